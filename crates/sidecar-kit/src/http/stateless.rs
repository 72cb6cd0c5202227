//! A 2026-07-28 POST: no session; each call works in the job its key names under the
//! bearer token shown, or in a job of its own.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use maljan_mcp_proto::jsonrpc::{ErrorObject, Request, error_codes};
use maljan_mcp_proto::maljan::JobKey;
use maljan_mcp_proto::mcp::headers as modern_headers;
use maljan_mcp_proto::mcp::{methods, stateless_error_codes};

use crate::era::STATELESS_VERSION;
use sha2::{Digest, Sha256};

use super::access::Caller;
use super::{CancelOnDrop, HttpState, MODERN_METHODS, error_response, header_text, json_response};
use crate::JobDir;
use crate::server::{Answer, CallJob};
use crate::tool::Cancellation;

/// Where a stateless call works: the job its key names for this caller (made at its first
/// call), or, without a key, a job of its own that ends with the call.
pub(super) fn stateless_job(
    state: &HttpState,
    caller: Caller,
    meta: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<Arc<JobDir>, ErrorObject> {
    let key = JobKey::in_meta(meta)
        .map_err(|e| ErrorObject::new(error_codes::INVALID_PARAMS, e.to_string()))?;
    let Some(key) = key else {
        return Ok(JobDir::temporary_on_first_use());
    };
    state
        .stateless
        .get_or_open(job_binding(&key, caller.token), caller.peer)
        .map(|session| session.job.clone())
        .map_err(|refusal| ErrorObject::new(error_codes::INTERNAL_ERROR, refusal.to_string()))
}

/// What a stateless job is filed under: its key bound to the token its caller showed, so
/// that a key alone, sent with another token, reaches another job.
pub(super) fn job_binding(key: &JobKey, token: Option<[u8; 32]>) -> [u8; 32] {
    let mut digest = Sha256::new();
    digest.update(b"maljan stateless job\0");
    digest.update(token.unwrap_or([0; 32]));
    digest.update(key.as_str().as_bytes());
    digest.finalize().into()
}

/// A modern request: stateless, its headers matching its body, its calls run in the job
/// its key names.
pub(super) async fn stateless_post(
    state: &Arc<HttpState>,
    caller: Caller,
    headers: &HeaderMap,
    request: Request,
) -> Response {
    let mismatch = |detail: String| {
        error_response(
            StatusCode::BAD_REQUEST,
            Some(request.id.clone()),
            stateless_error_codes::HEADER_MISMATCH,
            detail,
        )
    };
    if header_text(headers, modern_headers::PROTOCOL_VERSION).as_deref() != Some(STATELESS_VERSION)
    {
        return mismatch(format!(
            "the MCP-Protocol-Version header must be {STATELESS_VERSION:?}, as in _meta"
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
    let cancellation = Cancellation::default();
    // The era cancels a call by closing its stream: the request's future is then dropped.
    let _client_gone = CancelOnDrop(cancellation.clone());
    let chooser = state.clone();
    let job = CallJob::ChosenBy(Box::new(move |meta| stateless_job(&chooser, caller, meta)));
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key() -> impl Strategy<Value = String> {
        "[A-Za-z0-9_-]{32,64}"
    }

    proptest! {
        /// Another caller's key with another token, or another key with the same token,
        /// is always another job.
        #[test]
        fn a_job_is_reached_only_by_its_own_key_and_token(
            (a, b) in (key(), key()),
            (ta, tb) in (proptest::option::of(any::<[u8; 32]>()), proptest::option::of(any::<[u8; 32]>())),
        ) {
            let (ka, kb) = (JobKey::parse(&a).unwrap(), JobKey::parse(&b).unwrap());
            let same = a == b && ta == tb;
            prop_assert_eq!(job_binding(&ka, ta) == job_binding(&kb, tb), same);
        }

        /// A forged key (too short, too long, or with another character) never names a job.
        #[test]
        fn a_forged_key_is_refused(forged in "([A-Za-z0-9_-]{0,31}|[A-Za-z0-9_-]{129,140}|[A-Za-z0-9_-]{10,40}[^A-Za-z0-9_-][A-Za-z0-9_-]{0,40})") {
            let meta = serde_json::json!({maljan_mcp_proto::maljan::JOB_KEY_META: forged});
            prop_assert!(JobKey::in_meta(meta.as_object()).is_err());
        }
    }
}
