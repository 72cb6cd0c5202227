//! Why a request over Streamable HTTP got no answer, each with its cause and what to do.

use std::sync::Arc;

use maljan_mcp_proto::jsonrpc::InvalidReason;

/// Why a request over Streamable HTTP did not get its answer.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum HttpError {
    /// The server could not be reached.
    #[error(
        "server {server} at {url} could not be reached: {}; check the URL and that the server runs",
        error_chain(&**source)
    )]
    Unreachable {
        /// The server's name.
        server: String,
        /// The endpoint (credentials redacted).
        url: String,
        /// The HTTP client's error, without the URL it was for.
        #[source]
        source: Arc<reqwest::Error>,
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
    #[error("server {server} sent an unusable reply: {problem}")]
    BadReply {
        /// The server's name.
        server: String,
        /// What is wrong.
        #[source]
        problem: ReplyProblem,
    },
    /// The stream ended before the response and could not be resumed.
    #[error("server {server}: the reply stream ended before the response: {why}")]
    StreamEnded {
        /// The server's name.
        server: String,
        /// Why it could not be resumed.
        #[source]
        why: StreamEnd,
    },
    /// The server wants authorization, and none could be had.
    #[error("server {server} wants authorization: {source}")]
    Unauthorized {
        /// The server's name.
        server: String,
        /// Why no token could be had, and what to do.
        #[source]
        source: crate::AuthorizationError,
    },
    /// The configuration is not usable (a bad header, a bad URL).
    #[error("server {server} is misconfigured: {problem}")]
    Config {
        /// The server's name.
        server: String,
        /// What is wrong.
        #[source]
        problem: ConfigProblem,
    },
}

/// What was wrong with a server's reply.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReplyProblem {
    /// A JSON reply without the response to the request.
    #[error("the JSON reply holds no response to the request")]
    NoResponse,
    /// A content type that is neither JSON nor an SSE stream.
    #[error("the reply's content type is {0:?}, not JSON or an SSE stream")]
    ContentType(String),
    /// A JSON reply over the bound, in bytes.
    #[error("the JSON reply is over the {0}-byte bound")]
    OverBound(usize),
    /// An SSE stream that is not UTF-8, from this byte.
    #[error("the SSE stream is not UTF-8 at byte {0}")]
    NotUtf8(u64),
    /// A reply that is not a JSON-RPC message.
    #[error("a reply that is not a JSON-RPC message")]
    NotJsonRpc,
}

/// Why a reply stream ended before its response.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StreamEnd {
    /// The transport was closed while the request waited.
    #[error("the connection was closed")]
    Closed,
    /// The stream broke, and gave no event id to resume from.
    #[error("{}", error_chain(&*.0))]
    Broken(#[source] Arc<reqwest::Error>),
    /// The server closed the stream and gave no event id to resume from.
    #[error("the server closed it and gave no event id to resume from")]
    NoEventId,
    /// Resumed this many times, still without the response.
    #[error("still no response after {0} resumptions")]
    TooManyResumptions(u32),
}

/// What is wrong with an HTTP server's configuration.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigProblem {
    /// A configured header's name.
    #[error("header name {name:?}: {source}")]
    HeaderName {
        /// The name as configured.
        name: String,
        /// Why it is not one.
        source: Arc<reqwest::header::InvalidHeaderName>,
    },
    /// A configured header's value.
    #[error("the value of header {name}: {source}")]
    HeaderValue {
        /// The header.
        name: String,
        /// Why it is not one.
        source: Arc<reqwest::header::InvalidHeaderValue>,
    },
    /// The URL.
    #[error("the URL {url} is not one: {source}")]
    Url {
        /// The URL as configured (credentials redacted).
        url: String,
        /// Why not.
        source: url::ParseError,
    },
    /// Credentials in the URL and a token or `Authorization` header too.
    #[error(
        "the URL carries credentials (user:password@) and a token or Authorization header is \
         configured too: one would silently replace the other; keep one"
    )]
    CredentialsTwice,
    /// A bearer token that is not a valid header value.
    #[error("the bearer token is not a valid header value")]
    BadToken,
    /// The bearer token could not be had from where it comes from (its file, the caller's
    /// function); the words are the source's, never the token.
    #[error("the bearer token could not be had: {0}")]
    NoToken(#[source] Arc<dyn std::error::Error + Send + Sync>),
    /// The HTTP client could not be built.
    #[error("the HTTP client cannot be built: {}", error_chain(&*.0))]
    Client(#[source] Arc<reqwest::Error>),
}

/// An error and its causes in one line, credentials in URLs redacted.
pub(crate) fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    crate::redact_credentials(&text)
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
