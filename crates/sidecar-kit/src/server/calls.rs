//! Calling a tool: on a thread of its own, under the call gates, its panic caught, its
//! answer put in a `tools/call` result.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use maljan_mcp_proto::jsonrpc::{ErrorResponse, Message, RequestId, error_codes};
use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
use maljan_mcp_proto::mcp::stateless_error_codes;
use serde_json::Value;
use serde_json::value::RawValue;

use crate::call_params::ToolCall;
use crate::era::{self};
use crate::reply::tool_reply;
use crate::tool::Cancellation;
use crate::{Arguments, JobDir, ToolContext};
use maljan_mcp_proto::large_buffers::LARGE_BUFFERS;

use super::{CAPABILITIES, CallJob, Server, encode, error_reply, panic_text};

/// The largest params a quick tool's call is read with on the serving task
/// ([`ServerBuilder::quick_tool`](crate::ServerBuilder::quick_tool)): larger ones are read
/// on a blocking thread, as any tool's.
pub const QUICK_PARAMS_BYTES: usize = 64 * 1024;

impl Server {
    /// Runs a tool call on a blocking thread (a quick tool's, on this task): parsing its
    /// parameters, the handler (a panic becomes `tool_failed`) and serializing the reply.
    pub(crate) async fn call(
        self: Arc<Self>,
        id: RequestId,
        params: Box<RawValue>,
        job: Arc<JobDir>,
        cancellation: Cancellation,
    ) -> Vec<u8> {
        match self
            .call_named(id, params, CallJob::Given(job), cancellation, None)
            .await
        {
            Ok(line) | Err((_, line)) => line,
        }
    }

    /// [`call`](Self::call); `Err` is a call refused before it runs, with the tool it named
    /// and the refusal: a modern call whose `_meta` lacks a required key or names another
    /// version (`-32602`, `-32022`), or whose tool is not `expected` (a modern HTTP request's
    /// `Mcp-Name` header: `-32020`). The call's params are read once, whatever their size.
    pub(crate) async fn call_named(
        self: Arc<Self>,
        id: RequestId,
        params: Box<RawValue>,
        job: CallJob,
        cancellation: Cancellation,
        expected: Option<String>,
    ) -> Result<Vec<u8>, (String, Vec<u8>)> {
        let turn = match self.gates.turn(self.is_chunk_call(&params)).await {
            Ok(turn) => turn,
            Err(busy) => return Ok(tool_reply(&id, Err(busy), &tool_name(&params))),
        };
        if self.is_quick_call(&params) {
            let outcome = self.call_blocking(id, &params, job, cancellation, expected.as_deref());
            drop(turn);
            return outcome;
        }
        let reply_id = id.clone();
        let call = move || self.call_blocking(id, &params, job, cancellation, expected.as_deref());
        let outcome = tokio::task::spawn_blocking(call).await;
        // The turn is given back once the call's thread is done with it, not while that
        // thread is still being handed back: the next call then finds it idle instead of
        // starting another.
        drop(turn);
        match outcome {
            Ok(outcome) => outcome,
            Err(_) => Ok(encode(&error_reply(
                reply_id,
                error_codes::INTERNAL_ERROR,
                "the call was stopped".to_owned(),
            ))),
        }
    }

    /// Whether a call's params name the chunk tool at their start, where a client writes
    /// the name: such a call passes the chunks' gate. (A call that names it elsewhere
    /// passes the other gate, bounded all the same.)
    pub(super) fn is_chunk_call(&self, params: &RawValue) -> bool {
        let Some(tool) = self.chunk_tool() else {
            return false;
        };
        let head = &params.get().as_bytes()[..params.get().len().min(256)];
        let quoted = format!("\"{tool}\"");
        memchr::memmem::find(head, quoted.as_bytes()).is_some()
    }

    /// Whether a call names a tool registered as quick, with params small enough to read
    /// on the serving task ([`QUICK_PARAMS_BYTES`]).
    fn is_quick_call(&self, params: &RawValue) -> bool {
        params.get().len() <= QUICK_PARAMS_BYTES && self.tools.iter().any(|t| t.quick) && {
            let name = tool_name(params);
            self.tools.iter().any(|t| t.quick && t.spec.name == name)
        }
    }

    /// The tool whose arguments are read as a file chunk, if the server has one.
    pub(super) fn chunk_tool(&self) -> Option<&str> {
        self.tools
            .iter()
            .find(|t| t.chunk_handler.is_some())
            .map(|t| t.spec.name.as_str())
    }

    pub(super) fn call_blocking(
        &self,
        id: RequestId,
        params: &RawValue,
        job: CallJob,
        cancellation: Cancellation,
        expected: Option<&str>,
    ) -> Result<Vec<u8>, (String, Vec<u8>)> {
        let Some(call) = ToolCall::read(params, self.chunk_tool()) else {
            return Ok(invalid_call_params(id));
        };
        let name = call.name().to_owned();
        // A call made with the modern HTTP headers (`expected`) must be modern in its body too.
        if let Err(error) = era::meta_era(call.meta(), expected.is_some()) {
            let refusal = encode(&Message::Error(ErrorResponse {
                id: Some(id),
                error,
            }));
            return Err((name, refusal));
        }
        if let Some(expected) = expected.filter(|e| *e != name) {
            let refusal = encode(&error_reply(
                id,
                stateless_error_codes::HEADER_MISMATCH,
                format!("the Mcp-Name header names {expected:?} and params.name {name:?}"),
            ));
            return Err((name, refusal));
        }
        let job = match job {
            CallJob::Given(job) => job,
            CallJob::ChosenBy(choose) => match choose(call.meta()) {
                Ok(job) => job,
                Err(error) => {
                    let refusal = encode(&Message::Error(ErrorResponse {
                        id: Some(id),
                        error,
                    }));
                    return Err((name, refusal));
                }
            },
        };
        Ok(self.run_tool(id, call, name, job, cancellation))
    }

    pub(super) fn run_tool(
        &self,
        id: RequestId,
        call: ToolCall<'_>,
        name: String,
        job: Arc<JobDir>,
        cancellation: Cancellation,
    ) -> Vec<u8> {
        if name == CAPABILITIES {
            return tool_reply(
                &id,
                Ok(serde_json::to_value(&self.manifest).unwrap_or(Value::Null)),
                CAPABILITIES,
            );
        }
        let Some(tool) = self.tools.iter().find(|t| t.spec.name == name) else {
            return encode(&error_reply(
                id,
                error_codes::INVALID_PARAMS,
                format!("unknown tool {name:?}; tools/list names the tools"),
            ));
        };
        if let (Some(Err(reason)), Some(dep)) = (&tool.dependency, &tool.spec.dependency) {
            let failure = ToolFailure::new(
                ErrorCode::MissingDependency,
                reason.clone(),
                Some(dep.remediation.clone()),
            );
            return tool_reply(&id, Err(failure), &name);
        }
        let dependency = match &tool.dependency {
            Some(Ok(found)) => Some(found.clone()),
            _ => None,
        };
        let context = ToolContext::for_job(name.clone(), job)
            .with_dependency(dependency)
            .reading(self.roots.clone())
            .cancelled_by(cancellation)
            .with_job_bytes(self.job_bytes);
        let outcome = match (call, &tool.chunk_handler) {
            (ToolCall::Chunk { chunk, .. }, Some(chunk_handler)) => {
                std::panic::catch_unwind(AssertUnwindSafe(|| chunk_handler(&chunk, &context)))
            }
            (ToolCall::Chunk { name, .. }, None) => {
                unreachable!("{name} has no chunk handler, so its call is not read as a chunk")
            }
            (ToolCall::Parsed(call), _) => {
                let arguments = Arguments::new(call.arguments.unwrap_or_default());
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    (tool.handler)(&arguments, &context)
                }));
                LARGE_BUFFERS.give_strings(Value::Object(arguments.into_map()));
                outcome
            }
        };
        let result = outcome.unwrap_or_else(|panic| {
            Err(ToolFailure::new(
                ErrorCode::ToolFailed,
                format!("the tool failed unexpectedly: {}", panic_text(&*panic)),
                Some("report this to the server's authors with the arguments used".to_owned()),
            ))
        });
        tool_reply(&id, result, &name)
    }
}

/// The tool a call's params name, for an answer given without reading them whole.
fn tool_name(params: &RawValue) -> String {
    #[derive(serde::Deserialize)]
    struct NameOnly {
        #[serde(default)]
        name: String,
    }
    serde_json::from_str::<NameOnly>(params.get())
        .map(|p| p.name)
        .unwrap_or_default()
}

pub(super) fn invalid_call_params(id: RequestId) -> Vec<u8> {
    encode(&error_reply(
        id,
        error_codes::INVALID_PARAMS,
        "tools/call needs {name, arguments}".to_owned(),
    ))
}
