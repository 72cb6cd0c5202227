//! Why a server could not be used: a failed call is an answer, not one of these.

#[cfg(feature = "stdio")]
use maljan_mcp_stdio::SpawnError;
use maljan_mcp_transport::session::SessionError;

/// Why a server could not be used. Failures of a single call are not errors: they are
/// [`ToolAnswer`](maljan_mcp_proto::maljan::ToolAnswer)s that failed, with a code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server process could not be started.
    #[cfg(feature = "stdio")]
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    /// Setup (`server/discover` or `initialize`, `tools/list`) failed.
    #[error("{}", setup_failed_text(server, cause, stderr_tail))]
    SetupFailed {
        /// The server's name.
        server: String,
        /// The step that failed: `server/discover`, `initialize`, `tools/list`.
        step: &'static str,
        /// What went wrong.
        #[source]
        cause: Box<SessionError>,
        /// How the process ended, when it did.
        exit: Option<String>,
        /// The last lines of its stderr.
        stderr_tail: String,
    },
    /// The HTTP transport could not be set up.
    #[cfg(feature = "http")]
    #[error(transparent)]
    Http(maljan_mcp_http::HttpError),
    /// The bearer token's environment variable is not set.
    #[error(
        "server {server} wants a bearer token from the environment variable {variable}, which \
         is not set; export it before running"
    )]
    MissingToken {
        /// The server's name.
        server: String,
        /// The variable.
        variable: String,
    },
    /// The job's directory for a server could not be made.
    #[error("could not create the job directory {}: {source}; check the job directory's permissions", path.display())]
    JobDirectory {
        /// The directory.
        path: std::path::PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// A model-facing call to a platform primitive (`get_file`, `put_sample*`,
    /// `capabilities`): only the staging layer calls those.
    #[error(
        "{tool} is a platform primitive of server {server}, not a tool a model or a pack may \
         call; files reach servers by staging (--stage FILE, a pack's references) and leave \
         them by taking (--take, a step's outputs)"
    )]
    PlatformPrimitive {
        /// The server's name.
        server: String,
        /// The primitive asked for.
        tool: String,
    },
    /// A call to a tool the server does not offer.
    #[error(
        "server {server} has no tool named {tool:?}; its tools are: {}; see `maljan tools {server}`",
        known.join(", ")
    )]
    UnknownTool {
        /// The server's name.
        server: String,
        /// The tool asked for.
        tool: String,
        /// The tools it has (model-facing ones).
        known: Vec<String>,
    },
}

impl ClientError {
    /// Whether setup failed (the server started, or was reached, but is not usable).
    pub fn is_setup_failed(&self) -> bool {
        matches!(self, ClientError::SetupFailed { .. })
    }

    /// Whether the server could not be started or reached at all.
    pub fn is_unreachable(&self) -> bool {
        match self {
            #[cfg(feature = "stdio")]
            ClientError::Spawn(_) => true,
            #[cfg(feature = "http")]
            ClientError::Http(_) => true,
            _ => false,
        }
    }

    /// Whether the call named a tool the server does not offer, or a platform primitive.
    pub fn is_refused_tool(&self) -> bool {
        matches!(
            self,
            ClientError::UnknownTool { .. } | ClientError::PlatformPrimitive { .. }
        )
    }
}

fn setup_failed_text(server: &str, cause: &SessionError, stderr_tail: &str) -> String {
    let detail = cause.to_string();
    let step = cause.method();
    let mut text = if detail.contains(step) {
        format!("server {server} could not be set up: {detail}")
    } else {
        format!("server {server} could not be set up: {step} failed: {detail}")
    };
    // A lost connection's error already says how the server ended and what it last wrote.
    if !cause.is_lost() {
        if stderr_tail.is_empty() {
            text.push_str("; it wrote nothing on stderr");
        } else {
            text.push_str(&format!("; last stderr:\n{stderr_tail}"));
        }
    }
    text.push_str(
        "\nCheck that the command starts an MCP server over stdio (try running it by hand).",
    );
    text
}
