//! A POST of the session era: `initialize` opens a session, each later request names it,
//! and DELETE ends it.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use maljan_mcp_proto::jsonrpc::{Message, Request, error_codes};
use maljan_mcp_proto::mcp::headers as modern_headers;
use maljan_mcp_proto::mcp::{CancelledParams, methods};

use crate::era::STATELESS_VERSION;

use super::access::{Caller, check_caller};
use super::sessions::OpenRefusal;
use super::{
    CancelOnDrop, HttpState, SESSION_HEADER, error_response, header_text, json_response,
    new_session_id,
};
use crate::job::lock;
use crate::server::{Answer, InFlight};
use crate::tool::Cancellation;

/// A legacy message: under the session its `Mcp-Session-Id` names.
pub(super) async fn session_post(
    state: &Arc<HttpState>,
    headers: &HeaderMap,
    message: Message,
) -> Response {
    let Some(session_id) = headers.get(SESSION_HEADER).and_then(|v| v.to_str().ok()) else {
        return error_response(
            StatusCode::BAD_REQUEST,
            message.id().cloned(),
            error_codes::INVALID_REQUEST,
            "the Mcp-Session-Id header is missing; send initialize first".to_owned(),
        );
    };
    let Some(session) = state.sessions.get(&session_id.to_owned()) else {
        return (
            StatusCode::NOT_FOUND,
            "no such session (it ended, or expired when idle); send initialize again",
        )
            .into_response();
    };
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
                session.touch();
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

pub(super) fn initialize(state: &HttpState, caller: Caller, request: Request) -> Response {
    let id = request.id.clone();
    let opened = new_session_id()
        .map_err(OpenRefusal::Io)
        .and_then(|sid| Ok((sid.clone(), state.sessions.open(sid, caller.peer)?)));
    let (session_id, session) = match opened {
        Ok(opened) => opened,
        Err(refusal) => {
            let status = match refusal {
                OpenRefusal::Io(_) => StatusCode::INTERNAL_SERVER_ERROR,
                OpenRefusal::Full(_) | OpenRefusal::PeerFull(_) => StatusCode::SERVICE_UNAVAILABLE,
            };
            return error_response(
                status,
                Some(id),
                error_codes::INTERNAL_ERROR,
                format!("no session was opened: {refusal}"),
            );
        }
    };
    let Answer::Line(line) = state.server.answer(request) else {
        state.sessions.end(&session_id);
        return error_response(
            StatusCode::BAD_REQUEST,
            Some(id),
            error_codes::INVALID_REQUEST,
            "not an initialize".to_owned(),
        );
    };
    drop(session);
    let mut response = json_response(StatusCode::OK, line);
    if let Ok(value) = HeaderValue::from_str(&session_id) {
        response.headers_mut().insert(SESSION_HEADER, value);
    }
    response
}

pub(super) async fn handle_delete(
    State(state): State<Arc<HttpState>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
) -> Response {
    if let Err(refusal) = check_caller(&state.options, state.loopback, peer, &headers).await {
        return refusal.into_response();
    }
    if headers.get(SESSION_HEADER).is_none()
        && header_text(&headers, modern_headers::PROTOCOL_VERSION).as_deref()
            == Some(STATELESS_VERSION)
    {
        // The modern era has no sessions to end.
        return StatusCode::METHOD_NOT_ALLOWED.into_response();
    }
    let ended = headers
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|sid| state.sessions.end(&sid.to_owned()));
    if ended {
        StatusCode::OK.into_response()
    } else {
        StatusCode::NOT_FOUND.into_response()
    }
}
