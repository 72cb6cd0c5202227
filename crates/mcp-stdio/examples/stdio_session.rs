//! Calls one tool of a stdio MCP server and prints its result:
//!
//! ```text
//! cargo run -p maljan-mcp-stdio --example stdio_session -- TOOL ARGUMENTS_JSON PROGRAM [ARG…]
//! cargo run -p maljan-mcp-stdio --example stdio_session -- capabilities '{}' maljan-sidecar
//! ```

use std::time::Duration;

use maljan_mcp_stdio::{ServerCommand, Session, SessionSettings, StdioConfig, StdioTransport};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [tool, arguments, program, program_args @ ..] = &args[..] else {
        return Err("usage: stdio_session TOOL ARGUMENTS_JSON PROGRAM [ARG…]".into());
    };
    let command = program_args
        .iter()
        .fold(ServerCommand::new(program), |command, arg| command.arg(arg));
    let server = StdioTransport::spawn(&command, StdioConfig::named(program))?;
    let session = Session::set_up(server, SessionSettings::default()).await?;
    let arguments = serde_json::from_str(arguments)?;
    let answer = session
        .call_tool(tool, arguments, Duration::from_secs(30))
        .await?;
    println!("{}", serde_json::to_string_pretty(&answer)?);
    session.close().await;
    Ok(())
}
