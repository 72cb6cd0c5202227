//! The kit's server over in-memory pipes, spoken to line by line.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use maljan_sidecar_kit::{Probe, Server, ToolSpec};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines, ReadHalf, WriteHalf};

struct Client {
    lines: Lines<BufReader<ReadHalf<tokio::io::DuplexStream>>>,
    write: WriteHalf<tokio::io::DuplexStream>,
}

impl Client {
    async fn send(&mut self, message: Value) {
        self.write
            .write_all(format!("{message}\n").as_bytes())
            .await
            .expect("write");
    }

    async fn receive(&mut self) -> Value {
        let line = self.lines.next_line().await.expect("read").expect("a line");
        serde_json::from_str(&line).expect("JSON")
    }
}

fn start(server: Server) -> Client {
    let (client, server_end) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        let (read, write) = tokio::io::split(server_end);
        server.serve(read, write).await
    });
    let (read, write) = tokio::io::split(client);
    Client {
        lines: BufReader::new(read).lines(),
        write,
    }
}

fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
}

#[tokio::test]
async fn a_missing_dependency_answers_its_envelope_without_running_the_handler() {
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let server = Server::builder("t", "1")
        .tool(
            ToolSpec::new("needs", "needs a program").depends_on(
                Probe::Program("no-such-program-anywhere".into()),
                "install it",
                Some("everything"),
            ),
            move |_, _| {
                flag.store(true, Ordering::SeqCst);
                Ok(json!({}))
            },
        )
        .build();
    let entry = &server.manifest().tools[0];
    assert!(!entry.available);
    assert_eq!(
        entry.optional_dependency.as_deref(),
        Some("no-such-program-anywhere")
    );
    let mut client = start(server);
    client.send(call(1, "needs", json!({}))).await;
    let reply = client.receive().await;
    let envelope = &reply["result"]["structuredContent"];
    assert_eq!(envelope["error"]["code"], "missing_dependency");
    assert_eq!(envelope["error"]["remediation"], "install it");
    assert_eq!(envelope["tool"], "needs");
    assert_eq!(reply["result"]["isError"], true);
    assert!(!ran.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_cancelled_call_is_not_answered_and_others_are() {
    let server = Server::builder("t", "1")
        .tool(ToolSpec::new("slow", "sleeps"), |_, _| {
            std::thread::sleep(Duration::from_millis(300));
            Ok(json!({"slept": true}))
        })
        .build();
    let mut client = start(server);
    client.send(call(1, "slow", json!({}))).await;
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}))
        .await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .await;
    client.send(call(3, "slow", json!({}))).await;
    let first = client.receive().await;
    assert_eq!(first["id"], 2);
    assert_eq!(first["result"], json!({}));
    let second = client.receive().await;
    assert_eq!(second["id"], 3, "call 1 was cancelled and never answered");
}

#[tokio::test]
async fn unknown_tools_methods_and_invalid_requests_get_json_rpc_errors() {
    let mut client = start(Server::builder("t", "1").build());
    client.send(call(1, "nope", json!({}))).await;
    let reply = client.receive().await;
    assert_eq!(reply["error"]["code"], -32602);
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "resources/list"}))
        .await;
    assert_eq!(client.receive().await["error"]["code"], -32601);
    client
        .send(json!({"jsonrpc": "2.0", "id": 3, "method": 5}))
        .await;
    let reply = client.receive().await;
    assert_eq!(reply["error"]["code"], -32600);
    assert_eq!(
        reply["error"]["message"],
        "method is an integer, not a string"
    );
}

#[tokio::test]
async fn initialize_echoes_a_supported_version_and_lists_capabilities_first() {
    let mut client = start(Server::builder("t", "1").build());
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"}}}),
        )
        .await;
    assert_eq!(
        client.receive().await["result"]["protocolVersion"],
        "2025-03-26"
    );
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .await;
    assert_eq!(
        client.receive().await["result"]["tools"][0]["name"],
        "capabilities"
    );
}
