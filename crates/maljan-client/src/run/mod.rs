//! A run: one job across every configured server.

mod connector;
mod resolve;
mod schedule;
mod servers;
mod steps;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use maljan_mcp_proto::maljan::{ErrorCode, ToolAnswer};
use serde_json::Value;

pub use connector::{Configured, Connector};
pub use servers::{MAX_RESTARTS, ServerRecord, Unavailable};

use crate::call::{CallOptions, CallTrace};
use crate::config::{ClientSettings, ServerConfig};
use crate::context::ConnectionContext;
use crate::error::ClientError;
use crate::events::{Recorder, RunEvent};
use crate::job::Job;
use crate::server_connection::ServerConnection;
use crate::trace::TraceParent;
use servers::ServerSlot;

/// One job across several servers: each configured server connected on first use and set
/// up once (its manifest read once), its concurrency cap and breaker held across all of the
/// run's calls (a resting server stays resting), a stdio server that dies started again up
/// to [`MAX_RESTARTS`] times, calls to different servers at once. Every call is ledgered
/// with the job, the run and its step. [`execute`](Run::execute) carries out a
/// [`Pack`](crate::pack::Pack); [`finish`](Run::finish) closes every connection.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use maljan_client::{ClientSettings, ConnectionContext, Job, Pack, Run, ServerCommand, ServerConfig};
/// let job = Arc::new(Job::create("/tmp/job-42")?);
/// job.add_sample(std::path::Path::new("sample.zip"))?;
/// let servers = [ServerConfig::stdio("sidecar", ServerCommand::new("maljan-sidecar"))];
/// let run = Run::new(job, servers, ClientSettings::default(), ConnectionContext::default());
/// let pack = Pack::load("triage.toml")?;
/// let outcomes = run.execute(&pack).await?;
/// let end = run.finish().await;
/// println!("{} steps, {} servers", outcomes.len(), end.servers.len());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Run {
    id: String,
    job: Arc<Job>,
    settings: ClientSettings,
    context: ConnectionContext,
    servers: BTreeMap<String, ServerSlot>,
    connector: Arc<dyn Connector>,
    /// The calls its steps made (or were refused for the run's cap): bounded by
    /// [`RunLimits::max_calls`](crate::config::RunLimits::max_calls).
    calls_made: AtomicUsize,
}

/// What a run learned, once it is finished.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RunEnd {
    /// The run's id.
    pub id: String,
    /// Each server the run used (or tried to), by name.
    pub servers: Vec<ServerRecord>,
}

/// A run id: the time in milliseconds, the process and a count, in hex; time-ordered.
fn new_run_id() -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!(
        "{millis:x}-{:x}-{:x}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    )
}

impl Run {
    /// A run of `job` over `servers`; `context` gives the ledger and where progress goes
    /// (the run puts in the job and itself).
    pub fn new(
        job: Arc<Job>,
        servers: impl IntoIterator<Item = ServerConfig>,
        settings: ClientSettings,
        context: ConnectionContext,
    ) -> Run {
        let id = new_run_id();
        if let Some(cap) = settings.run.max_taken_bytes {
            job.store().set_byte_cap(cap);
        }
        // The caller's trace, or one of the run's own: every call of the run is a span of it.
        let trace = context
            .trace()
            .copied()
            .unwrap_or_else(TraceParent::new_trace);
        let context = context
            .with_job(job.clone())
            .with_run(id.clone())
            .with_trace(trace);
        let servers = servers
            .into_iter()
            .map(|config| (config.name.clone(), ServerSlot::new(config, &settings)))
            .collect();
        Run {
            id,
            job,
            settings,
            context,
            servers,
            connector: Arc::new(Configured),
            calls_made: AtomicUsize::new(0),
        }
    }

    /// The run takes `id` instead of a new one: a run carried out for a queue keeps the
    /// queue's id, so that its ledger entries and report name it. Give it before the first
    /// call.
    pub fn with_id(mut self, id: impl Into<String>) -> Run {
        self.id = id.into();
        self.context = self.context.with_run(self.id.clone());
        self
    }

    /// The run connects its servers with `connector` instead of as their configuration says
    /// ([`Configured`]): a test drives a whole run over the in-memory transport so.
    pub fn connecting_with(mut self, connector: impl Connector + 'static) -> Run {
        self.connector = Arc::new(connector);
        self
    }

    /// The run tells `recorder` what it learns as it learns it ([`RunEvent`]): each step
    /// started and finished, each server lost, and what its connections do (calls, files
    /// taken, uploads, degradations). Add recorders before the run's first call.
    pub fn recording_to(mut self, recorder: impl Recorder + 'static) -> Run {
        self.context = self.context.recording_to(Arc::new(recorder));
        self
    }

    fn record(&self, event: &RunEvent<'_>) {
        self.context.record(event);
    }

    /// The run's id, as its ledger entries name it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The job.
    pub fn job(&self) -> &Arc<Job> {
        &self.job
    }

    /// The configured servers' names.
    pub fn server_names(&self) -> impl Iterator<Item = &str> {
        self.servers.keys().map(String::as_str)
    }

    fn slot(&self, server: &str) -> Result<&ServerSlot, Unavailable> {
        self.servers
            .get(server)
            .ok_or_else(|| Unavailable::NotConfigured {
                server: server.to_owned(),
                known: self.servers.keys().cloned().collect(),
            })
    }

    /// The connection to `server`: set up on first use, started again when it died.
    pub async fn connection(&self, server: &str) -> Result<Arc<ServerConnection>, Unavailable> {
        self.slot(server)?
            .connection(&*self.connector, &self.settings, &self.context)
            .await
    }

    /// Calls `tool` of `server` through its connection ([`ServerConnection::call_with`]).
    /// A server that cannot be used, and a call refused before it was made (an unknown
    /// tool), are failed answers too, so a run goes on: the first with
    /// `server_unavailable`, the second with `bad_argument`.
    ///
    /// A call that finds the connection lost has the server connected again (a stdio
    /// server started anew, at most [`MAX_RESTARTS`] times a run). A call that never reached
    /// the lost server (it waited under the cap, or was not yet written) goes to the new
    /// one; a call the server had when it died fails `connection_lost` and is not sent
    /// again: it may be what killed the server.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> ToolAnswer {
        self.call_on(server, tool, arguments, options)
            .await
            .0
            .answer
    }

    /// [`call`](Self::call), with the connection the call went on when there was one.
    async fn call_on(
        &self,
        server: &str,
        tool: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> (CallTrace, Option<Arc<ServerConnection>>) {
        let failed = |failure| CallTrace::of(ToolAnswer::failed(failure));
        let mut options = options.clone();
        options.resend_unsent = true;
        // Each pass that finds the connection lost retires it, and the slot connects again
        // at most MAX_RESTARTS times: the loop ends.
        loop {
            let connection = match self.connection(server).await {
                Ok(connection) => connection,
                Err(unavailable) => return (failed(unavailable_failure(&unavailable)), None),
            };
            let trace = match connection
                .call_with(tool, arguments.clone(), &options)
                .await
            {
                Ok(trace) => trace,
                Err(refused) => failed(refused_failure(&refused)),
            };
            let lost = trace
                .answer
                .failure()
                .filter(|f| f.code == ErrorCode::ConnectionLost);
            let Some(failure) = lost else {
                return (trace, Some(connection));
            };
            if let Ok(slot) = self.slot(server)
                && let Some(loss) = slot.lost(&connection, &failure.message).await
            {
                self.job.uploads().forget(server);
                self.record(&RunEvent::ServerLost {
                    server,
                    loss: &loss,
                });
            }
            if trace.written {
                return (trace, Some(connection));
            }
        }
    }

    /// Closes every connection and says what the run learned of each server.
    pub async fn finish(self) -> RunEnd {
        let mut servers = Vec::new();
        for (_, slot) in self.servers {
            servers.push(slot.close().await);
        }
        RunEnd {
            id: self.id,
            servers,
        }
    }
}

/// The failure of a step whose server cannot be used.
fn unavailable_failure(unavailable: &Unavailable) -> maljan_mcp_proto::maljan::ToolFailure {
    let remediation = match unavailable {
        Unavailable::NotConfigured { .. } => {
            "add the server to the configuration, or call a configured one"
        }
        _ => {
            "check the server's command and its stderr above (maljan probe SERVER); the rest of the run went on"
        }
    };
    maljan_mcp_proto::maljan::ToolFailure::new(
        ErrorCode::Other("server_unavailable".to_owned()),
        unavailable.to_string(),
        Some(remediation.to_owned()),
    )
}

/// The failure of a call refused before it was made.
fn refused_failure(refused: &ClientError) -> maljan_mcp_proto::maljan::ToolFailure {
    maljan_mcp_proto::maljan::ToolFailure::new(
        ErrorCode::BadArgument,
        refused.to_string(),
        Some("call one of the server's tools (maljan tools SERVER)".to_owned()),
    )
}
