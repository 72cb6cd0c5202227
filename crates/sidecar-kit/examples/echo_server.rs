//! A tool server in a dozen lines, served over stdio: one tool, `echo`, that answers what it
//! is told. Call it with any MCP client, or with the stdio session example:
//!
//! ```text
//! cargo build -p maljan-sidecar-kit --example echo_server
//! cargo run -p maljan-mcp-stdio --example stdio_session -- echo '{"say":"hi"}' target/debug/examples/echo_server
//! ```

use maljan_sidecar_kit::{Server, ToolSpec, log_to_stderr};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    log_to_stderr();
    let server = Server::builder("echo", env!("CARGO_PKG_VERSION"))
        .tool(
            ToolSpec::new("echo", "Answers what it is told").required_string("say", "the words"),
            |args, _ctx| Ok(serde_json::json!({ "said": args.string("say")? })),
        )
        .build();
    server.serve_stdio().await
}
