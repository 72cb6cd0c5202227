//! A small runtime for writing well-behaved MCP tool servers.
//!
//! - [`stdio_safe`] first of all: the protocol gets a private duplicate of stdout and fd 1
//!   points at stderr, so no stray `println!` or progress bar reaches the protocol stream.
//! - The capability manifest is computed at start by [`Probe`]s, never asserted; a tool whose
//!   dependency is missing answers `missing_dependency` with its remediation.
//! - A handler returns a value or a [`ToolFailure`](maljan_mcp_proto::maljan::ToolFailure);
//!   the kit answers the error envelope `{error: {code, message, remediation}, tool}`, and a
//!   panicking handler becomes `tool_failed`.
//! - Search arguments are read with [`unquote`], and the answer can say what each was read as.
//!
//! ```no_run
//! use maljan_sidecar_kit::{Probe, Server, ToolSpec, log_to_stderr, unquote};
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let server = Server::builder("demo", "1.0.0")
//!         .tool(
//!             ToolSpec::new("echo", "Echoes a search term").required_string("search", "a term"),
//!             |args, _ctx| {
//!                 let term = unquote(args.string("search")?);
//!                 Ok(serde_json::json!({"read_as": term.read_as}))
//!             },
//!         )
//!         .tool(
//!             ToolSpec::new("pdf_info", "PDF metadata").depends_on(
//!                 Probe::Program("pdfinfo".into()),
//!                 "install poppler-utils on the server's host: apt-get install poppler-utils",
//!                 Some("PDF metadata"),
//!             ),
//!             |_args, ctx| Ok(serde_json::json!({"pdfinfo": ctx.dependency})),
//!         )
//!         .build();
//!     let protocol_out = maljan_sidecar_kit::stdio_safe()?;
//!     log_to_stderr();
//!     server.serve(tokio::io::stdin(), tokio::fs::File::from_std(protocol_out)).await
//! }
//! ```

mod buffers;
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
    BODY_TIMEOUT, HEADER_TIMEOUT, HttpOptions, MAX_BODY_BYTES_HELD, MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_PEER, MAX_REQUEST_BYTES, MAX_SESSIONS, MAX_SESSIONS_PER_PEER, SESSION_IDLE,
};
pub use job::{JOB_DIR_ENV, JobDir};
pub use logging::log_to_stderr;
pub use probe::{Probe, ProbeResult};
pub use quoting::{Unquoted, unquote};
pub use reply::MAX_ANSWER_BYTES;
pub use server::{CAPABILITIES, Server};
pub use stdio_safe::stdio_safe;
pub use tool::{
    Arguments, Cancellation, Dependency, DiskReservation, JOB_BYTES, ToolContext, ToolResult,
    ToolSpec,
};
