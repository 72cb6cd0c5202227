//! Serving MCP over Streamable HTTP: one endpoint, one job directory per session.

use std::collections::HashMap;
use std::io::{self, Read};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use maljan_mcp_proto::jsonrpc::{DecodedLine, Message, RequestId, decode_line, error_codes};
use maljan_mcp_proto::mcp::{CancelledParams, methods};
use tokio::task::AbortHandle;

use crate::job::lock;
use crate::server::{Answer, encode, error_reply};
use crate::{Job, Server};

const SESSION_HEADER: &str = "mcp-session-id";
/// The largest request body accepted: a 4 MiB file chunk in base64 fits many times over.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;

/// One MCP session: its job and its calls in flight.
#[derive(Debug)]
struct Session {
    job: Arc<Job>,
    in_flight: Mutex<HashMap<RequestId, AbortHandle>>,
}

struct HttpState {
    server: Arc<Server>,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
}

/// A session id from the operating system's randomness: 128 bits in hex.
fn new_session_id() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether an `Origin` header names this host (the spec requires refusing others).
fn origin_is_loopback(origin: &str) -> bool {
    let host = origin
        .split_once("://")
        .map_or(origin, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default();
    let host = match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) && !h.ends_with(':') => h,
        _ => host,
    };
    host == "localhost"
        || host == "[::1]"
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
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
        None => encode(&Message::Error(maljan_mcp_proto::jsonrpc::ErrorResponse {
            id: None,
            error: maljan_mcp_proto::jsonrpc::ErrorObject::new(code, message),
        })),
    };
    json_response(status, line)
}

async fn handle_post(
    State(state): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok())
        && !origin_is_loopback(origin)
    {
        return (
            StatusCode::FORBIDDEN,
            format!("origin {origin} is not allowed"),
        )
            .into_response();
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
    if let Message::Request(request) = &message
        && request.method == methods::INITIALIZE
    {
        return initialize(&state, request.clone());
    }
    let Some(session_id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return error_response(
            StatusCode::BAD_REQUEST,
            message.id().cloned(),
            error_codes::INVALID_REQUEST,
            "the Mcp-Session-Id header is missing; send initialize first".to_owned(),
        );
    };
    let Some(session) = lock(&state.sessions).get(session_id).cloned() else {
        return (StatusCode::NOT_FOUND, "no such session").into_response();
    };
    match message {
        Message::Request(request) => match state.server.answer(request) {
            Answer::Line(line) => json_response(StatusCode::OK, line),
            Answer::Call(id, call) => {
                let task = tokio::spawn(state.server.clone().call(
                    id.clone(),
                    call,
                    session.job.clone(),
                ));
                lock(&session.in_flight).insert(id.clone(), task.abort_handle());
                let outcome = task.await;
                lock(&session.in_flight).remove(&id);
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
                && let Some(handle) = lock(&session.in_flight).remove(&c.request_id)
            {
                handle.abort();
            }
            StatusCode::ACCEPTED.into_response()
        }
        Message::Response(_) | Message::Error(_) => StatusCode::ACCEPTED.into_response(),
    }
}

fn initialize(state: &HttpState, request: maljan_mcp_proto::jsonrpc::Request) -> Response {
    let id = request.id.clone();
    let created = new_session_id().and_then(|sid| Ok((sid, Job::temporary()?)));
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
        }),
    );
    let mut response = json_response(StatusCode::OK, line);
    if let Ok(value) = HeaderValue::from_str(&session_id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

async fn handle_delete(State(state): State<Arc<HttpState>>, headers: HeaderMap) -> StatusCode {
    let removed = headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|sid| lock(&state.sessions).remove(sid));
    if removed.is_some() {
        StatusCode::OK
    } else {
        StatusCode::NOT_FOUND
    }
}

impl Server {
    /// Serves Streamable HTTP on `listener` at `/mcp`: each session gets its own job
    /// directory (removed when the session ends); requests whose `Origin` is not this host
    /// are refused (403); the GET stream is not offered (405); request bodies are bounded
    /// by [`MAX_REQUEST_BYTES`].
    pub async fn serve_http(self, listener: tokio::net::TcpListener) -> io::Result<()> {
        let state = Arc::new(HttpState {
            server: Arc::new(self),
            sessions: Mutex::default(),
        });
        let app = Router::new()
            .route(
                "/mcp",
                post(handle_post)
                    .delete(handle_delete)
                    .get(|| async { StatusCode::METHOD_NOT_ALLOWED }),
            )
            .layer(axum::extract::DefaultBodyLimit::max(MAX_REQUEST_BYTES))
            .with_state(state);
        axum::serve(listener, app).await
    }
}

#[cfg(test)]
mod tests {
    use super::origin_is_loopback;

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
        ] {
            assert!(!origin_is_loopback(bad), "{bad}");
        }
    }
}
