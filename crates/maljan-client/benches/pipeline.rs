//! The call pipeline's own cost per call (cap, breaker, timeout, answer reading, ledger)
//! against a bare request/response on the same in-memory transport, with a server of the
//! legacy era and one of the modern era (whose every request the client stamps with the
//! era's `_meta`, and whose every result it reads for its `resultType`).

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use std::sync::Arc;

use maljan_client::{ClientSettings, ConnectionContext, Ledger, ServerConnection, StdioConfig};
use maljan_mcp_proto::jsonrpc::{DecodedLine, Message, decode_line};
use maljan_mcp_proto::mcp::Era;
use maljan_mcp_stdio::StdioTransport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::runtime::Runtime;

/// An in-memory server answering every request at once; `server/discover` with a discover
/// result when `modern`, else with "method not found" as a legacy server does.
fn in_memory_connection(modern: bool) -> StdioTransport {
    let (client, server) = tokio::io::duplex(1 << 16);
    let (client_read, client_write) = tokio::io::split(client);
    tokio::spawn(async move {
        let (read, mut write) = tokio::io::split(server);
        let mut lines = BufReader::new(read).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let DecodedLine::Message(Message::Request(request)) =
                decode_line(line.as_bytes(), false)
            else {
                continue;
            };
            if request.method == "server/discover" && !modern {
                let refusal = json!({"jsonrpc": "2.0", "id": request.id,
                    "error": {"code": -32601, "message": "method not found"}});
                let _ = write.write_all(format!("{refusal}\n").as_bytes()).await;
                continue;
            }
            let result = match request.method.as_str() {
                "server/discover" => json!({"supportedVersions": ["2026-07-28"],
                    "capabilities": {"tools": {}}, "ttlMs": 0, "cacheScope": "public"}),
                "initialize" => json!({"protocolVersion": "2025-11-25", "capabilities": {},
                    "serverInfo": {"name": "bench", "version": "1"}}),
                "tools/list" => {
                    json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
                }
                _ => json!({"content": [{"type": "text", "text": "{\"size\":1234}"}],
                    "structuredContent": {"size": 1234}}),
            };
            let reply = json!({"jsonrpc": "2.0", "id": request.id, "result": result});
            if write
                .write_all(format!("{reply}\n").as_bytes())
                .await
                .is_err()
            {
                break;
            }
        }
    });
    StdioTransport::over(client_read, client_write, StdioConfig::named("bench"))
}

fn bench(c: &mut Criterion) {
    let runtime = Runtime::new().expect("a runtime");
    let bare = runtime.block_on(async { in_memory_connection(false) });
    let connected = |modern: bool| {
        runtime.block_on(async {
            // A ledger without sinks: each call is still made into its entry and numbered.
            let context = ConnectionContext::default().with_ledger(Arc::new(Ledger::new()));
            let server = ServerConnection::over(
                in_memory_connection(modern),
                ClientSettings::default(),
                context,
            );
            let server = server.set_up().await.expect("set up");
            let era = if modern { Era::Stateless } else { Era::Session };
            assert_eq!(server.card().era, era);
            server
        })
    };
    let legacy = connected(false);
    let modern = connected(true);
    let arguments = json!({"path": "/samples/a.bin"});
    let params = serde_json::value::to_raw_value(&json!({"name": "echo", "arguments": arguments}))
        .expect("JSON");

    let mut group = c.benchmark_group("call_round_trip");
    group.bench_function("bare_request_response", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let reply = bare
                    .send_request("tools/call", Some(params.clone()))
                    .await
                    .expect("sent")
                    .await
                    .expect("answered");
                std::hint::black_box(reply);
            })
        })
    });
    for (name, server) in [
        ("pipeline_call", &legacy),
        ("pipeline_call_modern", &modern),
    ] {
        group.bench_function(name, |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let answer = server
                        .call("echo", arguments.clone())
                        .await
                        .expect("called");
                    assert_eq!(answer.value, json!({"size": 1234}));
                    std::hint::black_box::<Value>(answer.value);
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
