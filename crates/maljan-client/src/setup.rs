//! Setting a server up, once: `initialize`, `notifications/initialized`, every `tools/list`
//! page, then the `capabilities` manifest when the server offers it.

use std::collections::HashMap;
use std::time::Duration;

use maljan_mcp_proto::jsonrpc::Reply;
use maljan_mcp_proto::maljan::CapabilityManifest;
use maljan_mcp_proto::mcp::{
    Implementation, InitializeParams, InitializeResult, ListToolsParams, ListToolsResult,
    ProtocolVersion, Tool, UnsupportedVersion, methods,
};
use maljan_mcp_transport::{OutgoingRequest, TransportFailure};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::call::{CallService, ToolCall};
use crate::timeout::{Timeout, Unanswered};

/// The most `tools/list` pages read in a setup: a server that pages for ever is refused.
const MAX_TOOL_PAGES: usize = 1000;
/// The name of the manifest tool.
const CAPABILITIES: &str = "capabilities";

/// What setup learned about a server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerSetup {
    /// The protocol version the server chose.
    pub protocol: ProtocolVersion,
    /// What the server says it is.
    pub server_info: Implementation,
    /// How to use the server, for a model.
    pub instructions: Option<String>,
    /// Every tool, platform primitives included.
    pub tools: Vec<Tool>,
    /// The capability manifest, when the server offers `capabilities`.
    pub manifest: Option<CapabilityManifest>,
    /// Why the manifest could not be read.
    pub manifest_error: Option<String>,
}

impl ServerSetup {
    /// Each tool's own timeout, from the manifest's `timeout_s` (finite and positive).
    pub(crate) fn tool_waits(&self) -> HashMap<String, Duration> {
        let Some(manifest) = &self.manifest else {
            return HashMap::new();
        };
        self.tools
            .iter()
            .filter_map(|tool| {
                let seconds = manifest.tool(&tool.name)?.timeout_s?;
                (seconds.is_finite() && seconds > 0.0)
                    .then(|| (tool.name.clone(), Duration::from_secs_f64(seconds)))
            })
            .collect()
    }
}

/// Why a setup step failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupFailure {
    /// The server answered the request with a JSON-RPC error.
    #[error("the server answered error {code}: {message}")]
    ErrorAnswer {
        /// The error's code.
        code: i64,
        /// The error's message.
        message: String,
    },
    /// No answer within the setup timeout.
    #[error("no answer within {} s", .0.as_secs_f64())]
    NoAnswer(Duration),
    /// The transport failed the request.
    #[error(transparent)]
    Transport(TransportFailure),
    /// The answer is not what the step expects.
    #[error("the answer is not {expected}: {source}")]
    Malformed {
        /// What the step expects.
        expected: &'static str,
        /// Why it is not that.
        #[source]
        source: serde_json::Error,
    },
    /// The server chose a protocol version this client does not speak.
    #[error(transparent)]
    Version(#[from] UnsupportedVersion),
    /// The tool list went on for ever.
    #[error("the tool list did not end within {0} pages")]
    EndlessToolList(usize),
}

/// A failed setup step, and why.
pub(crate) type StepFailure = (&'static str, SetupFailure);

fn last_tools_page(result: &RawValue) -> bool {
    serde_json::from_str::<ListToolsResult>(result.get())
        .map(|page| page.next_cursor.is_none())
        .unwrap_or(false)
}

/// One setup request and its answer, read as `T`.
async fn step<T: DeserializeOwned>(
    step: &'static str,
    wire: &Timeout,
    request: OutgoingRequest,
    wait: Duration,
    expected: &'static str,
) -> Result<T, StepFailure> {
    let raw = match wire.request(request, wait, false).await {
        Ok(Reply::Result(result)) => result,
        Ok(Reply::Error(e)) => {
            return Err((
                step,
                SetupFailure::ErrorAnswer {
                    code: e.code,
                    message: e.message,
                },
            ));
        }
        Err(Unanswered::TimedOut(t)) => return Err((step, SetupFailure::NoAnswer(t))),
        Err(Unanswered::Failed(e)) => return Err((step, SetupFailure::Transport(e))),
    };
    serde_json::from_str(raw.get())
        .map_err(|source| (step, SetupFailure::Malformed { expected, source }))
}

fn params<P: Serialize>(params: &P) -> Option<Value> {
    serde_json::to_value(params).ok()
}

/// Sets the server behind `wire` up, each request waiting up to `wait`.
pub(crate) async fn set_up(
    wire: &Timeout,
    client_info: &Implementation,
    capabilities: Map<String, Value>,
    wait: Duration,
) -> Result<ServerSetup, StepFailure> {
    let transport = wire.get_ref();
    let init: InitializeResult = step(
        methods::INITIALIZE,
        wire,
        OutgoingRequest::new(
            methods::INITIALIZE,
            params(&InitializeParams::new(client_info.clone()).with_capabilities(capabilities)),
        ),
        wait,
        "an InitializeResult",
    )
    .await?;
    let protocol = ProtocolVersion::parse(&init.protocol_version)
        .map_err(|e| (methods::INITIALIZE, SetupFailure::from(e)))?;
    transport.set_protocol(protocol);
    transport
        .notify(methods::INITIALIZED, None)
        .await
        .map_err(|e| (methods::INITIALIZED, SetupFailure::Transport(e)))?;

    let mut tools = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_TOOL_PAGES {
        let request = OutgoingRequest::new(
            methods::TOOLS_LIST,
            params(&ListToolsParams {
                cursor: cursor.take(),
            }),
        )
        .ending_setup(last_tools_page);
        let page: ListToolsResult =
            step(methods::TOOLS_LIST, wire, request, wait, "a tool list").await?;
        tools.extend(page.tools);
        match page.next_cursor {
            None => break,
            Some(next) => cursor = Some(next),
        }
    }
    if cursor.is_some() {
        return Err((
            methods::TOOLS_LIST,
            SetupFailure::EndlessToolList(MAX_TOOL_PAGES),
        ));
    }
    // The window closes on the last page's answer; this makes sure of it (and opens the
    // stream of the server's own messages where the transport has one).
    transport.end_setup();

    let (manifest, manifest_error) = if tools.iter().any(|t| t.name == CAPABILITIES) {
        let mut call = ToolCall::new(CAPABILITIES, Value::Object(Map::new()));
        call.wait = Some(wait);
        let answer = wire.call(call).await.answer;
        match answer.failure() {
            Some(f) => (None, Some(format!("{}: {}", f.code, f.message))),
            None => match serde_json::from_value::<CapabilityManifest>(answer.value) {
                Ok(m) => (Some(m), None),
                Err(e) => (None, Some(format!("the manifest is malformed: {e}"))),
            },
        }
    } else {
        (None, None)
    };
    Ok(ServerSetup {
        protocol,
        server_info: init.server_info,
        instructions: init.instructions,
        tools,
        manifest,
        manifest_error,
    })
}
