//! The bottom layer: a call on the wire, waited for up to its tool's timeout, and cancelled
//! on the server (`notifications/cancelled`) when it is given up.

use std::collections::HashMap;
use std::time::Duration;

use maljan_mcp_proto::jsonrpc::Reply;
use maljan_mcp_proto::maljan::{ErrorCode, ToolAnswer, ToolFailure, is_platform_primitive};
use maljan_mcp_proto::mcp::{
    CallToolParams, CallToolResult, CancelledParams, InputRequired, ResultKind, methods,
    read_result_kind,
};
use maljan_mcp_transport::{OutgoingRequest, Transport, TransportFailure, TransportKind};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::call::{CallService, CallTrace, ToolCall, not_an_object};
use crate::stateless::{MAX_INPUT_ROUNDS, StatelessRequests};

/// Why a request got no reply to read.
#[derive(Debug)]
pub(crate) enum Unanswered {
    /// Nothing within the wait; the request was cancelled on the server if it could be.
    TimedOut(Duration),
    /// The transport failed it.
    Failed(TransportFailure),
}

impl Unanswered {
    /// Whether the request never reached the server (the connection was gone before it was
    /// written).
    fn unsent(&self) -> bool {
        matches!(self, Unanswered::Failed(failure) if failure.is_unsent())
    }
}

/// Sends calls on a transport and waits for their answers, each up to its tool's timeout.
#[derive(Debug)]
pub(crate) struct Timeout {
    transport: Box<dyn Transport>,
    default_wait: Duration,
    tool_waits: HashMap<String, Duration>,
    /// For a server of the 2026-07-28 era: how its requests are stamped and its requests
    /// for input answered.
    modern: Option<StatelessRequests>,
}

impl Timeout {
    /// Calls over `transport`, waiting `default_wait` for a tool without a timeout of its own.
    pub(crate) fn new(transport: Box<dyn Transport>, default_wait: Duration) -> Self {
        Timeout {
            transport,
            default_wait,
            tool_waits: HashMap::new(),
            modern: None,
        }
    }

    /// The transport.
    pub(crate) fn get_ref(&self) -> &dyn Transport {
        &*self.transport
    }

    /// The transport, to close it.
    pub(crate) fn into_inner(self) -> Box<dyn Transport> {
        self.transport
    }

    /// The same wire, each tool waiting its own timeout (a manifest's `timeout_s`).
    pub(crate) fn with_tool_waits(self, tool_waits: HashMap<String, Duration>) -> Self {
        Timeout { tool_waits, ..self }
    }

    /// The same wire, every request following the 2026-07-28 era's rules.
    pub(crate) fn speaking_modern(self, modern: StatelessRequests) -> Self {
        Timeout {
            modern: Some(modern),
            ..self
        }
    }

    /// How long a call to `tool` waits.
    pub(crate) fn wait_for(&self, tool: &str) -> Duration {
        self.tool_waits
            .get(tool)
            .copied()
            .unwrap_or(self.default_wait)
    }

    /// Sends a request and waits up to `wait`; on giving up, tells the server with
    /// `notifications/cancelled` when `cancellable` (never for `initialize`).
    pub(crate) async fn request(
        &self,
        request: OutgoingRequest,
        wait: Duration,
        cancellable: bool,
    ) -> Result<Reply, Unanswered> {
        let method = request.method().to_owned();
        let request = match self.modern.as_ref() {
            Some(modern) => modern.stamp(request),
            None => request,
        };
        // A request the transport did not take never reached the server, whatever the
        // transport calls its failure.
        let pending = self.transport.send_request(request).await.map_err(|f| {
            Unanswered::Failed(if f.is_lost() && !f.is_unsent() {
                TransportFailure::unsent(f)
            } else {
                f
            })
        })?;
        let id = pending.id().clone();
        match tokio::time::timeout(wait, pending).await {
            Ok(reply) => reply.map_err(Unanswered::Failed),
            Err(_) => {
                // A modern HTTP request is cancelled by closing its stream, which dropping
                // its reply did; the era sends no notifications over HTTP.
                let closed_is_cancelled = self.modern.as_ref().is_some()
                    && self.transport.kind() == TransportKind::StreamableHttp;
                if cancellable && method != methods::INITIALIZE && !closed_is_cancelled {
                    let cancel = CancelledParams {
                        request_id: id,
                        reason: Some(format!("no answer within {} s", wait.as_secs_f64())),
                    };
                    let _ = self
                        .transport
                        .notify(methods::CANCELLED, serde_json::to_value(&cancel).ok())
                        .await;
                }
                Err(Unanswered::TimedOut(wait))
            }
        }
    }

    /// A tool's result, read by Maljan's rules.
    fn read_result(&self, tool: &str, raw: &RawValue) -> ToolAnswer {
        match serde_json::from_str::<CallToolResult>(raw.get()) {
            Ok(result) => ToolAnswer::from_result(result),
            Err(e) => ToolAnswer::failed(ToolFailure::new(
                ErrorCode::InvalidAnswer,
                format!(
                    "server {} answered {tool} with something that is not a tool result: {e}",
                    self.transport.server(),
                ),
                Some("report this to the server's authors".to_owned()),
            )),
        }
    }

    /// The call's params asked again with the answers to `input` and its state echoed; a
    /// failure when this client does not give what the server asks.
    fn answer_input(
        &self,
        tool: &str,
        mut params: Value,
        input: &InputRequired,
    ) -> Result<Value, ToolFailure> {
        let modern = self
            .modern
            .as_ref()
            .expect("only modern calls are asked for input");
        let answers = modern.answer(input).map_err(|refused| {
            ToolFailure::new(
                ErrorCode::InputRequired,
                format!(
                    "server {} asked for input to {tool} that this client does not give: \
                     {refused}",
                    self.transport.server()
                ),
                Some(
                    "set the client's elicitation policy or roots in [core.mcp], or make the \
                     tool work without the input"
                        .to_owned(),
                ),
            )
        })?;
        if let Value::Object(fields) = &mut params {
            fields.insert("inputResponses".to_owned(), Value::Object(answers));
            match &input.request_state {
                Some(state) => fields.insert("requestState".to_owned(), state.clone()),
                None => fields.remove("requestState"),
            };
        }
        Ok(params)
    }

    /// The answer a call without a usable reply gets.
    fn unanswered(&self, tool: &str, unanswered: Unanswered) -> ToolAnswer {
        let server = self.transport.server();
        let failure = match unanswered {
            Unanswered::TimedOut(t) => ToolFailure::new(
                ErrorCode::Unanswered,
                format!(
                    "server {server} did not answer {tool} within {} s; the call was cancelled",
                    t.as_secs_f64()
                ),
                Some(
                    "raise the tool's timeout_s on the server, or the client's default timeout"
                        .to_owned(),
                ),
            ),
            Unanswered::Failed(failure) => match failure.invalid_reason() {
                Some(reason) => ToolFailure::new(
                    ErrorCode::InvalidAnswer,
                    format!("server {server} answered {tool} with an invalid message: {reason}"),
                    Some("report this to the server's authors".to_owned()),
                ),
                None if failure.is_refused() => ToolFailure::new(
                    ErrorCode::RpcError,
                    failure.to_string(),
                    Some("check the server's logs; it refused the request".to_owned()),
                ),
                None => ToolFailure::new(
                    ErrorCode::ConnectionLost,
                    failure.to_string(),
                    Some(match self.transport.stderr_tail() {
                        tail if tail.is_empty() => {
                            "check the server's logs and restart it".to_owned()
                        }
                        tail => {
                            format!("check the server's last stderr lines and restart it:\n{tail}")
                        }
                    }),
                ),
            },
        };
        ToolAnswer::failed(failure)
    }
}

impl CallService for Timeout {
    /// One `tools/call` on the wire, its answer read by Maljan's rules.
    async fn call(&self, call: ToolCall) -> CallTrace {
        let wait = call.wait.unwrap_or_else(|| self.wait_for(&call.tool));
        let arguments = match call.arguments {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            other => {
                return CallTrace::of(ToolAnswer::failed(not_an_object(&other)));
            }
        };
        // The arguments move into the request and are dropped once written, before the
        // wait: a file chunk is not held twice while its call is in flight.
        let mut params = CallToolParams {
            name: call.tool.clone(),
            arguments: Some(arguments),
            meta: call.meta,
        }
        .into_value();
        let mut rounds = 0;
        let mut written = false;
        let mut cause = None;
        let answer = loop {
            // A modern call may be answered input_required and asked again, so its params
            // are kept past their sending; not a platform primitive's (a file chunk is not
            // held twice), which may not ask for input.
            let retained = (self.modern.as_ref().is_some() && !is_platform_primitive(&call.tool))
                .then(|| params.clone());
            let request = OutgoingRequest::new(methods::TOOLS_CALL, Some(params));
            let reply = self.request(request, wait, true).await;
            written |= !matches!(&reply, Err(unanswered) if unanswered.unsent());
            let raw = match reply {
                Ok(Reply::Result(raw)) => raw,
                Ok(Reply::Error(error)) => break ToolAnswer::from_rpc_error(&error),
                Err(unanswered) => {
                    if let Unanswered::Failed(failure) = &unanswered {
                        cause = Some(failure.clone());
                    }
                    break self.unanswered(&call.tool, unanswered);
                }
            };
            let Some(retained) = retained else {
                break self.read_result(&call.tool, &raw);
            };
            match read_result_kind(&raw) {
                Ok(ResultKind::InputRequired(input)) if rounds < MAX_INPUT_ROUNDS => {
                    rounds += 1;
                    match self.answer_input(&call.tool, retained, &input) {
                        Ok(again) => params = again,
                        Err(failure) => break ToolAnswer::failed(failure),
                    }
                }
                Ok(ResultKind::InputRequired(_)) => {
                    break ToolAnswer::failed(ToolFailure::new(
                        ErrorCode::InputRequired,
                        format!(
                            "server {} still asked for input after {MAX_INPUT_ROUNDS} rounds \
                             of {}",
                            self.transport.server(),
                            call.tool
                        ),
                        Some("report this to the server's authors".to_owned()),
                    ));
                }
                Ok(ResultKind::Complete) | Err(_) => break self.read_result(&call.tool, &raw),
                Ok(other) => {
                    let kind = other.as_str();
                    break ToolAnswer::failed(ToolFailure::new(
                        ErrorCode::InvalidAnswer,
                        format!(
                            "server {} answered {} with a result of type {kind:?}, which \
                             this client did not ask for",
                            self.transport.server(),
                            call.tool
                        ),
                        Some("report this to the server's authors".to_owned()),
                    ));
                }
            }
        };
        CallTrace {
            written,
            cause,
            ..CallTrace::of(answer)
        }
    }
}

#[cfg(test)]
mod tests {
    use maljan_mcp_proto::jsonrpc::Message;
    use maljan_mcp_transport::memory;
    use serde_json::json;

    use super::*;

    fn raw(value: Value) -> Box<serde_json::value::RawValue> {
        serde_json::value::to_raw_value(&value).expect("JSON")
    }

    fn params_of(
        message: Option<Message>,
    ) -> (String, Value, maljan_mcp_proto::jsonrpc::RequestId) {
        match message {
            Some(Message::Request(r)) => {
                let params = serde_json::from_str(r.params.expect("params").get()).expect("JSON");
                (r.method, params, r.id)
            }
            other => panic!("a request, not {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_call_goes_out_as_tools_call_and_its_answer_is_read() {
        let (transport, mut peer) = memory::pair("memory");
        let timeout = Timeout::new(Box::new(transport), Duration::from_secs(5));
        let server = tokio::spawn(async move {
            let (method, params, id) = params_of(peer.next_message().await);
            assert_eq!(method, "tools/call");
            assert_eq!(params, json!({"name": "echo", "arguments": {"x": 1}}));
            let text = json!({"y": 2}).to_string();
            peer.answer(
                &id,
                Reply::Result(raw(json!({"content": [{"type": "text", "text": text}]}))),
            );
        });
        let called = timeout.call(ToolCall::new("echo", json!({"x": 1}))).await;
        server.await.expect("the peer");
        assert!(called.answer.is_ok(), "{:?}", called.answer);
        assert_eq!(called.answer.value, json!({"y": 2}));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_given_up_is_cancelled_on_the_server() {
        let (transport, mut peer) = memory::pair("memory");
        let timeout = Timeout::new(Box::new(transport), Duration::from_secs(30));
        let called = timeout.call(ToolCall::new("slow", json!({}))).await;
        let failure = called.answer.failure().expect("a failed answer");
        assert_eq!(failure.code, ErrorCode::Unanswered);
        assert!(
            failure.message.contains("within 30 s"),
            "{}",
            failure.message
        );
        let (_, _, id) = params_of(peer.next_message().await);
        match peer.next_message().await {
            Some(Message::Notification(n)) => {
                assert_eq!(n.method, methods::CANCELLED);
                let params: Value =
                    serde_json::from_str(n.params.expect("params").get()).expect("JSON");
                assert_eq!(params["requestId"], json!(id));
            }
            other => panic!("notifications/cancelled, not {other:?}"),
        }
        assert!(
            !peer.answer(&id, Reply::Result(raw(json!({})))),
            "a late answer reaches nobody"
        );
    }

    #[tokio::test]
    async fn a_tool_with_its_own_timeout_waits_that_long() {
        let (transport, _peer) = memory::pair("memory");
        let timeout = Timeout::new(Box::new(transport), Duration::from_secs(60));
        let timeout =
            timeout.with_tool_waits([("slow".to_owned(), Duration::from_secs(600))].into());
        assert_eq!(timeout.wait_for("slow"), Duration::from_secs(600));
        assert_eq!(timeout.wait_for("other"), Duration::from_secs(60));
    }

    #[tokio::test]
    async fn arguments_that_are_not_an_object_never_go_out() {
        let (transport, mut peer) = memory::pair("memory");
        let timeout = Timeout::new(Box::new(transport), Duration::from_secs(5));
        let called = timeout.call(ToolCall::new("echo", json!([1, 2]))).await;
        assert_eq!(
            called.answer.failure().map(|f| &f.code),
            Some(&ErrorCode::BadArgument)
        );
        drop(timeout);
        assert!(peer.next_message().await.is_none(), "nothing was sent");
    }

    #[tokio::test]
    async fn a_peer_gone_is_a_lost_connection() {
        let (transport, peer) = memory::pair("memory");
        drop(peer);
        let timeout = Timeout::new(Box::new(transport), Duration::from_secs(5));
        let called = timeout.call(ToolCall::new("echo", json!({}))).await;
        let failure = called.answer.failure().expect("failed");
        assert_eq!(failure.code, ErrorCode::ConnectionLost);
        assert!(failure.message.contains("memory"), "{}", failure.message);
        let cause = called.cause.expect("the transport's failure, kept");
        assert!(cause.is_lost() && cause.is_unsent(), "{cause}");
        assert!(
            !called.written,
            "the peer was gone before the request was written"
        );
    }
}
