//! The tokio transport: a child process, or any reader/writer pair, driven through the
//! [`LineClassifier`](crate::LineClassifier).

mod as_transport;
mod child;
mod connection_state;
mod error;
mod reader;
mod stderr;
mod stdio_transport;
mod stdout_reader;
mod writer;

use std::time::Duration;

pub use child::ServerCommand;
pub use connection_state::PendingRequest;
pub use error::{LostBecause, SpawnError, StdioError};
pub use maljan_mcp_proto::jsonrpc::Reply;
pub use maljan_mcp_transport::{CloseReport, EndsSetup, StoppedBy};
pub use stderr::{STDERR_TAIL_BYTES, STDERR_TAIL_LINES};
pub use stdio_transport::StdioTransport;

use maljan_mcp_proto::mcp::ServerRequestPolicy;

use crate::classifier::ClassifierConfig;

/// Settings of a stdio connection.
///
/// ```
/// use maljan_mcp_stdio::StdioConfig;
/// let config = StdioConfig::named("sidecar");
/// assert_eq!(config.classifier.max_line_bytes, 32 * 1024 * 1024);
/// assert_eq!(config.close_grace.as_secs(), 2);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct StdioConfig {
    /// The server's name, used in logs and errors.
    pub name: String,
    /// The classifier's limits.
    pub classifier: ClassifierConfig,
    /// How long `close` waits at each step (stdin closed, SIGTERM) before the next.
    pub close_grace: Duration,
    /// How many server notifications may wait to be received before more are dropped.
    pub notification_capacity: usize,
    /// How the server's own requests (`ping`, `elicitation/create`, `roots/list`…) are
    /// answered.
    pub server_requests: ServerRequestPolicy,
    /// How long the reader polls the server's stdout after a request is written before it
    /// sleeps ([`BusyPoll`](crate::BusyPoll); [`DEFAULT_BUSY_POLL`](crate::DEFAULT_BUSY_POLL),
    /// zero: never). It applies where the reader runs as a task of the runtime: on a
    /// current-thread runtime, or over any reader and writer
    /// ([`StdioTransport::over`](crate::StdioTransport::over)). On a multi-thread runtime a
    /// spawned server's stdout is read on a thread of its own, which sleeps.
    pub busy_poll: Duration,
}

impl StdioConfig {
    /// Defaults, with the server's name.
    pub fn named(name: impl Into<String>) -> Self {
        StdioConfig {
            name: name.into(),
            classifier: ClassifierConfig::default(),
            close_grace: Duration::from_secs(2),
            notification_capacity: 256,
            server_requests: ServerRequestPolicy::default(),
            busy_poll: crate::DEFAULT_BUSY_POLL,
        }
    }
}
