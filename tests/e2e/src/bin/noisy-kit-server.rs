//! A server built with the kit whose tools write to stdout the careless way: `println!`, a
//! child process that inherits stdout, and a panic. `stdio_safe` must keep all of it off the
//! protocol stream.

use maljan_sidecar_kit::{Server, ToolSpec, log_to_stderr, stdio_safe};
use serde_json::json;

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let protocol_out = stdio_safe()?;
    log_to_stderr();
    println!("a banner printed with println! after stdio_safe");
    let server = Server::builder("noisy", "0.0.1")
        .tool(
            ToolSpec::new("noisy", "Prints to stdout, runs a child that does too"),
            |_, _| {
                println!("progress 50%");
                let status = std::process::Command::new("sh")
                    .args(["-c", "echo child output on inherited stdout"])
                    .status()
                    .map_err(|e| {
                        maljan_mcp_proto::maljan::ToolFailure::new(
                            maljan_mcp_proto::maljan::ErrorCode::ToolFailed,
                            e.to_string(),
                            None,
                        )
                    })?;
                Ok(json!({"child_ok": status.success()}))
            },
        )
        .tool(ToolSpec::new("panics", "Panics"), |_, _| {
            panic!("the handler fell over")
        })
        .build();
    server
        .serve(tokio::io::stdin(), tokio::fs::File::from_std(protocol_out))
        .await
}
