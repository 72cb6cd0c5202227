//! The stateless era's `input_required` results: a `tools/call` answered so is asked again
//! with the answers the client's policies give and the server's state echoed, at most
//! [`MAX_INPUT_ROUNDS`] times; a result of a kind the client did not ask for is refused.

use std::sync::Arc;
use std::time::Duration;

use maljan_mcp_proto::jsonrpc::Reply;
use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure, is_platform_primitive};
use maljan_mcp_proto::mcp::{InputRequired, ResultKind, methods, read_result_kind};
use maljan_mcp_transport::{OutgoingRequest, Transport};
use serde_json::Value;

use crate::stateless::{MAX_INPUT_ROUNDS, StatelessRequests};
use crate::timeout::{RequestService, Unanswered};

/// Answers the `input_required` results of `tools/call` requests to the layer below.
#[derive(Debug)]
pub(crate) struct AnsweringInput<R> {
    inner: R,
    requests: Arc<StatelessRequests>,
}

impl<R> AnsweringInput<R> {
    /// Answers for `inner` by `requests`' policies.
    pub(crate) fn new(inner: R, requests: Arc<StatelessRequests>) -> Self {
        AnsweringInput { inner, requests }
    }

    /// The layer below.
    pub(crate) fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: RequestService> AnsweringInput<R> {
    /// The call's params asked again with the answers to `input` and its state echoed; a
    /// failure when this client does not give what the server asks.
    fn answer_input(&self, mut params: Value, input: &InputRequired) -> Result<Value, ToolFailure> {
        let answers = self.requests.answer(input).map_err(|refused| {
            ToolFailure::new(
                ErrorCode::InputRequired,
                format!(
                    "server {} asked for input to {} that this client does not give: \
                     {refused}",
                    self.inner.transport().server(),
                    tool_of(&params),
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

    /// The call ends with `code` and `message`, the server's fault.
    fn ended(&self, code: ErrorCode, message: String) -> Unanswered {
        Unanswered::Ended(ToolFailure::new(
            code,
            message,
            Some("report this to the server's authors".to_owned()),
        ))
    }
}

fn tool_of(params: &Value) -> &str {
    params
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("a tool")
}

impl<R: RequestService> RequestService for AnsweringInput<R> {
    async fn request(
        &self,
        request: OutgoingRequest,
        wait: Duration,
        cancellable: bool,
    ) -> Result<Reply, Unanswered> {
        // A call that may be asked for input keeps its params past their sending; not a
        // platform primitive's (a file chunk is not held twice), which may not ask.
        let answerable = request.method() == methods::TOOLS_CALL
            && request
                .params()
                .is_some_and(|p| !is_platform_primitive(tool_of(p)));
        if !answerable {
            return self.inner.request(request, wait, cancellable).await;
        }
        // The first round sends the request as it came; its params are kept for the next.
        let mut params = request.params().cloned().unwrap_or(Value::Null);
        let headers = request.headers().to_vec();
        let mut first = Some(request);
        for round in 0..=MAX_INPUT_ROUNDS {
            let request = first.take().unwrap_or_else(|| {
                OutgoingRequest::new(methods::TOOLS_CALL, Some(params.clone()))
                    .with_headers(headers.clone())
            });
            let reply = match self.inner.request(request, wait, cancellable).await {
                Ok(reply) => reply,
                // Once the call was written, a later round lost before it was written is
                // not an unsent call: the server had the call.
                Err(unanswered) if round > 0 && unanswered.unsent() => {
                    let Unanswered::Failed(failure) = unanswered else {
                        unreachable!("only a transport's failure is unsent")
                    };
                    return Err(Unanswered::Ended(ToolFailure::new(
                        ErrorCode::ConnectionLost,
                        failure.to_string(),
                        Some("check the server's logs and restart it".to_owned()),
                    )));
                }
                Err(unanswered) => return Err(unanswered),
            };
            let Reply::Result(raw) = &reply else {
                return Ok(reply);
            };
            match read_result_kind(raw) {
                Ok(ResultKind::InputRequired(input)) if round < MAX_INPUT_ROUNDS => {
                    params = self
                        .answer_input(params, &input)
                        .map_err(Unanswered::Ended)?;
                }
                Ok(ResultKind::InputRequired(_)) => break,
                Ok(ResultKind::Complete) | Err(_) => return Ok(reply),
                Ok(other) => {
                    return Err(self.ended(
                        ErrorCode::InvalidAnswer,
                        format!(
                            "server {} answered {} with a result of type {:?}, which this \
                             client did not ask for",
                            self.inner.transport().server(),
                            tool_of(&params),
                            other.as_str()
                        ),
                    ));
                }
            }
        }
        Err(self.ended(
            ErrorCode::InputRequired,
            format!(
                "server {} still asked for input after {MAX_INPUT_ROUNDS} rounds of {}",
                self.inner.transport().server(),
                tool_of(&params)
            ),
        ))
    }

    fn transport(&self) -> &dyn Transport {
        self.inner.transport()
    }
}

#[cfg(test)]
mod tests {
    use maljan_mcp_proto::jsonrpc::Message;
    use maljan_mcp_proto::mcp::{ElicitationPolicy, Era, Implementation, ProtocolVersion};
    use maljan_mcp_transport::memory;
    use serde_json::json;

    use super::*;
    use crate::timeout::Timeout;

    fn answering(transport: memory::MemoryTransport) -> AnsweringInput<Timeout> {
        let me = Implementation {
            name: "maljan".into(),
            version: "0".into(),
            title: None,
        };
        let policy = maljan_mcp_proto::mcp::ServerRequestPolicy::default()
            .elicitation(ElicitationPolicy::Defaults);
        let requests =
            StatelessRequests::new(ProtocolVersion::newest_of(Era::Stateless), &me, policy);
        AnsweringInput::new(Timeout::new(Box::new(transport)), Arc::new(requests))
    }

    fn call(tool: &str) -> OutgoingRequest {
        OutgoingRequest::new(
            methods::TOOLS_CALL,
            Some(json!({"name": tool, "arguments": {"x": 1}})),
        )
    }

    fn raw(value: Value) -> Reply {
        Reply::Result(
            serde_json::value::to_raw_value(&value)
                .expect("JSON")
                .into(),
        )
    }

    const ASK: &str = "elicitation/create";

    fn asking(state: &str) -> Reply {
        raw(json!({
            "resultType": "input_required",
            "requestState": state,
            "inputRequests": {"go": {"method": ASK, "params": {"message": "go?",
                "requestedSchema": {"type": "object", "properties":
                    {"ok": {"type": "boolean", "default": true}}, "required": ["ok"]}}}}
        }))
    }

    #[tokio::test]
    async fn a_call_asked_for_input_is_asked_again_with_the_answers_and_the_state() {
        let (transport, mut peer) = memory::pair("memory");
        let layer = answering(transport);
        let server = tokio::spawn(async move {
            let Some(Message::Request(first)) = peer.next_message().await else {
                panic!("a request");
            };
            peer.answer(&first.id, asking("s1"));
            let Some(Message::Request(again)) = peer.next_message().await else {
                panic!("the call again");
            };
            let params: Value =
                serde_json::from_str(again.params.expect("params").get()).expect("JSON");
            peer.answer(&again.id, raw(json!({"content": []})));
            params
        });
        let reply = layer
            .request(call("t"), Duration::from_secs(5), true)
            .await
            .expect("a reply");
        let again = server.await.expect("the peer");
        assert!(matches!(reply, Reply::Result(_)));
        assert_eq!(again["arguments"], json!({"x": 1}));
        assert_eq!(again["requestState"], "s1");
        assert_eq!(
            again["inputResponses"]["go"],
            json!({"action": "accept", "content": {"ok": true}})
        );
    }

    #[tokio::test]
    async fn a_server_that_keeps_asking_is_given_up_after_the_last_round() {
        let (transport, mut peer) = memory::pair("memory");
        let layer = answering(transport);
        let server = tokio::spawn(async move {
            let mut asked = 0;
            while let Some(Message::Request(request)) = peer.next_message().await {
                asked += 1;
                peer.answer(&request.id, asking("again"));
            }
            asked
        });
        let ended = layer
            .request(call("t"), Duration::from_secs(5), true)
            .await
            .expect_err("given up");
        drop(layer);
        let Unanswered::Ended(failure) = ended else {
            panic!("{ended:?}");
        };
        assert_eq!(failure.code, ErrorCode::InputRequired);
        assert!(
            failure.message.contains("after 4 rounds of t"),
            "{}",
            failure.message
        );
        assert_eq!(server.await.expect("the peer"), MAX_INPUT_ROUNDS + 1);
    }

    #[tokio::test]
    async fn a_platform_primitive_goes_through_untouched() {
        let (transport, mut peer) = memory::pair("memory");
        let layer = answering(transport);
        let server = tokio::spawn(async move {
            let Some(Message::Request(request)) = peer.next_message().await else {
                panic!("a request");
            };
            peer.answer(&request.id, asking("s"));
        });
        let reply = layer
            .request(call("put_sample_chunk"), Duration::from_secs(5), true)
            .await
            .expect("the reply, as it came");
        server.await.expect("the peer");
        let Reply::Result(raw) = reply else {
            panic!("a result");
        };
        assert!(raw.get().contains("input_required"));
    }
}
