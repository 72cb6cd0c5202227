//! Why a request got no usable reply, kept as a value any transport can give.

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use maljan_mcp_proto::jsonrpc::InvalidReason;

/// Why a request got no usable reply from its transport.
///
/// Three kinds, which a caller branches on with the `is_*` queries: the reply failed
/// validation, the server refused the request at the transport level (an HTTP error status:
/// an answer, not a lost connection), or the connection is gone. A connection gone before
/// the request was written to it is told apart ([`is_unsent`](TransportFailure::is_unsent)):
/// the server never saw that request, so it may be sent again to a server started anew. The transport's own error is
/// kept as its [`cause`](TransportFailure::cause); the failure displays as that error and
/// its [`source`](Error::source) is that error's source.
///
/// ```
/// use maljan_mcp_transport::TransportFailure;
/// let gone = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdin closed");
/// let failure = TransportFailure::lost(gone);
/// assert!(failure.is_lost());
/// assert_eq!(failure.to_string(), "stdin closed");
/// assert!(failure.cause().downcast_ref::<std::io::Error>().is_some());
/// ```
#[derive(Debug, Clone)]
pub struct TransportFailure {
    kind: Kind,
    cause: Arc<dyn Error + Send + Sync + 'static>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    InvalidAnswer(InvalidReason),
    Refused,
    Lost,
    Unsent,
}

impl TransportFailure {
    /// The reply failed validation for `reason`.
    pub fn invalid_answer(
        reason: InvalidReason,
        cause: impl Error + Send + Sync + 'static,
    ) -> Self {
        TransportFailure {
            kind: Kind::InvalidAnswer(reason),
            cause: Arc::new(cause),
        }
    }

    /// The server refused the request at the transport level.
    pub fn refused(cause: impl Error + Send + Sync + 'static) -> Self {
        TransportFailure {
            kind: Kind::Refused,
            cause: Arc::new(cause),
        }
    }

    /// The connection is gone, or the request could not be made.
    pub fn lost(cause: impl Error + Send + Sync + 'static) -> Self {
        TransportFailure {
            kind: Kind::Lost,
            cause: Arc::new(cause),
        }
    }

    /// The connection was gone before the request was written to it: the server never saw
    /// it.
    ///
    /// ```
    /// use maljan_mcp_transport::TransportFailure;
    /// let gone = std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the server exited");
    /// let failure = TransportFailure::unsent(gone);
    /// assert!(failure.is_lost() && failure.is_unsent());
    /// ```
    pub fn unsent(cause: impl Error + Send + Sync + 'static) -> Self {
        TransportFailure {
            kind: Kind::Unsent,
            cause: Arc::new(cause),
        }
    }

    /// Whether the reply failed validation.
    pub fn is_invalid_answer(&self) -> bool {
        matches!(self.kind, Kind::InvalidAnswer(_))
    }

    /// What failed validation, when the reply did.
    pub fn invalid_reason(&self) -> Option<&InvalidReason> {
        match &self.kind {
            Kind::InvalidAnswer(reason) => Some(reason),
            _ => None,
        }
    }

    /// Whether the server refused the request at the transport level.
    pub fn is_refused(&self) -> bool {
        self.kind == Kind::Refused
    }

    /// Whether the connection is gone (before or after the request was written).
    pub fn is_lost(&self) -> bool {
        matches!(self.kind, Kind::Lost | Kind::Unsent)
    }

    /// Whether the connection was gone before the request was written: the server never saw
    /// it, and sending it again elsewhere does not repeat it.
    pub fn is_unsent(&self) -> bool {
        self.kind == Kind::Unsent
    }

    /// The transport's own error.
    pub fn cause(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.cause
    }
}

impl fmt::Display for TransportFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.cause, f)
    }
}

impl Error for TransportFailure {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.cause.source()
    }
}
