//! Why a request on a stdio connection got no answer, and why a server could not start.

use std::io;
use std::sync::Arc;

use maljan_mcp_proto::jsonrpc::InvalidReason;

/// Why a request on a stdio connection did not get its answer.
///
/// Every variant names the server, says what happened and what to do about it.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StdioError {
    /// The server wrote bytes that are not UTF-8 on stdout; the connection was ended.
    #[error(
        "server {server} wrote bytes that are not UTF-8 on stdout at byte offset {offset}; \
         the connection was closed (a server must write only UTF-8 protocol lines on stdout, \
         and its logs on stderr)"
    )]
    NotUtf8 {
        /// The server's name.
        server: String,
        /// The stream offset of the invalid sequence.
        offset: u64,
    },
    /// The connection ended before the answer came.
    #[error("server {server}: connection lost: {cause}")]
    ConnectionLost {
        /// The server's name.
        server: String,
        /// What ended it.
        #[source]
        cause: LostBecause,
    },
    /// The answer to this request failed validation.
    #[error("server {server} answered with an invalid message: {reason}")]
    InvalidAnswer {
        /// The server's name.
        server: String,
        /// What failed validation.
        reason: InvalidReason,
    },
    /// The connection was gone before this request was written to the server's stdin: the
    /// server never saw it.
    #[error("server {server}: the request was not sent: {cause}")]
    NotSent {
        /// The server's name.
        server: String,
        /// What ended the connection.
        #[source]
        cause: Box<StdioError>,
    },
    /// The connection was closed by this side.
    #[error("server {server}: the connection is closed")]
    Closed {
        /// The server's name.
        server: String,
    },
}

/// What ended a stdio connection.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LostBecause {
    /// The server closed its stdout (it exited, most often).
    #[error("the server closed its stdout")]
    StdoutClosed,
    /// The server's stdin was closed before the request could be written.
    #[error("the server's stdin is closed")]
    StdinClosed,
    /// Reading the server's stdout failed.
    #[error("reading the server's stdout failed: {0}")]
    ReadFailed(#[source] Arc<io::Error>),
    /// Writing to the server's stdin failed.
    #[error("writing to the server's stdin failed: {0}")]
    WriteFailed(#[source] Arc<io::Error>),
    /// No thread could be started to read the server's stdout.
    #[error(
        "no thread could be started to read its stdout ({0}); the system is short of threads \
         or memory: close other connections or processes and connect again"
    )]
    NoReaderThread(#[source] Arc<io::Error>),
    /// The client's reader of the server's stdout panicked.
    #[error(
        "the client's reader of the server's stdout panicked (a bug in the client, or in a \
         setup request's ends_setup callback); connect again, and report it"
    )]
    ReaderPanicked,
}

impl StdioError {
    /// Whether the connection is gone (as opposed to one answer being invalid).
    pub fn is_connection_lost(&self) -> bool {
        !matches!(self, StdioError::InvalidAnswer { .. })
    }
}

/// A server process could not be started.
#[derive(Debug, thiserror::Error)]
#[error(
    "could not start server {server} (`{program}`): {source}; check the command, its \
     arguments and PATH in the server's configuration"
)]
#[non_exhaustive]
pub struct SpawnError {
    /// The server's name.
    pub server: String,
    /// The program.
    pub program: String,
    /// The operating system's error.
    #[source]
    pub source: io::Error,
}
