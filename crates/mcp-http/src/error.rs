//! Why a request over Streamable HTTP got no answer, each with its cause and what to do.

use std::sync::Arc;

use maljan_mcp_proto::jsonrpc::InvalidReason;

/// Why a request over Streamable HTTP did not get its answer.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The server could not be reached.
    #[error(
        "server {server} at {url} could not be reached: {detail}; check the URL and that the server runs"
    )]
    Unreachable {
        /// The server's name.
        server: String,
        /// The endpoint.
        url: String,
        /// What failed, with its causes (credentials in URLs redacted).
        detail: String,
        /// The HTTP client's error, without the URL it was for.
        #[source]
        source: Option<Arc<reqwest::Error>>,
    },
    /// The session the server gave expired (404 on a request carrying it).
    #[error(
        "server {server}: the session expired (404 on a request with session id {session}); \
         connect again to start a new session"
    )]
    SessionExpired {
        /// The server's name.
        server: String,
        /// The expired session id.
        session: String,
    },
    /// An HTTP status other than success.
    #[error("server {server} answered HTTP {status}: {body}")]
    Status {
        /// The server's name.
        server: String,
        /// The status code.
        status: u16,
        /// The start of the body.
        body: String,
    },
    /// The answer to this request failed validation.
    #[error("server {server} answered with an invalid message: {reason}")]
    InvalidAnswer {
        /// The server's name.
        server: String,
        /// What failed validation.
        reason: InvalidReason,
    },
    /// The reply was not usable: not JSON, not UTF-8, over the bound, an unknown type.
    #[error("server {server} sent an unusable reply: {detail}")]
    BadReply {
        /// The server's name.
        server: String,
        /// What is wrong.
        detail: String,
    },
    /// The stream ended before the response and could not be resumed.
    #[error("server {server}: the reply stream ended before the response: {detail}")]
    StreamEnded {
        /// The server's name.
        server: String,
        /// Why it could not be resumed.
        detail: String,
    },
    /// The configuration is not usable (a bad header, a missing token variable).
    #[error("server {server} is misconfigured: {detail}")]
    Config {
        /// The server's name.
        server: String,
        /// What is wrong.
        detail: String,
    },
}

impl HttpError {
    /// Whether the session the server gave expired: connect again for a new one.
    pub fn is_session_expired(&self) -> bool {
        matches!(self, HttpError::SessionExpired { .. })
    }

    /// Whether the server could not be reached at all.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, HttpError::Unreachable { .. })
    }

    /// Whether the server answered with an HTTP error status (a refusal, not a lost
    /// connection).
    pub fn is_status(&self) -> bool {
        matches!(self, HttpError::Status { .. })
    }
}
