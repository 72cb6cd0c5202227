//! Maljan's MCP client: a thin composition of the transport crates.
//!
//! A [`ServerConnection`] starts a server, sets it up exactly once (`initialize`,
//! `notifications/initialized`, every `tools/list` page, then the `capabilities` manifest
//! when offered), shows its [`ServerCard`], and calls its tools. A call waits the manifest's
//! `timeout_s` (the configured default when null), tells the server with
//! `notifications/cancelled` when it gives up, and returns the answer read by Maljan's
//! rules: ok, or failed with a code, a message and a remediation.
//!
//! ```no_run
//! # async fn run() -> Result<(), maljan_client::ClientError> {
//! use maljan_client::{ClientSettings, ServerConfig, ServerConnection};
//! use maljan_mcp_stdio::ServerCommand;
//!
//! let config = ServerConfig::stdio("sidecar", ServerCommand::new("maljan-sidecar"));
//! let server = ServerConnection::connect(&config, ClientSettings::default()).await?;
//! for tool in server.model_tools()? {
//!     println!("{}", tool.name);
//! }
//! server.close().await;
//! # Ok(()) }
//! ```

mod card;
mod config;
mod connection;
mod error;
mod job;
mod link;
mod pipeline;
mod transfer;

pub use card::{CardTool, ServerCard, UnavailableTool};
pub use config::{ClientSettings, HttpServer, ServerConfig, ServerTransport};
pub use connection::{ServerConnection, ServerSetup};
pub use error::ClientError;
pub use job::{Job, Sample, TakenFile};
pub use maljan_breaker::{BreakerSettings, BreakerState};
pub use maljan_ledger::Ledger;
pub use maljan_mcp_http::redact_credentials;
pub use maljan_mcp_stdio::{CloseReport, LineCounts, ServerCommand, StdioConfig};
pub use maljan_staging::SampleMount;
pub use transfer::{ProgressReporter, TransferProgress};
