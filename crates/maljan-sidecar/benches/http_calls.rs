//! One small tool call's round trip over Streamable HTTP on loopback, to a kit server, in
//! each protocol era: legacy (a session, its id echoed) and modern (stateless, the era's
//! `_meta` and headers on every request).

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use maljan_client::{ClientSettings, ConnectionContext, EraChoice, ServerConfig, ServerConnection};
use maljan_sidecar_kit::{HttpOptions, Server, ToolSpec};
use serde_json::json;
use tokio::runtime::Runtime;

fn bench(c: &mut Criterion) {
    let runtime = Runtime::new().expect("a runtime");
    let url = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
        let server = Server::builder("bench", "1")
            .tool(ToolSpec::new("size", "Says a size"), |_, _| {
                Ok(json!({"size": 1234}))
            })
            .build();
        tokio::spawn(server.serve_http_with(
            listener,
            HttpOptions::default(),
            std::future::pending(),
        ));
        url
    });
    let config = ServerConfig::http("bench", &url);
    let connected = |era: EraChoice| {
        runtime.block_on(async {
            let mut settings = ClientSettings::default();
            settings.era = era;
            ServerConnection::connect(&config, settings, ConnectionContext::default())
                .await
                .expect("set up")
        })
    };
    let legacy = connected(EraChoice::Session);
    let modern = connected(EraChoice::Stateless);
    let arguments = json!({"path": "/samples/a.bin"});
    let mut group = c.benchmark_group("http_call_round_trip");
    for (name, server) in [("legacy", &legacy), ("modern", &modern)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let answer = server
                        .call("size", arguments.clone())
                        .await
                        .expect("called");
                    assert_eq!(answer.value, json!({"size": 1234}));
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
