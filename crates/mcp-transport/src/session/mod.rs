//! A session with one MCP server over any [`Transport`]: set up in either protocol era, its
//! tools listed, a tool called with a deadline, closed. The set-up window, the version
//! checks, paging and cancellation are handled inside; staging, ledgers and runs are not
//! here (they are `maljan-client`'s).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! use std::time::Duration;
//! use maljan_mcp_proto::jsonrpc::{ErrorObject, Message, Reply};
//! use maljan_mcp_transport::memory;
//! use maljan_mcp_transport::session::{Session, SessionSettings};
//! use serde_json::{json, value::to_raw_value};
//!
//! // A server of the session era, played in memory.
//! let (client, mut server) = memory::pair("echo");
//! tokio::spawn(async move {
//!     while let Some(message) = server.next_message().await {
//!         let Message::Request(request) = message else { continue };
//!         let result = match request.method.as_str() {
//!             "initialize" => json!({"protocolVersion": "2025-11-25", "capabilities": {},
//!                                    "serverInfo": {"name": "echo", "version": "1"}}),
//!             "tools/list" => json!({"tools": [{"name": "echo", "inputSchema": {}}]}),
//!             "tools/call" => json!({"content": [{"type": "text", "text": "hi"}]}),
//!             _ => {
//!                 let unknown = ErrorObject::new(-32601, "no such method");
//!                 server.answer(&request.id, Reply::Error(unknown));
//!                 continue;
//!             }
//!         };
//!         server.answer(&request.id, Reply::Result(to_raw_value(&result).unwrap().into()));
//!     }
//! });
//!
//! let session = Session::set_up(client, SessionSettings::default()).await.unwrap();
//! assert_eq!(session.tools()[0].name, "echo");
//! let answer = session
//!     .call_tool("echo", json!({"say": "hi"}), Duration::from_secs(5))
//!     .await
//!     .unwrap();
//! assert!(!answer.is_error());
//! session.close().await;
//! # }
//! ```

mod era_choice;
mod error;

use std::time::Duration;

use maljan_mcp_proto::jsonrpc::{RawJson, Reply};
use maljan_mcp_proto::mcp::{
    CallToolResult, Era, EraProbe, Implementation, InitializeParams, InitializeResult,
    ListToolsResult, ProbeStep, ProtocolVersion, ResultKind, Tool, ToolPages, methods,
    read_result_kind, stateless_meta, with_request_meta,
};
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use crate::deadline::{cancelled_by_notice, reply_within};
use crate::failure::TransportFailure;
use crate::report::CloseReport;
use crate::transport::{OutgoingRequest, PendingReply, Transport};

pub use era_choice::EraChoice;
pub use error::SessionError;

/// The most `tools/list` pages a set-up reads.
const MAX_TOOL_PAGES: usize = 1000;
/// How long a lost server's process is given to exit, so that its status and stderr's last
/// lines are known.
const EXIT_GRACE: Duration = Duration::from_secs(2);

/// How a session is set up: who the client says it is, what it declares, which era it
/// speaks and how long set-up waits.
///
/// ```
/// use std::time::Duration;
/// use maljan_mcp_transport::session::{EraChoice, SessionSettings};
/// let settings = SessionSettings::default()
///     .client("my-tool", "1.0")
///     .era(EraChoice::Session)
///     .setup_wait(Duration::from_secs(60));
/// assert_eq!(settings.client_info.name, "my-tool");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SessionSettings {
    /// Who the client says it is.
    pub client_info: Implementation,
    /// How long each set-up request waits (30 s).
    pub setup_wait: Duration,
    /// How long `server/discover` waits before the server is taken as one with sessions
    /// (5 s, at most the set-up wait).
    pub discover_wait: Duration,
    /// Which era to speak: found by asking (the default), or fixed.
    pub era: EraChoice,
    /// The client capabilities declared (none by default). A session answers none of the
    /// server's requests itself: declare only what the transport's owner answers.
    pub capabilities: Map<String, Value>,
}

impl Default for SessionSettings {
    fn default() -> Self {
        SessionSettings {
            client_info: Implementation {
                name: env!("CARGO_PKG_NAME").to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                title: None,
            },
            setup_wait: Duration::from_secs(30),
            discover_wait: Duration::from_secs(5),
            era: EraChoice::Auto,
            capabilities: Map::new(),
        }
    }
}

impl SessionSettings {
    /// The client is `name` at `version`.
    pub fn client(mut self, name: impl Into<String>, version: impl Into<String>) -> Self {
        self.client_info = Implementation {
            name: name.into(),
            version: version.into(),
            title: None,
        };
        self
    }

    /// Each set-up request waits up to `wait`.
    pub fn setup_wait(mut self, wait: Duration) -> Self {
        self.setup_wait = wait;
        self
    }

    /// `server/discover` waits up to `wait`.
    pub fn discover_wait(mut self, wait: Duration) -> Self {
        self.discover_wait = wait;
        self
    }

    /// Speaks `era`.
    pub fn era(mut self, era: EraChoice) -> Self {
        self.era = era;
        self
    }

    /// Declares `capabilities` (the object `initialize` and the stateless `_meta` carry).
    pub fn capabilities(mut self, capabilities: Map<String, Value>) -> Self {
        self.capabilities = capabilities;
        self
    }
}

/// What a set-up session is made of, for a caller that builds its own request path on the
/// transport ([`Session::into_parts`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct SessionParts {
    /// The transport, its set-up window closed.
    pub transport: Box<dyn Transport>,
    /// The protocol version agreed on; its era says whether requests are stateless.
    pub protocol: ProtocolVersion,
    /// Who the server says it is.
    pub server_info: Implementation,
    /// How to use the server, for a model, when it says.
    pub instructions: Option<String>,
    /// The server's tools, as listed at set-up.
    pub tools: Vec<Tool>,
}

/// A set-up session with one server: its era and version agreed, its tools listed.
///
/// A session declares no client capabilities unless its settings name some; the server's
/// `ping` is answered by the transport. Dropping it drops the transport (a stdio server is killed); call
/// [`close`](Session::close) for an orderly shutdown.
#[derive(Debug)]
pub struct Session {
    transport: Box<dyn Transport>,
    protocol: ProtocolVersion,
    server_info: Implementation,
    instructions: Option<String>,
    tools: Vec<Tool>,
    /// The `_meta` each request carries in the stateless era; `None` in a session.
    stateless_meta: Option<Map<String, Value>>,
}

/// Who the server is, as set-up learned it.
struct Agreed {
    protocol: ProtocolVersion,
    server_info: Implementation,
    instructions: Option<String>,
    stateless_meta: Option<Map<String, Value>>,
}

impl Session {
    /// Sets the server behind `transport` up: its era found (`server/discover`, else
    /// `initialize` and `notifications/initialized`), every page of its tools read, the
    /// set-up window closed. On failure the transport is closed, and a lost connection's
    /// error carries the server's exit status and the last lines of its stderr.
    pub async fn set_up(
        transport: impl Transport + 'static,
        settings: SessionSettings,
    ) -> Result<Session, SessionError> {
        Session::set_up_boxed(Box::new(transport), settings).await
    }

    /// [`set_up`](Session::set_up) for a transport already boxed.
    pub async fn set_up_boxed(
        transport: Box<dyn Transport>,
        settings: SessionSettings,
    ) -> Result<Session, SessionError> {
        let mut session = Session {
            transport,
            protocol: ProtocolVersion::newest_of(Era::Session),
            server_info: settings.client_info.clone(),
            instructions: None,
            tools: Vec::new(),
            stateless_meta: None,
        };
        let set_up = async {
            let agreed = session.agree(&settings).await?;
            session.protocol = agreed.protocol;
            session.server_info = agreed.server_info;
            session.instructions = agreed.instructions;
            session.stateless_meta = agreed.stateless_meta;
            session.tools = session.list_tools(settings.setup_wait).await?;
            session.transport.end_setup();
            Ok(())
        };
        match set_up.await {
            Ok(()) => Ok(session),
            Err(error) => {
                session.close().await;
                Err(error)
            }
        }
    }

    /// The protocol version agreed on.
    pub fn protocol(&self) -> ProtocolVersion {
        self.protocol
    }

    /// Who the server says it is.
    pub fn server_info(&self) -> &Implementation {
        &self.server_info
    }

    /// How to use the server, for a model, when it says.
    pub fn instructions(&self) -> Option<&str> {
        self.instructions.as_deref()
    }

    /// The server's tools, as listed at set-up.
    pub fn tools(&self) -> &[Tool] {
        &self.tools
    }

    /// The transport, for what it knows of the server ([`Transport::info`]) or its
    /// notifications.
    pub fn transport(&self) -> &dyn Transport {
        &*self.transport
    }

    /// Every page of the server's tools, read again.
    pub async fn list_tools(&self, wait: Duration) -> Result<Vec<Tool>, SessionError> {
        let mut pages = ToolPages::new(MAX_TOOL_PAGES);
        loop {
            let params = serde_json::to_value(pages.next_params()).ok();
            let request =
                OutgoingRequest::new(methods::TOOLS_LIST, params).ending_setup(last_tools_page);
            let raw = self.request(methods::TOOLS_LIST, request, wait).await?;
            let page: ListToolsResult = read(methods::TOOLS_LIST, &raw, "a tool list")?;
            if pages.handle_page(page)? {
                return Ok(pages.into_tools());
            }
        }
    }

    /// Calls `tool` with `arguments` (a JSON object) and waits up to `deadline` for its
    /// result; past it, the call is cancelled on the server and fails
    /// [`NoAnswer`](SessionError::NoAnswer). A tool's own failure is a result with
    /// [`is_error`](CallToolResult::is_error), not an error.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Value,
        deadline: Duration,
    ) -> Result<CallToolResult, SessionError> {
        let params = json!({ "name": tool, "arguments": arguments });
        let request = OutgoingRequest::new(methods::TOOLS_CALL, Some(params));
        let raw = self.request(methods::TOOLS_CALL, request, deadline).await?;
        if self.stateless_meta.is_some()
            && matches!(read_result_kind(&raw), Ok(ResultKind::InputRequired(_)))
        {
            return Err(SessionError::InputRequired {
                tool: tool.to_owned(),
            });
        }
        read(methods::TOOLS_CALL, &raw, "a tool result")
    }

    /// Closes the connection (a stdio server: stdin closed, grace, SIGTERM, grace,
    /// SIGKILL) and says how the server ended.
    pub async fn close(self) -> CloseReport {
        self.transport.close().await
    }

    /// The transport and what set-up learned, for a caller that makes its own requests (the
    /// stateless era's `_meta` is then the caller's to add).
    pub fn into_parts(self) -> SessionParts {
        SessionParts {
            transport: self.transport,
            protocol: self.protocol,
            server_info: self.server_info,
            instructions: self.instructions,
            tools: self.tools,
        }
    }

    /// Agrees on an era and a version.
    async fn agree(&self, settings: &SessionSettings) -> Result<Agreed, SessionError> {
        if settings.era == EraChoice::Session {
            return self.initialize(settings).await;
        }
        let mut probe = EraProbe::new();
        loop {
            let answer = self.discover(settings, probe.version()).await?;
            match probe.handle_answer(answer.as_ref()) {
                ProbeStep::Ask(_) => {}
                ProbeStep::Stateless(result) => {
                    let protocol = probe.version();
                    self.transport.set_protocol(protocol);
                    let meta = stateless_meta(
                        protocol.as_str(),
                        &settings.capabilities,
                        &settings.client_info,
                    );
                    return Ok(Agreed {
                        protocol,
                        server_info: result.server_info().unwrap_or_else(unnamed_server),
                        instructions: result.instructions,
                        stateless_meta: Some(meta),
                    });
                }
                ProbeStep::Unusable(why) => return Err(SessionError::Unusable(why)),
                _ if settings.era == EraChoice::Stateless => {
                    return Err(SessionError::NotStateless);
                }
                _ => return self.initialize(settings).await,
            }
        }
    }

    /// Asks `server/discover` in `version`: its answer, or none within the wait (a server
    /// with sessions may ignore it) or an HTTP refusal without a JSON-RPC body.
    async fn discover(
        &self,
        settings: &SessionSettings,
        version: ProtocolVersion,
    ) -> Result<Option<Reply>, SessionError> {
        let meta = stateless_meta(
            version.as_str(),
            &settings.capabilities,
            &settings.client_info,
        );
        let request =
            OutgoingRequest::new(methods::SERVER_DISCOVER, Some(json!({ "_meta": meta })))
                .stateless(version);
        let wait = settings.discover_wait.min(settings.setup_wait);
        // Never cancelled: a server with sessions may be sent nothing but ping before
        // initialize.
        let pending = self.send(methods::SERVER_DISCOVER, request).await?;
        match tokio::time::timeout(wait, pending).await {
            Err(_) => Ok(None),
            Ok(Ok(reply)) => Ok(Some(reply)),
            Ok(Err(failure)) if failure.is_refused() => Ok(None),
            Ok(Err(failure)) => Err(self.failed(methods::SERVER_DISCOVER, failure).await),
        }
    }

    /// The session era's handshake: `initialize`, then `notifications/initialized`.
    async fn initialize(&self, settings: &SessionSettings) -> Result<Agreed, SessionError> {
        let params = InitializeParams::new(settings.client_info.clone())
            .with_capabilities(settings.capabilities.clone());
        let request = OutgoingRequest::new(methods::INITIALIZE, serde_json::to_value(params).ok());
        let raw = self
            .request(methods::INITIALIZE, request, settings.setup_wait)
            .await?;
        let init: InitializeResult = read(methods::INITIALIZE, &raw, "an InitializeResult")?;
        let protocol = ProtocolVersion::parse_session(&init.protocol_version)?;
        self.transport.set_protocol(protocol);
        if let Err(failure) = self.transport.notify(methods::INITIALIZED, None).await {
            return Err(self.failed(methods::INITIALIZED, failure).await);
        }
        Ok(Agreed {
            protocol,
            server_info: init.server_info,
            instructions: init.instructions,
            stateless_meta: None,
        })
    }

    /// Sends `request` (with the stateless era's `_meta` once agreed) and waits up to
    /// `wait` for its result; past it, cancels it on the server.
    async fn request(
        &self,
        method: &'static str,
        request: OutgoingRequest,
        wait: Duration,
    ) -> Result<RawJson, SessionError> {
        let request = self.stamped(request);
        let notify = cancelled_by_notice(&request, self.transport.kind());
        let pending = self.send(method, request).await?;
        match reply_within(&*self.transport, pending, wait, notify).await {
            Some(Ok(Reply::Result(raw))) => Ok(raw),
            Some(Ok(Reply::Error(error))) => Err(SessionError::ErrorAnswer {
                method,
                code: error.code,
                message: error.message,
            }),
            Some(Err(failure)) => Err(self.failed(method, failure).await),
            None => Err(SessionError::NoAnswer {
                method,
                waited: wait,
            }),
        }
    }

    async fn send(
        &self,
        method: &'static str,
        request: OutgoingRequest,
    ) -> Result<PendingReply, SessionError> {
        match self.transport.send_request(request).await {
            Ok(pending) => Ok(pending),
            Err(failure) => Err(self.failed(method, failure).await),
        }
    }

    /// The request with the stateless era's `_meta` keys beside its own.
    fn stamped(&self, request: OutgoingRequest) -> OutgoingRequest {
        let Some(meta) = &self.stateless_meta else {
            return request;
        };
        let ends_setup = request.ends_setup();
        let (method, params, _) = request.into_parts();
        let params = with_request_meta(params, meta);
        let stamped = OutgoingRequest::new(method, Some(params)).stateless(self.protocol);
        match ends_setup {
            Some(ends) => stamped.ending_setup(ends),
            None => stamped,
        }
    }

    /// The error of a failed request; a lost connection's with how the server ended.
    async fn failed(&self, method: &'static str, failure: TransportFailure) -> SessionError {
        if !failure.is_lost() {
            return SessionError::Transport { method, failure };
        }
        let exit = self.transport.wait_exit(EXIT_GRACE).await;
        SessionError::Lost {
            method,
            failure,
            exit,
            stderr_tail: self.transport.info().stderr_tail(),
        }
    }
}

fn read<T: DeserializeOwned>(
    method: &'static str,
    raw: &RawJson,
    expected: &'static str,
) -> Result<T, SessionError> {
    serde_json::from_str(raw.get()).map_err(|source| SessionError::Malformed {
        method,
        expected,
        source,
    })
}

fn last_tools_page(result: &RawJson) -> bool {
    serde_json::from_str::<ListToolsResult>(result.get())
        .map(|page| page.next_cursor.is_none())
        .unwrap_or(false)
}

fn unnamed_server() -> Implementation {
    Implementation {
        name: "(the server did not say)".to_owned(),
        version: String::new(),
        title: None,
    }
}
