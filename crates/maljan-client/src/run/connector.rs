//! How a run connects its servers: a [`Connector`] starts one server and sets it up; the
//! run calls it at a server's first use and after each loss. [`Configured`] does what the
//! server's configuration says (a process, an HTTP endpoint); a test gives a connector of its
//! own to drive a whole run over the in-memory transport, with no process.

use std::fmt;

use maljan_mcp_transport::BoxFuture;

use crate::config::{ClientSettings, ServerConfig};
use crate::context::ConnectionContext;
use crate::error::ClientError;
use crate::server_connection::ServerConnection;

/// Starts and sets up the connection to one server of a run.
///
/// `context` is the run's (its job, ledger, trace) with the server's call guard, which must
/// go into the connection so the server's cap and breaker hold across its restarts.
///
/// ```
/// use maljan_client::{
///     ClientError, ClientSettings, ConnectionContext, Connector, ServerConfig, ServerConnection,
/// };
/// use maljan_mcp_transport::{BoxFuture, memory};
///
/// /// Connects every server over the in-memory transport (a test plays the server).
/// #[derive(Debug)]
/// struct InMemory;
///
/// impl Connector for InMemory {
///     fn connect<'a>(
///         &'a self,
///         config: &'a ServerConfig,
///         settings: &'a ClientSettings,
///         context: ConnectionContext,
///     ) -> BoxFuture<'a, Result<ServerConnection, ClientError>> {
///         Box::pin(async move {
///             let (transport, _peer) = memory::pair(config.name.as_str());
///             ServerConnection::over(transport, settings.clone(), context).set_up().await
///         })
///     }
/// }
/// ```
pub trait Connector: fmt::Debug + Send + Sync {
    /// Starts the server `config` names and sets it up; an error says why it cannot be used
    /// (the run does not try it again).
    fn connect<'a>(
        &'a self,
        config: &'a ServerConfig,
        settings: &'a ClientSettings,
        context: ConnectionContext,
    ) -> BoxFuture<'a, Result<ServerConnection, ClientError>>;
}

/// Connects each server as its configuration says: a stdio server started as a process, an
/// HTTP server reached at its URL ([`ServerConnection::connect`]). What a run uses unless
/// given another.
#[derive(Debug, Clone, Copy, Default)]
pub struct Configured;

impl Connector for Configured {
    fn connect<'a>(
        &'a self,
        config: &'a ServerConfig,
        settings: &'a ClientSettings,
        context: ConnectionContext,
    ) -> BoxFuture<'a, Result<ServerConnection, ClientError>> {
        Box::pin(ServerConnection::connect(config, settings.clone(), context))
    }
}
