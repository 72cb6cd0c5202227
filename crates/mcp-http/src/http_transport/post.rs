//! Each message a POST: the request and its reply (JSON, or an SSE stream read to the
//! answer), the status checked, a notification or an answer to the server posted.

use futures_util::StreamExt;
use maljan_mcp_proto::json_writer::request_line;
use maljan_mcp_proto::jsonrpc::{
    DecodedLine, ErrorResponse, Message, Notification, Reply, Request, RequestId, decode_line,
};
use maljan_mcp_proto::large_buffers::{LARGE_BUFFERS, MIN_KEPT_BYTES};
use maljan_mcp_proto::mcp::{ProtocolVersion, headers, methods};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::Value;
use serde_json::value::RawValue;

use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};

use super::stateless_headers::StatelessHeaders;
use super::{HttpTransport, SESSION_HEADER, gateway_busy, lock};
use crate::{HttpError, ReplyProblem};

/// The set-up requests, sent again when they fail for a reason that passes.
const SETUP_METHODS: [&str; 3] = [
    methods::INITIALIZE,
    methods::SERVER_DISCOVER,
    methods::TOOLS_LIST,
];

/// Up to three more tries, 100 ms apart at first, doubling, at most 2 s, jittered so that
/// many clients restarted together do not knock together.
fn setup_backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(2))
        .with_max_times(3)
        .with_jitter()
}

/// A failure that may pass: the connection refused (a server still starting) or a
/// gateway's 502, 503 or 504.
fn is_transient(failure: &HttpError) -> bool {
    match failure {
        HttpError::Unreachable { source, .. } => source.is_connect(),
        HttpError::Status { status, .. } => gateway_busy(*status),
        _ => false,
    }
}

impl HttpTransport {
    pub(super) fn post(
        &self,
        body: impl Into<bytes::Bytes>,
    ) -> Result<reqwest::RequestBuilder, HttpError> {
        self.post_as(body.into(), None)
    }

    /// A POST of `body`; a modern request's headers say its version, method and name.
    pub(super) fn post_as(
        &self,
        body: bytes::Bytes,
        modern: Option<&StatelessHeaders>,
    ) -> Result<reqwest::RequestBuilder, HttpError> {
        let mut request = self
            .http_request(reqwest::Method::POST)?
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
                for (name, value) in &modern.params {
                    request = request.header(name, value);
                }
            }
            None => {
                if let Some(version) = lock(&self.state.protocol_version).clone() {
                    request = request.header(headers::PROTOCOL_VERSION, version);
                }
            }
        }
        Ok(request)
    }

    /// Fails on statuses other than success, naming an expired session.
    pub(super) async fn check_status(
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
    /// dropped once written, before the request is sent. A request of the stateless era
    /// names its `version`: it goes out with the era's headers too.
    ///
    /// ```no_run
    /// # async fn call(connection: &maljan_mcp_http::HttpTransport) {
    /// let params = serde_json::json!({"name": "get_file", "arguments": {"path": "a.bin"}});
    /// let id = connection.next_id();
    /// let reply = connection.request_json(id, "tools/call", params, None).await.unwrap();
    /// # }
    /// ```
    pub async fn request_json(
        &self,
        id: RequestId,
        method: &str,
        params: Value,
        version: Option<ProtocolVersion>,
    ) -> Result<Reply, HttpError> {
        self.request_json_with_headers(id, method, params, version, Vec::new())
            .await
    }

    /// [`request_json`](Self::request_json), a modern request carrying `headers` too (a
    /// tool's `Mcp-Param-*`).
    pub(crate) async fn request_json_with_headers(
        &self,
        id: RequestId,
        method: &str,
        params: Value,
        version: Option<ProtocolVersion>,
        headers: Vec<(String, String)>,
    ) -> Result<Reply, HttpError> {
        let modern = version.map(|version| {
            let mut modern = StatelessHeaders::of(version, method, &params);
            modern.params = headers;
            modern
        });
        let body = request_line(&id, method, &params);
        LARGE_BUFFERS.give_strings(params);
        self.request_body(body, id, method, modern).await
    }

    /// POSTs a request's body and reads its response. A modern request refused with a
    /// JSON-RPC error in the body (400 with `-32022`, say) gets that error as its reply.
    pub(super) async fn request_body(
        &self,
        body: Vec<u8>,
        id: RequestId,
        method: &str,
        modern: Option<StatelessHeaders>,
    ) -> Result<Reply, HttpError> {
        let mut wait = self.state.waiting.register(id);
        let sent_session = self.session_id();
        let response = if SETUP_METHODS.contains(&method) {
            // Set-up is small and may be sent again: a server still starting, or a gateway
            // in front of one, is given a few tries.
            (|| self.send_once(body.clone(), modern.as_ref()))
                .retry(setup_backoff())
                .when(is_transient)
                .notify(|failure, delay| {
                    tracing::info!(
                        server = self.server(),
                        "{method} is tried again in {} ms: {failure}",
                        delay.as_millis()
                    );
                })
                .await?
        } else {
            self.send_once(body, modern.as_ref()).await?
        };
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
            // A result stays in the body's buffer: whoever reads a file chunk's answer gives
            // the buffer back to LARGE_BUFFERS with the base64 string it has become.
            self.handle_body(body).await?;
            match wait.try_take() {
                Some(end) => self.ended(end),
                None => Err(self.bad_reply(ReplyProblem::NoResponse)),
            }
        } else {
            Err(self.bad_reply(ReplyProblem::ContentType(content_type.to_owned())))
        }
    }

    /// POSTs a request once; a gateway's 502, 503 or 504 is an error (a transient one).
    async fn send_once(
        &self,
        body: Vec<u8>,
        modern: Option<&StatelessHeaders>,
    ) -> Result<reqwest::Response, HttpError> {
        // Shared, not copied, by each sending after a new token.
        let body = bytes::Bytes::from(body);
        let response = self
            .send_authorized(|| self.post_as(body.clone(), modern))
            .await?;
        give_back(body);
        if gateway_busy(response.status().as_u16()) {
            return self.check_status(response, None).await;
        }
        Ok(response)
    }

    /// A modern request's 4xx: the JSON-RPC error its body holds, else the status.
    pub(super) async fn refused_modern(
        &self,
        response: reqwest::Response,
    ) -> Result<Reply, HttpError> {
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

    /// Reads a JSON reply's body, refused past the configured bound.
    pub(super) async fn read_body(
        &self,
        response: reqwest::Response,
    ) -> Result<Vec<u8>, HttpError> {
        let max = self.state.config.max_event_bytes;
        // Room for the length the server states, up to the bound: a file chunk's answer is
        // then copied once, not again each time the buffer grows (a kept buffer, given back
        // once the answer is read).
        let stated = response
            .content_length()
            .map_or(0, |len| len.min(max as u64) as usize);
        // Taken here, on the caller's thread, rather than in the task that fills it: the
        // buffers of one transfer then come from one thread's part of the allocator's
        // memory, not from a part for each thread that happens to read a body (glibc's
        // malloc keeps each part's freed chunk buffers resident).
        let body = LARGE_BUFFERS.take(stated);
        let read = if stated >= MIN_KEPT_BYTES {
            // A long body (a file chunk's answer) is read by a task of its own, which the
            // connection's task wakes on its own thread for each piece: the caller is woken
            // once, for the whole body, rather than once a piece from another thread.
            let task = tokio::spawn(collect_body(response, body, max));
            let _stop_if_dropped = AbortOnDrop(task.abort_handle());
            task.await.unwrap_or_else(|e| match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                // Cancelled: the runtime is shutting down.
                Err(_) => Err(BodyProblem::Stopped),
            })
        } else {
            collect_body(response, body, max).await
        };
        read.map_err(|problem| match problem {
            BodyProblem::Unreachable(e) => self.unreachable(e),
            BodyProblem::OverBound => {
                lock(&self.state.counts).oversized += 1;
                self.bad_reply(ReplyProblem::OverBound(max))
            }
            BodyProblem::Stopped => self.stream_ended(crate::StreamEnd::Closed),
        })
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
    pub(super) async fn send(&self, message: &Message) -> Result<reqwest::Response, HttpError> {
        self.post_checked(message.to_line()).await
    }

    /// POSTs a body with the session's headers and checks the status.
    pub(super) async fn post_checked(&self, body: Vec<u8>) -> Result<reqwest::Response, HttpError> {
        let sent_session = self.session_id();
        let body = bytes::Bytes::from(body);
        let response = self.send_authorized(|| self.post(body.clone())).await?;
        self.check_status(response, sent_session.as_deref()).await
    }
}

/// Why a body was not read whole.
enum BodyProblem {
    Unreachable(reqwest::Error),
    OverBound,
    /// The task reading it was cancelled.
    Stopped,
}

/// Stops a task when the caller waiting for it is dropped (a call given up on), so that a
/// body nobody waits for is not read on.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Reads a body of up to `max` bytes into `body`.
async fn collect_body(
    response: reqwest::Response,
    mut body: Vec<u8>,
    max: usize,
) -> Result<Vec<u8>, BodyProblem> {
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(BodyProblem::Unreachable)?;
        if body.len() + chunk.len() > max {
            return Err(BodyProblem::OverBound);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// Gives a sent request's buffer back to [`LARGE_BUFFERS`] when it is large and nothing
/// holds it any more (the request was sent whole before its response came): the next file
/// chunk's request is written into it rather than into a new one.
fn give_back(body: bytes::Bytes) {
    if body.len() >= MIN_KEPT_BYTES
        && let Ok(buffer) = body.try_into_mut()
    {
        LARGE_BUFFERS.give(buffer.into());
    }
}
