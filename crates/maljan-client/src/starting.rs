//! Starting a configured server's transport: a child process over stdio (in the job's
//! directory when there is a job), or a connection over Streamable HTTP.

use maljan_mcp_proto::mcp::ServerRequestPolicy;
#[cfg(feature = "stdio")]
use maljan_mcp_stdio::{ServerCommand, StdioTransport};
use maljan_mcp_transport::Transport;

#[cfg(feature = "http")]
use crate::config::HttpServer;
use crate::config::{ServerConfig, ServerTransport};
use crate::context::ConnectionContext;
use crate::error::ClientError;

/// The environment variable naming a local server's staging directory (as the server kit
/// reads it).
#[cfg(feature = "stdio")]
const JOB_DIR_ENV: &str = "MALJAN_JOB_DIR";
/// The environment variable naming the directories, besides its own, a local server may
/// read (as the server kit reads it): the job's.
#[cfg(feature = "stdio")]
const ROOTS_ENV: &str = "MALJAN_ROOTS";

/// The transport to the server `config` names, its own requests answered by
/// `server_requests`.
pub(crate) fn start_transport(
    config: &ServerConfig,
    server_requests: ServerRequestPolicy,
    #[cfg_attr(not(feature = "stdio"), allow(unused_variables))] context: &ConnectionContext,
) -> Result<Box<dyn Transport>, ClientError> {
    match &config.transport {
        #[cfg(feature = "stdio")]
        ServerTransport::Stdio(command) => spawn(config, command, server_requests, context),
        #[cfg(feature = "http")]
        ServerTransport::Http(http) => reach(config, http, server_requests),
    }
}

/// Starts a stdio server; with a job, in a directory of its own, reading the job's.
#[cfg(feature = "stdio")]
fn spawn(
    config: &ServerConfig,
    command: &ServerCommand,
    server_requests: ServerRequestPolicy,
    context: &ConnectionContext,
) -> Result<Box<dyn Transport>, ClientError> {
    let mut command = command.clone();
    if let Some(job) = context.job() {
        let dir = job.server_dir(&config.name);
        std::fs::create_dir_all(&dir).map_err(|source| ClientError::JobDirectory {
            path: dir.clone(),
            source,
        })?;
        // The server writes in its own directory and reads the whole job's (the sample, the
        // artefact store): nothing else of this host.
        command = command
            .env(JOB_DIR_ENV, dir.display().to_string())
            .env(ROOTS_ENV, job.dir().display().to_string());
    }
    let mut stdio = config.stdio.clone();
    stdio.server_requests = server_requests;
    Ok(Box::new(StdioTransport::spawn(&command, stdio)?))
}

/// A connection to a Streamable HTTP server, its bearer token read from the environment.
#[cfg(feature = "http")]
fn reach(
    config: &ServerConfig,
    http: &HttpServer,
    server_requests: ServerRequestPolicy,
) -> Result<Box<dyn Transport>, ClientError> {
    let mut http_config = maljan_mcp_http::HttpConfig::new(&config.name, &http.url);
    http_config.headers = http.headers.clone();
    http_config.server_requests = server_requests;
    http_config.authorizer = http.authorizer.as_ref().map(|a| a.0.clone());
    if let Some(var) = &http.bearer_token_env {
        let token = std::env::var(var).map_err(|_| ClientError::MissingToken {
            server: config.name.clone(),
            variable: var.clone(),
        })?;
        http_config.bearer_token = Some(maljan_mcp_http::BearerToken::Value(token));
    }
    let transport = maljan_mcp_http::HttpTransport::new(http_config).map_err(ClientError::Http)?;
    Ok(Box::new(transport))
}
