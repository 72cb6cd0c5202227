//! Where ledger entries go: a JSON Lines file, memory, and the trait any other sink
//! implements.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::LedgerEntry;

/// A ledger sink could not write or read.
#[derive(Debug, thiserror::Error)]
#[error("the ledger file {}: {action} failed: {source}", path.display())]
pub struct SinkError {
    /// The file.
    pub path: PathBuf,
    /// What was being done.
    pub action: &'static str,
    /// The system's error.
    #[source]
    pub source: io::Error,
}

/// Where ledger entries go.
pub trait LedgerSink: Send + fmt::Debug {
    /// Writes one entry; a sink that persists must have it stored when this returns.
    fn write(&mut self, entry: &LedgerEntry) -> Result<(), SinkError>;
}

/// Keeps entries in memory; clones share them.
///
/// ```
/// use maljan_ledger::MemorySink;
/// let sink = MemorySink::default();
/// assert!(sink.entries().is_empty());
/// ```
#[derive(Debug, Clone, Default)]
pub struct MemorySink {
    entries: Arc<Mutex<Vec<LedgerEntry>>>,
}

impl MemorySink {
    /// The entries so far.
    pub fn entries(&self) -> Vec<LedgerEntry> {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl LedgerSink for MemorySink {
    fn write(&mut self, entry: &LedgerEntry) -> Result<(), SinkError> {
        self.entries
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(entry.clone());
        Ok(())
    }
}

/// Appends one JSON line per entry to a file, flushed before `write` returns.
#[derive(Debug)]
pub struct JsonLinesSink {
    path: PathBuf,
    file: File,
}

impl JsonLinesSink {
    /// Opens (or creates) the file for appending. A torn last line left by a crash is
    /// ended with a newline first, so the next entry starts on a line of its own.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SinkError> {
        let path = path.as_ref().to_owned();
        let fail = |action| {
            let path = path.clone();
            move |source| SinkError {
                path,
                action,
                source,
            }
        };
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(fail("creating its directory"))?;
        }
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(fail("opening"))?;
        let len = file.metadata().map_err(fail("reading its size"))?.len();
        if len > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(len - 1))
                .map_err(fail("reading"))?;
            file.read_exact(&mut last).map_err(fail("reading"))?;
            if last[0] != b'\n' {
                file.write_all(b"\n").map_err(fail("ending a torn line"))?;
            }
        }
        Ok(JsonLinesSink { path, file })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl LedgerSink for JsonLinesSink {
    fn write(&mut self, entry: &LedgerEntry) -> Result<(), SinkError> {
        let mut line = serde_json::to_vec(entry).map_err(|e| SinkError {
            path: self.path.clone(),
            action: "encoding an entry",
            source: io::Error::other(e),
        })?;
        line.push(b'\n');
        let fail = |source| SinkError {
            path: self.path.clone(),
            action: "appending",
            source,
        };
        // One write(2) of the whole line to a file opened O_APPEND: the kernel appends it at
        // the end as one piece, so lines of several writers to one file never interleave.
        self.file.write_all(&line).map_err(fail)?;
        self.file.flush().map_err(|source| SinkError {
            path: self.path.clone(),
            action: "flushing",
            source,
        })
    }
}

/// A line of a ledger file that was not read as an entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLine {
    /// Its line number, from 1.
    pub line: usize,
    /// Why it was skipped.
    pub reason: String,
    /// Whether it is the last line, cut short (no newline): what a crash mid-write leaves.
    pub torn: bool,
}

/// What a ledger file held.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerFile {
    /// Every entry read, in file order.
    pub entries: Vec<LedgerEntry>,
    /// The lines that were not entries.
    pub skipped: Vec<SkippedLine>,
}

/// The longest ledger line read: an entry holds at most a 24 MiB answer twice over (as
/// written and as sent). A longer line is skipped without being held.
pub const MAX_LEDGER_LINE_BYTES: usize = 64 * 1024 * 1024;

/// Reads a JSON Lines ledger. A torn last line is skipped and reported; nothing before it
/// is lost. Other unreadable lines, and lines over [`MAX_LEDGER_LINE_BYTES`], are skipped
/// and reported too. Anything but a regular file (a FIFO, a device, a directory) is
/// refused before it is opened for reading.
pub fn read_json_lines(path: impl AsRef<Path>) -> Result<LedgerFile, SinkError> {
    read_json_lines_capped(path, MAX_LEDGER_LINE_BYTES)
}

fn read_json_lines_capped(
    path: impl AsRef<Path>,
    max_line: usize,
) -> Result<LedgerFile, SinkError> {
    let path = path.as_ref();
    let failed = |action: &'static str| {
        move |source| SinkError {
            path: path.to_owned(),
            action,
            source,
        }
    };
    let not_regular = || {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file: a ledger is a file of JSON lines",
        )
    };
    if !std::fs::metadata(path)
        .map_err(failed("opening"))?
        .is_file()
    {
        return Err(failed("opening")(not_regular()));
    }
    let file = File::open(path).map_err(failed("opening"))?;
    if !file.metadata().map_err(failed("opening"))?.is_file() {
        return Err(failed("opening")(not_regular()));
    }
    let mut reader = BufReader::new(file);
    let mut entries = Vec::new();
    let mut skipped = Vec::new();
    let mut raw = Vec::new();
    let mut number = 0;
    loop {
        raw.clear();
        let n = (&mut reader)
            .take(max_line as u64 + 1)
            .read_until(b'\n', &mut raw)
            .map_err(failed("reading"))?;
        if n == 0 {
            break;
        }
        number += 1;
        let ended = raw.last() == Some(&b'\n');
        if !ended && raw.len() > max_line {
            let rest = skip_line(&mut reader).map_err(failed("reading"))?;
            skipped.push(SkippedLine {
                line: number,
                reason: format!(
                    "a line of {} bytes or more, over the {max_line} bytes a line read",
                    raw.len() as u64 + rest
                ),
                torn: false,
            });
            continue;
        }
        let text = raw.strip_suffix(b"\n").unwrap_or(&raw);
        if text.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<LedgerEntry>(text) {
            Ok(entry) => entries.push(entry),
            Err(e) => skipped.push(SkippedLine {
                line: number,
                reason: e.to_string(),
                torn: !ended,
            }),
        }
    }
    Ok(LedgerFile { entries, skipped })
}

/// Reads past the rest of a line without keeping it; how many bytes that was.
fn skip_line(reader: &mut impl BufRead) -> io::Result<u64> {
    let mut skipped = 0;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(skipped);
        }
        match buffer.iter().position(|b| *b == b'\n') {
            Some(end) => {
                reader.consume(end + 1);
                return Ok(skipped + end as u64 + 1);
            }
            None => {
                let all = buffer.len();
                reader.consume(all);
                skipped += all as u64;
            }
        }
    }
}

#[cfg(test)]
mod bounded_reading {
    use super::*;

    #[test]
    fn a_line_over_the_cap_is_skipped_and_the_lines_after_it_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        let mut text = "x".repeat(5000);
        text.push_str("\nnot json\n");
        std::fs::write(&path, text).unwrap();
        let file = read_json_lines_capped(&path, 1000).unwrap();
        assert_eq!(file.skipped.len(), 2);
        assert!(
            file.skipped[0].reason.contains("over the 1000 bytes"),
            "{:?}",
            file.skipped
        );
        assert_eq!(file.skipped[1].line, 2);
    }

    #[test]
    fn a_fifo_is_refused_without_waiting_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.jsonl");
        let made = std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .unwrap();
        assert!(made.success());
        let error = read_json_lines(&path).unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");
    }
}
