//! End-to-end tests of the Maljan client against real server processes that misbehave on
//! purpose. The server is the `misbehaving-server` binary of this crate; the tests are in
//! `tests/`. This library holds what several of them start: a kit server over HTTP.

use maljan_sidecar_kit::{HttpOptions, Server, ToolSpec};
use serde_json::json;

/// Starts a kit server over Streamable HTTP on a free loopback port, with one tool,
/// `hello` (answering `{"hello": "world"}`), serving until the runtime ends; its URL.
///
/// ```no_run
/// # #[tokio::main] async fn main() {
/// let url = maljan_e2e::hello_kit_over_http().await;
/// assert!(url.ends_with("/mcp"));
/// # }
/// ```
pub async fn hello_kit_over_http() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("http://{}/mcp", listener.local_addr().expect("its address"));
    let server = Server::builder("http-kit", "0.0.1")
        .tool(ToolSpec::new("hello", "Says hello"), |_, _| {
            Ok(json!({"hello": "world"}))
        })
        .build();
    tokio::spawn(server.serve_http_with(listener, HttpOptions::default(), std::future::pending()));
    url
}

/// The workspace README, whose Rust examples are compiled as this crate's doctests (the
/// README belongs to no published crate).
#[doc = include_str!("../../../README.md")]
#[allow(dead_code)]
mod workspace_readme {}
