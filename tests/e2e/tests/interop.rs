//! Our client against third-party MCP servers, over stdio and Streamable HTTP: the
//! TypeScript SDK's `server-everything` and a small server on the Python SDK.
//!
//! These tests need the peers installed: `cargo xtask interop` installs them into a cache
//! folder and runs these tests with their paths in the environment (and says which it
//! skipped). Run by hand, they are ignored.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use maljan_client::{
    CallOptions, ClientSettings, ConnectionContext, EraChoice, ServerCommand, ServerConfig,
    ServerConnection,
};
use serde_json::{Value, json};

/// The Python SDK server the tests run: echo, get-sum and a long-running tool with progress.
const PYTHON_SERVER: &str = r#"
import asyncio, sys
try:
    from mcp.server.mcpserver import MCPServer, Context
    SDK2 = True
except ImportError:
    from mcp.server.fastmcp import FastMCP, Context
    SDK2 = False

port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
if SDK2:
    mcp = MCPServer("python-interop")
else:
    mcp = FastMCP("python-interop", host="127.0.0.1", port=port)

@mcp.tool()
def echo(message: str) -> str:
    return f"Echo: {message}"

@mcp.tool(name="get-sum")
def get_sum(a: float, b: float) -> float:
    return a + b

@mcp.tool(name="trigger-long-running-operation")
async def long_running(duration: float, steps: int, ctx: Context) -> str:
    for step in range(1, steps + 1):
        await asyncio.sleep(duration / steps)
        await ctx.report_progress(step, steps, f"step {step}")
    return f"done in {steps} steps"

if sys.argv[1] == "stdio" or not SDK2:
    mcp.run(transport=sys.argv[1])
else:
    stateless = len(sys.argv) > 3 and sys.argv[3] == "stateless"
    mcp.run(transport=sys.argv[1], host="127.0.0.1", port=port, stateless_http=stateless)
"#;

/// The Python SDK 2.x's client against a server (a URL, or a command to start over stdio):
/// in each mode (`auto`, which probes `server/discover`, and `legacy`) it lists the tools and
/// calls the one named with no arguments, and prints what it saw as one JSON array.
const PYTHON_CLIENT: &str = r#"
import asyncio, json, sys
from mcp import Client, StdioServerParameters

async def one(target, mode, tool):
    server = target if target.startswith("http") else StdioServerParameters(command=target)
    async with Client(server, mode=mode) as client:
        tools = await client.list_tools()
        result = await client.call_tool(tool, {})
        return {
            "mode": mode,
            "version": client.protocol_version,
            "tools": sorted(t.name for t in tools.tools),
            "result": result.structured_content,
            "is_error": result.is_error,
        }

async def main():
    target, tool = sys.argv[1], sys.argv[2]
    print(json.dumps([await one(target, mode, tool) for mode in ("auto", "legacy")]))

asyncio.run(main())
"#;

fn env(name: &str) -> String {
    std::env::var(name)
        .unwrap_or_else(|_| panic!("{name} is not set: run these tests with `cargo xtask interop`"))
}

/// A child server over HTTP, killed at the end of the test.
struct HttpPeer(Child);

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Starts an HTTP peer and waits for the line on stderr that says it listens.
fn start_http(mut command: Command, ready: &str) -> HttpPeer {
    let mut child = command
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("the peer starts");
    let stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut lines = stderr.lines();
    loop {
        let line = lines
            .next()
            .expect("the peer announces it listens")
            .expect("a line");
        if line.contains(ready) {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    HttpPeer(child)
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Setup in `era`, found to be `expected`; the tool list, echo, get-sum, and the
/// long-running tool with progress.
async fn exercise_in(config: ServerConfig, era: EraChoice, expected: &str) {
    let mut settings = ClientSettings::default();
    settings.default_timeout = Duration::from_secs(60);
    settings.era = era;
    let mut server = ServerConnection::connect(&config, settings, ConnectionContext::default())
        .await
        .expect("sets up");
    let card = server.card();
    assert_eq!(
        card.era.as_str(),
        expected,
        "{} in era {}",
        config.name,
        era.as_str()
    );
    let names: Vec<String> = server
        .model_tools()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    for tool in ["echo", "get-sum", "trigger-long-running-operation"] {
        assert!(
            names.iter().any(|n| n == tool),
            "{tool} missing from {names:?}"
        );
    }
    let echo = server
        .call("echo", json!({"message": "hello interop"}))
        .await
        .expect("call");
    assert!(echo.is_ok(), "{echo:?}");
    assert!(
        text_of(&echo.value).contains("hello interop"),
        "{:?}",
        echo.value
    );
    let sum = server
        .call("get-sum", json!({"a": 2, "b": 3}))
        .await
        .expect("call");
    assert!(sum.is_ok(), "{sum:?}");
    assert!(text_of(&sum.value).contains('5'), "{:?}", sum.value);

    let mut notifications = server
        .take_notifications()
        .expect("the notification receiver");
    let long = server
        .call_with(
            "trigger-long-running-operation",
            json!({"duration": 1, "steps": 3}),
            &CallOptions::default().progress("interop-1"),
        )
        .await
        .expect("call")
        .answer;
    assert!(long.is_ok(), "{long:?}");
    let mut progress = 0;
    while let Ok(n) = notifications.try_recv() {
        if n.method == "notifications/progress"
            && n.params
                .as_ref()
                .is_some_and(|p| p.get().contains("interop-1"))
        {
            progress += 1;
        }
    }
    assert!(progress >= 1, "no progress notification arrived");
    server.close().await;
}

/// [`exercise_in`] with the era found by `server/discover`: a legacy-only server.
async fn exercise(config: ServerConfig) {
    exercise_in(config, EraChoice::Auto, "session").await;
}

#[tokio::test]
#[ignore = "run by cargo xtask interop"]
async fn server_everything_over_stdio() {
    let command = ServerCommand::new(env("MALJAN_INTEROP_NODE"))
        .arg(env("MALJAN_INTEROP_EVERYTHING"))
        .arg("stdio");
    exercise(ServerConfig::stdio("everything", command)).await;
}

#[tokio::test]
#[ignore = "run by cargo xtask interop"]
async fn server_everything_over_streamable_http() {
    let port = free_port();
    let mut command = Command::new(env("MALJAN_INTEROP_NODE"));
    command
        .arg(env("MALJAN_INTEROP_EVERYTHING"))
        .arg("streamableHttp")
        .env("PORT", port.to_string());
    let _peer = start_http(command, &port.to_string());
    exercise(ServerConfig::http(
        "everything",
        format!("http://127.0.0.1:{port}/mcp"),
    ))
    .await;
}

fn python_script() -> tempfile::NamedTempFile {
    let script = tempfile::Builder::new()
        .suffix(".py")
        .tempfile()
        .expect("temp file");
    std::fs::write(script.path(), PYTHON_SERVER).expect("write");
    script
}

#[tokio::test]
#[ignore = "run by cargo xtask interop"]
async fn python_sdk_server_over_stdio() {
    let script = python_script();
    let command = ServerCommand::new(env("MALJAN_INTEROP_PYTHON"))
        .arg(script.path().display().to_string())
        .arg("stdio");
    exercise(ServerConfig::stdio("python", command)).await;
}

#[tokio::test]
#[ignore = "run by cargo xtask interop"]
async fn python_sdk_server_over_streamable_http() {
    let script = python_script();
    let port = free_port();
    let mut command = Command::new(env("MALJAN_INTEROP_PYTHON"));
    command
        .arg(script.path())
        .arg("streamable-http")
        .arg(port.to_string());
    let _peer = start_http(command, "Uvicorn running");
    exercise(ServerConfig::http(
        "python",
        format!("http://127.0.0.1:{port}/mcp"),
    ))
    .await;
}

#[tokio::test]
#[ignore = "run by cargo xtask interop"]
async fn python_sdk_2_server_over_stdio_in_both_eras() {
    let script = python_script();
    let command = ServerCommand::new(env("MALJAN_INTEROP_PYTHON2"))
        .arg(script.path().display().to_string())
        .arg("stdio");
    let config = ServerConfig::stdio("python2", command);
    exercise_in(config.clone(), EraChoice::Auto, "stateless").await;
    exercise_in(config, EraChoice::Session, "session").await;
}

/// The Python SDK 2.x server over HTTP, `stateless` or with sessions, in both eras.
async fn python_sdk_2_over_http(stateless: bool) {
    let script = python_script();
    let port = free_port();
    let mut command = Command::new(env("MALJAN_INTEROP_PYTHON2"));
    command
        .arg(script.path())
        .arg("streamable-http")
        .arg(port.to_string())
        .arg(if stateless { "stateless" } else { "sessions" });
    let _peer = start_http(command, "Uvicorn running");
    let config = ServerConfig::http("python2", format!("http://127.0.0.1:{port}/mcp"));
    exercise_in(config.clone(), EraChoice::Auto, "stateless").await;
    exercise_in(config, EraChoice::Session, "session").await;
}

#[tokio::test]
#[ignore = "run by cargo xtask interop"]
async fn python_sdk_2_server_over_streamable_http_in_both_eras() {
    python_sdk_2_over_http(false).await;
}

#[tokio::test]
#[ignore = "run by cargo xtask interop"]
async fn python_sdk_2_stateless_server_over_streamable_http_in_both_eras() {
    python_sdk_2_over_http(true).await;
}

/// Runs a peer's client (`command`, given a target and a tool); what it saw in each mode.
fn peer_client(mut command: Command, target: &str, tool: &str) -> Vec<Value> {
    let output = command
        .arg(target)
        .arg(tool)
        .output()
        .expect("the client runs");
    assert!(
        output.status.success(),
        "the client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen: Value = serde_json::from_slice(&output.stdout).expect("one JSON array");
    seen.as_array().expect("an array").clone()
}

/// The Python SDK 2.x client against `target`, calling `tool`; what it saw in each mode.
fn python_client(target: &str, tool: &str) -> Vec<Value> {
    let script = tempfile::Builder::new()
        .suffix(".py")
        .tempfile()
        .expect("temp file");
    std::fs::write(script.path(), PYTHON_CLIENT).expect("write");
    let mut command = Command::new(env("MALJAN_INTEROP_PYTHON2"));
    command.arg(script.path());
    peer_client(command, target, tool)
}

/// rmcp's client against `target`, calling `tool`; what it saw in each mode.
fn rmcp_client(target: &str, tool: &str) -> Vec<Value> {
    peer_client(
        Command::new(env("MALJAN_INTEROP_RMCP_CLIENT")),
        target,
        tool,
    )
}

fn assert_both_eras(seen: &[Value], expected: &Value) {
    let versions: Vec<&str> = seen.iter().filter_map(|s| s["version"].as_str()).collect();
    assert_eq!(versions, ["2026-07-28", "2025-11-25"], "{seen:?}");
    for mode in seen {
        assert_eq!(&mode["result"], expected, "{mode}");
        assert_eq!(mode["is_error"], false, "{mode}");
    }
}

#[test]
#[ignore = "run by cargo xtask interop"]
fn python_sdk_2_client_against_the_kit_over_stdio_in_both_eras() {
    let seen = python_client(env!("CARGO_BIN_EXE_noisy-kit-server"), "noisy");
    assert_both_eras(&seen, &json!({"child_ok": true}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by cargo xtask interop"]
async fn python_sdk_2_client_against_the_kit_over_streamable_http_in_both_eras() {
    let url = maljan_e2e::hello_kit_over_http().await;
    let seen = tokio::task::spawn_blocking(move || python_client(&url, "hello"))
        .await
        .expect("join");
    assert_both_eras(&seen, &json!({"hello": "world"}));
}

#[test]
#[ignore = "run by cargo xtask interop"]
fn rmcp_client_against_the_kit_over_stdio_in_both_eras() {
    let seen = rmcp_client(env!("CARGO_BIN_EXE_noisy-kit-server"), "noisy");
    assert_both_eras(&seen, &json!({"child_ok": true}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run by cargo xtask interop"]
async fn rmcp_client_against_the_kit_over_streamable_http_in_both_eras() {
    let url = maljan_e2e::hello_kit_over_http().await;
    let seen = tokio::task::spawn_blocking(move || rmcp_client(&url, "hello"))
        .await
        .expect("join");
    assert_both_eras(&seen, &json!({"hello": "world"}));
}

#[tokio::test]
#[ignore = "run by cargo xtask interop"]
async fn rmcp_server_over_stdio_in_both_eras() {
    let config = ServerConfig::stdio(
        "rmcp",
        ServerCommand::new(env("MALJAN_INTEROP_RMCP_SERVER")).arg("stdio"),
    );
    exercise_in(config.clone(), EraChoice::Auto, "stateless").await;
    exercise_in(config, EraChoice::Session, "session").await;
}

#[tokio::test]
#[ignore = "run by cargo xtask interop"]
async fn rmcp_server_over_streamable_http_in_both_eras() {
    let port = free_port();
    let mut command = Command::new(env("MALJAN_INTEROP_RMCP_SERVER"));
    command.arg("http").arg(port.to_string());
    let _peer = start_http(command, "listening on");
    let config = ServerConfig::http("rmcp", format!("http://127.0.0.1:{port}/mcp"));
    exercise_in(config.clone(), EraChoice::Auto, "stateless").await;
    exercise_in(config, EraChoice::Session, "session").await;
}
