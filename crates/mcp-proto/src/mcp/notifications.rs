//! The notifications both sides send: cancelled, progress, log messages.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::jsonrpc::RequestId;

/// `notifications/cancelled`: the sender gave up on a request.
///
/// ```
/// use maljan_mcp_proto::mcp::CancelledParams;
/// let p = CancelledParams { request_id: 3.into(), reason: Some("timed out".into()) };
/// assert_eq!(serde_json::to_string(&p).unwrap(), r#"{"requestId":3,"reason":"timed out"}"#);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelledParams {
    /// The request given up on.
    pub request_id: RequestId,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `notifications/progress`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressParams {
    /// The token the request carried in `_meta.progressToken`.
    pub progress_token: Value,
    /// Progress so far; increases with every update.
    pub progress: f64,
    /// The total, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// What is happening.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `notifications/message`: a log record from the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggingMessageParams {
    /// `debug`, `info`, `notice`, `warning`, `error`, `critical`, `alert` or `emergency`.
    pub level: String,
    /// The logger's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    /// The record.
    pub data: Value,
}
