//! The servers of the ecosystem's shared JSON shape: `mcpServers` (Claude Desktop, Cursor
//! and most clients) or `servers` (VS Code), read as those clients write it. Keys those
//! clients add for themselves (`disabled`, `autoApprove`, …) are passed over.

use std::collections::BTreeMap;
use std::path::PathBuf;

use maljan_client::{ServerCommand, ServerConfig};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
struct McpServersFile {
    #[serde(rename = "mcpServers", alias = "servers")]
    servers: BTreeMap<String, Entry>,
}

#[derive(Debug, Deserialize)]
struct Entry {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// The servers `text` (a `mcpServers` JSON document) names, or why it cannot be read.
pub(super) fn read(text: &str) -> Result<Vec<ServerConfig>, String> {
    let file: McpServersFile = serde_json::from_str(text)
        .map_err(|e| format!("it is not an mcpServers (or VS Code servers) JSON document: {e}"))?;
    file.servers
        .into_iter()
        .map(|(name, entry)| server(name, entry))
        .collect()
}

fn server(name: String, entry: Entry) -> Result<ServerConfig, String> {
    match (entry.kind.as_deref(), entry.command, entry.url) {
        (None | Some("stdio"), Some(program), None) => {
            let mut command = ServerCommand::new(program);
            command.args = entry.args;
            command.env = entry.env.into_iter().collect();
            command.cwd = entry.cwd;
            Ok(ServerConfig::stdio(name, command))
        }
        (None | Some("http" | "streamable-http" | "streamableHttp"), None, Some(url)) => {
            let mut config = ServerConfig::http(name, url);
            for (header, value) in entry.headers {
                config = config.with_header(header, value);
            }
            Ok(config)
        }
        (Some("sse"), _, _) => Err(format!(
            "server {name} is of type \"sse\", the HTTP+SSE transport of 2024-11-05, which this \
             client does not speak; point it at the server's Streamable HTTP endpoint (type \
             \"http\")"
        )),
        (Some(other), _, _) => Err(format!(
            "server {name} is of type {other:?}; write \"stdio\" (with command) or \"http\" (with \
             url)"
        )),
        _ => Err(format!(
            "server {name} needs either command (stdio) or url (HTTP), not both or neither"
        )),
    }
}

#[cfg(test)]
mod tests {
    use maljan_client::ServerTransport;

    use super::*;

    #[test]
    fn the_ecosystems_shapes_are_read_as_written() {
        let text = r#"{
            "mcpServers": {
                "fs": {"command": "npx", "args": ["-y", "server-filesystem", "/srv"],
                       "env": {"A": "1"}, "disabled": false, "autoApprove": []},
                "remote": {"type": "http", "url": "https://x.example/mcp",
                           "headers": {"X-Team": "triage"}}
            }
        }"#;
        let servers = read(text).expect("reads");
        assert_eq!(servers.len(), 2);
        match &servers[0].transport {
            ServerTransport::Stdio(command) => {
                assert_eq!(command.args, ["-y", "server-filesystem", "/srv"]);
                assert_eq!(command.env, [("A".to_owned(), "1".to_owned())]);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(servers[1].transport, ServerTransport::Http(_)));
        let vs_code = r#"{"servers": {"time": {"type": "stdio", "command": "uvx",
                                                "args": ["mcp-server-time"]}}}"#;
        assert_eq!(read(vs_code).expect("reads")[0].name, "time");
    }

    #[test]
    fn what_cannot_be_spoken_is_refused_with_the_remedy() {
        let sse = r#"{"mcpServers": {"old": {"type": "sse", "url": "http://x/sse"}}}"#;
        assert!(read(sse).expect_err("refused").contains("Streamable HTTP"));
        let neither = r#"{"mcpServers": {"x": {"args": []}}}"#;
        assert!(
            read(neither)
                .expect_err("refused")
                .contains("either command")
        );
        assert!(read("[1]").expect_err("refused").contains("mcpServers"));
    }
}
