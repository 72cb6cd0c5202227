//! The ledger: every call numbered and handed to each sink, never lost for a failing one.

use std::io::Read;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use crate::{CallRecord, JsonLinesSink, LedgerEntry, LedgerSink, MemorySink, SinkError};

/// Numbers calls and hands each entry to every sink.
///
/// Each ledger has a writer id of its own (time-ordered, unique): an entry is numbered by
/// that id and a counter, so opening a ledger file reads nothing of it, and several
/// processes appending to one file never number two entries alike.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use maljan_ledger::{CallRecord, Ledger, MemorySink};
/// use maljan_mcp_proto::maljan::Outcome;
///
/// let memory = MemorySink::default();
/// let ledger = Ledger::new().with_sink(memory.clone());
/// let entry = ledger.record(CallRecord {
///     scope: Default::default(),
///     server: "sidecar".into(),
///     protocol_version: None,
///     tool: "file_info".into(),
///     arguments: serde_json::json!({"path": "/bin/sh"}),
///     sent_arguments: None,
///     answer: serde_json::json!({"size": 1}),
///     outcome: Outcome::Ok,
///     started_at: SystemTime::now(),
///     duration: Duration::from_millis(3),
///     queued: Duration::ZERO,
/// }).unwrap();
/// assert_eq!(entry.seq, 1);
/// assert_eq!(entry.writer, ledger.writer());
/// assert_eq!(memory.entries(), vec![entry]);
/// ```
#[derive(Debug)]
pub struct Ledger {
    writer: String,
    next_seq: AtomicU64,
    sinks: Mutex<Vec<Box<dyn LedgerSink>>>,
}

impl Default for Ledger {
    fn default() -> Self {
        Self::new()
    }
}

/// A time-ordered unique id: milliseconds since the epoch, the process id and 64 random
/// bits, in hex.
fn new_writer_id() -> String {
    let millis = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let mut random = [0u8; 8];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut random));
    if read.is_err() {
        // No system randomness: the clock's nanoseconds and a per-process counter instead.
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let mixed = (u64::from(nanos) << 20) ^ COUNTER.fetch_add(1, Ordering::Relaxed);
        random = mixed.to_le_bytes();
    }
    format!(
        "{millis:012x}-{:x}-{:016x}",
        std::process::id(),
        u64::from_le_bytes(random)
    )
}

impl Ledger {
    /// A ledger without sinks, numbering from 1 under a new writer id.
    pub fn new() -> Self {
        Ledger {
            writer: new_writer_id(),
            next_seq: AtomicU64::new(1),
            sinks: Mutex::default(),
        }
    }

    /// This ledger's writer id, in every entry it numbers.
    pub fn writer(&self) -> &str {
        &self.writer
    }

    /// Adds a sink.
    pub fn with_sink(self, sink: impl LedgerSink + 'static) -> Self {
        self.sinks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Box::new(sink));
        self
    }

    /// A ledger that appends to a JSON Lines file (which it does not read: its entries are
    /// told apart from those already there by this ledger's writer id).
    pub fn json_lines(path: impl AsRef<Path>) -> Result<Self, SinkError> {
        Ok(Ledger::new().with_sink(JsonLinesSink::open(path)?))
    }

    /// Numbers a call and writes it to every sink; every sink is tried, and the first error
    /// is returned.
    pub fn record(&self, call: CallRecord) -> Result<LedgerEntry, SinkError> {
        let entry = LedgerEntry {
            writer: self.writer.clone(),
            seq: self.next_seq.fetch_add(1, Ordering::Relaxed),
            call,
        };
        let mut first_error = None;
        for sink in self
            .sinks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter_mut()
        {
            if let Err(e) = sink.write(&entry) {
                first_error.get_or_insert(e);
            }
        }
        match first_error {
            None => Ok(entry),
            Some(e) => Err(e),
        }
    }
}

impl LedgerSink for Box<dyn LedgerSink> {
    fn write(&mut self, entry: &LedgerEntry) -> Result<(), SinkError> {
        (**self).write(entry)
    }
}

impl From<MemorySink> for Ledger {
    fn from(sink: MemorySink) -> Self {
        Ledger::new().with_sink(sink)
    }
}
