//! A Streamable HTTP connection: the session it keeps, and what its parts share (the
//! requests waiting for answers, the counts, the listener).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use maljan_mcp_proto::jsonrpc::{Notification, RequestId};
use maljan_mcp_proto::mcp::headers;
use reqwest::header::{ACCEPT, HeaderMap, HeaderName, HeaderValue};
use tokio::sync::mpsc;

mod config;
mod listener;
mod post;
mod stateless_headers;
mod stream;
mod token;

pub use config::HttpConfig;
pub use token::{BearerToken, TokenFn};

use crate::Challenge;
use crate::error::error_chain;
use crate::waiting::WaitingRequests;
use crate::{ConfigProblem, HttpError, ReplyProblem, StreamEnd};
use maljan_mcp_transport::{TransportCounts, TransportInfo};

const SESSION_HEADER: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
/// How many times a cut reply stream is resumed before giving up.
const MAX_RESUMES: u32 = 5;
/// The longest a server's `retry` may make a cut stream wait before it is resumed: a
/// hostile or mistaken value (hours) does not stall a call.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

struct SessionState {
    config: HttpConfig,
    client: reqwest::Client,
    /// The configured headers, checked once, added to every request.
    headers: HeaderMap,
    session: Mutex<Option<String>>,
    protocol_version: Mutex<Option<String>>,
    next_id: AtomicI64,
    /// What the replies held (the counts a stream has no use for stay at zero).
    counts: Mutex<TransportCounts>,
    notifications: mpsc::Sender<Notification>,
    incoming: Mutex<Option<mpsc::Receiver<Notification>>>,
    listener: Mutex<Option<tokio::task::AbortHandle>>,
    /// Whether the standalone GET stream is open: an answer may then arrive on it.
    listening: AtomicBool,
    waiting: WaitingRequests,
}

impl std::fmt::Debug for SessionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The config's own Debug keeps its token out.
        f.debug_struct("SessionState")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl TransportInfo for SessionState {
    fn counts(&self) -> TransportCounts {
        *lock(&self.counts)
    }

    fn origin(&self) -> Option<String> {
        let url = reqwest::Url::parse(&self.config.url).ok()?;
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        Some(format!("{}://{host}:{port}", url.scheme()))
    }
}

/// Whether an HTTP status is a gateway's that passes (502, 503, 504): worth trying again.
fn gateway_busy(status: u16) -> bool {
    (502..=504).contains(&status)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A connection to an MCP server over Streamable HTTP: one endpoint, each message a POST,
/// replies as JSON or as an SSE stream, the session id kept and echoed.
///
/// Cancel safety: dropping a request's future aborts its HTTP request; send
/// `notifications/cancelled` for the server's sake (disconnecting is not cancelling).
#[derive(Clone)]
pub struct HttpTransport {
    state: Arc<SessionState>,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTransport")
            .field("config", &self.state.config)
            .finish_non_exhaustive()
    }
}

/// How many times one request has the authorizer obtain a token before the server's
/// refusal stands.
pub const MAX_AUTHORIZATIONS: u32 = 3;

/// How many redirects one request follows.
const MAX_REDIRECTS: usize = 5;

/// Redirects followed only within the server's origin: the token, the configured headers
/// and the request's body would go with it to any other, so another origin is refused,
/// named in the error.
fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let origin = |url: &reqwest::Url| url.origin();
        let first = attempt.previous().first().map(origin);
        if first.as_ref() != Some(&origin(attempt.url())) {
            let target = crate::redact_credentials(attempt.url().as_str());
            return attempt.error(format!(
                "the server redirected to another origin, {target}; redirects are not \
                 followed there (the token and configured headers would go with them): \
                 configure that URL instead if it is trusted"
            ));
        }
        if attempt.previous().len() > MAX_REDIRECTS {
            return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
        }
        attempt.follow()
    })
}

impl HttpTransport {
    /// A connection (nothing is sent until the first request); take the receiver of the
    /// server's notifications with [`take_notifications`](Self::take_notifications).
    pub fn new(config: HttpConfig) -> Result<HttpTransport, HttpError> {
        let misconfigured = |problem: ConfigProblem| HttpError::Config {
            server: config.name.clone(),
            problem,
        };
        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let name = HeaderName::try_from(name.as_str()).map_err(|source| {
                misconfigured(ConfigProblem::HeaderName {
                    name: name.clone(),
                    source: Arc::new(source),
                })
            })?;
            let value = HeaderValue::try_from(value.as_str()).map_err(|source| {
                misconfigured(ConfigProblem::HeaderValue {
                    name: name.to_string(),
                    source: Arc::new(source),
                })
            })?;
            headers.insert(name, value);
        }
        let url = reqwest::Url::parse(&config.url).map_err(|source| {
            misconfigured(ConfigProblem::Url {
                url: crate::redact_credentials(&config.url),
                source,
            })
        })?;
        let configured_authorization =
            config.bearer_token.is_some() || headers.contains_key(reqwest::header::AUTHORIZATION);
        if configured_authorization && (!url.username().is_empty() || url.password().is_some()) {
            return Err(misconfigured(ConfigProblem::CredentialsTwice));
        }
        let client = match &config.client {
            Some(client) => client.clone(),
            None => {
                let mut builder = reqwest::Client::builder()
                    .redirect(same_origin_redirects())
                    .connect_timeout(config.connect_timeout);
                if let Some(read_timeout) = config.read_timeout {
                    builder = builder.read_timeout(read_timeout);
                }
                builder
                    .build()
                    .map_err(|e| misconfigured(ConfigProblem::Client(Arc::new(e.without_url()))))?
            }
        };
        let (tx, rx) = mpsc::channel(256);
        Ok(HttpTransport {
            state: Arc::new(SessionState {
                config,
                client,
                headers,
                session: Mutex::default(),
                protocol_version: Mutex::default(),
                next_id: AtomicI64::new(1),
                counts: Mutex::default(),
                notifications: tx,
                incoming: Mutex::new(Some(rx)),
                listener: Mutex::default(),
                listening: AtomicBool::new(false),
                waiting: WaitingRequests::default(),
            }),
        })
    }

    /// A request to the endpoint with the configured headers and the token as it is now.
    fn http_request(&self, method: reqwest::Method) -> Result<reqwest::RequestBuilder, HttpError> {
        let state = &self.state;
        let mut request = state
            .client
            .request(method, &state.config.url)
            .headers(state.headers.clone());
        if let Some(authorizer) = &state.config.authorizer {
            if let Some(token) = authorizer.token() {
                let mut value = HeaderValue::try_from(format!("Bearer {}", token.secret()))
                    .map_err(|_| HttpError::Config {
                        server: state.config.name.clone(),
                        problem: ConfigProblem::BadToken,
                    })?;
                value.set_sensitive(true);
                request = request.header(reqwest::header::AUTHORIZATION, value);
            }
        } else if let Some(token) = &state.config.bearer_token {
            let misconfigured = |problem| HttpError::Config {
                server: state.config.name.clone(),
                problem,
            };
            let token = token
                .current()
                .map_err(|e| misconfigured(ConfigProblem::NoToken(Arc::from(e))))?;
            let mut value = HeaderValue::try_from(format!("Bearer {token}"))
                .map_err(|_| misconfigured(ConfigProblem::BadToken))?;
            value.set_sensitive(true);
            request = request.header(reqwest::header::AUTHORIZATION, value);
        }
        Ok(request)
    }

    /// Sends what `build` makes. A refusal of the token (401, or 403 asking for more
    /// scope) is handed to the authorizer, when there is one, and the request is made and
    /// sent again with the new token: at most [`MAX_AUTHORIZATIONS`] times, so a server that
    /// refuses every token cannot keep the client asking.
    pub(super) async fn send_authorized(
        &self,
        build: impl Fn() -> Result<reqwest::RequestBuilder, HttpError>,
    ) -> Result<reqwest::Response, HttpError> {
        let mut authorizations = 0;
        if let Some(renewal) = self
            .state
            .config
            .authorizer
            .as_ref()
            .and_then(|a| a.renew())
            && let Err(e) = renewal.await
        {
            tracing::debug!(server = self.server(), "the token was not renewed: {e}");
        }
        loop {
            let response = build()?.send().await.map_err(|e| self.unreachable(e))?;
            let Some(authorizer) = &self.state.config.authorizer else {
                return Ok(response);
            };
            let status = response.status().as_u16();
            let challenge = Challenge::parse(
                status,
                response
                    .headers()
                    .get_all(reqwest::header::WWW_AUTHENTICATE)
                    .iter()
                    .filter_map(|v| v.to_str().ok()),
            );
            let refused = status == 401 || (status == 403 && challenge.wants_more_scope());
            if !refused || authorizations == MAX_AUTHORIZATIONS {
                return Ok(response);
            }
            authorizations += 1;
            tracing::debug!(
                server = self.server(),
                status,
                error = challenge.error.as_deref().unwrap_or("none"),
                "the server asks for authorization (try {authorizations} of {MAX_AUTHORIZATIONS})"
            );
            authorizer
                .authorize(&challenge)
                .await
                .map_err(|source| HttpError::Unauthorized {
                    server: self.server().to_owned(),
                    source,
                })?;
        }
    }

    /// The server's name.
    pub fn server(&self) -> &str {
        &self.state.config.name
    }

    /// Takes the receiver of the server's notifications, once. Notifications that arrive
    /// while it is full or not taken are dropped.
    pub fn take_notifications(&self) -> Option<mpsc::Receiver<Notification>> {
        lock(&self.state.incoming).take()
    }

    /// The session id the server gave, if any.
    pub fn session_id(&self) -> Option<String> {
        lock(&self.state.session).clone()
    }

    /// Sends `MCP-Protocol-Version` from now on (after `initialize`).
    pub fn set_protocol_version(&self, version: &str) {
        *lock(&self.state.protocol_version) = Some(version.to_owned());
    }

    /// The endpoint's origin, `scheme://host:port` (the default port included), when its
    /// URL has a host.
    ///
    /// ```
    /// use maljan_mcp_http::{HttpConfig, HttpTransport};
    /// let t = HttpTransport::new(HttpConfig::new("r", "https://user:pw@example.org/mcp")).unwrap();
    /// assert_eq!(t.origin().as_deref(), Some("https://example.org:443"));
    /// ```
    pub fn origin(&self) -> Option<String> {
        self.state.origin()
    }

    /// What replies held so far.
    pub fn counts(&self) -> TransportCounts {
        self.state.counts()
    }

    /// What the session knows of its server, as a handle of its own.
    pub(crate) fn session_info(&self) -> Arc<dyn TransportInfo> {
        self.state.clone()
    }

    /// A fresh request id.
    pub fn next_id(&self) -> RequestId {
        RequestId::Integer(self.state.next_id.fetch_add(1, Ordering::Relaxed))
    }

    fn unreachable(&self, e: reqwest::Error) -> HttpError {
        HttpError::Unreachable {
            server: self.server().to_owned(),
            url: crate::redact_credentials(&self.state.config.url),
            // Without its URL: the source must not carry credentials a URL held.
            source: Arc::new(e.without_url()),
        }
    }

    fn bad_reply(&self, problem: ReplyProblem) -> HttpError {
        HttpError::BadReply {
            server: self.server().to_owned(),
            problem,
        }
    }

    fn stream_ended(&self, why: StreamEnd) -> HttpError {
        HttpError::StreamEnded {
            server: self.server().to_owned(),
            why,
        }
    }

    /// A GET of the endpoint's SSE stream, resuming after `last_event_id` when given.
    fn get_stream(
        &self,
        last_event_id: Option<&str>,
    ) -> Result<reqwest::RequestBuilder, HttpError> {
        let mut get = self
            .http_request(reqwest::Method::GET)?
            .header(ACCEPT, "text/event-stream");
        if let Some(id) = last_event_id {
            get = get.header(LAST_EVENT_ID, id);
        }
        if let Some(session) = self.session_id() {
            get = get.header(SESSION_HEADER, session);
        }
        if let Some(version) = lock(&self.state.protocol_version).clone() {
            get = get.header(headers::PROTOCOL_VERSION, version);
        }
        Ok(get)
    }

    /// Stops the GET stream and ends the session with DELETE (a server that answers 405
    /// keeps it; that is fine).
    pub async fn close(&self) {
        if let Some(listener) = lock(&self.state.listener).take() {
            listener.abort();
        }
        self.state.waiting.close();
        let Some(session) = lock(&self.state.session).take() else {
            return;
        };
        let request = match self.http_request(reqwest::Method::DELETE) {
            Ok(request) => request.header(SESSION_HEADER, session),
            Err(e) => {
                tracing::debug!(server = self.server(), "the session is not ended: {e}");
                return;
            }
        };
        match request.send().await {
            Ok(r) if r.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED => {
                tracing::debug!(
                    server = self.server(),
                    "the server keeps its sessions (DELETE: 405)"
                );
            }
            Ok(_) => {}
            Err(e) => tracing::debug!(
                server = self.server(),
                "ending the session failed: {}",
                error_chain(&e)
            ),
        }
    }
}
