#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(not(any(feature = "stdio", feature = "http")))]
compile_error!(
    "maljan-client reaches servers over stdio or Streamable HTTP: enable the `stdio` or `http` feature (or both)"
);

mod admission;
mod call;
mod card;
mod config;
mod context;
mod error;
mod events;
mod input_required;
mod job;
mod known_eras;
mod ledgering;
#[cfg(feature = "runs")]
mod outcome;
#[cfg(feature = "runs")]
mod pack;
mod progress;
mod reach;
#[cfg(feature = "runs")]
pub mod report;
#[cfg(feature = "runs")]
mod run;
mod server_connection;
mod setup;
mod staging;
mod starting;
mod stateless;
mod taking;
mod timeout;
mod tool_calls;
mod trace;
mod uploads;
mod wire;

pub use call::{CallOptions, CallTrace};
pub use card::{CardTool, ServerCard, UnavailableTool};
pub use config::{ClientSettings, EraChoice, RunLimits, ServerConfig, ServerTransport};
#[cfg(feature = "http")]
pub use config::{HttpServer, SharedAuthorizer};
pub use context::ConnectionContext;
pub use error::ClientError;
pub use events::{Recorder, RunEvent};
pub use job::{Job, Sample, TakenFile, UnkeptArtefact};
pub use known_eras::KnownEras;
pub use maljan_breaker::{BreakerSettings, BreakerState};
pub use maljan_ledger::{CallScope, Ledger};
#[cfg(feature = "http")]
pub use maljan_mcp_http::redact_credentials;
pub use maljan_mcp_proto::mcp::{ClientRoot, ElicitationPolicy, ServerRequestPolicy};
pub use maljan_mcp_proto::untrusted_text::{
    escape_controls, escape_json_controls, is_active_control,
};
#[cfg(feature = "stdio")]
pub use maljan_mcp_stdio::{ServerCommand, StdioConfig};
pub use maljan_mcp_transport::{CloseReport, StoppedBy, Transport, TransportCounts, TransportInfo};
pub use maljan_staging::SampleMount;
#[cfg(feature = "runs")]
pub use outcome::{
    DistinctFailure, HandedFile, ServerLoss, StepOutcome, StepStatus, distinct_failures,
};
#[cfg(feature = "runs")]
pub use pack::{MAX_STEP_TIMEOUT_S, Pack, PackError, PackErrors, Step};
pub use progress::{ProgressReporter, TransferProgress};
#[cfg(feature = "runs")]
pub use report::{
    IndexError, IndexedRun, JobsDirectory, PackInfo, REPORT_SCHEMA_VERSION, ReportBuilder,
    ReportFiles, RunIndex, RunListing, RunReport, RunVerdict, SampleInfo,
};
#[cfg(feature = "runs")]
pub use run::{Configured, Connector, MAX_RESTARTS, Run, RunEnd, ServerRecord, Unavailable};
pub use server_connection::{ServerConnection, StartedConnection};
pub use setup::ServerSetup;
pub use trace::{TraceParent, TraceParentError};
