//! An MCP server written with rmcp: `echo`, `get-sum` and `trigger-long-running-operation`
//! (progress notifications), as the reference servers name them. `stdio`, or `http PORT`
//! (Streamable HTTP at `/mcp` on loopback).

use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{ProgressNotificationParam, ServerCapabilities, ServerConfig};
use rmcp::service::RequestContext;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{RoleServer, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct EchoRequest {
    message: String,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct SumRequest {
    a: f64,
    b: f64,
}

#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
struct LongRequest {
    duration: f64,
    steps: u32,
}

#[derive(Debug, Clone)]
struct Echo {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Echo {
    fn new() -> Self {
        Echo {
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Echoes its message")]
    fn echo(&self, Parameters(EchoRequest { message }): Parameters<EchoRequest>) -> String {
        format!("Echo: {message}")
    }

    #[tool(name = "get-sum", description = "Adds two numbers")]
    fn get_sum(&self, Parameters(SumRequest { a, b }): Parameters<SumRequest>) -> String {
        (a + b).to_string()
    }

    #[tool(
        name = "trigger-long-running-operation",
        description = "Sleeps in steps, reporting progress"
    )]
    async fn long_running(
        &self,
        Parameters(LongRequest { duration, steps }): Parameters<LongRequest>,
        context: RequestContext<RoleServer>,
    ) -> String {
        let token = context.meta.get_progress_token();
        for step in 1..=steps {
            tokio::time::sleep(Duration::from_secs_f64(duration / f64::from(steps.max(1)))).await;
            if let Some(token) = &token {
                let mut progress = ProgressNotificationParam::new(token.clone(), f64::from(step));
                progress.total = Some(f64::from(steps));
                let _ = context.peer.notify_progress(progress).await;
            }
        }
        format!("done in {steps} steps")
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Echo {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("http") => {
            let port: u16 = args.get(1).ok_or("http needs a PORT")?.parse()?;
            let service: StreamableHttpService<Echo, LocalSessionManager> =
                StreamableHttpService::new(
                    || Ok(Echo::new()),
                    Default::default(),
                    StreamableHttpServerConfig::default(),
                );
            let router = axum::Router::new().nest_service("/mcp", service);
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
            eprintln!("rmcp-echo-server listening on http://127.0.0.1:{port}/mcp");
            axum::serve(listener, router).await?;
        }
        _ => {
            Echo::new()
                .serve(rmcp::transport::stdio())
                .await?
                .waiting()
                .await?;
        }
    }
    Ok(())
}
