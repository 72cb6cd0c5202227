//! A reply waited for up to a deadline, and the request cancelled on the server when the
//! deadline passes: the one rule every caller of a transport keeps.

use std::time::Duration;

use maljan_mcp_proto::jsonrpc::Reply;
use maljan_mcp_proto::mcp::{CancelledParams, methods};

use crate::failure::TransportFailure;
use crate::transport::{OutgoingRequest, PendingReply, Transport, TransportKind};

/// Whether giving `request` up is told to the server with `notifications/cancelled` over a
/// transport of `kind`: never for `initialize` (the lifecycle forbids it), nor for a
/// stateless request over HTTP, which is cancelled by closing its stream (dropping its
/// reply does that).
///
/// ```
/// use maljan_mcp_transport::{OutgoingRequest, TransportKind, cancelled_by_notice};
/// let call = OutgoingRequest::new("tools/call", None);
/// assert!(cancelled_by_notice(&call, TransportKind::Stdio));
/// assert!(!cancelled_by_notice(&OutgoingRequest::new("initialize", None), TransportKind::Stdio));
/// ```
pub fn cancelled_by_notice(request: &OutgoingRequest, kind: TransportKind) -> bool {
    let closed_is_cancelled =
        request.stateless_version().is_some() && kind == TransportKind::StreamableHttp;
    request.method() != methods::INITIALIZE && !closed_is_cancelled
}

/// Waits up to `wait` for `pending`; past it, tells the server with
/// `notifications/cancelled` when `notify` (see [`cancelled_by_notice`]) and gives `None`.
/// The notice is best effort: the deadline has passed whether or not it gets through.
pub async fn reply_within(
    transport: &dyn Transport,
    pending: PendingReply,
    wait: Duration,
    notify: bool,
) -> Option<Result<Reply, TransportFailure>> {
    let id = pending.id().clone();
    match tokio::time::timeout(wait, pending).await {
        Ok(reply) => Some(reply),
        Err(_) => {
            if notify {
                let cancel = CancelledParams {
                    request_id: id,
                    reason: Some(format!("no answer within {} s", wait.as_secs_f64())),
                };
                let _ = transport
                    .notify(methods::CANCELLED, serde_json::to_value(&cancel).ok())
                    .await;
            }
            None
        }
    }
}
