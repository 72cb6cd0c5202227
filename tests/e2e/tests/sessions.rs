//! The transports' sessions, as a downstream crate uses them: over stdio against real server
//! processes that misbehave (one that writes stray lines around its answers, in each era;
//! one that never answers a call; one that exits in the middle of a call or before set-up),
//! and over Streamable HTTP against a kit server.

use std::time::Duration;

use maljan_mcp_http::{HttpConfig, HttpTransport};
use maljan_mcp_stdio::{
    ServerCommand, Session, SessionError, SessionSettings, StdioConfig, StdioTransport,
};
use maljan_sidecar_kit::{Server, ToolSpec};
use serde_json::{Value, json};

const MISBEHAVING: &str = env!("CARGO_BIN_EXE_misbehaving-server");

async fn session(args: &[&str]) -> Result<Session, SessionError> {
    let command = args
        .iter()
        .fold(ServerCommand::new(MISBEHAVING), |c, a| c.arg(*a));
    let server = StdioTransport::spawn(&command, StdioConfig::named("misbehaving"))
        .expect("the test server starts");
    let settings = SessionSettings::default().discover_wait(Duration::from_millis(500));
    Session::set_up(server, settings).await
}

fn structured(answer: &maljan_mcp_proto::mcp::CallToolResult) -> &Value {
    answer.structured_content.as_ref().expect("structured")
}

#[tokio::test]
async fn a_server_that_writes_stray_lines_is_set_up_and_answers_in_either_era() {
    for era in ["legacy", "modern"] {
        let session = session(&["--banners", "3", "--chatty", "--discover", era])
            .await
            .expect("set up despite the stray lines");
        assert_eq!(
            session.protocol().era().as_str() == "stateless",
            era == "modern"
        );
        assert!(session.tools().iter().any(|t| t.name == "echo"));
        let answer = session
            .call_tool("echo", json!({"said": era}), Duration::from_secs(10))
            .await
            .expect("answered");
        assert_eq!(structured(&answer)["said"], era);
        assert!(session.transport().info().counts().stray >= 3, "{era}");
        session.close().await;
    }
}

#[tokio::test]
async fn a_call_past_its_deadline_fails_and_is_cancelled_on_the_server() {
    let session = session(&[]).await.expect("set up");
    let deadline = Duration::from_millis(300);
    let error = session
        .call_tool("never", json!({}), deadline)
        .await
        .expect_err("never answered");
    assert!(
        matches!(error, SessionError::NoAnswer { method: "tools/call", waited } if waited == deadline),
        "{error}"
    );
    // The server heard of the cancellation before this later call, written after it.
    let answer = session
        .call_tool("cancelled", json!({}), Duration::from_secs(10))
        .await
        .expect("answered");
    assert_eq!(
        structured(&answer)["cancelled"].as_array().map(Vec::len),
        Some(1)
    );
    session.close().await;
}

#[tokio::test]
async fn a_server_that_exits_mid_call_is_lost_with_its_exit_and_stderr_tail() {
    let session = session(&["--die-on-call", "1"]).await.expect("set up");
    let error = session
        .call_tool("echo", json!({"tag": "last"}), Duration::from_secs(10))
        .await
        .expect_err("the server died");
    assert!(error.is_lost(), "{error}");
    let tail = error.stderr_tail().expect("a lost connection's tail");
    assert!(tail.contains("dying on call 1"), "{tail:?}");
    let SessionError::Lost { exit, .. } = &error else {
        unreachable!("is_lost")
    };
    assert_eq!(exit.and_then(|status| status.code()), Some(3));
    let shown = error.to_string();
    assert!(
        shown.contains("dying on call 1") && shown.contains("tools/call"),
        "{shown}"
    );
    session.close().await;
}

#[tokio::test]
async fn a_server_that_exits_during_set_up_fails_it_with_its_stderr_tail() {
    let command = ServerCommand::new("sh")
        .arg("-c")
        .arg("echo 'no licence key' >&2; exit 7");
    let server = StdioTransport::spawn(&command, StdioConfig::named("gone")).expect("spawned");
    let error = Session::set_up(server, SessionSettings::default())
        .await
        .expect_err("the server is gone");
    assert!(error.is_lost(), "{error}");
    assert!(error.to_string().contains("no licence key"), "{error}");
}

#[tokio::test]
async fn an_http_session_sets_a_kit_server_up_and_calls_its_tool() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let server = Server::builder("kit", "1")
        .tool(
            ToolSpec::new("double", "twice n").optional("n", json!({"type": "integer"})),
            |args, _| Ok(json!({"doubled": args.optional_u64("n")?.unwrap_or(0) * 2})),
        )
        .build();
    tokio::spawn(server.serve_http(listener));
    let transport = HttpTransport::new(HttpConfig::new("kit", &url)).expect("a valid URL");
    let session = maljan_mcp_http::Session::set_up(transport, SessionSettings::default())
        .await
        .expect("set up");
    assert_eq!(session.server_info().name, "kit");
    let answer = session
        .call_tool("double", json!({"n": 21}), Duration::from_secs(10))
        .await
        .expect("answered");
    assert_eq!(structured(&answer)["doubled"], 42);
    session.close().await;
}
