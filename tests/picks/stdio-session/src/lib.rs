//! Picks the stdio transport and its session: one tool of a server, called.

use std::time::Duration;

use maljan_mcp_stdio::{ServerCommand, Session, SessionSettings, StdioConfig, StdioTransport};

/// Calls `tool` of the server `program` starts, with `arguments`; its result as JSON.
pub async fn call_once(
    program: &str,
    tool: &str,
    arguments: serde_json::Value,
) -> Result<serde_json::Value, Box<dyn std::error::Error>> {
    let server = StdioTransport::spawn(&ServerCommand::new(program), StdioConfig::named(program))?;
    let session = Session::set_up(server, SessionSettings::default()).await?;
    let answer = session
        .call_tool(tool, arguments, Duration::from_secs(30))
        .await;
    session.close().await;
    Ok(serde_json::to_value(answer?)?)
}
