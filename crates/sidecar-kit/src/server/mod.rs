//! A kit server: its tools, its manifest, and the state its ways of serving share.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use maljan_mcp_proto::jsonrpc::{ErrorObject, ErrorResponse, Message, RequestId};
use maljan_mcp_proto::maljan::CapabilityManifest;
use maljan_mcp_proto::mcp::{Implementation, Tool};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::task::AbortHandle;

use crate::call_gate::{CallGates, CallLimits};
use crate::tool::{Cancellation, ChunkHandler, Handler};
use crate::{JobDir, ServerBuilder, ToolSpec};
use maljan_confine::Root;

mod calls;
mod requests;
mod stdio;

pub use calls::QUICK_PARAMS_BYTES;

/// The name of the manifest tool every kit server offers.
pub const CAPABILITIES: &str = "capabilities";

/// What a request needs: a line now, or a tool call to run. The call's parameters stay
/// raw: they are parsed on the call's own thread, so a large argument (a file chunk) does
/// not hold up reading the next request.
pub(crate) enum Answer {
    Line(Vec<u8>),
    Call(RequestId, Box<RawValue>),
}

/// A tool as the builder registered it, its dependency probed.
pub(crate) struct RegisteredTool {
    pub(crate) spec: ToolSpec,
    pub(crate) handler: Handler,
    /// How a tool whose arguments are a file chunk takes them read straight from the request.
    pub(crate) chunk_handler: Option<ChunkHandler>,
    /// `Ok(found)` or `Err(reason)` from the dependency's probe (`None` until built).
    pub(crate) dependency: Option<Result<String, String>>,
    /// The handler is quick and never blocks: it runs on the task that serves the call.
    pub(crate) quick: bool,
}

/// The job a call works in: the one its stdio process or HTTP session holds, or one chosen
/// from the call's own `_meta` as its params are read (a stateless HTTP caller's job key).
pub(crate) enum CallJob {
    Given(Arc<JobDir>),
    /// Only a stateless HTTP call's job is chosen from its params.
    #[cfg_attr(not(feature = "http"), allow(dead_code))]
    ChosenBy(Box<ChooseJob>),
}

/// Chooses a call's job from its `_meta`; `Err` refuses the call.
pub(crate) type ChooseJob =
    dyn FnOnce(Option<&serde_json::Map<String, Value>>) -> Result<Arc<JobDir>, ErrorObject> + Send;

/// A call in flight: how to stop its answer, and how to tell its handler to stop.
#[derive(Debug)]
pub(crate) struct InFlight {
    pub(crate) answer: AbortHandle,
    pub(crate) cancellation: Cancellation,
}

impl InFlight {
    pub(crate) fn cancel(&self) {
        self.cancellation.cancel();
        self.answer.abort();
    }
}

/// A tool server: answers `initialize`, `tools/list`, `tools/call` and `ping`, honours
/// `notifications/cancelled`, and offers the `capabilities` manifest.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use maljan_sidecar_kit::{Server, ToolSpec};
/// let server = Server::builder("demo", "1.0.0")
///     .tool(ToolSpec::new("hello", "Says hello"), |_args, _ctx| Ok(serde_json::json!({"hello": "world"})))
///     .build();
/// assert_eq!(server.manifest().tools.len(), 1);
///
/// let requests = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"hello\"}}\n";
/// let mut out = Vec::new();
/// server.serve(&requests[..], &mut out).await.unwrap();
/// let answer = String::from_utf8(out).unwrap();
/// assert!(answer.contains("world"));
/// # }
/// ```
pub struct Server {
    info: Implementation,
    tools: Vec<RegisteredTool>,
    manifest: CapabilityManifest,
    /// Directories besides each job's whose files tools may read.
    roots: Arc<[Root]>,
    gates: CallGates,
    /// Each job's disk budget, in bytes.
    job_bytes: u64,
    /// How long stdin is polled after each answer before the serving task sleeps.
    busy_poll: Duration,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("info", &self.info)
            .field("manifest", &self.manifest)
            .finish_non_exhaustive()
    }
}

pub(crate) fn encode(message: &Message) -> Vec<u8> {
    message.to_line()
}

pub(crate) fn error_reply(id: RequestId, code: i64, message: String) -> Message {
    Message::Error(ErrorResponse {
        id: Some(id),
        error: ErrorObject::new(code, message),
    })
}

fn panic_text(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

impl Server {
    pub(crate) fn new(
        info: Implementation,
        tools: Vec<RegisteredTool>,
        manifest: CapabilityManifest,
        roots: Arc<[Root]>,
        call_limits: CallLimits,
        job_bytes: u64,
        busy_poll: Duration,
    ) -> Server {
        Server {
            info,
            tools,
            manifest,
            roots,
            gates: CallGates::new(call_limits),
            job_bytes,
            busy_poll,
        }
    }

    /// How long stdin is polled after each answer before the serving task sleeps
    /// ([`ServerBuilder::busy_poll`]).
    pub fn busy_poll(&self) -> Duration {
        self.busy_poll
    }

    /// Each job's disk budget, in bytes.
    pub fn job_bytes(&self) -> u64 {
        self.job_bytes
    }

    /// How many calls it runs at once, and how many may wait.
    pub fn call_limits(&self) -> CallLimits {
        self.gates.limits()
    }

    /// Starts building a server.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        ServerBuilder::new(name.into(), version.into())
    }

    /// The capability manifest, as probed at build.
    pub fn manifest(&self) -> &CapabilityManifest {
        &self.manifest
    }

    fn tool_list(&self) -> Vec<Tool> {
        let capabilities = Tool {
            name: CAPABILITIES.to_owned(),
            title: None,
            description: Some("What this server can do on the host it runs on".to_owned()),
            input_schema: json!({"type": "object", "additionalProperties": false}),
            output_schema: None,
            annotations: None,
        };
        std::iter::once(capabilities)
            .chain(self.tools.iter().map(|t| Tool {
                name: t.spec.name.clone(),
                title: None,
                description: Some(t.spec.description.clone()),
                input_schema: t.spec.input_schema.clone(),
                output_schema: None,
                annotations: None,
            }))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_transfer_server_reads_put_sample_chunk_calls_as_chunks_and_no_other() {
        let files = Server::builder("files", "1").file_transfer().build();
        assert_eq!(files.chunk_tool(), Some("put_sample_chunk"));
        let plain = Server::builder("plain", "1")
            .tool(
                ToolSpec::new("put_sample_chunk", "a tool of its own"),
                |_, _| Ok(json!({})),
            )
            .build();
        assert_eq!(plain.chunk_tool(), None);
    }
}
