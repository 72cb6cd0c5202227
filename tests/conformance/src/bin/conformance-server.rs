//! The sidecar kit as the conformance suite's server under test: serves the tools its
//! server scenarios call over Streamable HTTP on a free loopback port, and prints the
//! endpoint's URL as its first line on stdout.

use std::process::ExitCode;

use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
use maljan_sidecar_kit::{Server, ToolSpec};
use serde_json::json;

fn server() -> Server {
    Server::builder("maljan-conformance", env!("CARGO_PKG_VERSION"))
        .tool(
            ToolSpec::new("test_simple_text", "Answers a fixed text."),
            |_, _| Ok(json!({"text": "This is a simple text response for testing."})),
        )
        .tool(
            ToolSpec::new("test_error_handling", "Always fails, as a tool error."),
            |_, _| {
                Err(ToolFailure::new(
                    ErrorCode::ToolFailed,
                    "This tool intentionally returns an error for testing",
                    None,
                ))
            },
        )
        .build()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:0").await {
        Ok(listener) => listener,
        Err(e) => {
            eprintln!("conformance-server: binding a loopback port: {e}");
            return ExitCode::FAILURE;
        }
    };
    match listener.local_addr() {
        Ok(local) => println!("http://{local}/mcp"),
        Err(e) => {
            eprintln!("conformance-server: {e}");
            return ExitCode::FAILURE;
        }
    }
    match server().serve_http(listener).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance-server: {e}");
            ExitCode::FAILURE
        }
    }
}
