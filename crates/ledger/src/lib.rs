//! The call ledger: every call with its arguments as written (and what was sent, when
//! rewritten), its answer, ok or failed (code, message, remediation), when it started, how
//! long it took and how long it queued.
//!
//! Sinks: [`MemorySink`], [`JsonLinesSink`] (append and flush per entry; a torn last line
//! left by a crash is skipped on read and reported, and nothing before it is lost), or your
//! own [`LedgerSink`]. The [`failure_summary`] lists each distinct failure once with its
//! count: the report's header.
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use maljan_ledger::{CallRecord, Ledger, failure_summary, read_json_lines, render_summary};
//! use maljan_mcp_proto::maljan::{ErrorCode, Outcome, ToolFailure};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("ledger.jsonl");
//! let ledger = Ledger::json_lines(&path).unwrap();
//! let missing = ToolFailure::new(ErrorCode::MissingDependency, "zipinfo is not on PATH",
//!     Some("apt-get install unzip".to_owned()));
//! for _ in 0..2 {
//!     ledger.record(CallRecord {
//!         scope: Default::default(),
//!         server: "sidecar".into(),
//!         protocol_version: None,
//!         tool: "archive_list".into(),
//!         arguments: serde_json::json!({"path": "a.zip"}),
//!         sent_arguments: None,
//!         answer: serde_json::Value::Null,
//!         outcome: Outcome::Failed(missing.clone()),
//!         started_at: SystemTime::now(),
//!         duration: Duration::from_millis(2),
//!         queued: Duration::ZERO,
//!     }).unwrap();
//! }
//! let file = read_json_lines(&path).unwrap();
//! let summary = failure_summary(&file.entries);
//! assert_eq!(summary[0].count, 2);
//! assert!(render_summary(&summary).contains("2× sidecar/archive_list: missing_dependency"));
//! ```

#![forbid(unsafe_code)]

mod entry;
mod ledger;
mod render;
mod sink;
mod summary;

pub use entry::{CallRecord, CallScope, LedgerEntry};
pub use ledger::Ledger;
pub use render::{LedgerReport, render_summary, render_table};
pub use sink::{
    JsonLinesSink, LedgerFile, LedgerSink, MAX_LEDGER_LINE_BYTES, MemorySink, SinkError,
    SkippedLine, read_json_lines,
};
pub use summary::{FailureGroup, failure_summary, message_shape};
