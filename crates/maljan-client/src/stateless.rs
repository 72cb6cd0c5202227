//! What the stateless era (2026-07-28) asks of every request once a server speaks it: the
//! required `_meta` keys on each (the [`Stamped`] layer), and the input an
//! `input_required` result asks for, answered by the client's policies (see
//! [`input_required`](crate::input_required)).

use std::sync::Arc;

use maljan_mcp_proto::jsonrpc::Reply;
use maljan_mcp_proto::maljan::{JOB_KEY_META, JobKey};
use maljan_mcp_proto::mcp::{
    Implementation, InputRequired, ProtocolVersion, ServerRequestPolicy, stateless_meta,
    with_request_meta,
};
use maljan_mcp_transport::{OutgoingRequest, Transport};
use serde_json::{Map, Value};

use crate::timeout::{RequestService, Unanswered};

/// How many times one call may be answered `input_required` before it fails: a server that
/// keeps asking is not waited on for ever.
pub(crate) const MAX_INPUT_ROUNDS: usize = 4;

/// The modern era's per-request rules for one server.
#[derive(Debug, Clone)]
pub(crate) struct StatelessRequests {
    meta: Map<String, Value>,
    inputs: ServerRequestPolicy,
    /// The version the requests are made in.
    version: ProtocolVersion,
}

impl StatelessRequests {
    /// Requests in `version`, declaring the capabilities of `inputs` and who the client is,
    /// each naming the connection's own job (a fresh random job key), so that a kit server
    /// keeps the files of its calls together and apart from every other caller's.
    pub(crate) fn new(
        version: ProtocolVersion,
        client_info: &Implementation,
        inputs: ServerRequestPolicy,
    ) -> Self {
        let mut meta = stateless_meta(version.as_str(), &inputs.capabilities(), client_info);
        match new_job_key() {
            Some(key) => {
                meta.insert(
                    JOB_KEY_META.to_owned(),
                    Value::String(key.as_str().to_owned()),
                );
            }
            None => tracing::warn!(
                "the system gave no randomness for a job key: each call to this server works \
                 in a job of its own"
            ),
        }
        StatelessRequests {
            version,
            meta,
            inputs,
        }
    }

    /// The request with the era's `_meta` keys in its params (beside the keys it has, a
    /// call's `traceparent` or `progressToken`; params that are not an object are left as
    /// they are, for the server to refuse).
    pub(crate) fn stamp(&self, request: OutgoingRequest) -> OutgoingRequest {
        let ends_setup = request.ends_setup();
        let headers = request.headers().to_vec();
        let (method, params, _) = request.into_parts();
        let params = with_request_meta(params, &self.meta);
        let stamped = OutgoingRequest::new(method, Some(params))
            .stateless(self.version)
            .with_headers(headers);
        match ends_setup {
            Some(ends) => stamped.ending_setup(ends),
            None => stamped,
        }
    }

    /// The answers to an `input_required` result, under its keys; `Err` says which input
    /// this client does not give, and why.
    pub(crate) fn answer(&self, input: &InputRequired) -> Result<Map<String, Value>, String> {
        let mut answers = Map::new();
        for (key, request) in input.requests() {
            let request = request?;
            let answer = self
                .inputs
                .answer_input(&request.method, request.params.as_ref())
                .map_err(|refused| format!("{} ({key}): {}", request.method, refused.message))?;
            answers.insert(key.to_owned(), answer);
        }
        Ok(answers)
    }
}

/// Stamps every request to the layer below with the era's `_meta` keys and version.
#[derive(Debug)]
pub(crate) struct Stamped<R> {
    inner: R,
    requests: Arc<StatelessRequests>,
}

impl<R> Stamped<R> {
    /// Stamps the requests to `inner` by `requests`' rules.
    pub(crate) fn new(inner: R, requests: Arc<StatelessRequests>) -> Self {
        Stamped { inner, requests }
    }

    /// The layer below.
    pub(crate) fn into_inner(self) -> R {
        self.inner
    }
}

impl<R: RequestService> RequestService for Stamped<R> {
    async fn request(
        &self,
        request: OutgoingRequest,
        wait: std::time::Duration,
        cancellable: bool,
    ) -> Result<Reply, Unanswered> {
        self.inner
            .request(self.requests.stamp(request), wait, cancellable)
            .await
    }

    fn transport(&self) -> &dyn Transport {
        self.inner.transport()
    }
}

/// A job key from the operating system's randomness; `None` when it gives none (a key
/// must be unguessable, so there is no fallback).
fn new_job_key() -> Option<JobKey> {
    let mut bytes = [0u8; 16];
    getrandom::getrandom(&mut bytes).ok()?;
    Some(JobKey::from_random(bytes))
}

#[cfg(test)]
mod tests {
    use maljan_mcp_proto::mcp::{ElicitationPolicy, Era, ResultKind, read_result_kind};
    use serde_json::json;

    use super::*;

    fn requests(policy: ServerRequestPolicy) -> StatelessRequests {
        let me = Implementation {
            name: "maljan".into(),
            version: "0".into(),
            title: None,
        };
        StatelessRequests::new(ProtocolVersion::newest_of(Era::Stateless), &me, policy)
    }

    fn input(text: &str) -> InputRequired {
        let raw = serde_json::value::RawValue::from_string(text.to_owned()).unwrap();
        match read_result_kind(&raw.into()).unwrap() {
            ResultKind::InputRequired(input) => input,
            other => panic!("not input_required: {other:?}"),
        }
    }

    #[test]
    fn stamping_keeps_the_callers_meta_and_adds_the_eras() {
        let request = OutgoingRequest::new(
            "tools/call",
            Some(json!({"name": "t", "_meta": {"traceparent": "00-a-b-01"}})),
        );
        let stamped = requests(ServerRequestPolicy::default()).stamp(request);
        let meta = &stamped.params().unwrap()["_meta"];
        assert_eq!(meta["traceparent"], "00-a-b-01");
        assert_eq!(
            meta["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(
            meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"],
            json!({"form": {}})
        );
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "maljan");
        let bare = requests(ServerRequestPolicy::default())
            .stamp(OutgoingRequest::new("server/discover", None));
        assert!(bare.params().unwrap()["_meta"].is_object());
    }

    #[test]
    fn inputs_are_answered_by_the_policy_or_refused_by_name() {
        let asked = input(
            r#"{"resultType":"input_required","inputRequests":{"ok":{"method":"elicitation/create",
               "params":{"message":"go?","requestedSchema":{"type":"object","properties":
               {"go":{"type":"boolean","default":true}},"required":["go"]}}}}}"#,
        );
        let defaults =
            requests(ServerRequestPolicy::default().elicitation(ElicitationPolicy::Defaults));
        assert_eq!(
            defaults.answer(&asked).unwrap()["ok"],
            json!({"action": "accept", "content": {"go": true}})
        );
        let declining = requests(ServerRequestPolicy::default());
        assert_eq!(declining.answer(&asked).unwrap()["ok"]["action"], "decline");
        let sampling = input(
            r#"{"resultType":"input_required","inputRequests":{"s":{"method":"sampling/createMessage"}}}"#,
        );
        let refused = declining.answer(&sampling).unwrap_err();
        assert!(refused.contains("sampling/createMessage (s)"), "{refused}");
    }
}
