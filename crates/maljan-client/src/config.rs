//! How to reach each server and how the client behaves: the settings a configuration file
//! fills.

use std::time::Duration;

use maljan_breaker::BreakerSettings;
use maljan_mcp_proto::mcp::{ClientRoot, ElicitationPolicy, Implementation, ServerRequestPolicy};
#[cfg(feature = "stdio")]
use maljan_mcp_stdio::{ServerCommand, StdioConfig};
pub use maljan_mcp_transport::session::EraChoice;
use maljan_staging::SampleMount;

/// How to reach a server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ServerTransport {
    /// A child process speaking newline-delimited JSON-RPC on stdin/stdout.
    #[cfg(feature = "stdio")]
    Stdio(ServerCommand),
    /// A server elsewhere, over Streamable HTTP.
    #[cfg(feature = "http")]
    Http(HttpServer),
}

impl ServerTransport {
    /// Whether the server runs elsewhere (not as a child process of this client).
    pub fn is_remote(&self) -> bool {
        match self {
            #[cfg(feature = "stdio")]
            ServerTransport::Stdio(_) => false,
            #[cfg(feature = "http")]
            ServerTransport::Http(_) => true,
        }
    }
}

/// How to reach a server over Streamable HTTP.
#[cfg(feature = "http")]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HttpServer {
    /// The MCP endpoint, e.g. `http://127.0.0.1:8080/mcp`.
    pub url: String,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// The environment variable holding a bearer token, if the server wants one.
    pub bearer_token_env: Option<String>,
    /// Where tokens come from when the server asks for authorization (OAuth 2.1, say).
    pub authorizer: Option<SharedAuthorizer>,
}

/// An [`Authorizer`](maljan_mcp_http::Authorizer) shared by the connections to one server:
/// equal only to itself.
#[cfg(feature = "http")]
#[derive(Debug, Clone)]
pub struct SharedAuthorizer(pub std::sync::Arc<dyn maljan_mcp_http::Authorizer>);

#[cfg(feature = "http")]
impl PartialEq for SharedAuthorizer {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::addr_eq(
            std::sync::Arc::as_ptr(&self.0),
            std::sync::Arc::as_ptr(&other.0),
        )
    }
}

#[cfg(feature = "http")]
impl Eq for SharedAuthorizer {}

/// A server the client can connect to.
///
/// ```
/// use maljan_client::{ServerConfig, ServerTransport};
/// use maljan_mcp_stdio::ServerCommand;
/// let config = ServerConfig::stdio("sidecar", ServerCommand::new("maljan-sidecar"));
/// assert_eq!(config.stdio.name, "sidecar");
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The server's name, as used in logs, errors and the ledger.
    pub name: String,
    /// How to reach it.
    pub transport: ServerTransport,
    /// Settings of the stdio transport.
    #[cfg(feature = "stdio")]
    pub stdio: StdioConfig,
    /// Where the server sees the job's files, when it shares them: paths are rewritten,
    /// nothing is uploaded, and files it writes are taken through `get_file`.
    pub sample_mount: Option<SampleMount>,
}

impl ServerConfig {
    /// A Streamable HTTP server at `url`, with no extra headers.
    #[cfg(feature = "http")]
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        let name = name.into();
        ServerConfig {
            #[cfg(feature = "stdio")]
            stdio: StdioConfig::named(name.clone()),
            name,
            transport: ServerTransport::Http(HttpServer {
                url: url.into(),
                headers: Vec::new(),
                bearer_token_env: None,
                authorizer: None,
            }),
            sample_mount: None,
        }
    }

    /// Sends `name: value` with every request (an HTTP server's; ignored for stdio).
    ///
    /// ```
    /// use maljan_client::{ServerConfig, ServerTransport};
    /// let config = ServerConfig::http("remote", "https://analysis.example/mcp")
    ///     .with_header("X-Team", "triage")
    ///     .with_bearer_token_env("ANALYSIS_TOKEN");
    /// let ServerTransport::Http(http) = &config.transport else { unreachable!() };
    /// assert_eq!(http.headers, [("X-Team".to_owned(), "triage".to_owned())]);
    /// assert_eq!(http.bearer_token_env.as_deref(), Some("ANALYSIS_TOKEN"));
    /// ```
    #[cfg(feature = "http")]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        // Irrefutable when Streamable HTTP is the only transport built.
        #[allow(irrefutable_let_patterns)]
        if let ServerTransport::Http(http) = &mut self.transport {
            http.headers.push((name.into(), value.into()));
        }
        self
    }

    /// Reads an HTTP server's bearer token from the environment variable `variable` when
    /// connecting (ignored for stdio).
    #[cfg(feature = "http")]
    pub fn with_bearer_token_env(mut self, variable: impl Into<String>) -> Self {
        // Irrefutable when Streamable HTTP is the only transport built.
        #[allow(irrefutable_let_patterns)]
        if let ServerTransport::Http(http) = &mut self.transport {
            http.bearer_token_env = Some(variable.into());
        }
        self
    }

    /// Has `authorizer` obtain the tokens an HTTP server asks for (ignored for stdio):
    /// OAuth 2.1 with `maljan_mcp_http::oauth`, or the caller's own.
    #[cfg(feature = "http")]
    pub fn with_authorizer(
        mut self,
        authorizer: std::sync::Arc<dyn maljan_mcp_http::Authorizer>,
    ) -> Self {
        // Irrefutable when Streamable HTTP is the only transport built.
        #[allow(irrefutable_let_patterns)]
        if let ServerTransport::Http(http) = &mut self.transport {
            http.authorizer = Some(SharedAuthorizer(authorizer));
        }
        self
    }

    /// The server sees the job's files through `mount`: paths are rewritten, nothing is
    /// uploaded, and the files it writes are taken through `get_file`.
    pub fn with_sample_mount(mut self, mount: SampleMount) -> Self {
        self.sample_mount = Some(mount);
        self
    }

    /// A stdio server with default transport settings.
    #[cfg(feature = "stdio")]
    pub fn stdio(name: impl Into<String>, command: ServerCommand) -> Self {
        let name = name.into();
        ServerConfig {
            stdio: StdioConfig::named(name.clone()),
            name,
            transport: ServerTransport::Stdio(command),
            sample_mount: None,
        }
    }
}

/// The client's own settings: plain values, no live collaborators (those are a
/// [`ConnectionContext`](crate::context::ConnectionContext)).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClientSettings {
    /// How long a call waits when the manifest's `timeout_s` is null or absent.
    pub default_timeout: Duration,
    /// How long each setup request waits.
    pub setup_timeout: Duration,
    /// Who the client says it is.
    pub client_info: Implementation,
    /// The breaker and the concurrency cap of each server (`core.mcp.breaker.*`).
    pub breaker: BreakerSettings,
    /// How a server's `elicitation/create` is answered: declined (the default, for an
    /// unattended run) or accepted with the schema's defaults.
    pub elicitation: ElicitationPolicy,
    /// Whether the client declares `roots`: `roots/list` then lists the job's directory.
    pub declare_roots: bool,
    /// Which protocol era to speak: found by `server/discover` (the default), or fixed. With
    /// `auto`, a server found to hold sessions at an HTTP origin is not asked again by the
    /// same connection context.
    pub era: EraChoice,
    /// How long `server/discover` waits for an answer before the server is taken as one of
    /// the legacy era (which need not answer a method it does not know).
    pub discover_timeout: Duration,
    /// How much one run may do (`core.run.*`).
    pub run: RunLimits,
}

/// How much one run may do: what a hostile archive could otherwise turn into a hundred
/// thousand calls. Past a limit the step fails with `over_limit`, naming the limit and its
/// setting; the rest of the run goes on.
///
/// ```
/// use maljan_client::RunLimits;
/// let limits = RunLimits::default();
/// assert_eq!(limits.max_instances_per_step, 1000);
/// assert_eq!(limits.max_calls, 10_000);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RunLimits {
    /// How many runs a step's glob may fan out to (`core.run.max_instances_per_step`).
    pub max_instances_per_step: usize,
    /// How many tool calls a run's steps may make in all (`core.run.max_calls`).
    pub max_calls: usize,
    /// How many bytes the files a run takes from servers may come to
    /// (`core.run.max_taken_bytes`; none by default but the disk's free space). A file that
    /// states more than is left is refused at its first answer.
    pub max_taken_bytes: Option<u64>,
}

impl Default for RunLimits {
    fn default() -> Self {
        RunLimits {
            max_instances_per_step: 1000,
            max_calls: 10_000,
            max_taken_bytes: None,
        }
    }
}

impl ClientSettings {
    /// How the server's own requests are answered, for a connection whose job (if any)
    /// lives in `job_dir`.
    ///
    /// ```
    /// use maljan_client::ClientSettings;
    /// let mut settings = ClientSettings::default();
    /// settings.declare_roots = true;
    /// let policy = settings.server_requests(Some(std::path::Path::new("/jobs/j1")));
    /// assert_eq!(policy.declared_roots().unwrap()[0].uri, "file:///jobs/j1");
    /// ```
    pub fn server_requests(&self, job_dir: Option<&std::path::Path>) -> ServerRequestPolicy {
        let policy = ServerRequestPolicy::default().elicitation(self.elicitation);
        if !self.declare_roots {
            return policy;
        }
        policy.roots(
            job_dir
                .map(|dir| ClientRoot::directory(dir, "job"))
                .into_iter()
                .collect(),
        )
    }
}

impl Default for ClientSettings {
    fn default() -> Self {
        ClientSettings {
            default_timeout: Duration::from_secs(60),
            setup_timeout: Duration::from_secs(30),
            client_info: Implementation {
                name: "maljan".to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
                title: Some("Maljan".to_owned()),
            },
            breaker: BreakerSettings::default(),
            elicitation: ElicitationPolicy::default(),
            declare_roots: false,
            era: EraChoice::Auto,
            discover_timeout: Duration::from_secs(5),
            run: RunLimits::default(),
        }
    }
}
