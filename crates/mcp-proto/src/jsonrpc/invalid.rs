//! Why a message failed validation, in words a log or an error can show.

use std::fmt;

use super::{ErrorObject, ErrorResponse, Message, RequestId};

/// The JSON type of a value, named in validation reasons ("id is an object").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonKind {
    /// `null`.
    Null,
    /// `true` or `false`.
    Boolean,
    /// An integer number.
    Integer,
    /// A number with a fraction or an exponent.
    Fractional,
    /// A string.
    String,
    /// An array.
    Array,
    /// An object.
    Object,
}

impl JsonKind {
    /// The kind of a raw JSON text, read from its first byte (and, for numbers, its shape).
    pub fn of_raw(raw: &str) -> JsonKind {
        match raw.as_bytes().first() {
            Some(b'"') => JsonKind::String,
            Some(b'{') => JsonKind::Object,
            Some(b'[') => JsonKind::Array,
            Some(b't' | b'f') => JsonKind::Boolean,
            Some(b'n') => JsonKind::Null,
            _ if raw.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) => JsonKind::Fractional,
            _ => JsonKind::Integer,
        }
    }
}

impl fmt::Display for JsonKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            JsonKind::Null => "null",
            JsonKind::Boolean => "a boolean",
            JsonKind::Integer => "an integer",
            JsonKind::Fractional => "a fractional number",
            JsonKind::String => "a string",
            JsonKind::Array => "an array",
            JsonKind::Object => "an object",
        })
    }
}

/// What is wrong with a line that claims to be a JSON-RPC message.
///
/// The `Display` text is the reason a user reads: `id is null`, `both result and error`,
/// `jsonrpc is "1.0"`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidReason {
    /// The line begins like a protocol message and mentions `"jsonrpc"` but is not valid JSON.
    NotJson(String),
    /// `jsonrpc` is present but is not the string `"2.0"`.
    WrongVersion(String),
    /// A member appears twice.
    DuplicateMember(&'static str),
    /// `id` is `null`.
    NullId,
    /// `id` is neither a string nor an integer.
    IdKind(JsonKind),
    /// `id` is an integer outside the 64-bit range.
    IdOutOfRange,
    /// `method` is not a string.
    MethodKind(JsonKind),
    /// `params` is neither an object nor an array.
    ParamsKind(JsonKind),
    /// A message with `method` also carries `result` or `error`.
    MethodAndResponse(&'static str),
    /// A response has both `result` and `error`.
    ResultAndError,
    /// A result response without an id.
    ResultWithoutId,
    /// The object has `jsonrpc` but none of `method`, `result`, `error`.
    NoMethodResultOrError,
    /// `error` is not an object.
    ErrorKind(JsonKind),
    /// `error.code` is missing or not an integer.
    ErrorCodeKind(String),
    /// `error.message` is missing or not a string.
    ErrorMessageKind(String),
    /// A batch (a JSON array of messages) outside protocol 2025-03-26.
    BatchNotAllowed,
    /// An empty batch.
    EmptyBatch,
    /// An element of a batch is invalid.
    InBatch {
        /// The element's position, from 0.
        index: usize,
        /// What is wrong with it.
        reason: Box<InvalidReason>,
    },
}

impl fmt::Display for InvalidReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidReason::NotJson(value) => write!(f, "not valid JSON: {value}"),
            InvalidReason::WrongVersion(value) => write!(f, "jsonrpc is {value}"),
            InvalidReason::DuplicateMember(value) => write!(f, "member {value} appears twice"),
            InvalidReason::NullId => write!(f, "id is null"),
            InvalidReason::IdKind(value) => write!(f, "id is {value}, not a string or an integer"),
            InvalidReason::IdOutOfRange => write!(f, "id is an integer outside the 64-bit range"),
            InvalidReason::MethodKind(value) => write!(f, "method is {value}, not a string"),
            InvalidReason::ParamsKind(value) => {
                write!(f, "params is {value}, not an object or an array")
            }
            InvalidReason::MethodAndResponse(value) => {
                write!(f, "a message with method also has {value}")
            }
            InvalidReason::ResultAndError => write!(f, "both result and error"),
            InvalidReason::ResultWithoutId => write!(f, "result without id"),
            InvalidReason::NoMethodResultOrError => write!(f, "none of method, result or error"),
            InvalidReason::ErrorKind(value) => write!(f, "error is {value}, not an object"),
            InvalidReason::ErrorCodeKind(value) => {
                write!(f, "error.code is {value}, not an integer")
            }
            InvalidReason::ErrorMessageKind(value) => {
                write!(f, "error.message is {value}, not a string")
            }
            InvalidReason::BatchNotAllowed => write!(
                f,
                "a batch (JSON array) of messages, allowed only under protocol 2025-03-26"
            ),
            InvalidReason::EmptyBatch => write!(f, "an empty batch"),
            InvalidReason::InBatch { index, reason } => {
                write!(f, "batch element {index}: {reason}")
            }
        }
    }
}

impl std::error::Error for InvalidReason {}

/// A line that claimed to be a JSON-RPC message and failed validation.
///
/// `id` is the request id when it could be read: of an answer, so the call waiting for it
/// can fail at once; of the sender's own request (`request`), so it can be refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidMessage {
    /// What failed validation.
    pub reason: InvalidReason,
    /// The id, when one could be read.
    pub id: Option<RequestId>,
    /// Whether the message was a request or a notification (it has `method`, and neither
    /// `result` nor `error`): its id is then the sender's own, never one of the receiver's
    /// requests, and a request is answered with `-32600`.
    pub request: bool,
}

impl fmt::Display for InvalidMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid JSON-RPC message: {}", self.reason)
    }
}

impl std::error::Error for InvalidMessage {}

impl InvalidMessage {
    /// The answer an invalid request gets: `-32600` naming what is wrong, under its id.
    /// `None` for anything else (an invalid answer, or a request without a readable id).
    ///
    /// ```
    /// use maljan_mcp_proto::jsonrpc::{DecodedLine, decode_line};
    /// let line = br#"{"jsonrpc":"2.0","id":7,"method":"ping","params":null}"#;
    /// let DecodedLine::Invalid(invalid) = decode_line(line, false) else { panic!() };
    /// let refusal = invalid.refusal().unwrap().to_json();
    /// assert!(refusal.contains(r#""id":7"#) && refusal.contains("-32600"), "{refusal}");
    /// ```
    pub fn refusal(&self) -> Option<Message> {
        let id = self.id.clone().filter(|_| self.request)?;
        Some(Message::Error(ErrorResponse {
            id: Some(id),
            error: ErrorObject::new(
                super::error_codes::INVALID_REQUEST,
                format!("invalid request: {}", self.reason),
            ),
        }))
    }
}
