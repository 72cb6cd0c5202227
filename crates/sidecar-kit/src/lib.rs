#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
mod builder;
mod call_gate;
mod call_params;
mod confined;
mod era;
mod file_primitives;
#[cfg(feature = "http")]
mod http;
mod job;
mod logging;
mod probe;
mod quoting;
mod reply;
mod server;
mod stdio_safe;
mod tool;

pub use builder::ServerBuilder;
pub use call_gate::{CallLimits, MAX_CALLS_QUEUED, MAX_CALLS_RUNNING};
pub use confined::{ConfinedFile, ROOTS_ENV};
pub use file_primitives::{
    CHUNKS_IN_FLIGHT, MAX_CHUNK_AHEAD, MAX_CHUNKS_WAITING, MAX_CHUNKS_WAITING_IN_ALL,
    MAX_GET_FILE_CHUNK, MAX_UPLOAD_BYTES, MAX_UPLOADS_IN_PROGRESS, SAMPLES_DIR, TURN_WAIT,
    TransferLimits, UPLOAD_IDLE,
};
#[cfg(feature = "http")]
pub use http::{
    BODY_TIMEOUT, HEADER_TIMEOUT, HttpOptions, IssuerError, MAX_BODY_BYTES_HELD, MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_PEER, MAX_REQUEST_BYTES, MAX_SESSIONS, MAX_SESSIONS_PER_PEER,
    ProtectedResource, SESSION_IDLE,
};
pub use job::{JOB_DIR_ENV, JobDir};
pub use logging::log_to_stderr;
pub use probe::{Probe, ProbeResult};
pub use quoting::{Unquoted, unquote};
pub use reply::MAX_ANSWER_BYTES;
pub use server::{CAPABILITIES, QUICK_PARAMS_BYTES, Server};
pub use stdio_safe::stdio_safe;
pub use tool::{
    Arguments, Cancellation, Dependency, DiskReservation, JOB_BYTES, ToolContext, ToolResult,
    ToolSpec,
};
