#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
mod tools;

use maljan_confine::Root;
use maljan_sidecar_kit::{CallLimits, HttpOptions, Server, ServerBuilder, TransferLimits};

/// The server's name in its manifest.
pub const NAME: &str = "maljan-sidecar";

/// Builds the server; tool dependencies are probed now. Its tools read files beneath each
/// job's directory only.
pub fn server() -> Server {
    tools().file_transfer().build()
}

/// The analysis tools, before the file primitives.
fn tools() -> ServerBuilder {
    Server::builder(NAME, env!("CARGO_PKG_VERSION"))
        .tool(tools::file_info_spec(), tools::file_info)
        .tool(tools::strings_spec(), tools::strings)
        .tool(tools::archive_list_spec(), tools::archive_list)
        .tool(tools::unpack_spec(), tools::unpack)
}

/// The server with other bounds on its transfers, its calls and each job's disk use
/// (`job_bytes`), its tools also reading files beneath `roots` and the directories
/// `MALJAN_ROOTS` names.
pub fn server_with(
    roots: Vec<Root>,
    limits: TransferLimits,
    calls: CallLimits,
    job_bytes: u64,
) -> std::io::Result<Server> {
    let mut builder = tools()
        .file_transfer_with(limits)
        .call_limits(calls)
        .job_bytes(job_bytes)
        .roots_from_env()?;
    for root in roots {
        builder = builder.root(root);
    }
    Ok(builder.build())
}

/// Makes stdio safe, logs to stderr, and serves over stdin/stdout until stdin ends. Tools
/// read files beneath the job's directory (`MALJAN_JOB_DIR`) and the directories
/// `MALJAN_ROOTS` names.
pub async fn serve_stdio() -> std::io::Result<()> {
    serve_stdio_with(server_with(
        Vec::new(),
        TransferLimits::default(),
        CallLimits::default(),
        maljan_sidecar_kit::JOB_BYTES,
    )?)
    .await
}

/// [`serve_stdio`] with a server of the caller's (see [`server_with`]).
pub async fn serve_stdio_with(server: Server) -> std::io::Result<()> {
    maljan_sidecar_kit::log_to_stderr();
    server.serve_stdio().await
}

/// Serves `server` over Streamable HTTP on `addr` at `/mcp`, one job directory per session,
/// logging to stderr, until SIGINT or SIGTERM (then every session's job directory is
/// removed). The first line on stderr names the endpoint: `listening on http://ADDR/mcp`.
/// Any address but loopback is refused, before it is bound, unless `options` name a bearer
/// token.
pub async fn serve_http(addr: &str, options: HttpOptions, server: Server) -> std::io::Result<()> {
    maljan_sidecar_kit::log_to_stderr();
    if let Ok(wanted) = addr.parse::<std::net::SocketAddr>()
        && !wanted.ip().is_loopback()
        && !options.has_bearer_token()
        && !options.is_protected_resource()
    {
        return Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "refusing to serve {wanted} without a bearer token: anyone who reaches the \
                 port could call the tools; name one (--token-file or --token-env), serve \
                 as an OAuth protected resource (--oauth-resource) or bind 127.0.0.1"
            ),
        ));
    }
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let shutdown = async {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        let terminated = async {
            match term.as_mut() {
                Some(term) => {
                    term.recv().await;
                }
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = terminated => {}
        }
        tracing::info!("shutting down: ending every session");
    };
    let serving = server.serve_http_with(listener, options, shutdown);
    eprintln!("listening on http://{local}/mcp");
    serving.await
}
