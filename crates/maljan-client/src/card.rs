//! A server card: what a connection test shows of a server, its tools and the ones that
//! cannot run on its host, with why and what to do.

use maljan_mcp_proto::maljan::{CapabilityManifest, is_platform_primitive};
use maljan_mcp_proto::mcp::{Era, Implementation};
use maljan_mcp_transport::TransportCounts;
use serde::Serialize;

use crate::setup::ServerSetup;

/// What a connection test shows of a server: who it is, its tools, the ones that cannot run
/// here with why and what to do, and what its stdout held besides the protocol.
#[derive(Debug, Clone, Serialize)]
pub struct ServerCard {
    /// The server's configured name.
    pub server: String,
    /// What the server says it is.
    pub server_info: Implementation,
    /// The protocol version in use.
    pub protocol_version: String,
    /// Its era: with a session (`initialize`), or stateless (`server/discover`).
    pub era: Era,
    /// The model-facing tools (platform primitives left out).
    pub tools: Vec<CardTool>,
    /// The tools the manifest says cannot run on the server's host.
    pub unavailable: Vec<UnavailableTool>,
    /// The platform primitives the server offers.
    pub primitives: Vec<String>,
    /// The manifest, when the server offers `capabilities`.
    pub manifest: Option<CapabilityManifest>,
    /// Why the manifest could not be read, when it could not.
    pub manifest_error: Option<String>,
    /// How the server is reached: `stdio` or `http`.
    pub transport: &'static str,
    /// What the server's stdout (or, over HTTP, its replies) held so far.
    pub stdout: TransportCounts,
}

/// A tool on the card.
#[derive(Debug, Clone, Serialize)]
pub struct CardTool {
    /// The tool's name.
    pub name: String,
    /// The name to show.
    pub title: String,
    /// What it does.
    pub description: Option<String>,
    /// Whether the manifest says it can run.
    pub available: bool,
}

/// A tool that cannot run on the server's host.
#[derive(Debug, Clone, Serialize)]
pub struct UnavailableTool {
    /// The tool.
    pub name: String,
    /// Why not.
    pub reason: String,
    /// What to do about it.
    pub remediation: Option<String>,
    /// What is lost without it.
    pub without: Option<String>,
}

impl ServerCard {
    pub(crate) fn new(
        server: &str,
        setup: &ServerSetup,
        transport: &'static str,
        stdout: TransportCounts,
    ) -> ServerCard {
        let manifest = setup.manifest.as_ref();
        let tools = &setup.tools;
        let available = |name: &str| {
            manifest
                .and_then(|m| m.tool(name))
                .is_none_or(|t| t.available)
        };
        ServerCard {
            server: server.to_owned(),
            server_info: setup.server_info.clone(),
            protocol_version: setup.protocol.as_str().to_owned(),
            era: setup.protocol.era(),
            tools: tools
                .iter()
                .filter(|t| !is_platform_primitive(&t.name))
                .map(|t| CardTool {
                    name: t.name.clone(),
                    title: t.display_name().to_owned(),
                    description: t.description.clone(),
                    available: available(&t.name),
                })
                .collect(),
            unavailable: manifest
                .map(|m| {
                    m.unavailable()
                        .map(|t| UnavailableTool {
                            name: t.name.clone(),
                            reason: t
                                .reason
                                .clone()
                                .unwrap_or_else(|| "the server gave no reason".to_owned()),
                            remediation: t.remediation.clone(),
                            without: t.without.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            primitives: tools
                .iter()
                .filter(|t| is_platform_primitive(&t.name))
                .map(|t| t.name.clone())
                .collect(),
            manifest: manifest.cloned(),
            manifest_error: setup.manifest_error.clone(),
            transport,
            stdout,
        }
    }
}
