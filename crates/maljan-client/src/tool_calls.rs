//! The tools/call layer: a call made a `tools/call` request, waited for up to its tool's
//! wait (a manifest's `timeout_s`, else the default), and its reply read by Maljan's rules
//! into an answer: ok, or failed with a code, a message and a remediation.

use std::collections::HashMap;
use std::time::Duration;

use maljan_mcp_proto::jsonrpc::{RawJson, Reply};
use maljan_mcp_proto::maljan::{ErrorCode, ToolAnswer, ToolFailure};
use maljan_mcp_proto::mcp::{CallToolParams, CallToolResult, ParamHeaders, methods};
use maljan_mcp_transport::OutgoingRequest;
use serde_json::{Map, Value};

use crate::call::{CallService, CallTrace, ToolCall, not_an_object};
use crate::timeout::{RequestService, Unanswered};

/// Makes calls `tools/call` requests on the request path below.
#[derive(Debug)]
pub(crate) struct ToolCalls<R> {
    inner: R,
    default_wait: Duration,
    tool_waits: HashMap<String, Duration>,
    /// The parameters each tool's calls repeat in headers, for tools that have any (over
    /// HTTP only: stdio has no headers).
    #[cfg(feature = "http")]
    param_headers: HashMap<String, ParamHeaders>,
}

impl<R: RequestService> ToolCalls<R> {
    /// Calls over `inner`, waiting `default_wait` for a tool without a wait of its own.
    pub(crate) fn new(inner: R, default_wait: Duration) -> Self {
        ToolCalls {
            inner,
            default_wait,
            tool_waits: HashMap::new(),
            #[cfg(feature = "http")]
            param_headers: HashMap::new(),
        }
    }

    /// The headers a call of `tool` with `arguments` repeats its parameters in (over HTTP;
    /// without it, none).
    #[cfg(feature = "http")]
    fn headers_of(&self, tool: &str, arguments: &Map<String, Value>) -> Vec<(String, String)> {
        self.param_headers
            .get(tool)
            .map(|headers| headers.for_arguments(arguments))
            .unwrap_or_default()
    }

    #[cfg(not(feature = "http"))]
    fn headers_of(&self, _: &str, _: &Map<String, Value>) -> Vec<(String, String)> {
        Vec::new()
    }

    /// The same calls, a tool's annotated parameters repeated in its calls' headers.
    #[cfg(feature = "http")]
    pub(crate) fn with_param_headers(self, param_headers: HashMap<String, ParamHeaders>) -> Self {
        ToolCalls {
            param_headers,
            ..self
        }
    }

    #[cfg(not(feature = "http"))]
    pub(crate) fn with_param_headers(self, _: HashMap<String, ParamHeaders>) -> Self {
        self
    }

    /// The request path below.
    pub(crate) fn get_ref(&self) -> &R {
        &self.inner
    }

    /// The request path below.
    pub(crate) fn into_inner(self) -> R {
        self.inner
    }

    /// The same calls, each tool waiting its own timeout (a manifest's `timeout_s`).
    pub(crate) fn with_tool_waits(self, tool_waits: HashMap<String, Duration>) -> Self {
        ToolCalls { tool_waits, ..self }
    }

    /// How long a call to `tool` waits.
    pub(crate) fn wait_for(&self, tool: &str) -> Duration {
        self.tool_waits
            .get(tool)
            .copied()
            .unwrap_or(self.default_wait)
    }

    /// A tool's result, read by Maljan's rules; a file chunk's base64 is moved out of the
    /// raw result, not copied.
    fn read_result(&self, tool: &str, raw: RawJson) -> ToolAnswer {
        match CallToolResult::from_raw(raw) {
            Ok(result) => ToolAnswer::from_result(result),
            Err(e) => ToolAnswer::failed(ToolFailure::new(
                ErrorCode::InvalidAnswer,
                format!(
                    "server {} answered {tool} with something that is not a tool result: {e}",
                    self.inner.transport().server(),
                ),
                Some("report this to the server's authors".to_owned()),
            )),
        }
    }

    /// The answer a call without a usable reply gets.
    fn unanswered(&self, tool: &str, unanswered: Unanswered) -> ToolAnswer {
        let transport = self.inner.transport();
        let server = transport.server();
        let failure = match unanswered {
            Unanswered::Ended(failure) => failure,
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
                    Some(match transport.info().stderr_tail() {
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

impl<R: RequestService> CallService for ToolCalls<R> {
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
        let headers = self.headers_of(&call.tool, &arguments);
        // The arguments move into the request and are dropped once written, before the
        // wait: a file chunk is not held twice while its call is in flight.
        let params = CallToolParams {
            name: call.tool.clone(),
            arguments: Some(arguments),
            meta: call.meta,
        }
        .into_value();
        let request = OutgoingRequest::new(methods::TOOLS_CALL, Some(params)).with_headers(headers);
        let reply = self.inner.request(request, wait, true).await;
        let written = !matches!(&reply, Err(unanswered) if unanswered.unsent());
        let mut cause = None;
        let answer = match reply {
            Ok(Reply::Result(raw)) => self.read_result(&call.tool, raw),
            Ok(Reply::Error(error)) => ToolAnswer::from_rpc_error(&error),
            Err(unanswered) => {
                if let Unanswered::Failed(failure) = &unanswered {
                    cause = Some(failure.clone());
                }
                self.unanswered(&call.tool, unanswered)
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
    use crate::timeout::Timeout;

    /// Calls over `transport`, a tool waiting `seconds` unless its own wait says otherwise.
    fn calls_over(transport: memory::MemoryTransport, seconds: u64) -> ToolCalls<Timeout> {
        ToolCalls::new(
            Timeout::new(Box::new(transport)),
            Duration::from_secs(seconds),
        )
    }

    fn raw(value: Value) -> RawJson {
        serde_json::value::to_raw_value(&value)
            .expect("JSON")
            .into()
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
        let calls = calls_over(transport, 5);
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
        let called = calls.call(ToolCall::new("echo", json!({"x": 1}))).await;
        server.await.expect("the peer");
        assert!(called.answer.is_ok(), "{:?}", called.answer);
        assert_eq!(called.answer.value, json!({"y": 2}));
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_given_up_is_cancelled_on_the_server() {
        let (transport, mut peer) = memory::pair("memory");
        let calls = calls_over(transport, 30);
        let called = calls.call(ToolCall::new("slow", json!({}))).await;
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
        let calls = calls_over(transport, 60);
        let calls = calls.with_tool_waits([("slow".to_owned(), Duration::from_secs(600))].into());
        assert_eq!(calls.wait_for("slow"), Duration::from_secs(600));
        assert_eq!(calls.wait_for("other"), Duration::from_secs(60));
    }

    #[tokio::test]
    async fn arguments_that_are_not_an_object_never_go_out() {
        let (transport, mut peer) = memory::pair("memory");
        let calls = calls_over(transport, 5);
        let called = calls.call(ToolCall::new("echo", json!([1, 2]))).await;
        assert_eq!(
            called.answer.failure().map(|f| &f.code),
            Some(&ErrorCode::BadArgument)
        );
        drop(calls);
        assert!(peer.next_message().await.is_none(), "nothing was sent");
    }

    #[tokio::test]
    async fn a_peer_gone_is_a_lost_connection() {
        let (transport, peer) = memory::pair("memory");
        drop(peer);
        let calls = calls_over(transport, 5);
        let called = calls.call(ToolCall::new("echo", json!({}))).await;
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
