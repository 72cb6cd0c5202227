//! A connection to one MCP server: started, set up over the bare transport, and only then
//! composed as a stack of call layers (staging → ledger → admission → timeout → transport)
//! from what set-up learned: the era's rules, each tool's wait, the protocol version, the
//! tools and where the server is. A connection that is not set up cannot be called: it is
//! another type ([`StartedConnection`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use maljan_breaker::{BreakerState, CallGuard};
use maljan_mcp_proto::jsonrpc::Notification;
use maljan_mcp_proto::maljan::{ToolAnswer, ToolFailure, is_platform_primitive};
use maljan_mcp_proto::mcp::{Era, Tool};
use maljan_mcp_transport::{CloseReport, Transport, TransportCounts, TransportInfo, TransportKind};
use maljan_staging::{SampleMount, ToolCaller};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::admission::Admitted;
use crate::call::{CallOptions, CallService, CallTrace, ToolCall};
use crate::card::ServerCard;
use crate::config::{ClientSettings, EraChoice, ServerConfig};
use crate::context::ConnectionContext;
use crate::error::ClientError;
use crate::job::TakenFile;
use crate::ledgering::Ledgered;
use crate::reach::ServerReach;
use crate::setup::{ServerSetup, SetupPlan, set_up};
use crate::staging::Staged;
use crate::starting::start_transport;
use crate::timeout::RequestService;
use crate::tool_calls::ToolCalls;
use crate::trace::TraceParent;
use crate::wire::Wire;

/// The call layers, outermost first.
type CallStack = Staged<Ledgered<Admitted<ToolCalls<Wire>>>>;

/// A server started (a process spawned, an endpoint chosen) but not set up: the only thing
/// to do with it is to [`set_up`](StartedConnection::set_up) (or close) it.
///
/// A connection that is not set up cannot be called:
///
/// ```compile_fail
/// # async fn run(started: maljan_client::StartedConnection) {
/// started.call("file_info", serde_json::json!({})).await;
/// # }
/// ```
///
/// ```no_run
/// # async fn run() -> Result<(), maljan_client::ClientError> {
/// use maljan_client::{ClientSettings, ConnectionContext, ServerConfig, ServerConnection};
/// use maljan_mcp_stdio::ServerCommand;
///
/// let config = ServerConfig::stdio("sidecar", ServerCommand::new("maljan-sidecar"));
/// let started =
///     ServerConnection::start(&config, ClientSettings::default(), ConnectionContext::default())?;
/// println!("started as process {:?}", started.server_pid());
/// let server = started.set_up().await?;
/// println!("{} tools", server.model_tools().len());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct StartedConnection {
    name: String,
    settings: ClientSettings,
    context: ConnectionContext,
    transport: Box<dyn Transport>,
    /// What the transport knows of the server, shared.
    info: Arc<dyn TransportInfo>,
    reach: ServerReach,
    notifications: Option<mpsc::Receiver<Notification>>,
}

/// A connection to one MCP server, set up.
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
/// let card = server.card();
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
    stack: CallStack,
    /// What the transport knows of the server, shared: read without reaching down the
    /// stack.
    info: Arc<dyn TransportInfo>,
    kind: TransportKind,
    guard: Arc<CallGuard>,
    notifications: Option<mpsc::Receiver<Notification>>,
    setup: ServerSetup,
    trace: Option<TraceParent>,
    /// How long a call to a tool without a `timeout_s` of its own waits.
    default_wait: Duration,
}

impl ToolCaller for ServerConnection {
    /// A platform primitive through the ledger and admission layers (not staging): how the
    /// transfer functions of `maljan-staging` move files with this connection. A failed
    /// answer is the failure.
    async fn call_tool(&self, tool: &str, arguments: Value) -> Result<Value, ToolFailure> {
        self.stack.primitives().call_tool(tool, arguments).await
    }
}

impl StartedConnection {
    /// The server's configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Declares the server elsewhere: it does not share this host's files, so path
    /// arguments inside the job's directory are uploaded to it and the files it names are
    /// taken through `get_file`. (A connection over pipes to a remote process, say.)
    pub fn remote(mut self, sample_mount: Option<SampleMount>) -> Self {
        self.reach.remote = true;
        self.reach.sample_mount = sample_mount;
        self
    }

    /// The server's process id: `Some` for a server this client spawned (stdio).
    pub fn server_pid(&self) -> Option<u32> {
        self.info.server_pid()
    }

    /// Takes the receiver of the server's notifications (progress, log messages), once.
    pub fn take_notifications(&mut self) -> Option<mpsc::Receiver<Notification>> {
        self.notifications.take()
    }

    /// Sets the connection up: the era found (`server/discover`, else `initialize` and
    /// `notifications/initialized`), every `tools/list` page, then `capabilities` when
    /// offered; then the call layers are built from what it learned. When set-up fails, the
    /// server is closed and the error says how it exited and what it last wrote on stderr.
    pub async fn set_up(self) -> Result<ServerConnection, ClientError> {
        let StartedConnection {
            name,
            settings,
            context,
            transport,
            info,
            reach,
            notifications,
        } = self;
        let origin = info.origin();
        let kind = transport.kind();
        let known_eras = context.known_eras().clone();
        let known_legacy = origin
            .as_deref()
            .and_then(|o| known_eras.get(o))
            .is_some_and(|v| !(v.era() == Era::Stateless));
        let job_dir: Option<PathBuf> = context.job().map(|job| job.dir().to_owned());
        let plan = SetupPlan {
            client_info: &settings.client_info,
            policy: settings.server_requests(job_dir.as_deref()),
            wait: settings.setup_timeout,
            era: match settings.era {
                EraChoice::Auto if known_legacy => EraChoice::Session,
                chosen => chosen,
            },
            discover_wait: settings.discover_timeout.min(settings.setup_timeout),
        };
        let (wire, setup) = match set_up(transport, plan, settings.default_timeout).await {
            Ok(set_up) => set_up,
            Err(cause) => {
                return Err(ClientError::SetupFailed {
                    server: name,
                    step: cause.method(),
                    exit: cause.exit().map(|status| format!("exited with {status}")),
                    stderr_tail: cause
                        .stderr_tail()
                        .map_or_else(|| info.stderr_tail(), str::to_owned),
                    cause: Box::new(cause),
                });
            }
        };
        if let Some(origin) = origin {
            known_eras.remember(&origin, setup.protocol);
        }
        let guard = context
            .call_guard()
            .cloned()
            .unwrap_or_else(|| Arc::new(CallGuard::new(settings.breaker)));
        let tools = setup.tools.iter().map(|t| t.name.clone()).collect();
        let trace = context.trace().copied();
        let stack = Staged::new(
            Ledgered::new(
                Admitted::new(wire, &name, guard.clone()),
                &name,
                setup.protocol,
                context.recorders().clone(),
                context.scope(),
            ),
            reach,
            tools,
            context,
        );
        Ok(ServerConnection {
            name,
            stack,
            info,
            kind,
            guard,
            notifications,
            setup,
            trace,
            default_wait: settings.default_timeout,
        })
    }

    /// Closes the connection without setting it up.
    pub async fn close(self) -> CloseReport {
        self.transport.close().await
    }
}

impl ServerConnection {
    /// Starts the server and sets it up ([`start`](Self::start), then
    /// [`StartedConnection::set_up`]).
    pub async fn connect(
        config: &ServerConfig,
        settings: ClientSettings,
        context: ConnectionContext,
    ) -> Result<ServerConnection, ClientError> {
        Self::start(config, settings, context)?.set_up().await
    }

    /// Starts the server without setting it up.
    pub fn start(
        config: &ServerConfig,
        settings: ClientSettings,
        context: ConnectionContext,
    ) -> Result<StartedConnection, ClientError> {
        let server_requests = settings.server_requests(context.job().map(|job| job.dir()));
        let transport = start_transport(config, server_requests, &context)?;
        let mut started = Self::over_boxed(transport, settings, context);
        started.reach.remote = config.transport.is_remote();
        started.reach.sample_mount = config.sample_mount.clone();
        Ok(started)
    }

    /// Wraps a transport (for example a [`StdioTransport`](maljan_mcp_stdio::StdioTransport) over in-memory pipes, or
    /// [`maljan_mcp_transport::memory::pair`]'s), to be set up.
    pub fn over(
        transport: impl Transport + 'static,
        settings: ClientSettings,
        context: ConnectionContext,
    ) -> StartedConnection {
        Self::over_boxed(Box::new(transport), settings, context)
    }

    fn over_boxed(
        mut transport: Box<dyn Transport>,
        settings: ClientSettings,
        context: ConnectionContext,
    ) -> StartedConnection {
        let name = transport.server().to_owned();
        let notifications = transport.take_incoming();
        let info = transport.info();
        StartedConnection {
            info,
            reach: ServerReach {
                server: name.clone(),
                remote: false,
                sample_mount: None,
            },
            name,
            settings,
            context,
            transport,
            notifications,
        }
    }

    /// The server's configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The transport at the bottom of the stack: to wait for its process's end.
    fn wire(&self) -> &dyn Transport {
        self.stack
            .get_ref()
            .get_ref()
            .get_ref()
            .get_ref()
            .transport()
    }

    /// What set-up learned.
    pub fn setup(&self) -> &ServerSetup {
        &self.setup
    }

    /// The tools a model may see: every tool but the platform primitives.
    pub fn model_tools(&self) -> Vec<&Tool> {
        self.setup
            .tools
            .iter()
            .filter(|t| !is_platform_primitive(&t.name))
            .collect()
    }

    /// The server card.
    pub fn card(&self) -> ServerCard {
        ServerCard::new(
            &self.name,
            &self.setup,
            self.kind.as_str(),
            self.info.counts(),
        )
    }

    /// How long a call to `tool` waits: the manifest's `timeout_s`, else the default.
    pub fn timeout_for(&self, tool: &str) -> Duration {
        self.setup.tool_wait(tool).unwrap_or(self.default_wait)
    }

    /// Calls a tool through the whole stack with the default options and reads its answer
    /// by Maljan's rules: [`call_with`](Self::call_with) with [`CallOptions::default`].
    pub async fn call(&self, tool: &str, arguments: Value) -> Result<ToolAnswer, ClientError> {
        self.call_with(tool, arguments, &CallOptions::default())
            .await
            .map(|trace| trace.answer)
    }

    /// Calls a tool through the whole stack, as `options` say (the run's step, the caller's
    /// trace, a progress token, its own wait), and says what happened to it.
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
    /// `arguments` must be a JSON object (or null for none). A tool the server does not
    /// offer, and a platform primitive (`get_file`, `put_sample*`, `capabilities`), are
    /// refused by name ([`ClientError::UnknownTool`], [`ClientError::PlatformPrimitive`]):
    /// this is the model-facing call, and only staging moves files.
    pub async fn call_with(
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
        if !self.setup.tools.iter().any(|t| t.name == tool) {
            return Err(ClientError::UnknownTool {
                server: self.name.clone(),
                tool: tool.to_owned(),
                known: self.model_tools().iter().map(|t| t.name.clone()).collect(),
            });
        }
        Ok(self
            .stack
            .call(self.call_of(tool, arguments, options))
            .await)
    }

    /// The call `options` make of `tool` with `arguments`: its step, wait, trace and
    /// progress token.
    fn call_of(&self, tool: &str, arguments: Value, options: &CallOptions) -> ToolCall {
        let mut call = ToolCall::new(tool, arguments);
        call.step = options.step().map(str::to_owned);
        call.wait = options.wait_for();
        call.resend_unsent = options.resend_unsent;
        let traceparent = match options.trace().or(self.trace.as_ref()) {
            Some(parent) => parent.child(),
            None => TraceParent::new_trace(),
        }
        .to_string();
        let meta = call.meta.get_or_insert_with(serde_json::Map::new);
        meta.insert("traceparent".to_owned(), Value::String(traceparent.clone()));
        if let Some(token) = options.progress_token() {
            meta.insert("progressToken".to_owned(), token.clone());
        }
        call.traceparent = Some(traceparent);
        call
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
        let mut taken = self.stack.take_files(tool, answer, step).await;
        if let Some(job) = self.stack.context().job() {
            let wire = self.stack.get_ref().get_ref().get_ref().get_ref();
            let call = maljan_staging::Origin {
                step: step.map(str::to_owned),
                server: self.name.clone(),
                tool: tool.to_owned(),
            };
            taken.extend(
                crate::taking::take_resources(
                    wire,
                    job,
                    self.stack.context(),
                    &call,
                    answer,
                    self.default_wait,
                )
                .await,
            );
        }
        taken
    }

    /// The breaker's state (shared with every connection to the server that a run makes).
    pub fn breaker_state(&self) -> BreakerState {
        self.guard.state()
    }

    /// Takes the receiver of the server's notifications (progress, log messages), once.
    pub fn take_notifications(&mut self) -> Option<mpsc::Receiver<Notification>> {
        self.notifications.take()
    }

    /// The server's process id: `Some` for a server this client spawned (stdio), `None`
    /// over HTTP.
    pub fn server_pid(&self) -> Option<u32> {
        self.info.server_pid()
    }

    /// Waits up to `grace` for the server's process to exit and says how it exited (for a
    /// connection found lost); `None` without a process of its own.
    pub async fn wait_exit(&self, grace: Duration) -> Option<std::process::ExitStatus> {
        self.wire().wait_exit(grace).await
    }

    /// The last lines the server wrote on stderr (a stdio server's).
    pub fn stderr_tail(&self) -> String {
        self.info.stderr_tail()
    }

    /// What the connection received so far (for stdio, what the server's stdout held).
    pub fn counts(&self) -> TransportCounts {
        self.info.counts()
    }

    /// Closes the connection (for stdio: stdin closed, grace, SIGTERM, grace, SIGKILL).
    pub async fn close(self) -> CloseReport {
        let calls = self.stack.into_inner().into_inner().into_inner();
        calls.into_inner().into_transport().close().await
    }
}
