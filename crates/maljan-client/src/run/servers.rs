//! A run's servers: each connected on first use and set up once, its cap and breaker kept
//! across the run's calls, a server whose connection was lost (a stdio server that died, an
//! HTTP session the server ended) connected again a bounded number of times.

use std::sync::Arc;
use std::time::Duration;

use maljan_breaker::CallGuard;
use maljan_mcp_transport::{CloseReport, TransportCounts};

use super::Connector;
use crate::card::ServerCard;
use crate::config::{ClientSettings, ServerConfig};
use crate::context::ConnectionContext;
use crate::error::ClientError;
use crate::outcome::ServerLoss;
use crate::server_connection::ServerConnection;

/// How many times a run connects a server again after its connection was lost: a stdio
/// server started anew, an HTTP server given a new session.
pub const MAX_RESTARTS: u32 = 2;

/// How long a run waits for a server whose connection was lost to exit, to say how it
/// ended.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// Why a run could not give a server's connection.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Unavailable {
    /// The configuration does not name it.
    #[error("server {server} is not configured (configured: {})", known.join(", "))]
    NotConfigured {
        /// The server asked for.
        server: String,
        /// The configured servers.
        known: Vec<String>,
    },
    /// Starting or setting it up failed.
    #[error("{cause}")]
    NotStarted {
        /// The server.
        server: String,
        /// Why, with what it last wrote on stderr.
        #[source]
        cause: Arc<ClientError>,
    },
    /// Its connection was lost more often than the run connects it again.
    #[error(
        "server {server} was lost {starts} times in this run and is not started again (at \
         most {MAX_RESTARTS} restarts); last: {last}"
    )]
    GaveUp {
        /// The server.
        server: String,
        /// How many times it was started.
        starts: u32,
        /// The last loss.
        last: ServerLoss,
    },
}

/// One configured server of a run.
#[derive(Debug)]
pub(crate) struct ServerSlot {
    config: ServerConfig,
    guard: Arc<CallGuard>,
    state: tokio::sync::Mutex<SlotState>,
}

#[derive(Debug, Default)]
struct SlotState {
    current: Option<Arc<ServerConnection>>,
    retired: Vec<Arc<ServerConnection>>,
    losses: Vec<ServerLoss>,
    starts: u32,
    last_failure: Option<String>,
    /// Why the server could not be started, when it could not.
    start_failed: Option<Arc<ClientError>>,
    card: Option<ServerCard>,
}

/// What a run learned of one server, at its end.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerRecord {
    /// The server's name.
    pub server: String,
    /// Its card, from its first successful setup.
    pub card: Option<ServerCard>,
    /// How many times it was connected again after its connection was lost.
    pub restarts: u32,
    /// Each connection lost, in order, with why.
    pub losses: Vec<ServerLoss>,
    /// Why it last stopped or failed to start, when it did.
    pub last_failure: Option<String>,
    /// Each connection's close report (its stdout counts among them), in order.
    pub connections: Vec<CloseReport>,
}

impl ServerRecord {
    /// The stdout counts of all its connections together.
    pub fn counts(&self) -> TransportCounts {
        let mut all = TransportCounts::default();
        for c in &self.connections {
            all.messages += c.counts.messages;
            all.stray += c.counts.stray;
            all.invalid += c.counts.invalid;
            all.oversized += c.counts.oversized;
            all.salvaged += c.counts.salvaged;
            all.blank += c.counts.blank;
        }
        all
    }
}

impl ServerSlot {
    pub(crate) fn new(config: ServerConfig, settings: &ClientSettings) -> Self {
        ServerSlot {
            config,
            guard: Arc::new(CallGuard::new(settings.breaker)),
            state: tokio::sync::Mutex::default(),
        }
    }

    /// The server's connection: set up on first use; connected again when it was lost (at
    /// most [`MAX_RESTARTS`] times); never again when it could not be started.
    /// Callers at the same time wait for the same setup.
    pub(crate) async fn connection(
        &self,
        connector: &dyn Connector,
        settings: &ClientSettings,
        context: &ConnectionContext,
    ) -> Result<Arc<ServerConnection>, Unavailable> {
        let mut state = self.state.lock().await;
        // A server that could not be started is not tried again: every later step fails
        // with the same words, so the failure is one.
        if let Some(cause) = &state.start_failed {
            return Err(Unavailable::NotStarted {
                server: self.config.name.clone(),
                cause: cause.clone(),
            });
        }
        if let Some(current) = &state.current {
            return Ok(current.clone());
        }
        if state.starts > MAX_RESTARTS
            && let Some(last) = state.losses.last()
        {
            return Err(Unavailable::GaveUp {
                server: self.config.name.clone(),
                starts: state.starts,
                last: last.clone(),
            });
        }
        state.starts += 1;
        let context = context.clone().with_call_guard(self.guard.clone());
        match connector.connect(&self.config, settings, context).await {
            Ok(connection) => {
                if state.card.is_none() {
                    state.card = Some(connection.card());
                }
                let connection = Arc::new(connection);
                state.current = Some(connection.clone());
                Ok(connection)
            }
            Err(e) => {
                let cause = Arc::new(e);
                state.last_failure = Some(cause.to_string());
                state.start_failed = Some(cause.clone());
                Err(Unavailable::NotStarted {
                    server: self.config.name.clone(),
                    cause,
                })
            }
        }
    }

    /// Says that `connection` was lost (a call failed with `connection_lost`): it is
    /// retired with how its server ended, and the next call connects the server again. Of
    /// the callers that find the same connection lost, the first tells, and is given the
    /// loss.
    pub(crate) async fn lost(
        &self,
        connection: &Arc<ServerConnection>,
        failure: &str,
    ) -> Option<ServerLoss> {
        let mut state = self.state.lock().await;
        let current = state
            .current
            .take_if(|current| Arc::ptr_eq(current, connection));
        let dead = current?;
        let exit = dead.wait_exit(EXIT_GRACE).await;
        let loss = ServerLoss {
            exit: exit.map(|status| status.to_string()),
            failure: failure.to_owned(),
            stderr_tail: dead.stderr_tail(),
        };
        tracing::warn!(server = self.config.name, "connection lost: {loss}");
        state.last_failure = Some(loss.to_string());
        state.losses.push(loss.clone());
        state.retired.push(dead);
        Some(loss)
    }

    /// Closes every connection the run made to the server, and says what it learned.
    pub(crate) async fn close(self) -> ServerRecord {
        let state = self.state.into_inner();
        let mut connections = Vec::new();
        for connection in state.retired.into_iter().chain(state.current) {
            match Arc::into_inner(connection) {
                Some(connection) => connections.push(connection.close().await),
                None => tracing::warn!(
                    server = self.config.name,
                    "a connection is still in use at the end of the run; it closes when dropped"
                ),
            }
        }
        ServerRecord {
            server: self.config.name,
            card: state.card,
            restarts: state.starts.saturating_sub(1),
            losses: state.losses,
            last_failure: state.last_failure,
            connections,
        }
    }
}
