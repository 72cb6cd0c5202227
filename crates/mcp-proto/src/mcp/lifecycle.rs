//! The session era's handshake: `initialize` and its answer.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The name and version of a client or a server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Implementation {
    /// A machine-readable name.
    pub name: String,
    /// The version.
    pub version: String,
    /// A name for display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// The `initialize` request's parameters.
///
/// ```
/// use maljan_mcp_proto::mcp::{Era, Implementation, InitializeParams, ProtocolVersion};
/// let params = InitializeParams::new(Implementation {
///     name: "maljan".into(),
///     version: "0.1.0".into(),
///     title: None,
/// });
/// assert_eq!(params.protocol_version, ProtocolVersion::newest_of(Era::Session).as_str());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// The newest version the client speaks.
    pub protocol_version: String,
    /// The client's capabilities.
    #[serde(default)]
    pub capabilities: Map<String, Value>,
    /// The client.
    pub client_info: Implementation,
}

impl InitializeParams {
    /// Parameters offering the latest version, with no client capabilities.
    pub fn new(client_info: Implementation) -> Self {
        InitializeParams {
            protocol_version: super::ProtocolVersion::newest_of(super::Era::Session)
                .as_str()
                .to_owned(),
            capabilities: Map::new(),
            client_info,
        }
    }

    /// The same, declaring `capabilities`.
    pub fn with_capabilities(mut self, capabilities: Map<String, Value>) -> Self {
        self.capabilities = capabilities;
        self
    }
}

/// The `initialize` response's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The version the server chose.
    pub protocol_version: String,
    /// The server's capabilities.
    #[serde(default)]
    pub capabilities: Map<String, Value>,
    /// The server.
    pub server_info: Implementation,
    /// How to use the server, for a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
}
