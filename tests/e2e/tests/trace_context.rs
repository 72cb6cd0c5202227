//! A call's W3C `traceparent` goes to the server in `_meta` and into the call's ledger
//! entry: from the caller's trace when given, else a new trace.

use std::sync::Arc;

use maljan_client::{
    CallOptions, ClientSettings, ConnectionContext, Ledger, ServerCommand, ServerConfig,
    ServerConnection, TraceParent,
};
use maljan_ledger::MemorySink;
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_misbehaving-server");

async fn sent_traceparent(server: &ServerConnection, options: &CallOptions) -> TraceParent {
    let answer = server
        .call_with("meta", json!({}), options)
        .await
        .expect("call");
    let sent = answer.answer.value["meta"]["traceparent"]
        .as_str()
        .expect("a traceparent in _meta");
    sent.parse().expect("a W3C traceparent")
}

#[tokio::test]
async fn each_call_sends_a_span_of_the_trace_and_the_ledger_names_it() {
    let memory = MemorySink::default();
    let ledger = Arc::new(Ledger::new().with_sink(memory.clone()));
    let run_trace = TraceParent::new_trace();
    let context = ConnectionContext::default()
        .with_ledger(ledger.clone())
        .with_trace(run_trace);
    let config = ServerConfig::stdio("tracer", ServerCommand::new(SERVER));
    let server = ServerConnection::connect(&config, ClientSettings::default(), context)
        .await
        .expect("set up");

    let first = sent_traceparent(&server, &CallOptions::default()).await;
    let second = sent_traceparent(&server, &CallOptions::default()).await;
    assert_eq!(first.trace_id(), run_trace.trace_id());
    assert_eq!(second.trace_id(), run_trace.trace_id());
    assert_ne!(first, second, "each call is a span of its own");
    assert_ne!(first, run_trace);

    let caller: TraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        .parse()
        .unwrap();
    let traced = sent_traceparent(&server, &CallOptions::default().traced(caller)).await;
    assert_eq!(traced.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");

    let recorded: Vec<Option<String>> = memory
        .entries()
        .iter()
        .map(|e| e.call.scope.traceparent.clone())
        .collect();
    assert_eq!(
        recorded,
        vec![
            Some(first.to_string()),
            Some(second.to_string()),
            Some(traced.to_string())
        ]
    );
    server.close().await;
}

#[tokio::test]
async fn a_call_outside_any_trace_starts_one() {
    let config = ServerConfig::stdio("tracer", ServerCommand::new(SERVER));
    let server = ServerConnection::connect(
        &config,
        ClientSettings::default(),
        ConnectionContext::default(),
    )
    .await
    .expect("set up");
    let one = sent_traceparent(&server, &CallOptions::default()).await;
    let two = sent_traceparent(&server, &CallOptions::default()).await;
    assert_ne!(one.trace_id(), two.trace_id());
    server.close().await;
}
