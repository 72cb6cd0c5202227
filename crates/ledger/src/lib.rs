#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
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
