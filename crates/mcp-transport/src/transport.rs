//! The transport trait: JSON-RPC to one server, whatever carries it.

use std::borrow::Cow;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::process::ExitStatus;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use maljan_mcp_proto::jsonrpc::{Notification, RawJson, Reply, RequestId};
use maljan_mcp_proto::mcp::ProtocolVersion;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::failure::TransportFailure;
use crate::report::{CloseReport, TransportCounts};

/// A boxed future that may move between threads: what the object-safe [`Transport`]
/// methods return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Decides, from a response's result, whether it ends the setup window (the last page of
/// `tools/list`, say). A transport that salvages messages during setup closes the window
/// before it reads anything after that response; the others ignore it.
pub type EndsSetup = fn(&RawJson) -> bool;

/// A request on its way out: its method and params.
///
/// ```
/// use maljan_mcp_transport::OutgoingRequest;
/// let request = OutgoingRequest::new("tools/list", Some(serde_json::json!({})))
///     .ending_setup(|_result| true);
/// assert_eq!(request.method(), "tools/list");
/// ```
#[derive(Debug, Clone)]
pub struct OutgoingRequest {
    method: Cow<'static, str>,
    params: Option<Value>,
    ends_setup: Option<EndsSetup>,
    stateless_version: Option<ProtocolVersion>,
    headers: Vec<(String, String)>,
}

impl OutgoingRequest {
    /// A request for `method`; `params` is written straight into the request's line or body
    /// (large arguments are neither escaped byte by byte nor copied first).
    pub fn new(method: impl Into<Cow<'static, str>>, params: Option<Value>) -> Self {
        OutgoingRequest {
            method: method.into(),
            params,
            ends_setup: None,
            stateless_version: None,
            headers: Vec::new(),
        }
    }

    /// Headers a transport over HTTP sends with this request beside those of its era (a
    /// tool's `Mcp-Param-*`, say); a transport over stdio has no headers and leaves them.
    ///
    /// ```
    /// use maljan_mcp_transport::OutgoingRequest;
    /// let request = OutgoingRequest::new("tools/call", None)
    ///     .with_headers(vec![("mcp-param-region".into(), "eu-west".into())]);
    /// assert_eq!(request.headers().len(), 1);
    /// ```
    pub fn with_headers(mut self, headers: Vec<(String, String)>) -> Self {
        self.headers = headers;
        self
    }

    /// The headers given by [`with_headers`](Self::with_headers).
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The request is of the stateless era, in `version` (its `_meta` says so too): a
    /// transport that states the version outside the body (over HTTP, the
    /// `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers) takes it from here,
    /// never by reading the params again.
    ///
    /// ```
    /// use maljan_mcp_proto::mcp::{Era, ProtocolVersion};
    /// use maljan_mcp_transport::OutgoingRequest;
    /// let version = ProtocolVersion::newest_of(Era::Stateless);
    /// let request = OutgoingRequest::new("tools/list", None).stateless(version);
    /// assert_eq!(request.stateless_version(), Some(version));
    /// ```
    pub fn stateless(mut self, version: ProtocolVersion) -> Self {
        self.stateless_version = Some(version);
        self
    }

    /// The version of a stateless-era request; `None` for a request of a session.
    pub fn stateless_version(&self) -> Option<ProtocolVersion> {
        self.stateless_version
    }

    /// The reply to this request may end the setup window, when `ends` says so of its result.
    pub fn ending_setup(mut self, ends: EndsSetup) -> Self {
        self.ends_setup = Some(ends);
        self
    }

    /// The method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The params.
    pub fn params(&self) -> Option<&Value> {
        self.params.as_ref()
    }

    /// Whether and when the reply ends the setup window.
    pub fn ends_setup(&self) -> Option<EndsSetup> {
        self.ends_setup
    }

    /// The method, params and setup rule, taken apart.
    pub fn into_parts(self) -> (Cow<'static, str>, Option<Value>, Option<EndsSetup>) {
        (self.method, self.params, self.ends_setup)
    }
}

/// A reply on its way: the request's id (to cancel it with `notifications/cancelled`) and
/// a future of its reply.
///
/// Dropping it forgets the request: a late reply is counted and dropped, never given to
/// another request.
pub struct PendingReply {
    id: RequestId,
    reply: BoxFuture<'static, Result<Reply, TransportFailure>>,
}

impl PendingReply {
    /// A reply the future `reply` resolves to, for the request `id`.
    pub fn new(
        id: RequestId,
        reply: impl Future<Output = Result<Reply, TransportFailure>> + Send + 'static,
    ) -> Self {
        PendingReply {
            id,
            reply: Box::pin(reply),
        }
    }

    /// The request's id.
    pub fn id(&self) -> &RequestId {
        &self.id
    }
}

impl fmt::Debug for PendingReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingReply")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Future for PendingReply {
    type Output = Result<Reply, TransportFailure>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.reply.as_mut().poll(cx)
    }
}

/// Which transport carries a connection, for display (a server card, a report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportKind {
    /// A child process's stdin and stdout, or any byte pipe pair.
    Stdio,
    /// Streamable HTTP.
    StreamableHttp,
    /// In memory, for tests.
    Memory,
}

impl TransportKind {
    /// `stdio`, `http` or `memory`.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportKind::Stdio => "stdio",
            TransportKind::StreamableHttp => "http",
            TransportKind::Memory => "memory",
        }
    }
}

impl fmt::Display for TransportKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a transport knows of its server, apart from the channel: what it received, and
/// where the server is.
pub trait TransportInfo: fmt::Debug + Send + Sync {
    /// What the connection received so far.
    fn counts(&self) -> TransportCounts;

    /// The server's origin (`scheme://host:port`) for a transport that reaches it over a
    /// network: what the era it speaks is remembered under. `None` for a process of its own.
    fn origin(&self) -> Option<String> {
        None
    }

    /// The server's process id, when this transport started it.
    fn server_pid(&self) -> Option<u32> {
        None
    }

    /// The last lines the server wrote on stderr, when the transport reads them.
    fn stderr_tail(&self) -> String {
        String::new()
    }
}

/// JSON-RPC between this client and one MCP server.
///
/// Implementations correlate replies to requests by id and never give one request's reply
/// to another; they answer the server's own requests they can (`ping`) and hand its
/// notifications to [`take_incoming`](Transport::take_incoming)'s receiver.
///
/// Cancel safety: a dropped [`send_request`](Transport::send_request) or
/// [`notify`](Transport::notify) future sends a whole message or none.
pub trait Transport: fmt::Debug + Send + Sync {
    /// The server's configured name.
    fn server(&self) -> &str;

    /// Which transport this is.
    fn kind(&self) -> TransportKind;

    /// Sends a request under a fresh id and returns its pending reply.
    fn send_request(
        &self,
        request: OutgoingRequest,
    ) -> BoxFuture<'_, Result<PendingReply, TransportFailure>>;

    /// Sends a notification.
    fn notify(
        &self,
        method: &str,
        params: Option<Value>,
    ) -> BoxFuture<'_, Result<(), TransportFailure>>;

    /// Takes the receiver of the server's notifications (progress, log messages), once.
    /// Notifications that arrive while it is full or not taken are dropped.
    fn take_incoming(&mut self) -> Option<mpsc::Receiver<Notification>>;

    /// The protocol version setup agreed on: what the transport must do differently (batches
    /// on stdio, the version header over HTTP).
    fn set_protocol(&self, version: ProtocolVersion);

    /// Setup is over: a transport that salvages messages during setup stops for good; one
    /// with a stream for the server's own messages opens it.
    fn end_setup(&self);

    /// What the transport knows of its server, as a handle of its own: it stays readable
    /// while the transport is used (or after it is closed) without reaching through the
    /// layers above it.
    fn info(&self) -> Arc<dyn TransportInfo>;

    /// Waits up to `grace` for the server's process to exit and says how it exited: for a
    /// connection found lost, what ended the server. `None` without a process of its own, or
    /// when it has not exited within `grace`.
    fn wait_exit(&self, grace: Duration) -> BoxFuture<'_, Option<ExitStatus>> {
        let _ = grace;
        Box::pin(std::future::ready(None))
    }

    /// Closes the connection: requests still waiting fail as closed.
    fn close(self: Box<Self>) -> BoxFuture<'static, CloseReport>;
}
