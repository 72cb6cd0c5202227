//! The capability manifest: what a server can do on its host, tool by tool.

use serde::{Deserialize, Serialize};

/// The answer of the `capabilities` tool: what a server can do on the host it runs on.
///
/// ```
/// use maljan_mcp_proto::maljan::CapabilityManifest;
/// let m: CapabilityManifest = serde_json::from_str(r#"{"server":"analysis","version":"1.0.0",
///   "tools":[{"name":"document_info","optional_dependency":"olefile","available":false,
///   "reason":"olefile is not installed","timeout_s":null,
///   "remediation":"uv sync --extra tools","without":"the PDF and OOXML halves"}]}"#).unwrap();
/// assert_eq!(m.unavailable().count(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapabilityManifest {
    /// The server's name.
    pub server: String,
    /// The server's version.
    pub version: String,
    /// One entry per tool.
    #[serde(default)]
    pub tools: Vec<ToolCapability>,
    /// Where the server reads the files its arguments name; absent when it does not say
    /// (taken as [`FileReach::Host`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<FileReach>,
}

/// Where a server reads the files its arguments name: what tells a client whether to stage
/// a file into the job's directory and hand the server that copy, or to hand it the path as
/// the user wrote it.
///
/// ```
/// use maljan_mcp_proto::maljan::{CapabilityManifest, FileReach};
/// let m: CapabilityManifest =
///     serde_json::from_str(r#"{"server":"kit","version":"1","files":"job"}"#).unwrap();
/// assert_eq!(m.files, Some(FileReach::Job));
/// let odd: CapabilityManifest =
///     serde_json::from_str(r#"{"server":"x","version":"1","files":"mars"}"#).unwrap();
/// assert_eq!(odd.files, Some(FileReach::Host));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FileReach {
    /// Only its job's directory (and the roots its operator named): a file elsewhere must
    /// be staged into the job first.
    Job,
    /// The host's files where they are (any value this version does not know reads so).
    #[serde(other)]
    Host,
}

impl CapabilityManifest {
    /// The entry for a tool.
    pub fn tool(&self, name: &str) -> Option<&ToolCapability> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The tools that are not available on this host.
    pub fn unavailable(&self) -> impl Iterator<Item = &ToolCapability> {
        self.tools.iter().filter(|t| !t.available)
    }
}

/// One tool's entry in the manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCapability {
    /// The tool.
    pub name: String,
    /// The optional program or library it needs, if any.
    #[serde(default)]
    pub optional_dependency: Option<String>,
    /// Whether it can run on this host.
    #[serde(default = "available_by_default")]
    pub available: bool,
    /// Why it cannot, when it cannot.
    #[serde(default)]
    pub reason: Option<String>,
    /// How long the client waits for it, in seconds; `None`: the client's default.
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// What to do to make it available.
    #[serde(default)]
    pub remediation: Option<String>,
    /// What is lost without it.
    #[serde(default)]
    pub without: Option<String>,
}

fn available_by_default() -> bool {
    true
}
