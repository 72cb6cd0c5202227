//! A run's servers: each connected on first use and set up once, its cap and breaker kept
//! across the run's calls, a stdio server that died started again a bounded number of
//! times.

use std::sync::Arc;

use maljan_breaker::CallGuard;
use maljan_mcp_transport::{CloseReport, TransportCounts};

use crate::{
    ClientSettings, ConnectionContext, ServerCard, ServerConfig, ServerConnection, ServerTransport,
};

/// How many times a run starts a stdio server again after it died.
pub const MAX_RESTARTS: u32 = 2;

/// Why a run could not give a server's connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
    #[error("{reason}")]
    NotStarted {
        /// The server.
        server: String,
        /// Why, with what it last wrote on stderr.
        reason: String,
    },
    /// It died more often than the run starts it again.
    #[error(
        "server {server} died {starts} times in this run and is not started again (at most \
         {MAX_RESTARTS} restarts); last: {last}"
    )]
    GaveUp {
        /// The server.
        server: String,
        /// How many times it was started.
        starts: u32,
        /// Why it last stopped or failed to start.
        last: String,
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
    /// The current connection was lost: the next call starts the server again.
    lost: Option<String>,
    retired: Vec<Arc<ServerConnection>>,
    starts: u32,
    last_failure: Option<String>,
    /// Why the server could not be started, when it could not.
    start_failed: Option<String>,
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
    /// How many times it was started again after it died.
    pub restarts: u32,
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

    /// Only a stdio server is started again: an HTTP server is not this client's to start.
    fn restarts_allowed(&self) -> bool {
        matches!(self.config.transport, ServerTransport::Stdio(_))
    }

    /// The server's connection: set up on first use; started again when it died (a stdio
    /// server, at most [`MAX_RESTARTS`] times); never again when it could not be started.
    /// Callers at the same time wait for the same setup.
    pub(crate) async fn connection(
        &self,
        settings: &ClientSettings,
        context: &ConnectionContext,
    ) -> Result<Arc<ServerConnection>, Unavailable> {
        let mut state = self.state.lock().await;
        // A server that could not be started is not tried again: every later step fails
        // with the same words, so the failure is one.
        if let Some(reason) = &state.start_failed {
            return Err(Unavailable::NotStarted {
                server: self.config.name.clone(),
                reason: reason.clone(),
            });
        }
        if let Some(lost) = state.lost.take() {
            if let Some(dead) = state.current.take() {
                state.retired.push(dead);
            }
            state.last_failure = Some(lost);
        }
        if let Some(current) = &state.current {
            return Ok(current.clone());
        }
        if state.starts > MAX_RESTARTS {
            return Err(Unavailable::GaveUp {
                server: self.config.name.clone(),
                starts: state.starts,
                last: state.last_failure.clone().unwrap_or_default(),
            });
        }
        state.starts += 1;
        let context = context.clone().with_call_guard(self.guard.clone());
        match ServerConnection::connect(&self.config, settings.clone(), context).await {
            Ok(connection) => {
                if state.card.is_none() {
                    state.card = connection.card().ok();
                }
                let connection = Arc::new(connection);
                state.current = Some(connection.clone());
                Ok(connection)
            }
            Err(e) => {
                let reason = e.to_string();
                state.last_failure = Some(reason.clone());
                state.start_failed = Some(reason.clone());
                Err(Unavailable::NotStarted {
                    server: self.config.name.clone(),
                    reason,
                })
            }
        }
    }

    /// Says that `connection` was lost (a call failed with `connection_lost`): a stdio
    /// server is started again for the next call.
    pub(crate) async fn lost(&self, connection: &Arc<ServerConnection>, why: &str) {
        if !self.restarts_allowed() {
            return;
        }
        let mut state = self.state.lock().await;
        if state
            .current
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, connection))
        {
            state.lost = Some(why.to_owned());
        }
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
            last_failure: state.last_failure,
            connections,
        }
    }
}
