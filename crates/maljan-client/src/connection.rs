use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use maljan_breaker::CallGuard;
use maljan_mcp_proto::maljan::{
    CapabilityManifest, ErrorCode, ToolAnswer, ToolFailure, is_platform_primitive,
};
use maljan_mcp_proto::mcp::{
    CallToolParams, CallToolResult, CancelledParams, Implementation, InitializeParams,
    InitializeResult, ListToolsParams, ListToolsResult, ProtocolVersion, Tool, methods,
};
use maljan_mcp_stdio::{CloseReport, Connection, EndsSetup, LineCounts, Reply};
use maljan_staging::SampleMount;
use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::card::ServerCard;
use crate::link::{Link, LinkFailure, Params};
use crate::transfer::{JOB_DIR_ENV, ROOTS_ENV};
use crate::{ClientError, ClientSettings, ServerConfig, ServerTransport};

/// The most `tools/list` pages read in a setup: a server that pages for ever is refused.
const MAX_TOOL_PAGES: usize = 1000;
/// The name of the manifest tool.
const CAPABILITIES: &str = "capabilities";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetupState {
    Fresh,
    Connecting,
    Connected,
    Failed,
}

/// What setup learned about a server.
#[derive(Debug, Clone)]
pub struct ServerSetup {
    /// The protocol version the server chose.
    pub protocol: ProtocolVersion,
    /// What the server says it is.
    pub server_info: Implementation,
    /// How to use the server, for a model.
    pub instructions: Option<String>,
    /// Every tool, platform primitives included.
    pub tools: Vec<Tool>,
    /// The capability manifest, when the server offers `capabilities`.
    pub manifest: Option<CapabilityManifest>,
    /// Why the manifest could not be read.
    pub manifest_error: Option<String>,
}

/// A connection to one MCP server, set up exactly once.
///
/// ```no_run
/// # async fn run() -> Result<(), maljan_client::ClientError> {
/// use maljan_client::{ClientSettings, ServerConfig, ServerConnection};
/// use maljan_mcp_stdio::ServerCommand;
///
/// let config = ServerConfig::stdio("sidecar", ServerCommand::new("maljan-sidecar"));
/// let server = ServerConnection::connect(&config, ClientSettings::default()).await?;
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
    connection: Link,
    pub(crate) settings: ClientSettings,
    pub(crate) guard: CallGuard,
    /// Whether the server is elsewhere (does not share this host's files).
    pub(crate) remote: bool,
    pub(crate) sample_mount: Option<SampleMount>,
    state: Mutex<SetupState>,
    setup: OnceLock<ServerSetup>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn to_raw<T: Serialize>(value: &T) -> Option<Box<RawValue>> {
    serde_json::value::to_raw_value(value).ok()
}

fn last_tools_page(result: &RawValue) -> bool {
    serde_json::from_str::<ListToolsResult>(result.get())
        .map(|page| page.next_cursor.is_none())
        .unwrap_or(false)
}

/// Why one request went unanswered or failed, before reading its answer.
enum RequestFailure {
    TimedOut(Duration),
    Transport(LinkFailure),
}

impl ServerConnection {
    /// Starts the server and sets it up. When setup fails, the server is closed and the
    /// error says how it exited and what it last wrote on stderr.
    pub async fn connect(
        config: &ServerConfig,
        settings: ClientSettings,
    ) -> Result<ServerConnection, ClientError> {
        let server = Self::start(config, settings)?;
        match server.setup().await {
            Ok(_) => Ok(server),
            Err(ClientError::SetupFailed {
                server: name,
                step,
                detail,
                ..
            }) => {
                let report = server.close().await;
                Err(ClientError::SetupFailed {
                    server: name,
                    step,
                    detail,
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
    ) -> Result<ServerConnection, ClientError> {
        let link = match &config.transport {
            ServerTransport::Stdio(command) => {
                let mut command = command.clone();
                if let Some(job) = &settings.job {
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
                Link::Stdio(Box::new(Connection::spawn(&command, config.stdio.clone())?))
            }
            ServerTransport::Http(http) => {
                let mut http_config = maljan_mcp_http::HttpConfig::new(&config.name, &http.url);
                http_config.headers = http.headers.clone();
                if let Some(var) = &http.bearer_token_env {
                    let token = std::env::var(var).map_err(|_| ClientError::MissingToken {
                        server: config.name.clone(),
                        variable: var.clone(),
                    })?;
                    http_config.bearer_token = Some(token);
                }
                let (connection, notifications) =
                    maljan_mcp_http::HttpConnection::new(http_config).map_err(ClientError::Http)?;
                Link::Http(connection, Some(notifications))
            }
        };
        let remote = matches!(link, Link::Http(..));
        let mut server = Self::with_link(link, settings);
        server.remote = remote;
        server.sample_mount = config.sample_mount.clone();
        Ok(server)
    }

    /// Wraps a transport connection (for example one over in-memory pipes).
    pub fn over(connection: Connection, settings: ClientSettings) -> ServerConnection {
        Self::with_link(Link::Stdio(Box::new(connection)), settings)
    }

    fn with_link(connection: Link, settings: ClientSettings) -> ServerConnection {
        ServerConnection {
            name: connection.server().to_owned(),
            connection,
            guard: CallGuard::new(settings.breaker),
            remote: false,
            sample_mount: None,
            settings,
            state: Mutex::new(SetupState::Fresh),
            setup: OnceLock::new(),
        }
    }

    /// Declares the server elsewhere: it does not share this host's files, so path
    /// arguments inside the job's directory are uploaded to it and the files it names are
    /// taken through `get_file`. (A connection over pipes to a remote process, say.)
    pub fn remote(mut self, sample_mount: Option<SampleMount>) -> Self {
        self.remote = true;
        self.sample_mount = sample_mount;
        self
    }

    /// The server's configured name.
    pub fn name(&self) -> &str {
        &self.name
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
        let result = self.run_setup().await;
        let mut state = lock(&self.state);
        match result {
            Ok(setup) => {
                *state = SetupState::Connected;
                Ok(self.setup.get_or_init(|| setup))
            }
            Err(e) => {
                *state = SetupState::Failed;
                Err(e)
            }
        }
    }

    fn setup_failed(&self, step: &'static str, detail: impl Into<String>) -> ClientError {
        ClientError::SetupFailed {
            server: self.name.clone(),
            step,
            detail: detail.into(),
            exit: None,
            stderr_tail: self.connection.stderr_tail(),
        }
    }

    async fn setup_request<P: Serialize>(
        &self,
        step: &'static str,
        params: &P,
        ends_setup: Option<EndsSetup>,
    ) -> Result<Box<RawValue>, ClientError> {
        let params = to_raw(params);
        let reply = self
            .request(
                step,
                Params::Raw(params),
                self.settings.setup_timeout,
                ends_setup,
                false,
            )
            .await;
        match reply {
            Ok(Reply::Result(result)) => Ok(result),
            Ok(Reply::Error(e)) => Err(self.setup_failed(
                step,
                format!("the server answered error {}: {}", e.code, e.message),
            )),
            Err(RequestFailure::TimedOut(t)) => {
                Err(self.setup_failed(step, format!("no answer within {} s", t.as_secs_f64())))
            }
            Err(RequestFailure::Transport(e)) => Err(self.setup_failed(step, e.to_string())),
        }
    }

    async fn run_setup(&self) -> Result<ServerSetup, ClientError> {
        let params = InitializeParams::new(self.settings.client_info.clone());
        let raw = self
            .setup_request(methods::INITIALIZE, &params, None)
            .await?;
        let init: InitializeResult = serde_json::from_str(raw.get()).map_err(|e| {
            self.setup_failed(
                methods::INITIALIZE,
                format!("the answer is not an InitializeResult: {e}"),
            )
        })?;
        let protocol = ProtocolVersion::parse(&init.protocol_version)
            .map_err(|e| self.setup_failed(methods::INITIALIZE, e.to_string()))?;
        self.connection.set_protocol(protocol);
        self.connection
            .notify(methods::INITIALIZED, None)
            .await
            .map_err(|e| self.setup_failed(methods::INITIALIZED, e.to_string()))?;

        let mut tools = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_TOOL_PAGES {
            let params = ListToolsParams {
                cursor: cursor.take(),
            };
            let raw = self
                .setup_request(
                    methods::TOOLS_LIST,
                    &params,
                    Some(last_tools_page as EndsSetup),
                )
                .await?;
            let page: ListToolsResult = serde_json::from_str(raw.get()).map_err(|e| {
                self.setup_failed(
                    methods::TOOLS_LIST,
                    format!("the answer is not a tool list: {e}"),
                )
            })?;
            tools.extend(page.tools);
            match page.next_cursor {
                None => break,
                Some(next) => cursor = Some(next),
            }
        }
        if cursor.is_some() {
            return Err(self.setup_failed(
                methods::TOOLS_LIST,
                format!("the tool list did not end within {MAX_TOOL_PAGES} pages"),
            ));
        }
        // The window closes on the last page's answer; this makes sure of it.
        self.connection.close_setup_window();

        let (manifest, manifest_error) = if tools.iter().any(|t| t.name == CAPABILITIES) {
            let answer = self
                .send_tool_call(CAPABILITIES, Map::new(), None, self.settings.setup_timeout)
                .await;
            match answer.failure() {
                Some(f) => (None, Some(format!("{}: {}", f.code, f.message))),
                None => match serde_json::from_value::<CapabilityManifest>(answer.value) {
                    Ok(m) => (Some(m), None),
                    Err(e) => (None, Some(format!("the manifest is malformed: {e}"))),
                },
            }
        } else {
            (None, None)
        };
        self.connection.listen();
        Ok(ServerSetup {
            protocol,
            server_info: init.server_info,
            instructions: init.instructions,
            tools,
            manifest,
            manifest_error,
        })
    }

    /// Sends a request and waits up to `wait`; on giving up, tells the server with
    /// `notifications/cancelled` (unless `cancellable` is false, as for `initialize`).
    async fn request(
        &self,
        method: &str,
        params: Params,
        wait: Duration,
        ends_setup: Option<EndsSetup>,
        cancellable: bool,
    ) -> Result<Reply, RequestFailure> {
        let (id, pending) = self
            .connection
            .send(method, params, ends_setup)
            .await
            .map_err(RequestFailure::Transport)?;
        match tokio::time::timeout(wait, pending).await {
            Ok(reply) => reply.map_err(RequestFailure::Transport),
            Err(_) => {
                if cancellable && method != methods::INITIALIZE {
                    let cancel = CancelledParams {
                        request_id: id,
                        reason: Some(format!("no answer within {} s", wait.as_secs_f64())),
                    };
                    let _ = self
                        .connection
                        .notify(methods::CANCELLED, to_raw(&cancel))
                        .await;
                }
                Err(RequestFailure::TimedOut(wait))
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
        Ok(ServerCard::new(
            &self.name,
            setup,
            self.connection.transport(),
            self.connection.counts(),
        ))
    }

    /// How long a call to `tool` waits: the manifest's `timeout_s`, else the default.
    pub fn timeout_for(&self, tool: &str) -> Duration {
        self.setup
            .get()
            .and_then(|s| s.manifest.as_ref())
            .and_then(|m| m.tool(tool))
            .and_then(|t| t.timeout_s)
            .filter(|s| s.is_finite() && *s > 0.0)
            .map_or(self.settings.default_timeout, Duration::from_secs_f64)
    }

    /// Checks a call before it is made: the tool exists, the arguments are an object.
    /// `Ok(Err(answer))` is a call refused with a failed answer (to be ledgered).
    pub(crate) fn check_call(
        &self,
        tool: &str,
        arguments: Value,
    ) -> Result<Result<Map<String, Value>, ToolAnswer>, ClientError> {
        let setup = self.require_setup()?;
        if !setup.tools.iter().any(|t| t.name == tool) {
            return Err(ClientError::UnknownTool {
                server: self.name.clone(),
                tool: tool.to_owned(),
                known: self.model_tools()?.iter().map(|t| t.name.clone()).collect(),
            });
        }
        Ok(match arguments {
            Value::Object(map) => Ok(map),
            Value::Null => Ok(Map::new()),
            other => Err(ToolAnswer::failed(ToolFailure::new(
                ErrorCode::BadArgument,
                format!("the arguments must be a JSON object, not {other}"),
                Some("pass arguments as key=value pairs or a JSON object".to_owned()),
            ))),
        })
    }

    /// One `tools/call` on the wire, waiting up to `wait`, its answer read by Maljan's rules.
    pub(crate) async fn send_tool_call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        meta: Option<Map<String, Value>>,
        wait: Duration,
    ) -> ToolAnswer {
        // The arguments are dropped once serialized, before the wait: a file chunk is not
        // held twice while its call is in flight.
        let params = CallToolParams {
            name: tool.to_owned(),
            arguments: Some(arguments),
            meta,
        };
        let reply = self
            .request(
                methods::TOOLS_CALL,
                Params::Json(params.into_value()),
                wait,
                None,
                true,
            )
            .await;
        match reply {
            Ok(Reply::Result(raw)) => match serde_json::from_str::<CallToolResult>(raw.get()) {
                Ok(result) => ToolAnswer::from_result(result),
                Err(e) => ToolAnswer::failed(ToolFailure::new(
                    ErrorCode::InvalidAnswer,
                    format!(
                        "server {} answered {tool} with something that is not a tool result: {e}",
                        self.name
                    ),
                    Some("report this to the server's authors".to_owned()),
                )),
            },
            Ok(Reply::Error(error)) => ToolAnswer::from_rpc_error(&error),
            Err(RequestFailure::TimedOut(t)) => ToolAnswer::failed(ToolFailure::new(
                ErrorCode::Unanswered,
                format!(
                    "server {} did not answer {tool} within {} s; the call was cancelled",
                    self.name,
                    t.as_secs_f64()
                ),
                Some(
                    "raise the tool's timeout_s on the server, or the client's default timeout"
                        .to_owned(),
                ),
            )),
            Err(RequestFailure::Transport(LinkFailure::InvalidAnswer(reason))) => {
                ToolAnswer::failed(ToolFailure::new(
                    ErrorCode::InvalidAnswer,
                    format!(
                        "server {} answered {tool} with an invalid message: {reason}",
                        self.name
                    ),
                    Some("report this to the server's authors".to_owned()),
                ))
            }
            Err(RequestFailure::Transport(LinkFailure::Refused(message))) => {
                ToolAnswer::failed(ToolFailure::new(
                    ErrorCode::RpcError,
                    message,
                    Some("check the server's logs; it refused the request".to_owned()),
                ))
            }
            Err(RequestFailure::Transport(e)) => ToolAnswer::failed(ToolFailure::new(
                ErrorCode::ConnectionLost,
                e.to_string(),
                Some(match self.connection.stderr_tail() {
                    tail if tail.is_empty() => "check the server's logs and restart it".to_owned(),
                    tail => format!("check the server's last stderr lines and restart it:\n{tail}"),
                }),
            )),
        }
    }

    /// Takes the receiver of the server's notifications (progress, log messages), once.
    pub fn take_notifications(
        &mut self,
    ) -> Option<tokio::sync::mpsc::Receiver<maljan_mcp_proto::jsonrpc::Notification>> {
        self.connection.take_notifications()
    }

    /// The server's process id: `Some` for a server this client spawned (stdio), `None`
    /// over HTTP.
    pub fn server_pid(&self) -> Option<u32> {
        self.connection.server_pid()
    }

    /// What the server's stdout held so far.
    pub fn counts(&self) -> LineCounts {
        self.connection.counts()
    }

    /// Closes the connection (see [`Connection::close`]).
    pub async fn close(self) -> CloseReport {
        self.connection.close().await
    }
}
