//! The workspace's bench server: a kit server with one tool, `echo`, answering its
//! `message`; over stdio, or over Streamable HTTP with `http PORT` (at
//! `http://127.0.0.1:PORT/mcp`), as the peers' echo servers are started. The tool is a
//! quick one, as the peers' echo tools are: it answers on the task that serves the call.

use maljan_sidecar_kit::{Server, ToolSpec};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let server = Server::builder("bench-echo", env!("CARGO_PKG_VERSION"))
        .quick_tool(
            ToolSpec::new("echo", "Answers its message").required_string("message", "the words"),
            |args, _ctx| Ok(serde_json::json!({ "message": args.string("message")? })),
        )
        .build();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match &args[..] {
        [] => server.serve_stdio().await,
        [mode, port] if mode == "http" => {
            let port: u16 = port.parse().map_err(std::io::Error::other)?;
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
            server.serve_http(listener).await
        }
        _ => Err(std::io::Error::other("usage: bench-echo [http PORT]")),
    }
}
