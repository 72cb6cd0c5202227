//! The reference sidecar as a binary: serves MCP over stdio, or over Streamable HTTP with
//! `--http ADDR` (loopback by default: `--http` alone is `127.0.0.1:0`, a free port).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use maljan_confine::Root;
use maljan_sidecar_kit::{CallLimits, HttpOptions, ProtectedResource, TransferLimits};

/// The server decodes, hashes and encodes multi-MiB file chunks on a pool of blocking
/// threads: mimalloc reuses those buffers across threads where the system allocator's
/// per-thread arenas keep returning them to the kernel and faulting them back in.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Maljan's reference analysis sidecar: an MCP tool server over stdio (the default) or
/// Streamable HTTP.
///
/// Tools read files beneath the job's directory (MALJAN_JOB_DIR over stdio, one per session
/// over HTTP) and the roots named with --root or MALJAN_ROOTS; nothing else on the host.
#[derive(Debug, Parser)]
#[command(name = "maljan-sidecar", version)]
struct Options {
    /// Serve Streamable HTTP at http://ADDR/mcp instead of stdio (default 127.0.0.1:0, a
    /// free loopback port). Any address but loopback needs a bearer token.
    #[arg(long, value_name = "ADDR", num_args = 0..=1, default_missing_value = "127.0.0.1:0")]
    http: Option<String>,
    /// A file holding the bearer token HTTP clients must send (its first line).
    #[arg(
        long,
        value_name = "PATH",
        requires = "http",
        conflicts_with = "token_env"
    )]
    token_file: Option<PathBuf>,
    /// An environment variable holding the bearer token HTTP clients must send.
    #[arg(long, value_name = "VAR", requires = "http")]
    token_env: Option<String>,
    /// Serve as an OAuth 2.1 protected resource at this URL (the audience of its tokens;
    /// say https://analysis.example.com/mcp), instead of with one bearer token: callers need
    /// an access token of --oauth-issuer, checked against the keys it publishes at its
    /// metadata's jwks_uri (or those of --oauth-jwks-file).
    #[arg(
        long,
        value_name = "URL",
        requires_all = ["http", "oauth_issuer"],
        conflicts_with_all = ["token_file", "token_env"]
    )]
    oauth_resource: Option<String>,
    /// The authorization server whose access tokens are let in (its issuer identifier).
    #[arg(long, value_name = "URL", requires = "oauth_resource")]
    oauth_issuer: Option<String>,
    /// The authorization server's signing keys, as a JWK set saved from its jwks_uri, for
    /// a server this one cannot reach; without it they are fetched from the issuer, and
    /// fetched again as it rotates them.
    #[arg(long, value_name = "PATH", requires = "oauth_resource")]
    oauth_jwks_file: Option<PathBuf>,
    /// A scope every access token must hold; repeat for more.
    #[arg(long, value_name = "SCOPE", requires = "oauth_resource")]
    oauth_scope: Vec<String>,
    /// A host name (name or name:port) HTTP clients may address the server by; repeat for
    /// more. Default: any, with a token; loopback names only, on loopback.
    #[arg(long, value_name = "HOST", requires = "http")]
    allowed_host: Vec<String>,
    /// How many HTTP sessions may be open at once (and, apart, how many stateless jobs).
    #[arg(long, value_name = "N", default_value_t = maljan_sidecar_kit::MAX_SESSIONS, requires = "http")]
    max_sessions: usize,
    /// How many HTTP sessions (and, apart, stateless jobs) one peer address may hold.
    #[arg(long, value_name = "N", default_value_t = maljan_sidecar_kit::MAX_SESSIONS_PER_PEER, requires = "http")]
    max_sessions_per_peer: usize,
    /// How many HTTP connections may be open at once; past it, the oldest connection
    /// carrying no request makes room. Keep it well under the open-file limit.
    #[arg(long, value_name = "N", default_value_t = maljan_sidecar_kit::MAX_CONNECTIONS, requires = "http")]
    max_connections: usize,
    /// How many HTTP connections one peer address may hold.
    #[arg(long, value_name = "N", default_value_t = maljan_sidecar_kit::MAX_CONNECTIONS_PER_PEER, requires = "http")]
    max_connections_per_peer: usize,
    /// How long a client has to send a request's headers (and how long a connection may
    /// idle between requests), in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = maljan_sidecar_kit::HEADER_TIMEOUT.as_secs(), requires = "http")]
    header_timeout: u64,
    /// How many bytes of HTTP request bodies the server holds at once; a request past them
    /// waits (up to the body timeout) for room, then is answered 503.
    #[arg(long, value_name = "BYTES", default_value_t = maljan_sidecar_kit::MAX_BODY_BYTES_HELD, requires = "http")]
    max_body_bytes_held: usize,
    /// How long a client has to send a request's body once its headers are in, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = maljan_sidecar_kit::BODY_TIMEOUT.as_secs(), requires = "http")]
    body_timeout: u64,
    /// How long an HTTP session may go without a request before it ends (and its job
    /// directory with it), in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = maljan_sidecar_kit::SESSION_IDLE.as_secs(), requires = "http")]
    session_idle: u64,
    /// How many tool calls run at once.
    #[arg(long, value_name = "N", default_value_t = maljan_sidecar_kit::MAX_CALLS_RUNNING)]
    max_calls: usize,
    /// How many tool calls may wait for a turn; past that a call is answered server_busy.
    #[arg(long, value_name = "N", default_value_t = maljan_sidecar_kit::MAX_CALLS_QUEUED)]
    max_queued_calls: usize,
    /// How many bytes each job's files may take on disk: uploads, unpacked members and
    /// files tools write; a write past it fails with over_limit.
    #[arg(long, value_name = "BYTES", default_value_t = maljan_sidecar_kit::JOB_BYTES)]
    job_bytes: u64,
    /// The largest upload accepted, in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = maljan_sidecar_kit::MAX_UPLOAD_BYTES)]
    max_upload_bytes: u64,
    /// A directory whose files tools may read besides the job's; repeat for more.
    #[arg(long, value_name = "DIR")]
    root: Vec<PathBuf>,
}

fn token(options: &Options) -> Result<Option<String>, String> {
    let token = match (&options.token_file, &options.token_env) {
        (Some(path), _) => std::fs::read_to_string(path)
            .map_err(|e| format!("the token file {} cannot be read: {e}", path.display()))?
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned(),
        (None, Some(var)) => std::env::var(var)
            .map_err(|_| format!("the token variable {var} is not set"))?
            .trim()
            .to_owned(),
        (None, None) => return Ok(None),
    };
    if token.len() < 16 {
        return Err(
            "the bearer token is shorter than 16 characters; use a long random one \
                    (say, openssl rand -hex 32)"
                .to_owned(),
        );
    }
    Ok(Some(token))
}

/// The OAuth 2.1 protected resource the options name, when they name one.
async fn protected_resource(options: &Options) -> Result<Option<ProtectedResource>, String> {
    let (Some(resource), Some(issuer)) = (&options.oauth_resource, &options.oauth_issuer) else {
        return Ok(None);
    };
    let Some(jwks) = &options.oauth_jwks_file else {
        let protected = ProtectedResource::discover(resource.as_str(), issuer.as_str())
            .await
            .map_err(|e| e.to_string())?;
        return Ok(Some(protected.require_scopes(options.oauth_scope.clone())));
    };
    let keys = std::fs::read_to_string(jwks)
        .map_err(|e| format!("the JWK set {} cannot be read: {e}", jwks.display()))?;
    let protected =
        ProtectedResource::new(resource.as_str(), issuer.as_str(), &keys).map_err(|e| {
            format!(
                "{} is not a JWK set ({e}); save what the authorization server's jwks_uri serves",
                jwks.display()
            )
        })?;
    Ok(Some(protected.require_scopes(options.oauth_scope.clone())))
}

async fn run(options: Options) -> Result<(), String> {
    let roots = options
        .root
        .iter()
        .map(|dir| {
            Root::open(dir).map_err(|e| format!("--root {} cannot be opened: {e}", dir.display()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let limits = TransferLimits::default().max_upload_bytes(options.max_upload_bytes);
    let calls = CallLimits::default()
        .running(options.max_calls)
        .queued(options.max_queued_calls);
    let server = maljan_sidecar::server_with(roots, limits, calls, options.job_bytes)
        .map_err(|e| e.to_string())?;
    match &options.http {
        None => maljan_sidecar::serve_stdio_with(server)
            .await
            .map_err(|e| e.to_string()),
        Some(addr) => {
            let mut http = HttpOptions::default()
                .max_sessions(options.max_sessions)
                .max_sessions_per_peer(options.max_sessions_per_peer)
                .session_idle(Duration::from_secs(options.session_idle))
                .max_connections(options.max_connections)
                .max_connections_per_peer(options.max_connections_per_peer)
                .header_timeout(Duration::from_secs(options.header_timeout))
                .body_timeout(Duration::from_secs(options.body_timeout))
                .max_body_bytes_held(options.max_body_bytes_held);
            if let Some(token) = token(&options)? {
                http = http.bearer_token(token);
            }
            if let Some(resource) = protected_resource(&options).await? {
                http = http.protected_resource(resource);
            }
            for host in &options.allowed_host {
                http = http.allowed_host(host);
            }
            maljan_sidecar::serve_http(addr, http, server)
                .await
                .map_err(|e| e.to_string())
        }
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Options::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("maljan-sidecar: {e}");
            ExitCode::FAILURE
        }
    }
}
