//! Setting a server up, once: its era found by `server/discover` (modern) or `initialize`
//! and `notifications/initialized` (legacy), every `tools/list` page, then the
//! `capabilities` manifest when the server offers it.

use std::collections::HashMap;
use std::time::Duration;

use maljan_mcp_proto::jsonrpc::Reply;
use maljan_mcp_proto::maljan::{CapabilityManifest, ToolFailure};
use maljan_mcp_proto::mcp::{
    DiscoverResult, EndlessToolList, Era, EraProbe, Implementation, InitializeParams,
    InitializeResult, ListToolsResult, NoCommonGround, ProbeStep, ProtocolVersion,
    ServerRequestPolicy, Tool, ToolPages, UnsupportedVersion, methods, stateless_meta,
};
use maljan_mcp_transport::{OutgoingRequest, TransportFailure};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::call::{CallService, ToolCall};
use crate::config::EraChoice;
use crate::stateless::StatelessRequests;
use crate::timeout::{RequestService, Timeout, Unanswered};
use crate::tool_calls::ToolCalls;
use crate::wire::Wire;

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
    /// The server is modern but speaks nothing this client can use.
    #[error("{0}; use a server or client that share a protocol version")]
    Unusable(#[source] NoCommonGround),
    /// A layer of the client ended the request (a reply it cannot use).
    #[error("{}", .0.message)]
    Ended(ToolFailure),
    /// The configuration asks for the modern era and the server does not speak it.
    #[error(
        "the server does not speak the modern era (2026-07-28), and the configuration asks \
         for it (era = \"modern\"); set era = \"auto\" to speak the legacy era to it"
    )]
    NotModern,
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
    wire: &impl RequestService,
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
        Err(Unanswered::Ended(failure)) => return Err((step, SetupFailure::Ended(failure))),
    };
    serde_json::from_str(raw.get())
        .map_err(|source| (step, SetupFailure::Malformed { expected, source }))
}

fn params<P: Serialize>(params: &P) -> Option<Value> {
    serde_json::to_value(params).ok()
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

/// Who the server is and how to use it, from `server/discover` or `initialize`.
struct Agreed {
    protocol: ProtocolVersion,
    server_info: Implementation,
    instructions: Option<String>,
    /// For a server of the 2026-07-28 era, how its requests are made.
    modern: Option<StatelessRequests>,
}

/// Asks `server/discover` in `version`: the answer, or none (no answer within the wait, or
/// an HTTP refusal without a JSON-RPC body).
async fn discover(
    wire: &Timeout,
    plan: &SetupPlan<'_>,
    version: ProtocolVersion,
) -> Result<Option<Reply>, StepFailure> {
    let meta = stateless_meta(
        version.as_str(),
        &plan.policy.capabilities(),
        plan.client_info,
    );
    let request = OutgoingRequest::new(
        methods::SERVER_DISCOVER,
        Some(Value::Object(Map::from_iter([(
            "_meta".to_owned(),
            Value::Object(meta),
        )]))),
    )
    .stateless(version);
    // Not cancelled when given up: a legacy server may not be sent anything but ping
    // before initialize.
    match wire.request(request, plan.discover_wait, false).await {
        Ok(reply) => Ok(Some(reply)),
        Err(Unanswered::TimedOut(_)) => Ok(None),
        Err(Unanswered::Failed(failure)) if failure.is_refused() => Ok(None),
        Err(Unanswered::Failed(failure)) => {
            Err((methods::SERVER_DISCOVER, SetupFailure::Transport(failure)))
        }
        Err(Unanswered::Ended(failure)) => {
            Err((methods::SERVER_DISCOVER, SetupFailure::Ended(failure)))
        }
    }
}

/// Finds the server's era by the digest's rules ([`EraProbe`]): `server/discover` first; a
/// discover result with a stateless version of ours, or a recognized stateless-era error, is
/// stateless (`-32022` is asked again, once, with the version it lists); any other answer,
/// or none, means a server with sessions: `Ok(None)`.
async fn probe(
    wire: &Timeout,
    plan: &SetupPlan<'_>,
) -> Result<Option<DiscoverResult>, StepFailure> {
    let mut probe = EraProbe::new();
    loop {
        let answer = discover(wire, plan, probe.version()).await?;
        match probe.handle_answer(answer.as_ref()) {
            ProbeStep::Ask(_) => {}
            ProbeStep::Stateless(result) => return Ok(Some(result)),
            ProbeStep::Unusable(why) => {
                return Err((methods::SERVER_DISCOVER, SetupFailure::Unusable(why)));
            }
            _ => return Ok(None),
        }
    }
}

/// The legacy era's handshake: `initialize`, then `notifications/initialized`.
async fn initialize(wire: &Timeout, plan: &SetupPlan<'_>) -> Result<Agreed, StepFailure> {
    let init: InitializeResult = step(
        methods::INITIALIZE,
        wire,
        OutgoingRequest::new(
            methods::INITIALIZE,
            params(
                &InitializeParams::new(plan.client_info.clone())
                    .with_capabilities(plan.policy.capabilities()),
            ),
        ),
        plan.wait,
        "an InitializeResult",
    )
    .await?;
    let protocol = ProtocolVersion::parse_session(&init.protocol_version)
        .map_err(|e| (methods::INITIALIZE, SetupFailure::from(e)))?;
    let transport = wire.transport();
    transport.set_protocol(protocol);
    transport
        .notify(methods::INITIALIZED, None)
        .await
        .map_err(|e| (methods::INITIALIZED, SetupFailure::Transport(e)))?;
    Ok(Agreed {
        protocol,
        server_info: init.server_info,
        instructions: init.instructions,
        modern: None,
    })
}

/// Agrees on an era and a version with the server behind `wire`.
async fn agree(wire: &Timeout, plan: &SetupPlan<'_>) -> Result<Agreed, StepFailure> {
    let discovered = match plan.era {
        EraChoice::Session => None,
        EraChoice::Auto | EraChoice::Stateless => probe(wire, plan).await?,
    };
    let Some(result) = discovered else {
        if plan.era == EraChoice::Stateless {
            return Err((methods::SERVER_DISCOVER, SetupFailure::NotModern));
        }
        return initialize(wire, plan).await;
    };
    let protocol = ProtocolVersion::newest_of(Era::Stateless);
    wire.transport().set_protocol(protocol);
    Ok(Agreed {
        modern: Some(StatelessRequests::new(
            protocol,
            plan.client_info,
            plan.policy.clone(),
        )),
        protocol,
        server_info: result.server_info().unwrap_or_else(|| Implementation {
            name: "(the server did not say)".to_owned(),
            version: String::new(),
            title: None,
        }),
        instructions: result.instructions,
    })
}

/// Sets the server behind `wire` up by `plan`, and builds its call path from what set-up
/// learned (the era's layers, each tool's wait), with what set-up learned or why it failed.
pub(crate) async fn set_up(
    wire: Timeout,
    plan: SetupPlan<'_>,
    default_wait: Duration,
) -> (ToolCalls<Wire>, Result<ServerSetup, StepFailure>) {
    let mut agreed = match agree(&wire, &plan).await {
        Ok(agreed) => agreed,
        Err(failure) => {
            return (
                ToolCalls::new(Wire::of(wire, None), default_wait),
                Err(failure),
            );
        }
    };
    let calls = ToolCalls::new(Wire::of(wire, agreed.modern.take()), default_wait);
    let listed = list_tools(&calls, &plan, agreed).await;
    let calls = match &listed {
        Ok(setup) => calls.with_tool_waits(setup.tool_waits()),
        Err(_) => calls,
    };
    (calls, listed)
}

/// Every page of `tools/list`, then the manifest when the server offers `capabilities`.
async fn list_tools(
    calls: &ToolCalls<Wire>,
    plan: &SetupPlan<'_>,
    agreed: Agreed,
) -> Result<ServerSetup, StepFailure> {
    let wire = calls.get_ref();
    let transport = wire.transport();
    let wait = plan.wait;
    let mut pages = ToolPages::new(MAX_TOOL_PAGES);
    loop {
        let request = OutgoingRequest::new(methods::TOOLS_LIST, params(&pages.next_params()))
            .ending_setup(last_tools_page);
        let page: ListToolsResult =
            step(methods::TOOLS_LIST, wire, request, wait, "a tool list").await?;
        match pages.handle_page(page) {
            Ok(true) => break,
            Ok(false) => {}
            Err(EndlessToolList(pages)) => {
                return Err((methods::TOOLS_LIST, SetupFailure::EndlessToolList(pages)));
            }
        }
    }
    let tools = pages.into_tools();
    // The window closes on the last page's answer; this makes sure of it (and opens the
    // stream of the server's own messages where the transport has one).
    transport.end_setup();

    let (manifest, manifest_error) = if tools.iter().any(|t| t.name == CAPABILITIES) {
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
    } else {
        (None, None)
    };
    Ok(ServerSetup {
        protocol: agreed.protocol,
        server_info: agreed.server_info,
        instructions: agreed.instructions,
        tools,
        manifest,
        manifest_error,
    })
}
