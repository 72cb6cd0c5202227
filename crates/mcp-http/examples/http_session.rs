//! Calls one tool of an MCP server over Streamable HTTP and prints its result:
//!
//! ```text
//! cargo run -p maljan-mcp-http --example http_session -- URL TOOL ARGUMENTS_JSON
//! cargo run -p maljan-mcp-http --example http_session -- http://127.0.0.1:8080/mcp capabilities '{}'
//! ```

use std::time::Duration;

use maljan_mcp_http::{HttpConfig, HttpTransport, Session, SessionSettings};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, tool, arguments] = &args[..] else {
        return Err("usage: http_session URL TOOL ARGUMENTS_JSON".into());
    };
    let server = HttpTransport::new(HttpConfig::new("remote", url))?;
    let session = Session::set_up(server, SessionSettings::default()).await?;
    let arguments = serde_json::from_str(arguments)?;
    let answer = session
        .call_tool(tool, arguments, Duration::from_secs(30))
        .await?;
    println!("{}", serde_json::to_string_pretty(&answer)?);
    session.close().await;
    Ok(())
}
