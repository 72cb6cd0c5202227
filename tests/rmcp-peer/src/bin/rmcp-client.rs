//! An MCP client written with rmcp: `rmcp-client TARGET TOOL`, TARGET a URL (Streamable
//! HTTP) or a command to start (stdio). In each lifecycle mode (`auto`: `server/discover`
//! first, falling back to `initialize`; `legacy`: `initialize` only) it lists the tools and
//! calls TOOL with no arguments, then prints what it saw as one JSON array.

use rmcp::model::{CallToolRequestParams, ClientConfig, ProtocolVersion};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::{Value, json};

async fn one(target: &str, tool: &str, mode: &str) -> Result<Value, Box<dyn std::error::Error>> {
    let lifecycle = match mode {
        "legacy" => ClientLifecycleMode::Initialize,
        _ => ClientLifecycleMode::Auto {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            legacy_version: Some(ProtocolVersion::V_2025_11_25),
        },
    };
    let client: rmcp::service::RunningService<RoleClient, ClientConfig> =
        if target.starts_with("http") {
            ClientConfig::default()
                .serve_with_lifecycle(StreamableHttpClientTransport::from_uri(target), lifecycle)
                .await?
        } else {
            let child = TokioChildProcess::new(tokio::process::Command::new(target))?;
            ClientConfig::default()
                .serve_with_lifecycle(child, lifecycle)
                .await?
        };
    let version = client
        .peer()
        .peer_info()
        .map(|info| info.protocol_version.to_string());
    let mut tools: Vec<String> = client
        .list_all_tools()
        .await?
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    tools.sort();
    let result = client
        .call_tool(CallToolRequestParams::new(tool.to_owned()))
        .await?;
    let seen = json!({
        "mode": mode,
        "version": version,
        "tools": tools,
        "result": result.structured_content,
        "is_error": result.is_error.unwrap_or(false),
    });
    client.cancel().await?;
    Ok(seen)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (target, tool) = match args.as_slice() {
        [target, tool] => (target.as_str(), tool.as_str()),
        _ => return Err("usage: rmcp-client TARGET TOOL".into()),
    };
    let mut seen = Vec::new();
    for mode in ["auto", "legacy"] {
        seen.push(one(target, tool, mode).await?);
    }
    println!("{}", Value::Array(seen));
    Ok(())
}
