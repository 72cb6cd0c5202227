//! The MCP stdio transport, built for servers whose stdout is not to be trusted.
//!
//! Two layers:
//!
//! - [`LineClassifier`], sans-IO: bytes in, [`Event`]s out. It frames lines at LF, validates
//!   UTF-8 as a stream, caps line length with bounded memory, validates protocol messages and
//!   states invalid ones with their reason, leaves stray lines out (warning once, counting
//!   all), and during the setup window salvages a message glued behind a progress bar or a
//!   byte-order mark.
//! - [`StdioTransport`], on tokio: spawns a server (or wraps any `AsyncRead`/`AsyncWrite` pair),
//!   correlates requests with responses by id, drains stderr and keeps its tail, and closes
//!   explicitly with [`StdioTransport::close`] (stdin closed, grace, SIGTERM, grace, SIGKILL).
//!
//! ```
//! use maljan_mcp_stdio::{ClassifierConfig, Event, LineClassifier};
//!
//! let mut classifier = LineClassifier::in_setup(ClassifierConfig::default());
//! // During setup, an answer glued behind a progress bar is read out.
//! classifier.handle_bytes(b"Downloading 50%\r{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
//! let events: Vec<Event> = std::iter::from_fn(|| classifier.poll_event()).collect();
//! assert!(events.iter().any(|e| matches!(e, Event::Message(_))));
//! assert_eq!(classifier.counts().salvaged, 1);
//! assert_eq!(classifier.counts().stray, 1);
//! ```
//!
//! # Limits
//!
//! A line holds at most [`ClassifierConfig::max_line_bytes`] (32 MiB by default); a longer one
//! is discarded as it arrives, so memory stays bounded by the cap whatever the server writes.
//! At most [`DEFAULT_MAX_STATEMENTS`] invalid messages are logged one by one per connection.
//! Stderr keeps its last [`STDERR_TAIL_LINES`] lines / [`STDERR_TAIL_BYTES`] bytes.
//!
//! # Cancel safety
//!
//! Sending queues whole lines; a dropped send sends nothing. Dropping a [`PendingRequest`]
//! forgets it. Dropping a [`StdioTransport`] aborts its tasks and kills its child without
//! spawning anything; call [`StdioTransport::close`] for an orderly shutdown.

mod classifier;
// Not public API: the fuzz targets' and corpus replays' entry points, behind a feature of
// their own so that a user never sees them.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "transport")]
mod transport;

pub use classifier::{
    ClassifierConfig, DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_STATEMENTS, EXCERPT_CHARS, Event,
    Excerpt, LineClassifier, LineCounts, ReadTarget, SetupWindow,
};
#[cfg(feature = "transport")]
pub use maljan_mcp_transport::session::{Session, SessionError, SessionSettings};
#[cfg(feature = "transport")]
pub use transport::{
    CloseReport, EndsSetup, LostBecause, PendingRequest, Reply, STDERR_TAIL_BYTES,
    STDERR_TAIL_LINES, ServerCommand, SpawnError, StdioConfig, StdioError, StdioTransport,
    StoppedBy,
};
