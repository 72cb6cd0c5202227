//! Serving MCP over Streamable HTTP: one endpoint, one job directory per session.
//!
//! Who may call: bound to loopback, anyone on this host whose requests name a loopback
//! `Host` (and, from a browser, a loopback `Origin`); bound anywhere else, only a client
//! with the operator's bearer token. Sessions are bounded in number, expire when idle and
//! on shutdown, and take their job directories with them.

use std::collections::HashMap;
use std::future::Future;
use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use maljan_mcp_proto::jsonrpc::{
    DecodedLine, ErrorObject, ErrorResponse, Message, Request, RequestId, decode_line, error_codes,
};
use maljan_mcp_proto::mcp::headers as modern_headers;
use maljan_mcp_proto::mcp::{
    CancelledParams, MODERN_VERSION, decode_header_value, methods, modern_error_codes,
};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::era::{self, RequestEra};
use crate::job::lock;
use crate::server::{Answer, InFlight, encode, error_reply};
use crate::tool::Cancellation;
use crate::{JobDir, Server};

const SESSION_HEADER: &str = "mcp-session-id";
/// The methods a modern request may name here; any other is 404 with `-32601`.
const MODERN_METHODS: [&str; 3] = [
    methods::SERVER_DISCOVER,
    methods::TOOLS_LIST,
    methods::TOOLS_CALL,
];
/// The largest request body accepted: a 4 MiB file chunk in base64 fits many times over.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;
/// How many sessions may be open at once, unless the operator says otherwise.
pub const MAX_SESSIONS: usize = 64;
/// How long a session may go without a request before it ends, unless the operator says
/// otherwise.
pub const SESSION_IDLE: Duration = Duration::from_secs(15 * 60);

/// Who may call a server over HTTP, and how many sessions it keeps.
///
/// ```
/// use std::time::Duration;
/// use maljan_sidecar_kit::HttpOptions;
/// let options = HttpOptions::default()
///     .bearer_token("a long random secret")
///     .allowed_host("analysis.internal:8080")
///     .max_sessions(16)
///     .session_idle(Duration::from_secs(300));
/// assert!(format!("{options:?}").contains("redacted"));
/// ```
#[derive(Clone)]
pub struct HttpOptions {
    /// The sha256 of the token: compared in constant time, never kept in clear.
    token_digest: Option<[u8; 32]>,
    allowed_hosts: Vec<String>,
    max_sessions: usize,
    session_idle: Duration,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOptions")
            .field("bearer_token", &self.token_digest.map(|_| "(redacted)"))
            .field("allowed_hosts", &self.allowed_hosts)
            .field("max_sessions", &self.max_sessions)
            .field("session_idle", &self.session_idle)
            .finish()
    }
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            token_digest: None,
            allowed_hosts: Vec::new(),
            max_sessions: MAX_SESSIONS,
            session_idle: SESSION_IDLE,
        }
    }
}

impl HttpOptions {
    /// Requires `Authorization: Bearer TOKEN` on every request. Needed to bind anything but
    /// loopback.
    pub fn bearer_token(mut self, token: impl AsRef<[u8]>) -> Self {
        self.token_digest = Some(Sha256::digest(token.as_ref()).into());
        self
    }

    /// Whether a bearer token is required.
    pub fn has_bearer_token(&self) -> bool {
        self.token_digest.is_some()
    }

    /// Accepts requests whose `Host` header is `host` (`name` or `name:port`), besides
    /// loopback names when bound to loopback. Once any is named, no other host is accepted.
    pub fn allowed_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into().to_ascii_lowercase());
        self
    }

    /// How many sessions may be open at once ([`MAX_SESSIONS`]).
    pub fn max_sessions(mut self, sessions: usize) -> Self {
        self.max_sessions = sessions;
        self
    }

    /// How long a session may go without a request before it ends ([`SESSION_IDLE`]).
    pub fn session_idle(mut self, idle: Duration) -> Self {
        self.session_idle = idle;
        self
    }
}

/// One MCP session: its job and its calls in flight.
#[derive(Debug)]
struct Session {
    job: Arc<JobDir>,
    in_flight: Mutex<HashMap<RequestId, InFlight>>,
    last_used: Mutex<Instant>,
}

struct HttpState {
    server: Arc<Server>,
    options: HttpOptions,
    loopback: bool,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// The job directory of modern-era requests, once one needed it.
    modern_job: Mutex<Option<Arc<JobDir>>>,
}

/// A session id from the operating system's randomness: 128 bits in hex.
fn new_session_id() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The host part of a `Host` header or of an origin's authority, without its port.
fn host_name(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match authority.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => authority,
    }
}

fn is_loopback_name(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether an `Origin` header names this host (the spec requires refusing others).
fn origin_is_loopback(origin: &str) -> bool {
    let authority = origin
        .split_once("://")
        .map_or(origin, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default();
    is_loopback_name(host_name(authority))
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

fn refuse(status: StatusCode, why: String) -> Response {
    tracing::warn!("refused an HTTP request: {why}");
    (status, why).into_response()
}

/// Who is calling: the bearer token, the `Host` and the `Origin`. `Some` is the refusal.
fn caller_refusal(state: &HttpState, headers: &HeaderMap) -> Option<Response> {
    if let Some(expected) = &state.options.token_digest {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(|token| <[u8; 32]>::from(Sha256::digest(token.trim().as_bytes())));
        let matches = given.is_some_and(|given| bool::from(given.ct_eq(expected)));
        if !matches {
            let mut response = refuse(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required (Authorization: Bearer TOKEN); ask the server's \
                 operator for it"
                    .to_owned(),
            );
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return Some(response);
        }
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let host_allowed = if state.options.allowed_hosts.is_empty() {
        !state.loopback || is_loopback_name(host_name(&host))
    } else {
        state.options.allowed_hosts.contains(&host)
            || state
                .options
                .allowed_hosts
                .iter()
                .any(|allowed| allowed == host_name(&host))
            || (state.loopback && is_loopback_name(host_name(&host)))
    };
    if !host_allowed {
        return Some(refuse(
            StatusCode::FORBIDDEN,
            format!("host {host:?} is not served here"),
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        let authority = origin.split_once("://").map_or(origin, |(_, rest)| rest);
        let allowed = origin_is_loopback(origin)
            || state
                .options
                .allowed_hosts
                .iter()
                .any(|h| authority.eq_ignore_ascii_case(h));
        if !allowed {
            return Some(refuse(
                StatusCode::FORBIDDEN,
                format!("origin {origin} is not allowed"),
            ));
        }
    }
    None
}

/// Cancels a call when dropped before it answers: axum drops a request's future when its
/// client goes away, and the handler's thread must then stop too.
struct CancelOnDrop(Cancellation);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

async fn handle_post(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refusal) = caller_refusal(&state, &headers) {
        return refusal;
    }
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
            return initialize(&state, request);
        }
        let discover = request.method == methods::SERVER_DISCOVER;
        let era = if request.method == methods::TOOLS_CALL {
            // A call's params may be a multi-MiB file chunk: its era is told here by its
            // headers, and its `_meta` checked as the call is read.
            Ok(if headers.contains_key(modern_headers::METHOD) {
                RequestEra::Modern
            } else {
                RequestEra::Legacy
            })
        } else {
            era::request_era(request.params.as_deref(), discover)
        };
        match era {
            Ok(RequestEra::Legacy) => {
                return legacy_post(&state, &headers, Message::Request(request)).await;
            }
            Ok(RequestEra::Modern) => return modern_post(&state, &headers, request).await,
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
    legacy_post(&state, &headers, message).await
}

/// A header's value as its sender meant it (`=?base64?…?=` unwrapped).
fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    decode_header_value(headers.get(name)?.to_str().ok()?)
}

/// A modern request: stateless, its headers matching its body, its calls run in the job
/// directory modern requests share.
async fn modern_post(state: &Arc<HttpState>, headers: &HeaderMap, request: Request) -> Response {
    let mismatch = |detail: String| {
        error_response(
            StatusCode::BAD_REQUEST,
            Some(request.id.clone()),
            modern_error_codes::HEADER_MISMATCH,
            detail,
        )
    };
    if header_text(headers, modern_headers::PROTOCOL_VERSION).as_deref() != Some(MODERN_VERSION) {
        return mismatch(format!(
            "the MCP-Protocol-Version header must be {MODERN_VERSION:?}, as in _meta"
        ));
    }
    if header_text(headers, modern_headers::METHOD).as_deref() != Some(request.method.as_str()) {
        return mismatch(format!(
            "the Mcp-Method header must be {:?}, the body's method",
            request.method
        ));
    }
    if !MODERN_METHODS.contains(&request.method.as_str()) {
        return error_response(
            StatusCode::NOT_FOUND,
            Some(request.id),
            error_codes::METHOD_NOT_FOUND,
            format!("this server does not serve {}", request.method),
        );
    }
    if request.method != methods::TOOLS_CALL {
        return match state.server.answer(request) {
            Answer::Line(line) => json_response(StatusCode::OK, line),
            Answer::Call(id, _) => error_response(
                StatusCode::BAD_REQUEST,
                Some(id),
                error_codes::INVALID_REQUEST,
                "not a tool call".to_owned(),
            ),
        };
    }
    let Some(name) = header_text(headers, modern_headers::NAME) else {
        return mismatch("a tools/call needs the Mcp-Name header, naming its tool".to_owned());
    };
    let (id, params) = match state.server.answer(request) {
        Answer::Call(id, params) => (id, params),
        Answer::Line(line) => return json_response(StatusCode::OK, line),
    };
    let job = match modern_job(state) {
        Ok(job) => job,
        Err(e) => {
            return error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                Some(id),
                error_codes::INTERNAL_ERROR,
                format!("no job directory could be made: {e}"),
            );
        }
    };
    let cancellation = Cancellation::default();
    // The era cancels a call by closing its stream: axum then drops this future.
    let _client_gone = CancelOnDrop(cancellation.clone());
    let call = state
        .server
        .clone()
        .call_named(id.clone(), params, job, cancellation, Some(name));
    match tokio::spawn(call).await {
        Ok(Ok(line)) => json_response(StatusCode::OK, line),
        Ok(Err((_, refusal))) => json_response(StatusCode::BAD_REQUEST, refusal),
        Err(_) => error_response(
            StatusCode::OK,
            Some(id),
            error_codes::INTERNAL_ERROR,
            "the call was cancelled".to_owned(),
        ),
    }
}

/// The job directory every modern request shares (the era has no sessions), made at the
/// first call that needs one and removed when serving ends.
fn modern_job(state: &HttpState) -> io::Result<Arc<JobDir>> {
    let mut job = lock(&state.modern_job);
    if let Some(job) = job.as_ref() {
        return Ok(job.clone());
    }
    let made = JobDir::temporary()?;
    *job = Some(made.clone());
    Ok(made)
}

/// A legacy message: under the session its `Mcp-Session-Id` names.
async fn legacy_post(state: &Arc<HttpState>, headers: &HeaderMap, message: Message) -> Response {
    let Some(session_id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return error_response(
            StatusCode::BAD_REQUEST,
            message.id().cloned(),
            error_codes::INVALID_REQUEST,
            "the Mcp-Session-Id header is missing; send initialize first".to_owned(),
        );
    };
    let Some(session) = lock(&state.sessions).get(session_id).cloned() else {
        return (
            StatusCode::NOT_FOUND,
            "no such session (it ended, or expired when idle); send initialize again",
        )
            .into_response();
    };
    *lock(&session.last_used) = Instant::now();
    match message {
        Message::Request(request) => match state.server.answer(request) {
            Answer::Line(line) => json_response(StatusCode::OK, line),
            Answer::Call(id, call) => {
                let cancellation = Cancellation::default();
                let _client_gone = CancelOnDrop(cancellation.clone());
                let task = tokio::spawn(state.server.clone().call(
                    id.clone(),
                    call,
                    session.job.clone(),
                    cancellation.clone(),
                ));
                lock(&session.in_flight).insert(
                    id.clone(),
                    InFlight {
                        answer: task.abort_handle(),
                        cancellation,
                    },
                );
                let outcome = task.await;
                lock(&session.in_flight).remove(&id);
                *lock(&session.last_used) = Instant::now();
                match outcome {
                    Ok(line) => json_response(StatusCode::OK, line),
                    Err(_) => error_response(
                        StatusCode::OK,
                        Some(id),
                        error_codes::INTERNAL_ERROR,
                        "the call was cancelled".to_owned(),
                    ),
                }
            }
        },
        Message::Notification(n) => {
            if n.method == methods::CANCELLED
                && let Some(c) = n
                    .params
                    .and_then(|p| serde_json::from_str::<CancelledParams>(p.get()).ok())
                && let Some(call) = lock(&session.in_flight).remove(&c.request_id)
            {
                call.cancel();
            }
            StatusCode::ACCEPTED.into_response()
        }
        Message::Response(_) | Message::Error(_) => StatusCode::ACCEPTED.into_response(),
    }
}

fn initialize(state: &HttpState, request: Request) -> Response {
    let id = request.id.clone();
    end_idle_sessions(state);
    let open = lock(&state.sessions).len();
    if open >= state.options.max_sessions {
        return error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            Some(id),
            error_codes::INTERNAL_ERROR,
            format!(
                "{open} sessions are open, the most this server keeps; end one (DELETE) or \
                 try again once idle ones expire"
            ),
        );
    }
    let created = new_session_id().and_then(|sid| Ok((sid, JobDir::temporary()?)));
    let (session_id, job) = match created {
        Ok(made) => made,
        Err(e) => {
            return error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                Some(id),
                error_codes::INTERNAL_ERROR,
                format!("no session could be made: {e}"),
            );
        }
    };
    let Answer::Line(line) = state.server.answer(request) else {
        return error_response(
            StatusCode::BAD_REQUEST,
            Some(id),
            error_codes::INVALID_REQUEST,
            "not an initialize".to_owned(),
        );
    };
    lock(&state.sessions).insert(
        session_id.clone(),
        Arc::new(Session {
            job,
            in_flight: Mutex::default(),
            last_used: Mutex::new(Instant::now()),
        }),
    );
    let mut response = json_response(StatusCode::OK, line);
    if let Ok(value) = HeaderValue::from_str(&session_id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

async fn handle_delete(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> Response {
    if let Some(refusal) = caller_refusal(&state, &headers) {
        return refusal;
    }
    if headers.get(SESSION_HEADER).is_none()
        && header_text(&headers, modern_headers::PROTOCOL_VERSION).as_deref()
            == Some(MODERN_VERSION)
    {
        // The modern era has no sessions to end.
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let removed = headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|sid| lock(&state.sessions).remove(sid));
    match removed {
        Some(session) => {
            end_session(&session);
            StatusCode::OK.into_response()
        }
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

/// Stops a session's calls and removes its job directory: a call still winding down finds
/// it gone, and no file of the session outlives it.
fn end_session(session: &Session) {
    for (_, call) in lock(&session.in_flight).drain() {
        call.cancel();
    }
    session.job.remove_now();
}

/// Ends the sessions idle longer than the options allow, with no call in flight.
fn end_idle_sessions(state: &HttpState) {
    let idle = state.options.session_idle;
    let now = Instant::now();
    let expired: Vec<Arc<Session>> = {
        let mut sessions = lock(&state.sessions);
        let ids: Vec<String> = sessions
            .iter()
            .filter(|(_, s)| {
                lock(&s.in_flight).is_empty() && now.duration_since(*lock(&s.last_used)) > idle
            })
            .map(|(id, _)| id.clone())
            .collect();
        ids.iter().filter_map(|id| sessions.remove(id)).collect()
    };
    for session in &expired {
        tracing::info!(job = %session.job.dir().display(), "an idle session expired");
        end_session(session);
    }
}

/// Ends idle sessions once a while (and at each new session), until dropped.
async fn expire_idle_sessions(state: Arc<HttpState>) {
    let period =
        (state.options.session_idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(30));
    loop {
        tokio::time::sleep(period).await;
        end_idle_sessions(&state);
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
    /// every session and removes its job directory.
    ///
    /// Each session gets its own job directory. Refused: a listener on anything but
    /// loopback without a bearer token (at start, saying what to do); a request without the
    /// token when there is one (401); a `Host` or `Origin` not served here (403); a new
    /// session past [`HttpOptions::max_sessions`] (503). The GET stream is not offered (405);
    /// request bodies are bounded by [`MAX_REQUEST_BYTES`]. A client that goes away cancels
    /// its call.
    ///
    /// Both eras are served. A request whose `_meta` names a protocol version is modern:
    /// stateless, without a session; its `MCP-Protocol-Version`, `Mcp-Method` and (for
    /// `tools/call`) `Mcp-Name` headers must match its body (400 with `-32020`), its `_meta`
    /// must hold every required key (400 with `-32602`) for 2026-07-28 (400 with `-32022`),
    /// and a method not served is 404 with `-32601`. Modern calls share one job directory,
    /// the era having no sessions to give each its own; a DELETE in the modern era is 405.
    pub async fn serve_http_with(
        self,
        listener: tokio::net::TcpListener,
        options: HttpOptions,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> io::Result<()> {
        let local: SocketAddr = listener.local_addr()?;
        let loopback = local.ip().is_loopback();
        if !loopback && options.token_digest.is_none() {
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
            options,
            loopback,
            sessions: Mutex::default(),
            modern_job: Mutex::default(),
        });
        let expiry = tokio::spawn(expire_idle_sessions(state.clone()));
        let app = Router::new()
            .route(
                "/mcp",
                post(handle_post)
                    .delete(handle_delete)
                    .get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
            )
            .layer(axum::extract::DefaultBodyLimit::max(MAX_REQUEST_BYTES))
            .with_state(state.clone());
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await;
        expiry.abort();
        let sessions: Vec<Arc<Session>> = lock(&state.sessions).drain().map(|(_, s)| s).collect();
        for session in &sessions {
            end_session(session);
        }
        if let Some(job) = lock(&state.modern_job).take() {
            job.remove_now();
        }
        served
    }
}

#[cfg(test)]
mod tests {
    use super::{host_name, origin_is_loopback};

    #[test]
    fn only_loopback_origins_are_allowed() {
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:8443/x",
            "http://127.1.2.3",
        ] {
            assert!(origin_is_loopback(ok), "{ok}");
        }
        for bad in [
            "http://evil.example",
            "http://localhost.evil.example",
            "http://10.0.0.1:80",
            "http://127.evil.example",
            "http://[::2]:80",
        ] {
            assert!(!origin_is_loopback(bad), "{bad}");
        }
    }

    #[test]
    fn a_host_header_is_read_without_its_port() {
        assert_eq!(host_name("localhost:8080"), "localhost");
        assert_eq!(host_name("[::1]:8080"), "::1");
        assert_eq!(host_name("example.org"), "example.org");
    }
}
