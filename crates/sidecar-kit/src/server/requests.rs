//! Answering one request: the method, in either era (2026-07-28 requests carry their
//! version and capabilities in `_meta`; the others follow `initialize`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use maljan_mcp_proto::jsonrpc::{ErrorResponse, Message, Request, RequestId, error_codes};
use maljan_mcp_proto::mcp::{
    InitializeParams, InitializeResult, ListToolsResult, ProtocolVersion, meta_keys, methods,
};
use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::JobDir;
use crate::era;
use crate::reply::response_line;
use crate::tool::Cancellation;
use maljan_mcp_proto::mcp::Era;

use super::calls::invalid_call_params;
use super::{Answer, InFlight, Server, encode, error_reply};

impl Server {
    /// Answers a request at once, or says it is a tool call to run. A request in the
    /// modern era (a protocol version in its `_meta`) must carry every required `_meta`
    /// key, for a version spoken here (else `-32602` or `-32022`); `server/discover` and a
    /// modern `tools/list` say how long their results may be cached.
    pub(crate) fn answer(&self, request: Request) -> Answer {
        let Request { id, method, params } = request;
        if method == methods::TOOLS_CALL {
            // A call's `_meta` is checked as its params are read, in one pass: they may be a
            // multi-MiB file chunk.
            return match params {
                Some(params) => Answer::Call(id, params),
                None => Answer::Line(invalid_call_params(id)),
            };
        }
        let discover = method == methods::SERVER_DISCOVER;
        let era = match era::request_era(params.as_deref(), discover) {
            Ok(era) => era,
            Err(error) => {
                return Answer::Line(encode(&Message::Error(ErrorResponse {
                    id: Some(id),
                    error,
                })));
            }
        };
        let line = match method.as_str() {
            methods::SERVER_DISCOVER => response_line(
                &id,
                &json!({
                    "supportedVersions": era::supported(),
                    "capabilities": {"tools": {}},
                    "ttlMs": era::TTL_MS,
                    "cacheScope": "public",
                    "resultType": "complete",
                    "_meta": {meta_keys::SERVER_INFO: self.info},
                }),
            ),
            methods::INITIALIZE => {
                let offered = params
                    .as_ref()
                    .and_then(|p| serde_json::from_str::<InitializeParams>(p.get()).ok())
                    .and_then(|p| ProtocolVersion::parse_session(&p.protocol_version).ok())
                    .unwrap_or(ProtocolVersion::newest_of(Era::Session));
                let result = InitializeResult {
                    protocol_version: offered.as_str().to_owned(),
                    capabilities: json!({"tools": {}})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                    server_info: self.info.clone(),
                    instructions: None,
                };
                response_line(&id, &result)
            }
            methods::PING => response_line(&id, &json!({})),
            methods::TOOLS_LIST if era == Era::Stateless => response_line(
                &id,
                &json!({
                    "tools": self.tool_list(),
                    "ttlMs": era::TTL_MS,
                    "cacheScope": "public",
                    "resultType": "complete",
                    "_meta": {meta_keys::SERVER_INFO: self.info},
                }),
            ),
            methods::TOOLS_LIST => {
                let result = ListToolsResult {
                    tools: self.tool_list(),
                    next_cursor: None,
                };
                response_line(&id, &result)
            }
            other => encode(&error_reply(
                id,
                error_codes::METHOD_NOT_FOUND,
                format!("this server does not serve {other}"),
            )),
        };
        Answer::Line(line)
    }

    pub(super) async fn handle_request(
        self: &Arc<Self>,
        request: Request,
        job: &Arc<JobDir>,
        out: &mpsc::Sender<Vec<u8>>,
        in_flight: &Arc<Mutex<HashMap<RequestId, InFlight>>>,
        calls: &mut JoinSet<()>,
    ) {
        let (id, call) = match self.answer(request) {
            Answer::Line(line) => {
                let _ = out.send(line).await;
                return;
            }
            Answer::Call(id, call) => (id, call),
        };
        let server = self.clone();
        let out = out.clone();
        let registry = in_flight.clone();
        let call_id = id.clone();
        let job = job.clone();
        let cancellation = Cancellation::default();
        let handler_cancellation = cancellation.clone();
        // The registry stays locked until the call is in it, so the call's own removal
        // below cannot run first.
        let mut registered = in_flight.lock().unwrap_or_else(|p| p.into_inner());
        let answer = calls.spawn(async move {
            let reply = server
                .call(call_id.clone(), call, job, handler_cancellation)
                .await;
            registry
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&call_id);
            let _ = out.send(reply).await;
        });
        registered.insert(
            id,
            InFlight {
                answer,
                cancellation,
            },
        );
    }
}
