use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{
    CallRecord, JsonLinesSink, LedgerEntry, LedgerSink, MemorySink, SinkError, read_json_lines,
};

/// Numbers calls and hands each entry to every sink.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use maljan_ledger::{CallRecord, Ledger, MemorySink};
/// use maljan_mcp_proto::maljan::Outcome;
///
/// let memory = MemorySink::default();
/// let ledger = Ledger::new().with_sink(memory.clone());
/// let entry = ledger.record(CallRecord {
///     server: "sidecar".into(),
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
/// assert_eq!(memory.entries(), vec![entry]);
/// ```
#[derive(Debug, Default)]
pub struct Ledger {
    next_seq: AtomicU64,
    sinks: Mutex<Vec<Box<dyn LedgerSink>>>,
}

impl Ledger {
    /// A ledger without sinks, numbering from 1.
    pub fn new() -> Self {
        Ledger {
            next_seq: AtomicU64::new(1),
            sinks: Mutex::default(),
        }
    }

    /// Adds a sink.
    pub fn with_sink(self, sink: impl LedgerSink + 'static) -> Self {
        self.sinks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Box::new(sink));
        self
    }

    /// A ledger that appends to a JSON Lines file, numbering on from the entries already in it.
    pub fn json_lines(path: impl AsRef<Path>) -> Result<Self, SinkError> {
        let path = path.as_ref();
        let last = match read_json_lines(path) {
            Ok(file) => file.entries.iter().map(|e| e.seq).max().unwrap_or(0),
            Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => 0,
            Err(e) => return Err(e),
        };
        let ledger = Ledger::new().with_sink(JsonLinesSink::open(path)?);
        ledger.next_seq.store(last + 1, Ordering::Relaxed);
        Ok(ledger)
    }

    /// Numbers a call and writes it to every sink; every sink is tried, and the first error
    /// is returned.
    pub fn record(&self, call: CallRecord) -> Result<LedgerEntry, SinkError> {
        let entry = LedgerEntry {
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
