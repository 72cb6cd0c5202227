//! What travels down the call stack: a [`ToolCall`] in, a [`CallTrace`] out, through layers
//! that each implement [`CallService`] and wrap the next (staging → ledger → admission →
//! timeout → transport).

use std::future::Future;
use std::time::Duration;

use maljan_mcp_proto::maljan::{ErrorCode, ToolAnswer, ToolFailure};
use maljan_mcp_transport::TransportFailure;
use serde_json::{Map, Value};

use crate::trace::TraceParent;

/// How one call is made, beyond its tool and arguments.
///
/// ```
/// use std::time::Duration;
/// let options = maljan_client::CallOptions::default()
///     .in_step("unpack")
///     .wait(Duration::from_secs(120));
/// assert_eq!(options.step(), Some("unpack"));
/// ```
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct CallOptions {
    step: Option<String>,
    wait: Option<Duration>,
    trace: Option<TraceParent>,
    progress: Option<Value>,
    /// The caller sends the call again, to the server started anew, when it is lost before
    /// it was written (a run does): it is then ledgered once, when it is made.
    pub(crate) resend_unsent: bool,
}

impl CallOptions {
    /// The call is made for the run's step `id`: its ledger entry, and those of the
    /// transfers it causes, name it.
    pub fn in_step(mut self, id: impl Into<String>) -> Self {
        self.step = Some(id.into());
        self
    }

    /// Waits `wait` for the answer instead of the tool's own timeout.
    pub fn wait(mut self, wait: Duration) -> Self {
        self.wait = Some(wait);
        self
    }

    /// Makes the call within the caller's trace `parent` (rather than the run's, or a new
    /// one): it goes out as a span of it.
    pub fn traced(mut self, parent: TraceParent) -> Self {
        self.trace = Some(parent);
        self
    }

    /// Asks the server for progress notifications under `token` (`_meta.progressToken`);
    /// read them from [`ServerConnection::take_notifications`](crate::ServerConnection::take_notifications).
    pub fn progress(mut self, token: impl Into<Value>) -> Self {
        self.progress = Some(token.into());
        self
    }

    /// The progress token, when given.
    pub fn progress_token(&self) -> Option<&Value> {
        self.progress.as_ref()
    }

    /// The caller's trace, when given.
    pub fn trace(&self) -> Option<&TraceParent> {
        self.trace.as_ref()
    }

    /// The step, when there is one.
    pub fn step(&self) -> Option<&str> {
        self.step.as_deref()
    }

    /// The wait, when not the tool's own.
    pub fn wait_for(&self) -> Option<Duration> {
        self.wait
    }
}

/// A call's answer with what the call was sent and how long it waited under the cap.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CallTrace {
    /// The answer.
    pub answer: ToolAnswer,
    /// The arguments as sent, when staging rewrote them (paths uploaded or mapped).
    pub sent_arguments: Option<Value>,
    /// Time spent waiting for a slot under the server's concurrency cap.
    pub queued: Duration,
    /// Whether the request reached the server's connection. A call failed
    /// `connection_lost` that was not written never reached the server: it may be sent again
    /// to the server started anew without repeating anything.
    pub written: bool,
    /// The transport's failure, when the call got no reply to read (a lost connection, an
    /// invalid reply, an HTTP refusal): its cause, as a value.
    pub cause: Option<TransportFailure>,
}

impl CallTrace {
    /// An answer given without a call on the wire (refused before it was sent).
    pub(crate) fn of(answer: ToolAnswer) -> Self {
        CallTrace {
            answer,
            sent_arguments: None,
            queued: Duration::ZERO,
            written: false,
            cause: None,
        }
    }

    fn failed_with(&self, code: &ErrorCode) -> bool {
        self.answer.failure().is_some_and(|f| &f.code == code)
    }

    /// Whether the connection was lost under the call ([`cause`](Self::cause) says how;
    /// [`written`](Self::written) whether the server could have seen it).
    ///
    /// ```
    /// # async fn run(server: &maljan_client::ServerConnection) -> Result<(), maljan_client::ClientError> {
    /// let trace = server
    ///     .call_with("scan", serde_json::json!({}), &Default::default())
    ///     .await?;
    /// if trace.is_lost() && !trace.written {
    ///     // The server never saw it: safe to send again to a server started anew.
    /// }
    /// # Ok(()) }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.failed_with(&ErrorCode::ConnectionLost)
    }

    /// Whether the server left the call unanswered within its wait (it was then cancelled).
    pub fn is_unanswered(&self) -> bool {
        self.failed_with(&ErrorCode::Unanswered)
    }

    /// Whether the call was refused before it reached the server: the server rests, or is
    /// busy, or the arguments could not be sent.
    pub fn is_refused(&self) -> bool {
        !self.written && !self.is_lost() && self.answer.failure().is_some()
    }
}

/// One `tools/call` on its way down the stack.
#[derive(Debug, Clone)]
pub(crate) struct ToolCall {
    /// The tool.
    pub(crate) tool: String,
    /// The arguments that go out (an object, or null for none).
    pub(crate) arguments: Value,
    /// The arguments as written, when staging rewrote them (for the ledger).
    pub(crate) as_written: Option<Value>,
    /// `_meta` of the request (a progress token).
    pub(crate) meta: Option<Map<String, Value>>,
    /// How long to wait for the answer, when not the tool's own timeout.
    pub(crate) wait: Option<Duration>,
    /// The run's step the call is made for.
    pub(crate) step: Option<String>,
    /// The call's W3C `traceparent`, also in `meta`.
    pub(crate) traceparent: Option<String>,
    /// Its caller sends it again when it is lost before it was written
    /// ([`CallOptions::resend_unsent`]).
    pub(crate) resend_unsent: bool,
}

impl ToolCall {
    /// A call of `tool` with `arguments`, as written.
    pub(crate) fn new(tool: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            tool: tool.into(),
            arguments,
            as_written: None,
            meta: None,
            wait: None,
            step: None,
            traceparent: None,
            resend_unsent: false,
        }
    }
}

/// Why arguments that are not a JSON object (nor null) are refused before they go out.
pub(crate) fn not_an_object(arguments: &Value) -> ToolFailure {
    ToolFailure::new(
        ErrorCode::BadArgument,
        format!("the arguments must be a JSON object, not {arguments}"),
        Some("pass arguments as key=value pairs or a JSON object".to_owned()),
    )
}

/// A layer of the call stack: takes a call, gives its answer. A failed call is a failed
/// answer, never an error: every layer above still sees it (the ledger records it).
pub(crate) trait CallService: Send + Sync {
    /// Makes the call.
    fn call(&self, call: ToolCall) -> impl Future<Output = CallTrace> + Send;
}

/// A layer below the one under test, answering each call as a script says and keeping
/// every call it got.
#[cfg(test)]
pub(crate) struct Scripted<F> {
    answer: F,
    pub(crate) calls: std::sync::Mutex<Vec<ToolCall>>,
}

#[cfg(test)]
impl<F: Fn(&ToolCall) -> ToolAnswer + Send + Sync> Scripted<F> {
    pub(crate) fn new(answer: F) -> Self {
        Scripted {
            answer,
            calls: std::sync::Mutex::default(),
        }
    }

    pub(crate) fn calls(&self) -> Vec<ToolCall> {
        self.calls.lock().expect("calls").clone()
    }
}

#[cfg(test)]
impl<F: Fn(&ToolCall) -> ToolAnswer + Send + Sync> CallService for Scripted<F> {
    async fn call(&self, call: ToolCall) -> CallTrace {
        let answer = (self.answer)(&call);
        self.calls.lock().expect("calls").push(call);
        CallTrace {
            written: true,
            ..CallTrace::of(answer)
        }
    }
}
