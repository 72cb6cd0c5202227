//! What can stop `maljan`, each naming the remedy.

use std::io;
use std::path::PathBuf;

use maljan_client::ClientError;

#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    #[error("the config file {} is not usable: {detail}; see the README for its format", path.display())]
    Config { path: PathBuf, detail: String },
    #[error("no server named {name:?}; known servers: {}; add it to the config file (--config)", known.join(", "))]
    UnknownServer { name: String, known: Vec<String> },
    #[error("bad argument {argument:?}: {detail}")]
    BadArgument { argument: String, detail: String },
    #[error("cannot find maljan's own executable to start the bundled sidecar: {0}")]
    OwnExecutable(#[source] io::Error),
    #[error(transparent)]
    Client(#[from] ClientError),
    #[error("{0}; pass --ledger with a writable path")]
    Ledger(#[source] maljan_ledger::SinkError),
    #[error("the job directory {} cannot be used: {source}; pass --job with a writable directory", path.display())]
    Job {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "Ctrl-C and SIGTERM cannot be caught ({0}), so a stopped run could not write its report"
    )]
    Signals(#[source] io::Error),
    #[error("the demo could not be set up: {0}")]
    Demo(String),
    #[error("the output could not be made: {0}")]
    Output(#[source] io::Error),
    #[error(transparent)]
    Fleet(#[from] maljan_fleet::FleetError),
    #[error(
        "the configuration names no fleet store; add a [store] table (postgres and objects, see the README) and pass it with --config"
    )]
    NoStore,
    #[error("{source}; check that the jobs directory is readable")]
    Index {
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("server {server}: {source}")]
    Login {
        server: String,
        #[source]
        source: maljan_mcp_http::AuthorizationError,
    },
    #[error("the sidecar stopped: {0}")]
    Sidecar(#[source] io::Error),
}
