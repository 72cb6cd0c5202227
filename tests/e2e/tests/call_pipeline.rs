//! The call pipeline against a real server process: the breaker, the cap and the ledger.

use std::sync::Arc;
use std::time::Duration;

use maljan_client::{
    BreakerSettings, ClientSettings, ConnectionContext, Ledger, ServerCommand, ServerConfig,
    ServerConnection,
};
use maljan_ledger::MemorySink;
use maljan_mcp_proto::maljan::ErrorCode;
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_misbehaving-server");

fn config() -> ServerConfig {
    ServerConfig::stdio("misbehaving", ServerCommand::new(SERVER))
}

#[tokio::test]
async fn three_unanswered_calls_rest_the_server_and_the_fourth_is_never_sent() {
    let memory = MemorySink::default();
    let mut settings = ClientSettings::default();
    settings.default_timeout = Duration::from_millis(200);
    let context = ConnectionContext::default().with_ledger(Arc::new(Ledger::from(memory.clone())));
    let server = ServerConnection::connect(&config(), settings, context)
        .await
        .expect("sets up");
    for _ in 0..3 {
        let answer = server.call("never", json!({})).await.expect("call");
        assert_eq!(
            answer.failure().map(|f| &f.code),
            Some(&ErrorCode::Unanswered)
        );
    }
    let fourth = server.call("never", json!({})).await.expect("call");
    let failure = fourth.failure().expect("refused");
    assert_eq!(failure.code, ErrorCode::ServerResting);
    assert!(failure.message.contains("not sent"), "{}", failure.message);
    assert!(
        failure
            .remediation
            .as_deref()
            .is_some_and(|r| r.contains("core.mcp.breaker.rest_s"))
    );

    let report = server.close().await;
    let received = report
        .stderr_tail
        .lines()
        .filter(|l| *l == "received tools/call never")
        .count();
    assert_eq!(
        received, 3,
        "the server never received the fourth call:\n{}",
        report.stderr_tail
    );

    let entries = memory.entries();
    let codes: Vec<&str> = entries
        .iter()
        .map(|e| e.failure().map_or("ok", |f| f.code.as_str()))
        .collect();
    assert_eq!(
        codes,
        ["unanswered", "unanswered", "unanswered", "server_resting"],
        "every call is ledgered"
    );
    assert_eq!(
        entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
}

async fn most_in_flight(cap: u32) -> u64 {
    let mut settings = ClientSettings::default();
    settings.breaker = BreakerSettings {
        max_concurrent_calls: cap,
        ..BreakerSettings::default()
    };
    let server = ServerConnection::connect(&config(), settings, ConnectionContext::default())
        .await
        .expect("sets up");
    let calls = (0..10).map(|_| server.call("slow", json!({"ms": 150})));
    for answer in futures::future::join_all(calls).await {
        assert!(answer.expect("call").is_ok());
    }
    let answer = server
        .call("most_in_flight", json!({}))
        .await
        .expect("call");
    server.close().await;
    answer.value["most_in_flight"].as_u64().expect("a count")
}

#[tokio::test]
async fn the_cap_bounds_the_calls_a_server_sees_at_once() {
    assert_eq!(most_in_flight(4).await, 4);
    assert_eq!(most_in_flight(1).await, 1);
}
