//! Why a session's set-up or call failed: each kind apart, its cause kept, the remedy named.

use std::process::ExitStatus;
use std::time::Duration;

use maljan_mcp_proto::mcp::{EndlessToolList, NoCommonGround, UnsupportedVersion, methods};

use crate::TransportFailure;

/// Why a [`Session`](super::Session) could not be set up, or a call of it got no result.
///
/// ```
/// use std::time::Duration;
/// use maljan_mcp_transport::session::SessionError;
/// let error = SessionError::NoAnswer { method: "tools/call", waited: Duration::from_secs(2) };
/// assert!(error.to_string().contains("cancelled on the server"));
/// assert!(!error.is_lost());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The server answered the request with a JSON-RPC error.
    #[error("the server answered {method} with error {code}: {message}")]
    ErrorAnswer {
        /// The request's method.
        method: &'static str,
        /// The error's code.
        code: i64,
        /// The error's message, as the server wrote it.
        message: String,
    },
    /// No answer within the wait; the request was cancelled on the server
    /// (`notifications/cancelled`, or its stream closed over HTTP), unless it was
    /// `initialize`, which the lifecycle forbids cancelling.
    #[error("{}", no_answer_words(method, *waited))]
    NoAnswer {
        /// The request's method.
        method: &'static str,
        /// How long it waited.
        waited: Duration,
    },
    /// The connection was lost: the server exited or closed its output.
    #[error(
        "the connection to the server was lost during {method}: {failure}{}{}",
        exit_words(.exit),
        tail_words(.stderr_tail)
    )]
    Lost {
        /// The request's method.
        method: &'static str,
        /// The transport's failure, its cause kept.
        #[source]
        failure: TransportFailure,
        /// How the server's process exited, when it had one and it exited.
        exit: Option<ExitStatus>,
        /// The last lines the server wrote on stderr (empty without any).
        stderr_tail: String,
    },
    /// The transport failed the request otherwise: an answer that is not valid JSON-RPC, or
    /// a refusal at the transport level (an HTTP error status).
    #[error("{method} failed: {failure}")]
    Transport {
        /// The request's method.
        method: &'static str,
        /// The transport's failure.
        #[source]
        failure: TransportFailure,
    },
    /// The answer is not what the request expects.
    #[error("the answer to {method} is not {expected}: {source}")]
    Malformed {
        /// The request's method.
        method: &'static str,
        /// What was expected.
        expected: &'static str,
        /// Why it is not that.
        #[source]
        source: serde_json::Error,
    },
    /// The server chose a session version this client does not speak.
    #[error(transparent)]
    Version(#[from] UnsupportedVersion),
    /// The server is stateless and shares no version or capability with this client.
    #[error("{0}; use a server and client that share a protocol version")]
    Unusable(#[source] NoCommonGround),
    /// The server's tool list went on for ever.
    #[error(transparent)]
    EndlessToolList(#[from] EndlessToolList),
    /// A stateless server asked for input to a call (`input_required`), which a session
    /// does not give.
    #[error(
        "the server asked for input to {tool}, which a session does not give; make the tool \
         work without the input, or answer it on a request path of your own \
         (Session::into_parts)"
    )]
    InputRequired {
        /// The tool called.
        tool: String,
    },
    /// The settings ask for the stateless era and the server does not speak it.
    #[error(
        "the server does not speak the stateless era (2026-07-28), and the settings ask for it \
         (era = \"stateless\"); set era = \"auto\" to speak the session era to it"
    )]
    NotStateless,
}

impl SessionError {
    /// The request that failed: `server/discover`, `initialize`, `tools/list`, `tools/call`.
    ///
    /// ```
    /// use maljan_mcp_transport::session::SessionError;
    /// assert_eq!(SessionError::NotStateless.method(), "server/discover");
    /// ```
    pub fn method(&self) -> &'static str {
        match self {
            SessionError::ErrorAnswer { method, .. }
            | SessionError::NoAnswer { method, .. }
            | SessionError::Lost { method, .. }
            | SessionError::Transport { method, .. }
            | SessionError::Malformed { method, .. } => method,
            SessionError::Version(_) => methods::INITIALIZE,
            SessionError::Unusable(_) | SessionError::NotStateless => methods::SERVER_DISCOVER,
            SessionError::EndlessToolList(_) => methods::TOOLS_LIST,
            SessionError::InputRequired { .. } => methods::TOOLS_CALL,
        }
    }

    /// How the server's process exited, when the connection was lost and it had one.
    pub fn exit(&self) -> Option<ExitStatus> {
        match self {
            SessionError::Lost { exit, .. } => *exit,
            _ => None,
        }
    }

    /// Whether the connection is gone: nothing more can be sent on this session.
    pub fn is_lost(&self) -> bool {
        matches!(self, SessionError::Lost { .. })
    }

    /// The server's last stderr lines, when the connection was lost.
    pub fn stderr_tail(&self) -> Option<&str> {
        match self {
            SessionError::Lost { stderr_tail, .. } => Some(stderr_tail),
            _ => None,
        }
    }
}

fn no_answer_words(method: &str, waited: Duration) -> String {
    let waited = waited.as_secs_f64();
    if method == methods::INITIALIZE {
        // The lifecycle forbids cancelling initialize.
        format!("no answer to {method} within {waited} s; check that the server speaks MCP")
    } else {
        format!(
            "no answer to {method} within {waited} s; the request was cancelled on the server \
             (give it a longer deadline if the work takes that long)"
        )
    }
}

fn exit_words(exit: &Option<ExitStatus>) -> String {
    exit.map(|status| format!(" (the server ended with {status})"))
        .unwrap_or_default()
}

fn tail_words(tail: &str) -> String {
    let tail = tail.trim_end();
    if tail.is_empty() {
        String::new()
    } else {
        format!("; its last stderr lines:\n{tail}")
    }
}
