//! The client against scripted servers over in-memory pipes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use maljan_client::{
    ClientError, ClientSettings, ConnectionContext, ServerConnection, StartedConnection,
    StdioConfig,
};
use maljan_mcp_proto::jsonrpc::{DecodedLine, Message, Request, decode_line};
use maljan_mcp_proto::maljan::ErrorCode;
use maljan_mcp_stdio::StdioTransport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

type Script = fn(&Request, &Value) -> Option<Value>;

/// Starts a scripted server; returns the client connection and the notifications it got.
fn scripted(
    script: Script,
    settings: ClientSettings,
) -> (StartedConnection, Arc<Mutex<Vec<String>>>) {
    let (client, server) = tokio::io::duplex(1 << 16);
    let (client_read, client_write) = tokio::io::split(client);
    let connection =
        StdioTransport::over(client_read, client_write, StdioConfig::named("scripted"));
    let notifications = Arc::new(Mutex::new(Vec::new()));
    let seen = notifications.clone();
    tokio::spawn(async move {
        let (server_read, mut server_write) = tokio::io::split(server);
        let mut lines = BufReader::new(server_read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            match decode_line(line.as_bytes(), false) {
                DecodedLine::Message(Message::Request(request)) => {
                    let params: Value = request
                        .params
                        .as_ref()
                        .and_then(|p| serde_json::from_str(p.get()).ok())
                        .unwrap_or(Value::Null);
                    let line = match script(&request, &params) {
                        Some(result) => {
                            json!({"jsonrpc": "2.0", "id": request.id, "result": result})
                        }
                        // A legacy server, as the SDKs write them, refuses what it does not know.
                        None if request.method == "server/discover" => json!({"jsonrpc": "2.0",
                            "id": request.id, "error": {"code": -32601, "message": "not found"}}),
                        None => continue,
                    };
                    let _ = server_write.write_all(format!("{line}\n").as_bytes()).await;
                }
                DecodedLine::Message(Message::Notification(n)) => {
                    seen.lock().expect("lock").push(format!(
                        "{} {}",
                        n.method,
                        n.params.map(|p| p.get().to_owned()).unwrap_or_default()
                    ));
                }
                _ => {}
            }
        }
    });
    (
        ServerConnection::over(connection, settings, ConnectionContext::default()),
        notifications,
    )
}

fn waiting(timeout: Duration) -> ClientSettings {
    let mut settings = ClientSettings::default();
    settings.default_timeout = timeout;
    settings
}

fn initialize_result(version: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": {"tools": {}},
        "serverInfo": {"name": "scripted", "version": "1"}})
}

fn tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object"}})
}

fn paged_server(request: &Request, params: &Value) -> Option<Value> {
    match request.method.as_str() {
        "initialize" => Some(initialize_result("2025-06-18")),
        "tools/list" => Some(match params["cursor"].as_str() {
            None => json!({"tools": [tool("a"), tool("put_sample")], "nextCursor": "p2"}),
            Some("p2") => json!({"tools": [tool("b"), tool("get_file")], "nextCursor": "p3"}),
            _ => json!({"tools": [tool("capabilities"), tool("slow")]}),
        }),
        "tools/call" => match params["name"].as_str() {
            Some("capabilities") => Some(json!({"content": [], "structuredContent": {
                "server": "scripted", "version": "1", "tools": [
                    {"name": "slow", "available": true, "timeout_s": 0.25},
                    {"name": "b", "available": false, "reason": "libb is missing",
                     "remediation": "install libb", "timeout_s": null}]}})),
            Some("a") => Some(json!({"content": [{"type": "text", "text": "{\"ok\": true}"}]})),
            _ => None,
        },
        _ => None,
    }
}

#[tokio::test]
async fn setup_reads_every_tool_page_and_hides_platform_primitives() {
    let (server, notifications) = scripted(paged_server, ClientSettings::default());
    let server = server.set_up().await.expect("set up");
    let setup = server.setup();
    let all: Vec<&str> = setup.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        all,
        ["a", "put_sample", "b", "get_file", "capabilities", "slow"]
    );
    let model: Vec<&str> = server
        .model_tools()
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(model, ["a", "b", "slow"]);
    let card = server.card();
    assert_eq!(card.primitives, ["put_sample", "get_file", "capabilities"]);
    assert_eq!(card.unavailable.len(), 1);
    assert_eq!(card.unavailable[0].reason, "libb is missing");
    assert_eq!(
        card.unavailable[0].remediation.as_deref(),
        Some("install libb")
    );
    assert_eq!(card.protocol_version, "2025-06-18");
    assert_eq!(
        notifications.lock().expect("lock")[0],
        "notifications/initialized "
    );
    let answer = server.call("a", json!({})).await.expect("call");
    assert_eq!(answer.value, json!({"ok": true}));
}

#[tokio::test]
async fn an_unsupported_protocol_version_fails_setup_clearly() {
    fn old_server(request: &Request, _: &Value) -> Option<Value> {
        (request.method == "initialize").then(|| initialize_result("2023-01-01"))
    }
    let (server, _) = scripted(old_server, ClientSettings::default());
    let error = server.set_up().await.expect_err("refused").to_string();
    assert!(
        error.contains("initialize failed") && error.contains("2023-01-01"),
        "{error}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_waits_the_manifest_timeout_then_cancels_on_the_server() {
    let settings = waiting(Duration::from_secs(3600));
    let (server, notifications) = scripted(paged_server, settings);
    let server = server.set_up().await.expect("set up");
    assert_eq!(server.timeout_for("slow"), Duration::from_millis(250));
    assert_eq!(
        server.timeout_for("a"),
        Duration::from_secs(3600),
        "null: the default"
    );
    let answer = server.call("slow", json!({})).await.expect("call");
    let failure = answer.failure().expect("unanswered");
    assert_eq!(failure.code, ErrorCode::Unanswered);
    assert!(failure.message.contains("0.25 s"), "{}", failure.message);
    // The cancellation is sent before the call returns; let the server read it.
    server.call("a", json!({})).await.expect("call");
    let seen = notifications.lock().expect("lock").clone();
    assert!(
        seen.iter()
            .any(|n| n.starts_with("notifications/cancelled") && n.contains("\"requestId\":7")),
        "{seen:?}"
    );
}

#[tokio::test]
async fn non_object_arguments_and_unknown_tools_are_refused() {
    let (server, _) = scripted(paged_server, ClientSettings::default());
    let server = server.set_up().await.expect("set up");
    let error = server
        .call("nope", json!({}))
        .await
        .expect_err("no such tool");
    assert!(matches!(error, ClientError::UnknownTool { .. }), "{error}");
    let answer = server.call("a", json!([1])).await.expect("call");
    assert_eq!(
        answer.failure().map(|f| &f.code),
        Some(&ErrorCode::BadArgument)
    );
}
