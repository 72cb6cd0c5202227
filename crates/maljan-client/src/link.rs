//! The transport under a server connection: stdio or Streamable HTTP.

use futures::FutureExt;
use futures::future::BoxFuture;
use maljan_mcp_http::{HttpConnection, HttpError};
use maljan_mcp_proto::jsonrpc::{InvalidReason, Notification, Reply, RequestId};
use maljan_mcp_stdio::{CloseReport, Connection, EndsSetup, LineCounts, StoppedBy, TransportError};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

/// Why a request got no usable answer from the transport.
#[derive(Debug, Clone)]
pub(crate) enum LinkFailure {
    /// The answer failed validation.
    InvalidAnswer(InvalidReason),
    /// The server refused the request at the transport level (an HTTP error status): an
    /// answer, not a lost connection.
    Refused(String),
    /// The connection is gone or the request could not be made; the message says why.
    Lost(String),
}

impl From<TransportError> for LinkFailure {
    fn from(e: TransportError) -> Self {
        match e {
            TransportError::InvalidAnswer { reason, .. } => LinkFailure::InvalidAnswer(reason),
            other => LinkFailure::Lost(other.to_string()),
        }
    }
}

impl From<HttpError> for LinkFailure {
    fn from(e: HttpError) -> Self {
        match e {
            HttpError::InvalidAnswer { reason, .. } => LinkFailure::InvalidAnswer(reason),
            status @ HttpError::Status { .. } => LinkFailure::Refused(status.to_string()),
            other => LinkFailure::Lost(other.to_string()),
        }
    }
}

impl std::fmt::Display for LinkFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LinkFailure::InvalidAnswer(reason) => write!(f, "an invalid answer: {reason}"),
            LinkFailure::Refused(message) | LinkFailure::Lost(message) => f.write_str(message),
        }
    }
}

/// What a request carries.
#[derive(Debug)]
pub(crate) enum Params {
    /// Raw JSON, or nothing.
    Raw(Option<Box<RawValue>>),
    /// A value, written straight into the request's line or body (a tool call's
    /// arguments: a file chunk is then not escaped byte by byte nor copied).
    Json(Value),
}

impl Params {
    fn into_raw(self) -> Option<Box<RawValue>> {
        match self {
            Params::Raw(raw) => raw,
            Params::Json(value) => serde_json::value::to_raw_value(&value).ok(),
        }
    }
}

/// A request on its way: its id (for `notifications/cancelled`) and its answer.
pub(crate) type Pending = (RequestId, BoxFuture<'static, Result<Reply, LinkFailure>>);

#[derive(Debug)]
pub(crate) enum Link {
    Stdio(Box<Connection>),
    Http(HttpConnection, Option<mpsc::Receiver<Notification>>),
}

impl Link {
    pub(crate) fn transport(&self) -> &'static str {
        match self {
            Link::Stdio(_) => "stdio",
            Link::Http(..) => "http",
        }
    }

    pub(crate) fn server(&self) -> &str {
        match self {
            Link::Stdio(c) => c.server(),
            Link::Http(c, _) => c.server(),
        }
    }

    pub(crate) async fn send(
        &self,
        method: &str,
        params: Params,
        ends_setup: Option<EndsSetup>,
    ) -> Result<Pending, LinkFailure> {
        match self {
            Link::Stdio(c) => {
                let pending = match (ends_setup, params) {
                    (Some(ends), params) => {
                        c.send_setup_request(method, params.into_raw(), ends)
                            .await?
                    }
                    (None, Params::Json(value)) => c.send_request_json(method, value).await?,
                    (None, Params::Raw(raw)) => c.send_request(method, raw).await?,
                };
                let id = pending.id().clone();
                Ok((id, pending.map(|r| r.map_err(LinkFailure::from)).boxed()))
            }
            Link::Http(c, _) => {
                let id = c.next_id();
                let (connection, method, request_id) = (c.clone(), method.to_owned(), id.clone());
                let answer = async move {
                    match params {
                        Params::Json(value) => {
                            connection.request_json(request_id, &method, value).await
                        }
                        Params::Raw(raw) => connection.request(request_id, &method, raw).await,
                    }
                    .map_err(LinkFailure::from)
                };
                Ok((id, answer.boxed()))
            }
        }
    }

    pub(crate) async fn notify(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<(), LinkFailure> {
        match self {
            Link::Stdio(c) => Ok(c.notify(method, params).await?),
            Link::Http(c, _) => Ok(c.notify(method, params).await?),
        }
    }

    pub(crate) fn take_notifications(&mut self) -> Option<mpsc::Receiver<Notification>> {
        match self {
            Link::Stdio(c) => c.take_notifications(),
            Link::Http(_, receiver) => receiver.take(),
        }
    }

    /// Opens the server's optional message stream, where the transport has one.
    pub(crate) fn listen(&self) {
        if let Link::Http(c, _) = self {
            drop(c.listen());
        }
    }

    pub(crate) fn close_setup_window(&self) {
        if let Link::Stdio(c) = self {
            c.close_setup_window();
        }
    }

    pub(crate) fn set_protocol(&self, version: maljan_mcp_proto::mcp::ProtocolVersion) {
        match self {
            Link::Stdio(c) => c.set_batches_allowed(version.allows_batches()),
            Link::Http(c, _) => c.set_protocol_version(version.as_str()),
        }
    }

    pub(crate) fn counts(&self) -> LineCounts {
        match self {
            Link::Stdio(c) => c.counts(),
            Link::Http(c, _) => {
                let counts = c.counts();
                LineCounts {
                    messages: counts.messages,
                    invalid: counts.invalid,
                    oversized: counts.oversized,
                    ..LineCounts::default()
                }
            }
        }
    }

    pub(crate) fn server_pid(&self) -> Option<u32> {
        match self {
            Link::Stdio(c) => c.server_pid(),
            Link::Http(..) => None,
        }
    }

    pub(crate) fn stderr_tail(&self) -> String {
        match self {
            Link::Stdio(c) => c.stderr_tail(),
            Link::Http(..) => String::new(),
        }
    }

    pub(crate) async fn close(self) -> CloseReport {
        match self {
            Link::Stdio(c) => (*c).close().await,
            Link::Http(c, _) => {
                c.close().await;
                let counts = Link::Http(c, None).counts();
                CloseReport {
                    status: None,
                    stopped_by: StoppedBy::NoChild,
                    counts,
                    stderr_tail: String::new(),
                }
            }
        }
    }
}
