//! A real server built with the kit: `stdio_safe` keeps careless output off the protocol
//! stream, and a panicking handler answers `tool_failed`.

use maljan_client::{
    ClientSettings, ConnectionContext, ServerCommand, ServerConfig, ServerConnection,
};
use maljan_mcp_proto::maljan::ErrorCode;
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_noisy-kit-server");

#[tokio::test]
async fn println_and_child_output_never_reach_the_protocol_stream() {
    // The panic's report is one line whatever the caller's environment, so the stderr tail
    // (64 lines) still holds what the server printed before it.
    let mut command = ServerCommand::new(SERVER);
    command.env.push(("RUST_BACKTRACE".into(), "0".into()));
    let config = ServerConfig::stdio("noisy", command);
    let server = ServerConnection::connect(
        &config,
        ClientSettings::default(),
        ConnectionContext::default(),
    )
    .await
    .expect("sets up");
    let answer = server.call("noisy", json!({})).await.expect("call");
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(answer.value, json!({"child_ok": true}));
    let panicked = server.call("panics", json!({})).await.expect("call");
    let failure = panicked.failure().expect("failed");
    assert_eq!(failure.code, ErrorCode::ToolFailed);
    assert!(
        failure.message.contains("the handler fell over"),
        "{}",
        failure.message
    );
    assert_eq!(server.counts().stray, 0, "nothing but protocol on stdout");
    let report = server.close().await;
    assert!(
        report.stderr_tail.contains("progress 50%"),
        "{}",
        report.stderr_tail
    );
    assert!(
        report
            .stderr_tail
            .contains("child output on inherited stdout")
    );
    assert!(
        report
            .stderr_tail
            .contains("a banner printed with println!")
    );
}
