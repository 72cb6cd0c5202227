//! The kit's server speaking the modern era (2026-07-28) beside the legacy one, over
//! in-memory pipes: `server/discover`, then tools listed and called with no `initialize`,
//! every request carrying its `_meta`.

use maljan_sidecar_kit::{Server, ToolSpec};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn meta(version: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"}
    })
}

async fn exchange(requests: Vec<Value>) -> Vec<Value> {
    let server = Server::builder("modern", "1")
        .tool(ToolSpec::new("echo", "answers its arguments"), |args, _| {
            Ok(json!({"echo": args.get("x").cloned()}))
        })
        .build();
    let (client, server_end) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        let (read, write) = tokio::io::split(server_end);
        server.serve(read, write).await
    });
    let (read, mut write) = tokio::io::split(client);
    let mut lines = BufReader::new(read).lines();
    let mut answers = Vec::new();
    for request in requests {
        write
            .write_all(format!("{request}\n").as_bytes())
            .await
            .expect("write");
        let line = lines.next_line().await.expect("read").expect("a line");
        answers.push(serde_json::from_str(&line).expect("JSON"));
    }
    answers
}

#[tokio::test]
async fn a_modern_client_discovers_lists_and_calls_without_initialize() {
    let answers = exchange(vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
               "params": {"_meta": meta("2026-07-28")}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
               "params": {"_meta": meta("2026-07-28")}}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
               "params": {"name": "echo", "arguments": {"x": 7}, "_meta": meta("2026-07-28")}}),
    ])
    .await;
    let discover = &answers[0]["result"];
    assert_eq!(discover["supportedVersions"][0], "2026-07-28");
    assert!(
        discover["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!("2025-11-25"))
    );
    assert_eq!(discover["cacheScope"], "public");
    assert!(discover["ttlMs"].as_u64().is_some());
    assert_eq!(
        discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "modern"
    );
    let list = &answers[1]["result"];
    assert!(
        list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "echo")
    );
    assert_eq!(list["cacheScope"], "public");
    assert!(list["ttlMs"].as_u64().is_some());
    assert_eq!(
        answers[2]["result"]["structuredContent"],
        json!({"echo": 7})
    );
}

#[tokio::test]
async fn a_modern_request_missing_a_required_key_or_with_another_version_is_refused() {
    let answers = exchange(vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list",
               "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "server/discover"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover",
               "params": {"_meta": meta("2031-01-01")}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}),
    ])
    .await;
    assert_eq!(answers[0]["error"]["code"], -32602);
    assert!(
        answers[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("clientCapabilities")
    );
    assert_eq!(answers[1]["error"]["code"], -32602);
    assert_eq!(answers[2]["error"]["code"], -32022);
    assert_eq!(
        answers[2]["error"]["data"]["supported"],
        json!(["2026-07-28"])
    );
    assert_eq!(answers[2]["error"]["data"]["requested"], "2031-01-01");
    // A legacy request is answered as before, without the modern result's keys.
    assert!(answers[3]["result"]["tools"].is_array());
    assert!(answers[3]["result"].get("ttlMs").is_none());
}
