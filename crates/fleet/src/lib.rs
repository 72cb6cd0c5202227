#![doc = include_str!("../README.md")]
#![forbid(unsafe_code)]

mod archive;
mod error;
mod ledger;
mod migrations;
mod objects;
mod queue;
mod secret;
mod settings;

pub use error::FleetError;
pub use ledger::{
    LedgerQuery, PostgresLedger, PostgresLedgerSink, ledger_entries, ledger_failures, store_backoff,
};
pub use migrations::SCHEMA_VERSION;
pub use objects::{Objects, StoredFile};
pub use queue::{Queue, RunState, RunStatus, Submission, TakenRun};
pub use secret::Secret;
pub use settings::{FleetSettings, ObjectsSettings, PostgresSettings};
