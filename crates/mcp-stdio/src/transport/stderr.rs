//! A server's stderr, read to its end so it never blocks, logged and kept as a tail.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt};

/// The most lines of stderr kept to explain an exit.
pub const STDERR_TAIL_LINES: usize = 64;
/// The most bytes of stderr kept to explain an exit.
pub const STDERR_TAIL_BYTES: usize = 16 * 1024;
/// A longer stderr line is cut to this many bytes in the tail and the log.
const STDERR_LINE_BYTES: usize = 4 * 1024;

/// The last lines a server wrote on stderr.
#[derive(Debug, Default, Clone)]
pub(crate) struct StderrTail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl StderrTail {
    fn push(&mut self, line: String) {
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > STDERR_TAIL_LINES || self.bytes > STDERR_TAIL_BYTES {
            match self.lines.pop_front() {
                Some(old) => self.bytes -= old.len(),
                None => break,
            }
        }
    }

    pub(crate) fn text(&self) -> String {
        self.lines
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Reads stderr to its end so the server never blocks on it, logging each line under the
/// server's name and keeping the last ones.
pub(crate) async fn drain_stderr<R: AsyncRead + Unpin>(
    mut stderr: R,
    server: String,
    tail: Arc<Mutex<StderrTail>>,
) {
    let mut chunk = vec![0u8; 16 * 1024];
    let mut line: Vec<u8> = Vec::new();
    let mut line_len = 0usize;
    loop {
        let n = match stderr.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for piece in chunk[..n].split_inclusive(|&b| b == b'\n') {
            let (content, ends) = match piece.strip_suffix(b"\n") {
                Some(c) => (c, true),
                None => (piece, false),
            };
            let room = STDERR_LINE_BYTES.saturating_sub(line.len());
            line.extend_from_slice(&content[..room.min(content.len())]);
            line_len += content.len();
            if ends {
                emit(&server, &tail, &line, line_len);
                line.clear();
                line_len = 0;
            }
        }
    }
    if line_len > 0 {
        emit(&server, &tail, &line, line_len);
    }
}

fn emit(server: &str, tail: &Mutex<StderrTail>, line: &[u8], full_len: usize) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut text = String::from_utf8_lossy(line).into_owned();
    if full_len > STDERR_LINE_BYTES {
        text.push('…');
    }
    tracing::debug!(
        target: "maljan_mcp_stdio::stderr",
        server,
        "{}",
        maljan_mcp_proto::untrusted_text::escape_controls(&text)
    );
    if let Ok(mut tail) = tail.lock() {
        tail.push(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_within_its_bounds() {
        let mut tail = StderrTail::default();
        for i in 0..1000 {
            tail.push(format!("line {i}"));
        }
        assert_eq!(tail.lines.len(), STDERR_TAIL_LINES);
        assert!(tail.text().ends_with("line 999"));
        tail.push("x".repeat(STDERR_TAIL_BYTES));
        assert!(tail.bytes <= STDERR_TAIL_BYTES);
    }
}
