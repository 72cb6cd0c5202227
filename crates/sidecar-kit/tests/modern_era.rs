//! The kit's server speaking the modern era (2026-07-28) beside the legacy one, over
//! in-memory pipes and over HTTP: `server/discover`, then tools listed and called with no
//! `initialize`, every request carrying its `_meta` (and over HTTP, headers that match it).

use std::io::{Read, Write};
use std::net::TcpStream;

use maljan_sidecar_kit::{HttpOptions, Server, ToolSpec};
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

/// A kit server over HTTP on loopback; its address.
async fn serve_http() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address").to_string();
    let server = Server::builder("modern", "1")
        .tool(ToolSpec::new("echo", "answers its arguments"), |args, _| {
            Ok(json!({"echo": args.get("x").cloned()}))
        })
        .build();
    tokio::spawn(server.serve_http_with(listener, HttpOptions::default(), std::future::pending()));
    addr
}

/// One HTTP/1.1 exchange: the status and the body read as JSON (null when it is not).
async fn http(addr: &str, method: &str, headers: &[(&str, &str)], body: Value) -> (u16, Value) {
    let body = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let head: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let request = format!(
        "{method} /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
         {head}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let addr = addr.to_owned();
    let response = tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(&addr).expect("connect");
        stream.write_all(request.as_bytes()).expect("send");
        let mut response = String::new();
        stream.read_to_string(&mut response).expect("receive");
        response
    })
    .await
    .expect("join");
    let status = response[9..12].parse().expect("a status");
    let body = response
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or(Value::Null);
    (status, body)
}

fn modern_headers<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", method),
    ];
    if let Some(name) = name {
        headers.push(("Mcp-Name", name));
    }
    headers
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_http_a_modern_client_needs_no_session_and_headers_that_match_its_body() {
    let addr = serve_http().await;
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
        "params": {"_meta": meta("2026-07-28")}});
    let (status, body) = http(
        &addr,
        "POST",
        &modern_headers("server/discover", None),
        discover.clone(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["result"]["supportedVersions"][0], "2026-07-28");

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo", "arguments": {"x": 7}, "_meta": meta("2026-07-28")}});
    let (status, body) = http(
        &addr,
        "POST",
        &modern_headers("tools/call", Some("echo")),
        call.clone(),
    )
    .await;
    assert_eq!(
        (status, &body["result"]["structuredContent"]),
        (200, &json!({"echo": 7}))
    );

    let refusals = [
        (
            modern_headers("server/discover", None)[..1].to_vec(),
            discover.clone(),
            400,
            -32020,
        ),
        (
            modern_headers("tools/call", None),
            call.clone(),
            400,
            -32020,
        ),
        (
            modern_headers("tools/call", Some("=?base64?not base64!?=")),
            call.clone(),
            400,
            -32020,
        ),
        (
            modern_headers("tools/call", Some("other")),
            call.clone(),
            400,
            -32020,
        ),
        (
            modern_headers("server/discover", None),
            json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover",
                   "params": {"_meta": meta("2099-01-01")}}),
            400,
            -32022,
        ),
        (
            modern_headers("server/discover", None),
            json!({"jsonrpc": "2.0", "id": 4, "method": "server/discover",
                   "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
            400,
            -32602,
        ),
        (
            modern_headers("tools/call", Some("echo")),
            json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"x": 1},
                              "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}}),
            400,
            -32602,
        ),
        (
            modern_headers("tools/call", Some("echo")),
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                   "params": {"name": "echo", "arguments": {"x": 1}}}),
            400,
            -32602,
        ),
        (
            modern_headers("prompts/list", None),
            json!({"jsonrpc": "2.0", "id": 5, "method": "prompts/list",
                   "params": {"_meta": meta("2026-07-28")}}),
            404,
            -32601,
        ),
    ];
    for (headers, request, status, code) in refusals {
        let (got, body) = http(&addr, "POST", &headers, request.clone()).await;
        assert_eq!(
            (got, &body["error"]["code"]),
            (status, &json!(code)),
            "{request} {headers:?}: {body}"
        );
        assert_eq!(body["id"], request["id"], "the refusal answers the request");
    }
    let (status, _) = http(
        &addr,
        "GET",
        &modern_headers("server/discover", None),
        Value::Null,
    )
    .await;
    assert_eq!(status, 405);
    let (status, _) = http(
        &addr,
        "DELETE",
        &modern_headers("server/discover", None),
        Value::Null,
    )
    .await;
    assert_eq!(status, 405);
}
