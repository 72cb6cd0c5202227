//! Setting a server up, once: a [`Session`] agrees on the era and lists the tools (the
//! discover probe and its fall-back, paging, the set-up window), then the call path is built
//! for the era it found and the `capabilities` manifest is read when the server offers it.

use std::collections::HashMap;
use std::time::Duration;

use maljan_mcp_proto::maljan::CapabilityManifest;
use maljan_mcp_proto::mcp::{
    Era, Implementation, ParamHeaders, ProtocolVersion, ServerRequestPolicy, Tool,
};
use maljan_mcp_transport::Transport;
use maljan_mcp_transport::session::{
    EraChoice, Session, SessionError, SessionParts, SessionSettings,
};
use serde_json::{Map, Value};

use crate::call::{CallService, ToolCall};
use crate::stateless::StatelessRequests;
use crate::timeout::Timeout;
use crate::tool_calls::ToolCalls;
use crate::wire::Wire;

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
        self.tools
            .iter()
            .filter_map(|tool| Some((tool.name.clone(), self.tool_wait(&tool.name)?)))
            .collect()
    }

    /// `tool`'s own timeout, from the manifest's `timeout_s` (finite and positive), when it
    /// has one.
    pub(crate) fn tool_wait(&self, tool: &str) -> Option<Duration> {
        let seconds = self.manifest.as_ref()?.tool(tool)?.timeout_s?;
        (seconds.is_finite() && seconds > 0.0).then(|| Duration::from_secs_f64(seconds))
    }
}

/// How a setup goes: who the client is, what it declares, how long each step waits and
/// which era it speaks.
#[derive(Debug)]
pub(crate) struct SetupPlan<'a> {
    /// Who the client says it is.
    pub(crate) client_info: &'a Implementation,
    /// How the server's requests (and, in the modern era, its requests for input) are
    /// answered; its capabilities are declared.
    pub(crate) policy: ServerRequestPolicy,
    /// How long each setup request waits.
    pub(crate) wait: Duration,
    /// Which era to speak.
    pub(crate) era: EraChoice,
    /// How long `server/discover` waits before the server is taken as legacy.
    pub(crate) discover_wait: Duration,
}

/// Sets the server behind `transport` up by `plan`, and builds its call path from what
/// set-up learned (the era's layers, each tool's wait). On failure the transport is closed.
pub(crate) async fn set_up(
    transport: Box<dyn Transport>,
    plan: SetupPlan<'_>,
    default_wait: Duration,
) -> Result<(ToolCalls<Wire>, ServerSetup), SessionError> {
    let mut settings = SessionSettings::default()
        .capabilities(plan.policy.capabilities())
        .era(plan.era)
        .setup_wait(plan.wait)
        .discover_wait(plan.discover_wait);
    settings.client_info = plan.client_info.clone();
    let SessionParts {
        transport,
        protocol,
        server_info,
        instructions,
        tools,
        ..
    } = Session::set_up_boxed(transport, settings)
        .await?
        .into_parts();
    let (tools, param_headers) = usable_tools(tools);
    let stateless = (protocol.era() == Era::Stateless)
        .then(|| StatelessRequests::new(protocol, plan.client_info, plan.policy.clone()));
    let calls = ToolCalls::new(Wire::of(Timeout::new(transport), stateless), default_wait);
    let (manifest, manifest_error) = read_manifest(&calls, &tools, plan.wait).await;
    let setup = ServerSetup {
        protocol,
        server_info,
        instructions,
        tools,
        manifest,
        manifest_error,
    };
    let calls = calls
        .with_tool_waits(setup.tool_waits())
        .with_param_headers(param_headers);
    Ok((calls, setup))
}

/// The tools that may be called, each with the parameters its calls repeat in headers: a
/// tool whose `x-mcp-header` annotations are broken is left out (and said so), the others
/// kept.
fn usable_tools(tools: Vec<Tool>) -> (Vec<Tool>, HashMap<String, ParamHeaders>) {
    let mut param_headers = HashMap::new();
    let usable = tools
        .into_iter()
        .filter(|tool| match ParamHeaders::of_schema(&tool.input_schema) {
            Ok(headers) => {
                if !headers.is_empty() {
                    param_headers.insert(tool.name.clone(), headers);
                }
                true
            }
            Err(e) => {
                tracing::warn!(
                    tool = %maljan_mcp_proto::untrusted_text::escape_controls(&tool.name),
                    "the tool is left out: {e}"
                );
                false
            }
        })
        .collect();
    (usable, param_headers)
}

/// The manifest, when the server offers `capabilities`, or why it could not be read.
async fn read_manifest(
    calls: &ToolCalls<Wire>,
    tools: &[Tool],
    wait: Duration,
) -> (Option<CapabilityManifest>, Option<String>) {
    if !tools.iter().any(|t| t.name == CAPABILITIES) {
        return (None, None);
    }
    let mut call = ToolCall::new(CAPABILITIES, Value::Object(Map::new()));
    call.wait = Some(wait);
    let answer = calls.call(call).await.answer;
    match answer.failure() {
        Some(f) => (None, Some(format!("{}: {}", f.code, f.message))),
        None => match serde_json::from_value::<CapabilityManifest>(answer.value) {
            Ok(m) => (Some(m), None),
            Err(e) => (None, Some(format!("the manifest is malformed: {e}"))),
        },
    }
}
