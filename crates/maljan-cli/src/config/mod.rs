//! The servers `maljan` knows: the bundled reference sidecar, those of a TOML file or of the
//! ecosystem's `mcpServers` JSON, and one named on the command line after `--`.

mod mcp_servers;
mod oauth;
mod store;

pub(crate) use store::StoreSection;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use maljan_client::{
    BreakerSettings, ClientSettings, ElicitationPolicy, EraChoice, RunLimits, SampleMount,
    ServerCommand, ServerConfig, ServerTransport,
};
use serde::Deserialize;

use crate::authorization::ServerAuthorization;
use crate::error::CliError;
pub(crate) use oauth::OAuthSection;

/// The name of the bundled reference sidecar.
pub(crate) const BUNDLED: &str = "sidecar";

/// The config file's shape.
///
/// ```toml
/// default_server = "analysis"
/// timeout_s = 60
///
/// [servers.remote]
/// url = "https://analysis.example/mcp"
/// headers = { X-Team = "triage" }
/// bearer_token_env = "ANALYSIS_TOKEN"
///
/// [servers.protected]
/// url = "https://mcp.example.com/mcp"
/// oauth = { client_id = "triage-worker", client_secret_env = "PROTECTED_SECRET" }
///
/// [servers.analysis]
/// command = "python3"
/// args = ["-m", "analysis_server"]
/// env = { LOG_LEVEL = "info" }
/// cwd = "/srv/analysis"
/// max_line_bytes = 33554432
/// sample_mount = { local = "/var/maljan/jobs", remote = "/jobs" }
/// staging = "auto"   # or "always" (hand it the job's copy) or "never" (the path as written)
///
/// [core.mcp]
/// elicitation = "decline"   # or "defaults": accept with the schema's default values
/// roots = true              # declare roots: roots/list lists the job's directory
/// era = "auto"              # or "session" (initialize only) or "stateless" (2026-07-28 only)
/// discover_timeout_s = 5    # how long server/discover waits before a server is legacy
///
/// [core.mcp.breaker]
/// max_concurrent_calls = 4
/// unanswered_threshold = 3
/// rest_s = 60
///
/// [core.run]
/// max_instances_per_step = 1000   # the runs a step's glob may fan out to
/// max_calls = 10000               # the tool calls one run's steps may make
/// max_taken_bytes = 10737418240   # the bytes of files one run may take (default: the disk)
/// ```
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    default_server: Option<String>,
    timeout_s: Option<f64>,
    #[serde(default)]
    servers: BTreeMap<String, ServerEntry>,
    #[serde(default)]
    core: CoreSection,
    store: Option<StoreSection>,
}

/// `[core.mcp]`, `[core.mcp.breaker]` and `[core.run]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CoreSection {
    #[serde(default)]
    mcp: McpSection,
    #[serde(default)]
    run: RunLimits,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct McpSection {
    #[serde(default)]
    breaker: BreakerSettings,
    #[serde(default)]
    elicitation: ElicitationPolicy,
    #[serde(default)]
    roots: bool,
    #[serde(default)]
    era: EraChoice,
    discover_timeout_s: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ServerEntry {
    command: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    bearer_token_env: Option<String>,
    oauth: Option<OAuthSection>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    max_line_bytes: Option<usize>,
    sample_mount: Option<SampleMount>,
    #[serde(default)]
    staging: Staging,
}

/// Whether `maljan call` stages a file an argument names into a job and hands the server
/// that copy, or hands it the path as written (`staging` of a server in the TOML file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Staging {
    /// As the server needs: staged for a server on another host, one with a sample mount,
    /// or one whose manifest says it reads only its job's directory (the kit's servers);
    /// the path as written for any other (a server that works on the host's files, such
    /// as the official filesystem server, must edit the real file, not a copy).
    #[default]
    Auto,
    /// Always staged: the server gets the job's copy.
    Always,
    /// Never staged: the server gets the path as written.
    Never,
}

/// The servers and client settings in force.
#[derive(Debug)]
pub(crate) struct Config {
    default_server: String,
    servers: BTreeMap<String, ServerConfig>,
    /// Each server's `staging`, when its entry says.
    staging: BTreeMap<String, Staging>,
    /// How each HTTP server without a token of its own is authorized.
    authorizations: BTreeMap<String, Arc<ServerAuthorization>>,
    pub(crate) settings: ClientSettings,
    /// `[store]`, when the file names a fleet's stores.
    pub(crate) store: Option<StoreSection>,
}

impl Config {
    /// Reads the config file, if any; the bundled sidecar is always there unless the file
    /// defines a server of the same name.
    ///
    /// A file whose name ends in `.json` is read in the ecosystem's `mcpServers` shape (its
    /// servers only; every setting keeps its default); any other as maljan's TOML.
    pub(crate) fn load(path: Option<&Path>) -> Result<Config, CliError> {
        let file = match path {
            None => ConfigFile::default(),
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| CliError::Config {
                    path: path.to_owned(),
                    detail: format!("cannot read it: {e}"),
                })?;
                if path
                    .extension()
                    .is_some_and(|e| e.eq_ignore_ascii_case("json"))
                {
                    let servers = mcp_servers::read(&text).map_err(|detail| CliError::Config {
                        path: path.to_owned(),
                        detail,
                    })?;
                    return Config::of_servers(servers);
                }
                toml::from_str(&text).map_err(|e| CliError::Config {
                    path: path.to_owned(),
                    detail: e.to_string(),
                })?
            }
        };
        let mut servers = BTreeMap::new();
        let mut staging = BTreeMap::new();
        let mut authorizations = BTreeMap::new();
        servers.insert(BUNDLED.to_owned(), bundled_sidecar()?);
        for (name, entry) in file.servers {
            let mut config = match (entry.command, entry.url) {
                (Some(program), None) => {
                    let mut command = ServerCommand::new(program);
                    command.args = entry.args;
                    command.env = entry.env.into_iter().collect();
                    command.cwd = entry.cwd;
                    ServerConfig::stdio(name.clone(), command)
                }
                (None, Some(url)) => {
                    let mut config = ServerConfig::http(name.clone(), url.clone());
                    for (header, value) in entry.headers {
                        config = config.with_header(header, value);
                    }
                    match entry.bearer_token_env {
                        Some(variable) if entry.oauth.is_some() => {
                            return Err(CliError::Config {
                                path: path.map(Path::to_owned).unwrap_or_default(),
                                detail: format!(
                                    "server {name} names both bearer_token_env ({variable}) and [servers.{name}.oauth]; keep one"
                                ),
                            });
                        }
                        Some(variable) => config.with_bearer_token_env(variable),
                        None => {
                            let authorization =
                                Arc::new(ServerAuthorization::new(&name, &url, entry.oauth));
                            authorizations.insert(name.clone(), Arc::clone(&authorization));
                            config.with_authorizer(authorization)
                        }
                    }
                }
                _ => {
                    return Err(CliError::Config {
                        path: path.map(Path::to_owned).unwrap_or_default(),
                        detail: format!(
                            "server {name} needs either command (stdio) or url (HTTP), not both or neither"
                        ),
                    });
                }
            };
            if let Some(max) = entry.max_line_bytes {
                config.stdio.classifier.max_line_bytes = max;
            }
            config.sample_mount = entry.sample_mount;
            staging.insert(name.clone(), entry.staging);
            servers.insert(name, config);
        }
        let mut settings = ClientSettings::default();
        file.core
            .mcp
            .breaker
            .validate()
            .map_err(|e| CliError::Config {
                path: path.map(Path::to_owned).unwrap_or_default(),
                detail: e.to_string(),
            })?;
        settings.breaker = file.core.mcp.breaker;
        settings.elicitation = file.core.mcp.elicitation;
        settings.declare_roots = file.core.mcp.roots;
        settings.era = file.core.mcp.era;
        settings.run = file.core.run;
        if let Some(t) = file.core.mcp.discover_timeout_s {
            settings.discover_timeout = Duration::try_from_secs_f64(t)
                .ok()
                .filter(|t| !t.is_zero())
                .ok_or_else(|| CliError::Config {
                    path: path.map(Path::to_owned).unwrap_or_default(),
                    detail: format!(
                        "core.mcp.discover_timeout_s = {t} is not a positive number of seconds"
                    ),
                })?;
        }
        if let Some(t) = file.timeout_s {
            settings.default_timeout =
                Duration::try_from_secs_f64(t).map_err(|_| CliError::Config {
                    path: path.map(Path::to_owned).unwrap_or_default(),
                    detail: format!("timeout_s = {t} is not a number of seconds"),
                })?;
        }
        Ok(Config {
            default_server: file.default_server.unwrap_or_else(|| BUNDLED.to_owned()),
            servers,
            staging,
            authorizations,
            settings,
            store: file.store,
        })
    }

    /// The bundled sidecar and `servers`, with default settings; the default server is the
    /// only one of `servers` when there is one, else the sidecar.
    fn of_servers(servers: Vec<ServerConfig>) -> Result<Config, CliError> {
        let default_server = match servers.as_slice() {
            [only] => only.name.clone(),
            _ => BUNDLED.to_owned(),
        };
        let mut known = BTreeMap::new();
        known.insert(BUNDLED.to_owned(), bundled_sidecar()?);
        let mut authorizations = BTreeMap::new();
        for server in servers {
            let server = with_kept_login(server, &mut authorizations);
            known.insert(server.name.clone(), server);
        }
        Ok(Config {
            default_server,
            servers: known,
            staging: BTreeMap::new(),
            authorizations,
            settings: ClientSettings::default(),
            store: None,
        })
    }

    /// Adds the stdio server `command` (a program and its arguments, as written after `--`)
    /// and makes it the default server. It is named `name`, else by the last word of the
    /// command that is not an option, as a file name (`npx -y
    /// @modelcontextprotocol/server-everything` is `server-everything`), so that the ledger
    /// and messages say which server it was.
    pub(crate) fn add_command_server(&mut self, command: &[String], name: Option<&str>) {
        let Some((program, args)) = command.split_first() else {
            return;
        };
        let name = name.map_or_else(|| command_name(command), str::to_owned);
        let mut server = ServerCommand::new(program);
        server.args = args.to_vec();
        self.servers
            .insert(name.clone(), ServerConfig::stdio(name.clone(), server));
        self.default_server = name;
    }

    /// The server `name`'s staging.
    pub(crate) fn staging(&self, name: &str) -> Staging {
        self.staging.get(name).copied().unwrap_or_default()
    }

    /// The configured servers' names.
    pub(crate) fn server_names(&self) -> impl Iterator<Item = &str> {
        self.servers.keys().map(String::as_str)
    }

    /// Every configured server.
    pub(crate) fn servers(&self) -> Vec<ServerConfig> {
        self.servers.values().cloned().collect()
    }

    /// A server by name, or the default one; a bare `http://` or `https://` URL is a
    /// Streamable HTTP server of that name.
    /// How the server `name` (or the server at that URL) is authorized, for `maljan login`
    /// and `logout`.
    pub(crate) fn authorization(&self, name: &str) -> Result<Arc<ServerAuthorization>, CliError> {
        if name.starts_with("http://") || name.starts_with("https://") {
            return Ok(Arc::new(ServerAuthorization::new(
                &maljan_client::redact_credentials(name),
                name,
                None,
            )));
        }
        if let Some(authorization) = self.authorizations.get(name) {
            return Ok(Arc::clone(authorization));
        }
        let server = self.server(Some(name))?;
        let detail = if server.transport.is_remote() {
            "its token comes from bearer_token_env; login is for servers behind OAuth"
        } else {
            "it is reached over stdio; login is for servers reached over HTTP"
        };
        Err(CliError::BadArgument {
            argument: name.to_owned(),
            detail: format!("server {name} takes no login: {detail}"),
        })
    }

    pub(crate) fn server(&self, name: Option<&str>) -> Result<ServerConfig, CliError> {
        let name = name.unwrap_or(&self.default_server);
        if name.starts_with("http://") || name.starts_with("https://") {
            // The URL names the server in the ledger and in messages: without its credentials.
            return Ok(with_kept_login(
                ServerConfig::http(maljan_client::redact_credentials(name), name),
                &mut BTreeMap::new(),
            ));
        }
        self.servers
            .get(name)
            .cloned()
            .ok_or_else(|| CliError::UnknownServer {
                name: name.to_owned(),
                known: self.servers.keys().cloned().collect(),
            })
    }
}

/// `server`, authorized by the tokens `maljan login` kept for it when it is an HTTP server
/// with no token of its own.
fn with_kept_login(
    server: ServerConfig,
    authorizations: &mut BTreeMap<String, Arc<ServerAuthorization>>,
) -> ServerConfig {
    match &server.transport {
        ServerTransport::Http(http)
            if http.bearer_token_env.is_none() && http.authorizer.is_none() =>
        {
            let authorization = Arc::new(ServerAuthorization::new(&server.name, &http.url, None));
            authorizations.insert(server.name.clone(), Arc::clone(&authorization));
            server.with_authorizer(authorization)
        }
        _ => server,
    }
}

/// A server command's name: its last word that is not an option, as a file name, without a
/// package version (`@1.2`).
fn command_name(command: &[String]) -> String {
    let word = command
        .iter()
        .rev()
        .find(|word| !word.starts_with('-'))
        .map(String::as_str)
        .unwrap_or("server");
    let file = Path::new(word)
        .file_name()
        .and_then(|f| f.to_str())
        .unwrap_or(word);
    let unversioned = match file.rfind('@') {
        Some(at) if at > 0 => &file[..at],
        _ => file,
    };
    if unversioned.is_empty() {
        "server".to_owned()
    } else {
        unversioned.to_owned()
    }
}

/// `maljan` itself in sidecar mode: found on a fresh clone with no install step.
fn bundled_sidecar() -> Result<ServerConfig, CliError> {
    let exe = std::env::current_exe().map_err(CliError::OwnExecutable)?;
    Ok(ServerConfig::stdio(
        BUNDLED,
        ServerCommand::new(exe).arg("sidecar"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_file_adds_servers_beside_the_bundled_sidecar() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("maljan.toml");
        std::fs::write(
            &path,
            "timeout_s = 5\n[servers.py]\ncommand = \"python3\"\nargs = [\"-m\", \"srv\"]\nenv = { A = \"1\" }\n\
             [core.mcp.breaker]\nmax_concurrent_calls = 2\nrest_s = 10\n",
        )
        .expect("write");
        let config = Config::load(Some(&path)).expect("loads");
        assert_eq!(config.settings.default_timeout, Duration::from_secs(5));
        assert_eq!(config.settings.breaker.max_concurrent_calls, 2);
        assert_eq!(config.settings.breaker.rest_s, 10);
        assert_eq!(config.settings.breaker.unanswered_threshold, 3);
        assert!(config.server(Some("sidecar")).is_ok());
        let py = config.server(Some("py")).expect("py");
        match &py.transport {
            maljan_client::ServerTransport::Stdio(c) => {
                assert_eq!(c.args, ["-m", "srv"]);
                assert_eq!(c.env, [("A".to_owned(), "1".to_owned())]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_unknown_key_is_refused_with_the_file_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("maljan.toml");
        std::fs::write(&path, "[servers.x]\ncommand = \"a\"\nargz = []\n").expect("write");
        let error = Config::load(Some(&path)).expect_err("refused").to_string();
        assert!(
            error.contains("maljan.toml") && error.contains("argz"),
            "{error}"
        );
    }

    #[test]
    fn a_server_command_is_named_by_its_last_plain_word() {
        let words = |text: &str| text.split(' ').map(str::to_owned).collect::<Vec<_>>();
        for (command, name) in [
            (
                "npx -y @modelcontextprotocol/server-everything",
                "server-everything",
            ),
            (
                "npx -y @modelcontextprotocol/server-memory@2026.1.1",
                "server-memory",
            ),
            ("uvx mcp-server-time", "mcp-server-time"),
            ("python3 -m mcp_server_git --repository /srv/repo", "repo"),
            ("/usr/bin/srv --verbose", "srv"),
        ] {
            assert_eq!(command_name(&words(command)), name, "{command}");
        }
        let mut config = Config::load(None).expect("loads");
        config.add_command_server(&words("uvx mcp-server-time"), None);
        assert_eq!(
            config.server(None).expect("the default").name,
            "mcp-server-time"
        );
    }

    #[test]
    fn a_json_file_is_read_in_the_ecosystems_shape() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("claude_desktop_config.json");
        std::fs::write(
            &path,
            r#"{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}"#,
        )
        .expect("write");
        let config = Config::load(Some(&path)).expect("loads");
        assert_eq!(config.server(None).expect("the default").name, "time");
        assert!(config.server(Some("sidecar")).is_ok());
        std::fs::write(&path, r#"{"mcpServers": {"x": {}}}"#).expect("write");
        let error = Config::load(Some(&path)).expect_err("refused").to_string();
        assert!(error.contains("claude_desktop_config.json"), "{error}");
    }

    #[test]
    fn an_unknown_server_names_the_known_ones() {
        let config = Config::load(None).expect("loads");
        let error = config
            .server(Some("nope"))
            .expect_err("unknown")
            .to_string();
        assert!(
            error.contains("nope") && error.contains("sidecar"),
            "{error}"
        );
    }
}
