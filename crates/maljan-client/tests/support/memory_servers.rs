//! Scripted MCP servers over the in-memory transport, and the connector that starts them
//! for a run: no process, and every answer a function of the request.
//!
//! - `unpacker`: `unpack` writes four files into its staging directory and names them;
//!   `extract` writes two `.cfg` files and names them; `escape` names a file outside its
//!   staging directory.
//! - `analyser`: `info` (name and size of `path`), `strings` (the words of `path`), `hash`
//!   (how many paths it was given, in `paths` or `inner.list`), `entropy` (the distinct bytes
//!   of `path`), `fail` (a tool's error).
//! - `slowpoke`: `hang` never answers; `ping` answers.
//! - `fragile`: `crash` ends the server (its end of the transport dropped) under the call.
//! - `broken`: answers `initialize` with a protocol version no client speaks.

use std::path::{Path, PathBuf};

use maljan_client::ServerConnection;
use maljan_client::{ClientError, ClientSettings, ConnectionContext, Connector, ServerConfig};
use maljan_mcp_proto::jsonrpc::{ErrorObject, Message, Reply};
use maljan_mcp_transport::BoxFuture;
use maljan_mcp_transport::memory::{self, MemoryPeer};
use serde_json::{Value, json};

fn raw(value: Value) -> maljan_mcp_proto::jsonrpc::RawJson {
    serde_json::value::to_raw_value(&value)
        .expect("JSON")
        .into()
}

fn tools_of(server: &str) -> &'static [&'static str] {
    match server {
        "unpacker" => &["unpack", "extract", "escape"],
        "analyser" => &["info", "strings", "hash", "entropy", "fail"],
        "slowpoke" => &["hang", "ping"],
        "fragile" => &["crash"],
        _ => &[],
    }
}

fn answer(value: Value) -> Value {
    json!({"content": [{"type": "text", "text": value.to_string()}], "structuredContent": value})
}

/// Writes `files` into `dir` and answers with their paths.
fn wrote(dir: &Path, files: &[(&str, &[u8])]) -> Value {
    std::fs::create_dir_all(dir).expect("staging directory");
    let paths: Vec<Value> = files
        .iter()
        .map(|(name, bytes)| {
            let path = dir.join(name);
            std::fs::write(&path, bytes).expect("written");
            json!({"path": path.display().to_string()})
        })
        .collect();
    answer(json!({"files": paths}))
}

fn read(arguments: &Value) -> Vec<u8> {
    let path = arguments["path"].as_str().expect("a path");
    std::fs::read(path).expect("the file handed over")
}

fn name_of(arguments: &Value) -> String {
    Path::new(arguments["path"].as_str().expect("a path"))
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The result of `tool` of `server`; `None` for a call never answered.
fn call(server: &str, tool: &str, arguments: &Value, staging: &Path) -> Option<Value> {
    Some(match (server, tool) {
        ("unpacker", "unpack") => wrote(
            &staging.join("unpack"),
            &[
                ("a.js", b"eval(atob(x))"),
                ("b.js", b"alert(1)"),
                ("c.txt", b"nothing to see"),
                ("d.bin", &[0, 1, 2, 3, 3]),
            ],
        ),
        ("unpacker", "extract") => {
            let size = read(arguments).len();
            wrote(
                &staging.join("extract"),
                &[
                    ("x.cfg", format!("size={size}").as_bytes()),
                    ("y.cfg", b"mode=quiet"),
                ],
            )
        }
        ("analyser", "info") => {
            answer(json!({"name": name_of(arguments), "size": read(arguments).len()}))
        }
        ("analyser", "strings") => {
            let text = String::from_utf8_lossy(&read(arguments)).into_owned();
            answer(
                json!({"strings": text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).collect::<Vec<_>>()}),
            )
        }
        ("analyser", "hash") => {
            let list = arguments
                .get("paths")
                .or_else(|| arguments.pointer("/inner/list"))
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            answer(json!({"hashed": list}))
        }
        ("analyser", "entropy") => {
            let mut bytes = read(arguments);
            bytes.sort_unstable();
            bytes.dedup();
            answer(json!({"distinct_bytes": bytes.len()}))
        }
        ("analyser", "fail") => json!({"isError": true,
            "content": [{"type": "text", "text": "the tool found nothing to work on"}]}),
        ("slowpoke", "hang") => return None,
        ("unpacker", "escape") => answer(json!({"files": [{"path": "/etc/hostname"}]})),
        ("slowpoke", "ping") => answer(json!({"pong": true})),
        _ => json!({"isError": true, "content": [{"type": "text", "text": "no such tool"}]}),
    })
}

/// Plays `server` on `peer` until the client closes.
async fn serve(mut peer: MemoryPeer, server: String, staging: PathBuf) {
    while let Some(message) = peer.next_message().await {
        let Message::Request(request) = message else {
            continue;
        };
        let params: Value = request.params.as_ref().map_or(Value::Null, |p| {
            serde_json::from_str(p.get()).expect("JSON")
        });
        let reply = match request.method.as_str() {
            "initialize" => {
                let version = if server == "broken" {
                    "1999-01-01"
                } else {
                    "2025-06-18"
                };
                Reply::Result(raw(json!({"protocolVersion": version,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": server, "version": "1.0.0"}})))
            }
            "tools/list" => {
                let tools: Vec<Value> = tools_of(&server)
                    .iter()
                    .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}))
                    .collect();
                Reply::Result(raw(json!({"tools": tools})))
            }
            "tools/call" if params["name"] == "crash" => return,
            "tools/call" => {
                let tool = params["name"].as_str().unwrap_or_default();
                match call(&server, tool, &params["arguments"], &staging) {
                    Some(result) => Reply::Result(raw(result)),
                    None => continue,
                }
            }
            // A legacy server refuses what it does not know (server/discover among them).
            _ => Reply::Error(ErrorObject::new(-32601, "method not found")),
        };
        peer.answer(&request.id, reply);
    }
}

/// Connects each server of a run to its scripted self over the in-memory transport.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InMemory;

impl Connector for InMemory {
    fn connect<'a>(
        &'a self,
        config: &'a ServerConfig,
        settings: &'a ClientSettings,
        context: ConnectionContext,
    ) -> BoxFuture<'a, Result<ServerConnection, ClientError>> {
        Box::pin(async move {
            let staging = context
                .job()
                .map(|job| job.server_dir(&config.name))
                .expect("a run's context has its job");
            let (transport, peer) = memory::pair(config.name.as_str());
            tokio::spawn(serve(peer, config.name.clone(), staging));
            ServerConnection::over(transport, settings.clone(), context)
                .set_up()
                .await
        })
    }
}
