//! The reference sidecar as a binary: serves MCP over stdio.

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match maljan_sidecar::serve_stdio().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("maljan-sidecar: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
