//! A tool's answer read by Maljan's rules: a value, or a failure with a code, a message and
//! a remedy.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::ErrorCode;
use crate::jsonrpc::ErrorObject;
use crate::mcp::{CallToolResult, ContentBlock};

/// Why a call failed: a code, a message, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ToolFailure {
    /// The code.
    pub code: ErrorCode,
    /// What went wrong.
    pub message: String,
    /// What to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<String>,
}

impl ToolFailure {
    /// A failure with a code, a message and a remediation.
    pub fn new(
        code: ErrorCode,
        message: impl Into<String>,
        remediation: impl Into<Option<String>>,
    ) -> Self {
        ToolFailure {
            code,
            message: message.into(),
            remediation: remediation.into(),
        }
    }

    /// The error envelope a server answers: `{error: {code, message, remediation}, tool}`.
    ///
    /// ```
    /// use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
    /// let f = ToolFailure::new(ErrorCode::BadArgument, "path is missing", Some("pass path".into()));
    /// let v = f.to_envelope("file_info");
    /// assert_eq!(v["error"]["code"], "bad_argument");
    /// assert_eq!(v["tool"], "file_info");
    /// ```
    pub fn to_envelope(&self, tool: &str) -> Value {
        json!({
            "error": {
                "code": self.code,
                "message": self.message,
                "remediation": self.remediation,
            },
            "tool": tool,
        })
    }

    /// Reads an error envelope's `error` member: an object `{code, message, remediation}` or
    /// a plain string (read as `tool_failed`).
    pub fn from_error_member(error: &Value) -> ToolFailure {
        match error {
            Value::String(message) => {
                ToolFailure::new(ErrorCode::ToolFailed, message.clone(), None)
            }
            Value::Object(map) => ToolFailure {
                code: map
                    .get("code")
                    .and_then(Value::as_str)
                    .map_or(ErrorCode::ToolFailed, ErrorCode::from),
                message: map
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| error.to_string(), str::to_owned),
                remediation: map
                    .get("remediation")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            },
            other => ToolFailure::new(ErrorCode::ToolFailed, other.to_string(), None),
        }
    }
}

/// Whether a call succeeded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    /// The tool answered.
    Ok,
    /// The call failed.
    Failed(ToolFailure),
}

/// A tool's answer read by Maljan's rules.
///
/// The value is `structuredContent` when present, else the single text block parsed as JSON,
/// else the text itself. The call failed when the value is an object with an `error` member
/// (an object `{code, message, remediation}` or a string), when `isError` is true, or on a
/// JSON-RPC error.
///
/// ```
/// use maljan_mcp_proto::maljan::{ErrorCode, Outcome, ToolAnswer};
/// use maljan_mcp_proto::mcp::{CallToolResult, ContentBlock};
/// let envelope = serde_json::json!({"error": {"code": "missing_dependency",
///     "message": "pdfinfo is missing", "remediation": "apt-get install poppler-utils"},
///     "tool": "pdf_info"});
/// let result = CallToolResult {
///     content: vec![ContentBlock::Text { text: envelope.to_string() }],
///     structured_content: None,
///     is_error: None,
/// };
/// let answer = ToolAnswer::read(&result);
/// match answer.outcome {
///     Outcome::Failed(f) => assert_eq!(f.code, ErrorCode::MissingDependency),
///     Outcome::Ok => unreachable!(),
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolAnswer {
    /// The answer's value.
    pub value: Value,
    /// Whether the call succeeded.
    pub outcome: Outcome,
}

impl ToolAnswer {
    /// Reads a `tools/call` result.
    pub fn read(result: &CallToolResult) -> ToolAnswer {
        Self::from_value(answer_value(result), result.is_error())
    }

    /// Reads a `tools/call` result it owns, moving `structuredContent` rather than copying it.
    pub fn from_result(mut result: CallToolResult) -> ToolAnswer {
        let is_error = result.is_error();
        let value = match result.structured_content.take() {
            Some(structured) => structured,
            None => answer_value(&result),
        };
        Self::from_value(value, is_error)
    }

    fn from_value(value: Value, is_error: bool) -> ToolAnswer {
        let envelope = value.as_object().and_then(|m| m.get("error"));
        let outcome = match envelope {
            Some(error) => Outcome::Failed(ToolFailure::from_error_member(error)),
            None if is_error => Outcome::Failed(ToolFailure::new(
                ErrorCode::ToolFailed,
                match &value {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                },
                None,
            )),
            None => Outcome::Ok,
        };
        ToolAnswer { value, outcome }
    }

    /// A JSON-RPC error answer: failed with `rpc_error`.
    pub fn from_rpc_error(error: &ErrorObject) -> ToolAnswer {
        ToolAnswer {
            value: json!({"code": error.code, "message": error.message}),
            outcome: Outcome::Failed(ToolFailure::new(
                ErrorCode::RpcError,
                format!(
                    "the server answered JSON-RPC error {}: {}",
                    error.code, error.message
                ),
                Some("check the tool name and arguments against `maljan tools`".to_owned()),
            )),
        }
    }

    /// A failure the client decided (for example `unanswered`), with no answer from the server.
    pub fn failed(failure: ToolFailure) -> ToolAnswer {
        ToolAnswer {
            value: Value::Null,
            outcome: Outcome::Failed(failure),
        }
    }

    /// The failure, when the call failed.
    pub fn failure(&self) -> Option<&ToolFailure> {
        match &self.outcome {
            Outcome::Ok => None,
            Outcome::Failed(f) => Some(f),
        }
    }

    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }
}

fn answer_value(result: &CallToolResult) -> Value {
    if let Some(structured) = &result.structured_content {
        return structured.clone();
    }
    let texts: Vec<&str> = result
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    match texts.as_slice() {
        [single] if result.content.len() == 1 => {
            serde_json::from_str(single).unwrap_or_else(|_| Value::String((*single).to_owned()))
        }
        _ => serde_json::to_value(&result.content).unwrap_or(Value::Null),
    }
}
