use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use maljan_mcp_proto::json_writer::request_line;
use maljan_mcp_proto::jsonrpc::{
    DecodedLine, ErrorResponse, Message, Notification, Reply, Request, RequestId, Response,
    decode_line,
};
use maljan_mcp_proto::mcp::{
    ServerRequestPolicy, encode_header_value, headers, meta_keys, methods,
};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};

use crate::waiting::{Delivery, WaitEnd, Waiting, WaitingRequests};
use crate::{DEFAULT_MAX_EVENT_BYTES, HttpError, SseItem, SseParser};

const SESSION_HEADER: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
/// How many times a cut reply stream is resumed before giving up.
const MAX_RESUMES: u32 = 5;
/// The longest a server's `retry` may make a cut stream wait before it is resumed: a
/// hostile or mistaken value (hours) does not stall a call.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// Settings of a Streamable HTTP connection.
///
/// ```
/// use maljan_mcp_http::HttpConfig;
/// let config = HttpConfig::new("remote", "http://127.0.0.1:8080/mcp");
/// assert_eq!(config.max_event_bytes, 32 * 1024 * 1024);
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpConfig {
    /// The server's name, for logs and errors.
    pub name: String,
    /// The MCP endpoint.
    pub url: String,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// A bearer token sent as `Authorization: Bearer …` (never logged).
    pub bearer_token: Option<String>,
    /// The bound on one reply (JSON body or SSE event), in bytes.
    pub max_event_bytes: usize,
    /// How long connecting may take.
    pub connect_timeout: Duration,
    /// How the server's own requests (`ping`, `elicitation/create`, `roots/list`…) are
    /// answered.
    pub server_requests: ServerRequestPolicy,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("name", &self.name)
            .field("url", &crate::redact_credentials(&self.url))
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field(
                "bearer_token",
                &self.bearer_token.as_ref().map(|_| "<redacted>"),
            )
            .field("max_event_bytes", &self.max_event_bytes)
            .finish()
    }
}

impl HttpConfig {
    /// Defaults for an endpoint.
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Self {
        HttpConfig {
            name: name.into(),
            url: url.into(),
            headers: Vec::new(),
            bearer_token: None,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            connect_timeout: Duration::from_secs(10),
            server_requests: ServerRequestPolicy::default(),
        }
    }
}

/// What a connection's replies held, for the server card.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HttpCounts {
    /// Valid messages received.
    pub messages: u64,
    /// Invalid messages stated.
    pub invalid: u64,
    /// Events over the bound, dropped.
    pub oversized: u64,
    /// Answers to no request waiting (late, or an id never sent), dropped.
    pub unmatched: u64,
}

struct SessionState {
    config: HttpConfig,
    client: reqwest::Client,
    session: Mutex<Option<String>>,
    protocol_version: Mutex<Option<String>>,
    next_id: AtomicI64,
    counts: Mutex<HttpCounts>,
    notifications: mpsc::Sender<Notification>,
    incoming: Mutex<Option<mpsc::Receiver<Notification>>>,
    listener: Mutex<Option<tokio::task::AbortHandle>>,
    /// Whether the standalone GET stream is open: an answer may then arrive on it.
    listening: AtomicBool,
    waiting: WaitingRequests,
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
        let misconfigured = |detail: String| HttpError::Config {
            server: config.name.clone(),
            detail,
        };
        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let name = HeaderName::try_from(name.as_str())
                .map_err(|e| misconfigured(format!("header name {name:?}: {e}")))?;
            let value = HeaderValue::try_from(value.as_str())
                .map_err(|e| misconfigured(format!("the value of header {name}: {e}")))?;
            headers.insert(name, value);
        }
        let url = reqwest::Url::parse(&config.url).map_err(|e| {
            misconfigured(format!(
                "the URL {} is not one: {e}",
                crate::redact_credentials(&config.url)
            ))
        })?;
        let configured_authorization =
            config.bearer_token.is_some() || headers.contains_key(reqwest::header::AUTHORIZATION);
        if configured_authorization && (!url.username().is_empty() || url.password().is_some()) {
            return Err(misconfigured(
                "the URL carries credentials (user:password@) and a token or Authorization \
                 header is configured too: one would silently replace the other; keep one"
                    .to_owned(),
            ));
        }
        if let Some(token) = &config.bearer_token {
            let mut value = HeaderValue::try_from(format!("Bearer {token}")).map_err(|_| {
                misconfigured("the bearer token is not a valid header value".to_owned())
            })?;
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .redirect(same_origin_redirects())
            .connect_timeout(config.connect_timeout)
            .build()
            .map_err(|e| misconfigured(e.to_string()))?;
        let (tx, rx) = mpsc::channel(256);
        Ok(HttpTransport {
            state: Arc::new(SessionState {
                config,
                client,
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
        let url = reqwest::Url::parse(&self.state.config.url).ok()?;
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        Some(format!("{}://{host}:{port}", url.scheme()))
    }

    /// What replies held so far.
    pub fn counts(&self) -> HttpCounts {
        *lock(&self.state.counts)
    }

    /// A fresh request id.
    pub fn next_id(&self) -> RequestId {
        RequestId::Integer(self.state.next_id.fetch_add(1, Ordering::Relaxed))
    }

    fn unreachable(&self, e: reqwest::Error) -> HttpError {
        HttpError::Unreachable {
            server: self.server().to_owned(),
            url: crate::redact_credentials(&self.state.config.url),
            detail: error_chain(&e),
            // Without its URL: the source must not carry credentials a URL held.
            source: Some(Arc::new(e.without_url())),
        }
    }

    fn bad_reply(&self, detail: impl Into<String>) -> HttpError {
        HttpError::BadReply {
            server: self.server().to_owned(),
            detail: detail.into(),
        }
    }

    fn post(&self, body: Vec<u8>) -> reqwest::RequestBuilder {
        self.post_as(body, None)
    }

    /// A POST of `body`; a modern request's headers say its version, method and name.
    fn post_as(&self, body: Vec<u8>, modern: Option<&ModernHeaders>) -> reqwest::RequestBuilder {
        let mut request = self
            .state
            .client
            .post(&self.state.config.url)
            .header(ACCEPT, "application/json, text/event-stream")
            .header(CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(session) = self.session_id() {
            request = request.header(SESSION_HEADER, session);
        }
        match modern {
            Some(modern) => {
                request = request
                    .header(headers::PROTOCOL_VERSION, &modern.version)
                    .header(headers::METHOD, &modern.method);
                if let Some(name) = &modern.name {
                    request = request.header(headers::NAME, name);
                }
            }
            None => {
                if let Some(version) = lock(&self.state.protocol_version).clone() {
                    request = request.header(headers::PROTOCOL_VERSION, version);
                }
            }
        }
        request
    }

    /// A GET of the endpoint's SSE stream, resuming after `last_event_id` when given.
    fn get_stream(&self, last_event_id: Option<&str>) -> reqwest::RequestBuilder {
        let mut get = self
            .state
            .client
            .get(&self.state.config.url)
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
        get
    }

    /// Fails on statuses other than success, naming an expired session.
    async fn check_status(
        &self,
        response: reqwest::Response,
        sent_session: Option<&str>,
    ) -> Result<reqwest::Response, HttpError> {
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        if status == reqwest::StatusCode::NOT_FOUND
            && let Some(session) = sent_session
        {
            return Err(HttpError::SessionExpired {
                server: self.server().to_owned(),
                session: session.to_owned(),
            });
        }
        let body = response.text().await.unwrap_or_default();
        Err(HttpError::Status {
            server: self.server().to_owned(),
            status: status.as_u16(),
            body: body.chars().take(200).collect(),
        })
    }

    /// Sends a request and waits for its response, from a JSON reply or an SSE stream
    /// (resumed with `Last-Event-ID` after the server's `retry` delay when cut).
    pub async fn request(
        &self,
        id: RequestId,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<Reply, HttpError> {
        let body = Message::Request(Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        })
        .to_line();
        self.request_body(body, id, method, None).await
    }

    /// [`request`](Self::request) with params as a JSON value, written straight into the
    /// request's body ([`request_line`]): large arguments, a file chunk's base64 among them,
    /// are neither escaped byte by byte nor copied into a raw value first. The value is
    /// dropped once written, before the request is sent.
    ///
    /// ```no_run
    /// # async fn call(connection: &maljan_mcp_http::HttpTransport) {
    /// let params = serde_json::json!({"name": "get_file", "arguments": {"path": "a.bin"}});
    /// let id = connection.next_id();
    /// let reply = connection.request_json(id, "tools/call", params).await.unwrap();
    /// # }
    /// ```
    pub async fn request_json(
        &self,
        id: RequestId,
        method: &str,
        params: Value,
    ) -> Result<Reply, HttpError> {
        let modern = ModernHeaders::of(method, &params);
        let body = request_line(&id, method, &params);
        drop(params);
        self.request_body(body, id, method, modern).await
    }

    /// POSTs a request's body and reads its response. A modern request refused with a
    /// JSON-RPC error in the body (400 with `-32022`, say) gets that error as its reply.
    async fn request_body(
        &self,
        body: Vec<u8>,
        id: RequestId,
        method: &str,
        modern: Option<ModernHeaders>,
    ) -> Result<Reply, HttpError> {
        let mut wait = self.state.waiting.register(id);
        let sent_session = self.session_id();
        let response = self
            .post_as(body, modern.as_ref())
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        if modern.is_some() && response.status().is_client_error() {
            return self.refused_modern(response).await;
        }
        let response = self.check_status(response, sent_session.as_deref()).await?;
        if method == methods::INITIALIZE
            && let Some(session) = response
                .headers()
                .get(SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
        {
            *lock(&self.state.session) = Some(session.to_owned());
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_ascii_lowercase();
        if content_type.starts_with("text/event-stream") {
            self.read_stream(response, &mut wait).await
        } else if content_type.starts_with("application/json") {
            let body = self.read_body(response).await?;
            self.handle_line(&body).await?;
            match wait.try_take() {
                Some(end) => self.ended(end),
                None => Err(self.bad_reply("the JSON reply holds no response to the request")),
            }
        } else {
            Err(self.bad_reply(format!(
                "the reply's content type is {content_type:?}, not JSON or an SSE stream"
            )))
        }
    }

    /// A modern request's 4xx: the JSON-RPC error its body holds, else the status.
    async fn refused_modern(&self, response: reqwest::Response) -> Result<Reply, HttpError> {
        let status = response.status().as_u16();
        let body = self.read_body(response).await.unwrap_or_default();
        match decode_line(&body, false) {
            DecodedLine::Message(Message::Error(ErrorResponse { error, .. })) => {
                lock(&self.state.counts).messages += 1;
                Ok(Reply::Error(error))
            }
            _ => Err(HttpError::Status {
                server: self.server().to_owned(),
                status,
                body: String::from_utf8_lossy(&body).chars().take(200).collect(),
            }),
        }
    }

    async fn read_body(&self, response: reqwest::Response) -> Result<Vec<u8>, HttpError> {
        let max = self.state.config.max_event_bytes;
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.unreachable(e))?;
            if body.len() + chunk.len() > max {
                lock(&self.state.counts).oversized += 1;
                return Err(self.bad_reply(format!("the JSON reply is over the {max}-byte bound")));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// What a request's wait ended with.
    fn ended(&self, end: WaitEnd) -> Result<Reply, HttpError> {
        match end {
            WaitEnd::Answered(answer) => answer,
            WaitEnd::Closed => Err(HttpError::StreamEnded {
                server: self.server().to_owned(),
                detail: "the connection was closed".to_owned(),
            }),
        }
    }

    /// Reads a request's SSE stream until its answer arrives, on this stream or any other.
    /// A stream cut with an event id is resumed by GET with `Last-Event-ID` after the
    /// server's `retry` delay; one cut without is waited out while the GET stream is open
    /// (the answer may come there; the caller's timeout bounds the wait), and fails at once
    /// otherwise.
    async fn read_stream(
        &self,
        response: reqwest::Response,
        wait: &mut Waiting,
    ) -> Result<Reply, HttpError> {
        let mut parser = SseParser::new(self.state.config.max_event_bytes);
        let mut retry = Duration::ZERO;
        let mut response = response;
        for attempt in 0..=MAX_RESUMES {
            let mut stream = response.bytes_stream();
            let mut cut = None;
            loop {
                let chunk = tokio::select! {
                    biased;
                    end = wait.answer() => return self.ended(end),
                    chunk = stream.next() => chunk,
                };
                let chunk = match chunk {
                    None => break,
                    Some(Ok(chunk)) => chunk,
                    Some(Err(e)) => {
                        cut = Some(error_chain(&e));
                        break;
                    }
                };
                parser.handle_bytes(&chunk);
                while let Some(item) = parser.poll_item() {
                    match item {
                        SseItem::Event(event) => self.handle_line(event.data.as_bytes()).await?,
                        SseItem::Retry(ms) => {
                            retry = Duration::from_millis(ms).min(MAX_RETRY_DELAY);
                        }
                        SseItem::Oversized { length } => {
                            lock(&self.state.counts).oversized += 1;
                            tracing::warn!(
                                server = self.server(),
                                length,
                                "an SSE event over the bound was dropped"
                            );
                        }
                        SseItem::NotUtf8 { offset } => {
                            return Err(self.bad_reply(format!(
                                "the SSE stream is not UTF-8 at byte {offset}"
                            )));
                        }
                    }
                }
            }
            if let Some(end) = wait.try_take() {
                return self.ended(end);
            }
            let Some(last_id) = parser.last_event_id().map(str::to_owned) else {
                if self.state.listening.load(Ordering::Acquire) {
                    return self.ended(wait.answer().await);
                }
                return Err(HttpError::StreamEnded {
                    server: self.server().to_owned(),
                    detail: cut.unwrap_or_else(|| {
                        "the server closed it and gave no event id to resume from".to_owned()
                    }),
                });
            };
            if attempt == MAX_RESUMES {
                break;
            }
            tokio::select! {
                biased;
                end = wait.answer() => return self.ended(end),
                () = tokio::time::sleep(retry) => {}
            }
            tracing::info!(
                server = self.server(),
                last_id,
                "resuming a cut reply stream"
            );
            parser.handle_eof();
            let sent_session = self.session_id();
            let get = self.get_stream(Some(&last_id));
            let resumed = get.send().await.map_err(|e| self.unreachable(e))?;
            response = self.check_status(resumed, sent_session.as_deref()).await?;
        }
        Err(HttpError::StreamEnded {
            server: self.server().to_owned(),
            detail: format!("still no response after {MAX_RESUMES} resumptions"),
        })
    }

    /// Reads one JSON-RPC line of a reply, from any stream: each answer goes to the request
    /// waiting under its id (an answer to none is counted and dropped), notifications to the
    /// receiver, the server's requests are answered.
    async fn handle_line(&self, line: &[u8]) -> Result<(), HttpError> {
        let messages = match decode_line(line, true) {
            DecodedLine::Message(m) => vec![m],
            DecodedLine::Batch(ms) => ms,
            DecodedLine::Invalid(invalid) => {
                lock(&self.state.counts).invalid += 1;
                tracing::warn!(
                    server = self.server(),
                    "invalid protocol message in a reply: {}",
                    invalid.reason
                );
                if let Some(refusal) = invalid.refusal() {
                    // The server's own request, malformed: refused, so that it does not wait.
                    self.post_answer(refusal).await;
                    return Ok(());
                }
                if let Some(id) = invalid.id.filter(|_| !invalid.request) {
                    let error = HttpError::InvalidAnswer {
                        server: self.server().to_owned(),
                        reason: invalid.reason,
                    };
                    self.state.waiting.deliver(&id, Err(error));
                }
                return Ok(());
            }
            DecodedLine::NotProtocol => {
                if line.iter().all(u8::is_ascii_whitespace) {
                    return Ok(());
                }
                return Err(self.bad_reply("a reply that is not a JSON-RPC message"));
            }
        };
        for message in messages {
            lock(&self.state.counts).messages += 1;
            match message {
                Message::Response(Response { id, result }) => {
                    self.route(&id, Reply::Result(result));
                }
                Message::Error(ErrorResponse {
                    id: Some(id),
                    error,
                }) => self.route(&id, Reply::Error(error)),
                Message::Error(ErrorResponse { id: None, error }) => {
                    lock(&self.state.counts).unmatched += 1;
                    tracing::warn!(
                        server = self.server(),
                        code = error.code,
                        "an error answer to no request: {}",
                        error.message
                    );
                }
                Message::Notification(n) => {
                    let _ = self.state.notifications.try_send(n);
                }
                Message::Request(request) => self.answer_server_request(request).await,
            }
        }
        Ok(())
    }

    /// Gives an answer to the request waiting under `id`; one that none waits for is
    /// counted and dropped, never given to another.
    fn route(&self, id: &RequestId, reply: Reply) {
        if self.state.waiting.deliver(id, Ok(reply)) == Delivery::Unmatched {
            lock(&self.state.counts).unmatched += 1;
            tracing::debug!(
                server = self.server(),
                %id,
                "an answer to no request waiting (late, or never sent) was dropped"
            );
        }
    }

    async fn answer_server_request(&self, request: Request) {
        self.post_answer(self.state.config.server_requests.answer(request))
            .await;
    }

    /// POSTs the answer to a server's request.
    async fn post_answer(&self, answer: Message) {
        if let Ok(response) = self.post(answer.to_line()).send().await {
            let _ = self.check_status(response, None).await;
        }
    }

    /// Opens the optional GET stream for messages the server sends on its own, and answers
    /// it may send there. A server without one answers 405, which is fine: the stream is
    /// then simply not there. The stream's messages are handled as any reply's; it ends with
    /// the connection or when the server closes it.
    pub fn listen(&self) -> tokio::task::JoinHandle<()> {
        self.spawn_listener(None)
    }

    /// [`listen`](Self::listen), waiting until the server answered the GET (or
    /// `connect_timeout` passed): from then on, what the server sends on its own has a
    /// stream to go on.
    async fn open_listener(&self) {
        let (ready, answered) = oneshot::channel();
        drop(self.spawn_listener(Some(ready)));
        let _ = tokio::time::timeout(self.state.config.connect_timeout, answered).await;
    }

    fn spawn_listener(&self, ready: Option<oneshot::Sender<()>>) -> tokio::task::JoinHandle<()> {
        let connection = self.clone();
        let task = tokio::spawn(async move {
            let get = connection.get_stream(None);
            let response = get.send().await;
            let response = match response {
                Ok(r) if r.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED => {
                    tracing::debug!(
                        server = connection.server(),
                        "the server offers no GET stream (405)"
                    );
                    return;
                }
                Ok(r) if r.status().is_success() => r,
                Ok(r) => {
                    tracing::debug!(
                        server = connection.server(),
                        status = r.status().as_u16(),
                        "no GET stream"
                    );
                    return;
                }
                Err(e) => {
                    tracing::debug!(
                        server = connection.server(),
                        "no GET stream: {}",
                        error_chain(&e)
                    );
                    return;
                }
            };
            connection.state.listening.store(true, Ordering::Release);
            drop(ready);
            let _open = ListeningFlag(&connection.state.listening);
            let mut parser = SseParser::new(connection.state.config.max_event_bytes);
            let mut stream = response.bytes_stream();
            while let Some(Ok(chunk)) = stream.next().await {
                parser.handle_bytes(&chunk);
                while let Some(item) = parser.poll_item() {
                    match item {
                        SseItem::Event(event) => {
                            let _ = connection.handle_line(event.data.as_bytes()).await;
                        }
                        SseItem::Oversized { .. } => lock(&connection.state.counts).oversized += 1,
                        SseItem::NotUtf8 { .. } => return,
                        SseItem::Retry(_) => {}
                    }
                }
            }
        });
        if let Some(old) = lock(&self.state.listener).replace(task.abort_handle()) {
            old.abort();
        }
        task
    }

    /// Sends a notification; the server answers 202 Accepted. Once
    /// `notifications/initialized` is accepted, the GET stream is opened (see
    /// [`listen`](Self::listen)) and waited for, so that a server's request or answer sent
    /// there during the first call has a stream to go on.
    pub async fn notify(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<(), HttpError> {
        self.send(&Message::Notification(Notification {
            method: method.to_owned(),
            params,
        }))
        .await?;
        if method == methods::INITIALIZED {
            self.open_listener().await;
        }
        Ok(())
    }

    /// POSTs one message with the session's headers and checks the status.
    async fn send(&self, message: &Message) -> Result<reqwest::Response, HttpError> {
        self.post_checked(message.to_line()).await
    }

    /// POSTs a body with the session's headers and checks the status.
    async fn post_checked(&self, body: Vec<u8>) -> Result<reqwest::Response, HttpError> {
        let sent_session = self.session_id();
        let response = self
            .post(body)
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        self.check_status(response, sent_session.as_deref()).await
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
        let request = self
            .state
            .client
            .delete(&self.state.config.url)
            .header(SESSION_HEADER, session);
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

/// The headers a modern-era POST carries beside its body: the version its `_meta` names,
/// the method, and the tool (or resource, or prompt) it names.
#[derive(Debug)]
struct ModernHeaders {
    version: String,
    method: String,
    name: Option<String>,
}

impl ModernHeaders {
    /// The headers of a request whose params name a protocol version in `_meta`; `None` for
    /// a legacy request.
    fn of(method: &str, params: &Value) -> Option<ModernHeaders> {
        let version = params
            .get("_meta")?
            .get(meta_keys::PROTOCOL_VERSION)?
            .as_str()?;
        let name = match method {
            methods::TOOLS_CALL | "prompts/get" => params.get("name"),
            "resources/read" => params.get("uri"),
            _ => None,
        }
        .and_then(Value::as_str)
        .map(encode_header_value);
        Some(ModernHeaders {
            version: version.to_owned(),
            method: method.to_owned(),
            name,
        })
    }
}

/// Clears the listening flag when the GET stream's task ends, however it ends.
struct ListeningFlag<'a>(&'a AtomicBool);

impl Drop for ListeningFlag<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// An error and its causes, one line, without credentials a URL in it carried.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    crate::redact_credentials(&text)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_modern_request_names_its_version_method_and_tool() {
        let params =
            json!({"name": "file_info", "_meta": {meta_keys::PROTOCOL_VERSION: "2026-07-28"}});
        let headers = ModernHeaders::of("tools/call", &params).expect("modern");
        assert_eq!(
            (headers.version.as_str(), headers.method.as_str()),
            ("2026-07-28", "tools/call")
        );
        assert_eq!(headers.name.as_deref(), Some("file_info"));
        let listing = ModernHeaders::of(
            "tools/list",
            &json!({"_meta": {meta_keys::PROTOCOL_VERSION: "2026-07-28"}}),
        );
        assert!(listing.expect("modern").name.is_none());
        assert!(
            ModernHeaders::of("tools/call", &json!({"name": "x"})).is_none(),
            "legacy"
        );
    }
}
