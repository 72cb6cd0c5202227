//! A connection to one MCP server: started, set up once, and composed as a stack of call
//! layers (staging → ledger → admission → timeout → transport).

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use maljan_breaker::{BreakerState, CallGuard};
use maljan_mcp_proto::jsonrpc::Notification;
use maljan_mcp_proto::maljan::{ToolAnswer, ToolFailure, is_platform_primitive};
use maljan_mcp_proto::mcp::Tool;
use maljan_mcp_stdio::StdioTransport;
use maljan_mcp_transport::{CloseReport, Transport, TransportCounts};
use maljan_staging::{SampleMount, ToolCaller};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::admission::Admission;
use crate::call::{CallOptions, CallService, CallTrace, ToolCall, not_an_object};
use crate::card::ServerCard;
use crate::config::{ClientSettings, EraChoice, ServerConfig, ServerTransport};
use crate::context::ConnectionContext;
use crate::error::ClientError;
use crate::job::TakenFile;
use crate::known_eras::KnownEras;
use crate::ledgering::Ledgered;
use crate::reach::ServerReach;
use crate::setup::{ServerSetup, SetupPlan, set_up};
use crate::staging::Staged;
use crate::timeout::Timeout;
use crate::trace::TraceParent;

/// The environment variable naming a local server's staging directory (as the server kit
/// reads it).
const JOB_DIR_ENV: &str = "MALJAN_JOB_DIR";
/// The environment variable naming the directories, besides its own, a local server may
/// read (as the server kit reads it): the job's.
const ROOTS_ENV: &str = "MALJAN_ROOTS";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetupState {
    Fresh,
    Connecting,
    Connected,
    Failed,
}

/// The call layers, outermost first.
type CallStack = Staged<Ledgered<Admission<Timeout>>>;

/// A connection to one MCP server, set up exactly once.
///
/// A call goes one way down a stack of layers, each in its own module: staging (path
/// arguments uploaded or rewritten), the ledger (every call recorded), admission (the
/// concurrency cap and the breaker), the timeout (the tool's wait, and
/// `notifications/cancelled` when it is given up), and the [`Transport`].
///
/// ```no_run
/// # async fn run() -> Result<(), maljan_client::ClientError> {
/// use maljan_client::{ClientSettings, ConnectionContext, ServerConfig, ServerConnection};
/// use maljan_mcp_stdio::ServerCommand;
///
/// let config = ServerConfig::stdio("sidecar", ServerCommand::new("maljan-sidecar"));
/// let server =
///     ServerConnection::connect(&config, ClientSettings::default(), ConnectionContext::default())
///         .await?;
/// let card = server.card()?;
/// println!("{} offers {} tools", card.server, card.tools.len());
/// let answer = server
///     .call("file_info", serde_json::json!({"path": "/etc/hostname"}))
///     .await?;
/// println!("{}", answer.value);
/// server.close().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ServerConnection {
    name: String,
    settings: ClientSettings,
    stack: CallStack,
    notifications: Option<mpsc::Receiver<Notification>>,
    state: Mutex<SetupState>,
    setup: OnceLock<ServerSetup>,
    job_dir: Option<PathBuf>,
    trace: Option<TraceParent>,
    known_eras: Arc<KnownEras>,
}

impl ToolCaller for ServerConnection {
    /// A platform primitive through the ledger and admission layers (not staging): how the
    /// transfer functions of `maljan-staging` move files with this connection. A failed
    /// answer is the failure.
    async fn call_tool(&self, tool: &str, arguments: Value) -> Result<Value, ToolFailure> {
        self.stack.primitives().call_tool(tool, arguments).await
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ServerConnection {
    /// Starts the server and sets it up. When setup fails, the server is closed and the
    /// error says how it exited and what it last wrote on stderr.
    pub async fn connect(
        config: &ServerConfig,
        settings: ClientSettings,
        context: ConnectionContext,
    ) -> Result<ServerConnection, ClientError> {
        let server = Self::start(config, settings, context)?;
        match server.setup().await {
            Ok(_) => Ok(server),
            Err(ClientError::SetupFailed {
                server: name,
                step,
                cause,
                ..
            }) => {
                let report = server.close().await;
                Err(ClientError::SetupFailed {
                    server: name,
                    step,
                    cause,
                    exit: report.status.map(|s| format!("exited with {s}")),
                    stderr_tail: report.stderr_tail,
                })
            }
            Err(other) => Err(other),
        }
    }

    /// Starts the server without setting it up.
    pub fn start(
        config: &ServerConfig,
        settings: ClientSettings,
        context: ConnectionContext,
    ) -> Result<ServerConnection, ClientError> {
        let server_requests = settings.server_requests(context.job().map(|job| job.dir()));
        let transport: Box<dyn Transport> = match &config.transport {
            ServerTransport::Stdio(command) => {
                let mut command = command.clone();
                if let Some(job) = context.job() {
                    let dir = job.server_dir(&config.name);
                    std::fs::create_dir_all(&dir).map_err(|source| ClientError::JobDirectory {
                        path: dir.clone(),
                        source,
                    })?;
                    // The server writes in its own directory and reads the whole job's (the
                    // sample, the artefact store): nothing else of this host.
                    command = command
                        .env(JOB_DIR_ENV, dir.display().to_string())
                        .env(ROOTS_ENV, job.dir().display().to_string());
                }
                let mut stdio = config.stdio.clone();
                stdio.server_requests = server_requests;
                Box::new(StdioTransport::spawn(&command, stdio)?)
            }
            ServerTransport::Http(http) => {
                let mut http_config = maljan_mcp_http::HttpConfig::new(&config.name, &http.url);
                http_config.headers = http.headers.clone();
                http_config.server_requests = server_requests;
                if let Some(var) = &http.bearer_token_env {
                    let token = std::env::var(var).map_err(|_| ClientError::MissingToken {
                        server: config.name.clone(),
                        variable: var.clone(),
                    })?;
                    http_config.bearer_token = Some(token);
                }
                Box::new(
                    maljan_mcp_http::HttpTransport::new(http_config).map_err(ClientError::Http)?,
                )
            }
        };
        let remote = !matches!(config.transport, ServerTransport::Stdio(_));
        let mut server = Self::over_boxed(transport, settings, context);
        server.stack.set_reach(remote, config.sample_mount.clone());
        Ok(server)
    }

    /// Wraps a transport (for example a [`StdioTransport`] over in-memory pipes, or
    /// [`maljan_mcp_transport::memory::pair`]'s), without setting it up.
    pub fn over(
        transport: impl Transport + 'static,
        settings: ClientSettings,
        context: ConnectionContext,
    ) -> ServerConnection {
        Self::over_boxed(Box::new(transport), settings, context)
    }

    fn over_boxed(
        mut transport: Box<dyn Transport>,
        settings: ClientSettings,
        context: ConnectionContext,
    ) -> ServerConnection {
        let name = transport.server().to_owned();
        let notifications = transport.take_incoming();
        let job_dir = context.job().map(|job| job.dir().to_owned());
        let trace = context.trace().copied();
        let known_eras = context.known_eras().clone();
        let place = ServerReach {
            server: name.clone(),
            remote: false,
            sample_mount: None,
        };
        let stack = Staged::new(
            Ledgered::new(
                Admission::new(
                    Timeout::new(transport, settings.default_timeout),
                    &name,
                    context
                        .call_guard()
                        .cloned()
                        .unwrap_or_else(|| Arc::new(CallGuard::new(settings.breaker))),
                ),
                &name,
                context.ledger().clone(),
                context.scope(),
            ),
            place,
            context,
        );
        ServerConnection {
            name,
            settings,
            stack,
            notifications,
            state: Mutex::new(SetupState::Fresh),
            setup: OnceLock::new(),
            job_dir,
            trace,
            known_eras,
        }
    }

    /// Declares the server elsewhere: it does not share this host's files, so path
    /// arguments inside the job's directory are uploaded to it and the files it names are
    /// taken through `get_file`. (A connection over pipes to a remote process, say.)
    pub fn remote(mut self, sample_mount: Option<SampleMount>) -> Self {
        self.stack.set_reach(true, sample_mount);
        self
    }

    /// The server's configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn wire(&self) -> &Timeout {
        self.stack.get_ref().get_ref().get_ref()
    }

    /// Sets the connection up: `initialize`, `notifications/initialized`, every `tools/list`
    /// page, then `capabilities` when offered. Done once: a second call while connected or
    /// connecting is refused.
    pub async fn setup(&self) -> Result<&ServerSetup, ClientError> {
        {
            let mut state = lock(&self.state);
            let refused = match *state {
                SetupState::Fresh => None,
                SetupState::Connecting => Some("connecting"),
                SetupState::Connected => Some("connected"),
                SetupState::Failed => Some("a connection whose setup failed"),
            };
            if let Some(state) = refused {
                return Err(ClientError::AlreadySetUp {
                    server: self.name.clone(),
                    state,
                });
            }
            *state = SetupState::Connecting;
        }
        let origin = self.wire().get_ref().origin();
        let known_legacy = origin
            .as_deref()
            .and_then(|o| self.known_eras.get(o))
            .is_some_and(|v| !v.is_modern());
        let plan = SetupPlan {
            client_info: &self.settings.client_info,
            policy: self.settings.server_requests(self.job_dir.as_deref()),
            wait: self.settings.setup_timeout,
            era: match self.settings.era {
                EraChoice::Auto if known_legacy => EraChoice::Legacy,
                chosen => chosen,
            },
            discover_wait: self
                .settings
                .discover_timeout
                .min(self.settings.setup_timeout),
        };
        let result = set_up(self.wire(), plan).await;
        if let (Ok(setup), Some(origin)) = (&result, origin) {
            self.known_eras.remember(&origin, setup.protocol);
        }
        let mut state = lock(&self.state);
        match result {
            Ok(setup) => {
                *state = SetupState::Connected;
                self.wire().set_tool_waits(setup.tool_waits());
                self.stack.get_ref().set_protocol(setup.protocol);
                self.stack
                    .set_tools(setup.tools.iter().map(|t| t.name.clone()).collect());
                Ok(self.setup.get_or_init(|| setup))
            }
            Err((step, cause)) => {
                *state = SetupState::Failed;
                Err(ClientError::SetupFailed {
                    server: self.name.clone(),
                    step,
                    cause: Box::new(cause),
                    exit: None,
                    stderr_tail: self.wire().get_ref().stderr_tail(),
                })
            }
        }
    }

    /// What setup learned, once it is done.
    pub fn setup_info(&self) -> Option<&ServerSetup> {
        self.setup.get()
    }

    fn require_setup(&self) -> Result<&ServerSetup, ClientError> {
        self.setup.get().ok_or_else(|| ClientError::NotSetUp {
            server: self.name.clone(),
        })
    }

    /// The tools a model may see: every tool but the platform primitives.
    pub fn model_tools(&self) -> Result<Vec<&Tool>, ClientError> {
        Ok(self
            .require_setup()?
            .tools
            .iter()
            .filter(|t| !is_platform_primitive(&t.name))
            .collect())
    }

    /// The server card.
    pub fn card(&self) -> Result<ServerCard, ClientError> {
        let setup = self.require_setup()?;
        let transport = self.wire().get_ref();
        Ok(ServerCard::new(
            &self.name,
            setup,
            transport.kind().as_str(),
            transport.counts(),
        ))
    }

    /// How long a call to `tool` waits: the manifest's `timeout_s`, else the default.
    pub fn timeout_for(&self, tool: &str) -> Duration {
        self.wire().wait_for(tool)
    }

    /// Calls a tool through the whole stack and reads its answer by Maljan's rules.
    ///
    /// Path arguments inside the job's directory are staged for a server elsewhere. The
    /// call waits for a slot under the concurrency cap (FIFO), is refused at once with
    /// `server_resting` while the server rests, waits the manifest's `timeout_s` (the
    /// configured default when null), tells the server with `notifications/cancelled` when
    /// it gives up, and is recorded in the ledger whatever happened (strings over 64 KiB,
    /// such as file chunks, recorded by their length only). A failed call (the tool's error
    /// envelope, a JSON-RPC error, no answer, a lost connection, an invalid answer, a
    /// resting server) is a failed [`ToolAnswer`] with its code, not an `Err`.
    ///
    /// `arguments` must be a JSON object (or null for none). A platform primitive
    /// (`get_file`, `put_sample*`, `capabilities`) is refused by name
    /// ([`ClientError::PlatformPrimitive`]): this is the model-facing call, and only staging
    /// moves files.
    pub async fn call(&self, tool: &str, arguments: Value) -> Result<ToolAnswer, ClientError> {
        self.call_with(tool, arguments, &CallOptions::default())
            .await
    }

    /// [`call`](Self::call) as part of a run's step, or waiting another time than the
    /// tool's own (see [`CallOptions`]).
    pub async fn call_with(
        &self,
        tool: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<ToolAnswer, ClientError> {
        self.call_traced(tool, arguments, options)
            .await
            .map(|trace| trace.answer)
    }

    /// [`call_with`](Self::call_with), saying also what the call was sent and how long it
    /// waited under the cap (for a run's report).
    pub async fn call_traced(
        &self,
        tool: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<CallTrace, ClientError> {
        if is_platform_primitive(tool) {
            return Err(ClientError::PlatformPrimitive {
                server: self.name.clone(),
                tool: tool.to_owned(),
            });
        }
        let call = self.checked(tool, arguments, options)?;
        Ok(match call {
            Ok(call) => {
                let called = self.stack.call(call).await;
                CallTrace {
                    answer: called.answer,
                    sent_arguments: called.sent,
                    queued: called.queued,
                    written: called.written,
                }
            }
            Err(refused) => CallTrace::of(refused),
        })
    }

    /// [`call`](Self::call) without staging, asking the server for progress notifications
    /// under `token` (`_meta.progressToken`); read them from
    /// [`take_notifications`](Self::take_notifications).
    pub async fn call_with_progress(
        &self,
        tool: &str,
        arguments: Value,
        token: Value,
    ) -> Result<ToolAnswer, ClientError> {
        match self.checked(tool, arguments, &CallOptions::default())? {
            Ok(mut call) => {
                call.meta
                    .get_or_insert_with(serde_json::Map::new)
                    .insert("progressToken".to_owned(), token);
                Ok(self.stack.get_ref().call(call).await.answer)
            }
            Err(refused) => Ok(refused),
        }
    }

    /// Checks a call before it is made: the tool exists, the arguments are an object.
    /// `Ok(Err(answer))` is a call refused with a failed answer, ledgered.
    fn checked(
        &self,
        tool: &str,
        arguments: Value,
        options: &CallOptions,
    ) -> Result<Result<ToolCall, ToolAnswer>, ClientError> {
        let setup = self.require_setup()?;
        if !setup.tools.iter().any(|t| t.name == tool) {
            return Err(ClientError::UnknownTool {
                server: self.name.clone(),
                tool: tool.to_owned(),
                known: self.model_tools()?.iter().map(|t| t.name.clone()).collect(),
            });
        }
        let mut call = ToolCall::new(tool, arguments);
        call.step = options.step().map(str::to_owned);
        call.wait = options.wait_for();
        call.resend_unsent = options.resend_unsent;
        let traceparent = match options.trace().or(self.trace.as_ref()) {
            Some(parent) => parent.child(),
            None => TraceParent::new_trace(),
        }
        .to_string();
        call.meta
            .get_or_insert_with(serde_json::Map::new)
            .insert("traceparent".to_owned(), Value::String(traceparent.clone()));
        call.traceparent = Some(traceparent);
        Ok(match &call.arguments {
            Value::Object(_) | Value::Null => Ok(call),
            other => Err(self.stack.get_ref().refuse(&call, not_an_object(other))),
        })
    }

    /// Takes the files a tool named in its answer's `files` into the job's artefact store:
    /// from a local server without a sample mount, read directly, but only from inside its
    /// own staging directory; from any other server, through `get_file`. A file not taken is
    /// recorded with the server's words. Needs a job in the connection's context.
    pub async fn take_files(
        &self,
        tool: &str,
        answer: &ToolAnswer,
        step: Option<&str>,
    ) -> Vec<TakenFile> {
        self.stack.take_files(tool, answer, step).await
    }

    /// The breaker's state.
    pub fn breaker_state(&self) -> BreakerState {
        self.stack.get_ref().get_ref().breaker_state()
    }

    /// Takes the receiver of the server's notifications (progress, log messages), once.
    pub fn take_notifications(&mut self) -> Option<mpsc::Receiver<Notification>> {
        self.notifications.take()
    }

    /// The server's process id: `Some` for a server this client spawned (stdio), `None`
    /// over HTTP.
    pub fn server_pid(&self) -> Option<u32> {
        self.wire().get_ref().server_pid()
    }

    /// Waits up to `grace` for the server's process to exit and says how it exited (for a
    /// connection found lost); `None` without a process of its own.
    pub async fn wait_exit(&self, grace: Duration) -> Option<std::process::ExitStatus> {
        self.wire().get_ref().wait_exit(grace).await
    }

    /// The last lines the server wrote on stderr (a stdio server's).
    pub fn stderr_tail(&self) -> String {
        self.wire().get_ref().stderr_tail()
    }

    /// What the connection received so far (for stdio, what the server's stdout held).
    pub fn counts(&self) -> TransportCounts {
        self.wire().get_ref().counts()
    }

    /// Closes the connection (for stdio: stdin closed, grace, SIGTERM, grace, SIGKILL).
    pub async fn close(self) -> CloseReport {
        let transport = self
            .stack
            .into_inner()
            .into_inner()
            .into_inner()
            .into_inner();
        transport.close().await
    }
}
