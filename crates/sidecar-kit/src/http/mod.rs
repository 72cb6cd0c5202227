//! Serving MCP over Streamable HTTP: one endpoint, one job directory per caller's job.
//!
//! Who may call: bound to loopback, anyone on this host whose requests name a loopback
//! `Host` (and, from a browser, a loopback `Origin`); bound anywhere else, only a client
//! with the operator's bearer token, checked from the headers before the body is read.
//! A legacy-era session is a job; a stateless (2026-07-28) caller names its job with a job
//! key in `_meta`, bound to its token. Connections, sessions and stateless jobs are bounded
//! overall and per peer address, expire when idle and on shutdown, and take their job
//! directories with them.

mod access;
mod connections;
mod issuer_keys;
mod options;
mod protected_resource;
mod session_era;
mod sessions;
mod stateless;

use std::future::Future;
use std::io::{self, Read};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use maljan_mcp_proto::jsonrpc::{
    DecodedLine, ErrorObject, ErrorResponse, Message, RequestId, decode_line, error_codes,
};
use maljan_mcp_proto::mcp::headers as modern_headers;
use maljan_mcp_proto::mcp::{decode_header_value, methods};

use crate::Server;
use crate::era;
use crate::server::{encode, error_reply};
use crate::tool::Cancellation;
use access::{check_caller, refuse};
use connections::serve_connections;
pub use issuer_keys::IssuerError;
use maljan_mcp_proto::mcp::Era;
pub use options::{
    BODY_TIMEOUT, HEADER_TIMEOUT, HttpOptions, MAX_BODY_BYTES_HELD, MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_PEER, MAX_REQUEST_BYTES, MAX_SESSIONS, MAX_SESSIONS_PER_PEER, SESSION_IDLE,
};
pub use protected_resource::ProtectedResource;
use session_era::{handle_delete, initialize, session_post};
use sessions::Sessions;
use stateless::stateless_post;

const SESSION_HEADER: &str = "mcp-session-id";
/// The methods a modern request may name here; any other is 404 with `-32601`.
const MODERN_METHODS: [&str; 3] = [
    methods::SERVER_DISCOVER,
    methods::TOOLS_LIST,
    methods::TOOLS_CALL,
];

struct HttpState {
    server: Arc<Server>,
    options: HttpOptions,
    loopback: bool,
    sessions: Sessions<String>,
    /// Stateless callers' jobs, by the digest of their job key and token.
    stateless: Sessions<[u8; 32]>,
    /// Room for request bodies, in KiB: a request holds its body's share from before the
    /// body is read until it is answered.
    bodies: Arc<tokio::sync::Semaphore>,
}

/// The KiB of room a body of `bytes` takes (one for an empty one).
fn body_share(bytes: usize) -> u32 {
    u32::try_from(bytes.div_ceil(1024).max(1)).unwrap_or(u32::MAX)
}

/// A session id from the operating system's randomness: 128 bits in hex.
fn new_session_id() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn json_response(status: StatusCode, line: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], line).into_response()
}

fn error_response(
    status: StatusCode,
    id: Option<RequestId>,
    code: i64,
    message: String,
) -> Response {
    let line = match id {
        Some(id) => encode(&error_reply(id, code, message)),
        None => encode(&Message::Error(ErrorResponse {
            id: None,
            error: ErrorObject::new(code, message),
        })),
    };
    json_response(status, line)
}

/// Cancels a call when dropped before it answers: a request's future is dropped when its
/// client goes away, and the handler's thread must then stop too.
struct CancelOnDrop(Cancellation);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// A request: its caller checked from the headers first, then its body read within the
/// size and time bounds.
async fn handle_post(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    request: axum::extract::Request,
) -> Response {
    let (parts, body) = request.into_parts();
    let caller = match check_caller(&state.options, state.loopback, peer, &parts.headers).await {
        Ok(caller) => caller,
        Err(refusal) => return refusal.into_response(),
    };
    // Room for the body before it is read: its stated length, or the most a body may be.
    let stated = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if stated.is_some_and(|n| n > MAX_REQUEST_BYTES) {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("bodies are at most {MAX_REQUEST_BYTES} bytes: send large files in chunks"),
        );
    }
    let share = body_share(stated.unwrap_or(MAX_REQUEST_BYTES));
    let room = state.bodies.clone().acquire_many_owned(share);
    let _room = match tokio::time::timeout(state.options.body_timeout, room).await {
        Ok(Ok(room)) => room,
        _ => {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server holds as many request bodies as it may; try again later".to_owned(),
            );
        }
    };
    let read = axum::body::to_bytes(body, stated.unwrap_or(MAX_REQUEST_BYTES));
    let body = match tokio::time::timeout(state.options.body_timeout, read).await {
        Ok(Ok(body)) => body,
        Ok(Err(e)) => {
            return refuse(
                StatusCode::PAYLOAD_TOO_LARGE,
                format!(
                    "the request body was not read ({e}); bodies are at most \
                     {MAX_REQUEST_BYTES} bytes: send large files in chunks"
                ),
            );
        }
        Err(_) => {
            return refuse(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the request body did not arrive within {} s",
                    state.options.body_timeout.as_secs()
                ),
            );
        }
    };
    let headers = parts.headers;
    let message = match decode_line(&body, false) {
        DecodedLine::Message(m) => m,
        DecodedLine::Invalid(invalid) => {
            return error_response(
                StatusCode::BAD_REQUEST,
                invalid.id,
                error_codes::INVALID_REQUEST,
                invalid.reason.to_string(),
            );
        }
        DecodedLine::Batch(_) | DecodedLine::NotProtocol => {
            return error_response(
                StatusCode::BAD_REQUEST,
                None,
                error_codes::INVALID_REQUEST,
                "one JSON-RPC message per POST".to_owned(),
            );
        }
    };
    if let Message::Request(request) = message {
        if request.method == methods::INITIALIZE {
            return initialize(&state, caller, request);
        }
        let discover = request.method == methods::SERVER_DISCOVER;
        let era = if request.method == methods::TOOLS_CALL {
            // A call's params may be a multi-MiB file chunk: its era is told here by its
            // headers, and its `_meta` checked as the call is read.
            Ok(if headers.contains_key(modern_headers::METHOD) {
                Era::Stateless
            } else {
                Era::Session
            })
        } else {
            era::request_era(request.params.as_deref(), discover)
        };
        match era {
            Ok(Era::Stateless) => return stateless_post(&state, caller, &headers, request).await,
            Ok(_) => {
                return session_post(&state, &headers, Message::Request(request)).await;
            }
            Err(refusal) => {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    encode(&Message::Error(ErrorResponse {
                        id: Some(request.id),
                        error: refusal,
                    })),
                );
            }
        }
    }
    session_post(&state, &headers, message).await
}

/// A header's value as its sender meant it (`=?base64?…?=` unwrapped).
fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    decode_header_value(headers.get(name)?.to_str().ok()?)
}

/// Ends idle sessions and stateless jobs once a while, until dropped.
async fn expire_idle_jobs(state: Arc<HttpState>) {
    let period =
        (state.options.session_idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(30));
    loop {
        tokio::time::sleep(period).await;
        state.sessions.end_idle();
        state.stateless.end_idle();
    }
}

impl Server {
    /// Serves Streamable HTTP on a loopback `listener` at `/mcp` with the default
    /// [`HttpOptions`], until the process ends; see [`Server::serve_http_with`].
    pub async fn serve_http(self, listener: tokio::net::TcpListener) -> io::Result<()> {
        self.serve_http_with(listener, HttpOptions::default(), std::future::pending())
            .await
    }

    /// Serves Streamable HTTP on `listener` at `/mcp` until `shutdown` completes, then ends
    /// every session and stateless job and removes its job directory.
    ///
    /// Refused: a listener on anything but loopback without a bearer token (at start,
    /// saying what to do); a request without the token when there is one (401, before its
    /// body is read); a `Host` or `Origin` not served here (403); a body over
    /// [`MAX_REQUEST_BYTES`] (413) or slower than [`HttpOptions::body_timeout`] (408); a new
    /// session or stateless job past [`HttpOptions::max_sessions`] or
    /// [`HttpOptions::max_sessions_per_peer`] (503). Connections are bounded as
    /// [`HttpOptions`] says: past a cap, the oldest connection carrying no request makes
    /// room. The GET stream is not offered (405). A client that goes away cancels its call.
    ///
    /// Both eras are served. A legacy session is a job of its own. A request whose `_meta`
    /// names a protocol version is modern: stateless, without a session; its
    /// `MCP-Protocol-Version`, `Mcp-Method` and (for `tools/call`) `Mcp-Name` headers must
    /// match its body (400 with `-32020`), its `_meta` must hold every required key (400
    /// with `-32602`) for 2026-07-28 (400 with `-32022`), and a method not served is 404
    /// with `-32601`. A modern call works in the job its `_meta` job key names
    /// ([`maljan_mcp_proto::maljan::JOB_KEY_META`]), bound to the caller's token: the same
    /// key with another token is another job. A call with no key works in a job of its own,
    /// removed when it answers. A DELETE in the modern era is 405.
    pub async fn serve_http_with(
        self,
        listener: tokio::net::TcpListener,
        options: HttpOptions,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()> {
        let local: SocketAddr = listener.local_addr()?;
        let loopback = local.ip().is_loopback();
        if !loopback && options.token_digest.is_none() && options.protected.is_none() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "refusing to serve {local} without a bearer token: anyone who reaches \
                     the port could call the tools; name a token (HttpOptions::bearer_token, \
                     or the sidecar's --token-file / --token-env) or bind 127.0.0.1"
                ),
            ));
        }
        let state = Arc::new(HttpState {
            server: Arc::new(self),
            sessions: Sessions::new(
                options.max_sessions,
                options.max_sessions_per_peer,
                options.session_idle,
            ),
            stateless: Sessions::new(
                options.max_sessions,
                options.max_sessions_per_peer,
                options.session_idle,
            ),
            bodies: Arc::new(tokio::sync::Semaphore::new(
                body_share(options.max_body_bytes_held) as usize,
            )),
            options,
            loopback,
        });
        let expiry = tokio::spawn(expire_idle_jobs(state.clone()));
        let mut app = Router::new().route(
            "/mcp",
            post(handle_post)
                .delete(handle_delete)
                .get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
        );
        if let Some(resource) = &state.options.protected {
            // Read by clients before they hold a token: served to anyone.
            let metadata = axum::Json(resource.metadata());
            app = app.route(
                &resource.metadata_path(),
                axum::routing::get(move || async move { metadata.clone() }),
            );
        }
        let app = app.with_state(state.clone());
        serve_connections(listener, app, &state.options, shutdown).await;
        expiry.abort();
        state.sessions.end_all();
        state.stateless.end_all();
        Ok(())
    }
}
