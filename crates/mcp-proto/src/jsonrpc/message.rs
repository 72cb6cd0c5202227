//! The JSON-RPC messages: requests, notifications, responses and errors, and their lines.

use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::{RawJson, RequestId};

/// A request: it has a `method` and an `id` and expects a response.
#[derive(Debug, Clone)]
pub struct Request {
    /// The id the response will carry.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// The parameters, unparsed (an object or an array).
    pub params: Option<Box<RawValue>>,
}

/// A notification: a `method` without an `id`, never answered.
#[derive(Debug, Clone)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// The parameters, unparsed (an object or an array).
    pub params: Option<Box<RawValue>>,
}

/// A successful response.
#[derive(Debug, Clone)]
pub struct Response {
    /// The id of the request this answers.
    pub id: RequestId,
    /// The result, unparsed.
    pub result: RawJson,
}

/// An error response. Its `id` is absent only when the request's id could not be read.
#[derive(Debug, Clone)]
pub struct ErrorResponse {
    /// The id of the request this answers, when known.
    pub id: Option<RequestId>,
    /// The error.
    pub error: ErrorObject,
}

/// The `error` member of an error response.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code.
    pub code: i64,
    /// A short description.
    pub message: String,
    /// More about the error, unparsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Box<RawValue>>,
}

impl ErrorObject {
    /// An error object without data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        ErrorObject {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// A JSON-RPC 2.0 message.
///
/// Decode with [`decode_line`](super::decode_line) (which validates and says what is wrong),
/// encode with [`Message::to_json`].
///
/// ```
/// use maljan_mcp_proto::jsonrpc::{Message, Request, RequestId};
/// let request = Message::Request(Request {
///     id: RequestId::Integer(1),
///     method: "ping".into(),
///     params: None,
/// });
/// assert_eq!(request.to_json(), r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
/// ```
#[derive(Debug, Clone)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A successful response.
    Response(Response),
    /// An error response.
    Error(ErrorResponse),
}

impl Message {
    /// The message's id: a request's, or the id a response answers.
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            Message::Request(r) => Some(&r.id),
            Message::Notification(_) => None,
            Message::Response(r) => Some(&r.id),
            Message::Error(e) => e.id.as_ref(),
        }
    }

    /// The method of a request or notification.
    pub fn method(&self) -> Option<&str> {
        match self {
            Message::Request(r) => Some(&r.method),
            Message::Notification(n) => Some(&n.method),
            Message::Response(_) | Message::Error(_) => None,
        }
    }

    /// The message as one line of JSON ending in a newline, written in one pass into a
    /// buffer sized for it (a multi-megabyte `params` is copied once).
    ///
    /// ```
    /// use maljan_mcp_proto::jsonrpc::{Message, Notification};
    /// let m = Message::Notification(Notification { method: "n".into(), params: None });
    /// assert_eq!(m.to_line(), b"{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n");
    /// ```
    pub fn to_line(&self) -> Vec<u8> {
        let raw = match self {
            Message::Request(r) => r.params.as_ref().map_or(0, |p| p.get().len()) + r.method.len(),
            Message::Notification(n) => {
                n.params.as_ref().map_or(0, |p| p.get().len()) + n.method.len()
            }
            Message::Response(r) => r.result.get().len(),
            Message::Error(e) => {
                e.error.message.len() + e.error.data.as_ref().map_or(0, |d| d.get().len())
            }
        };
        let mut line = Vec::with_capacity(raw + 128);
        // Writing our own types into a Vec cannot fail: every key is a string.
        let _ = serde_json::to_writer(&mut line, self);
        line.push(b'\n');
        line
    }

    /// The message as one line of JSON, without a newline.
    pub fn to_json(&self) -> String {
        // Serializing our own types into a String cannot fail: every key is a string.
        serde_json::to_string(self).unwrap_or_default()
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("jsonrpc", "2.0")?;
        match self {
            Message::Request(r) => {
                map.serialize_entry("id", &r.id)?;
                map.serialize_entry("method", &r.method)?;
                if let Some(params) = &r.params {
                    map.serialize_entry("params", params)?;
                }
            }
            Message::Notification(n) => {
                map.serialize_entry("method", &n.method)?;
                if let Some(params) = &n.params {
                    map.serialize_entry("params", params)?;
                }
            }
            Message::Response(r) => {
                map.serialize_entry("id", &r.id)?;
                map.serialize_entry("result", &r.result)?;
            }
            Message::Error(e) => {
                if let Some(id) = &e.id {
                    map.serialize_entry("id", id)?;
                }
                map.serialize_entry("error", &e.error)?;
            }
        }
        map.end()
    }
}

/// A request's answer: its result, or the JSON-RPC error the server answered.
#[derive(Debug, Clone)]
pub enum Reply {
    /// The result, unparsed.
    Result(RawJson),
    /// The server answered with an error.
    Error(ErrorObject),
}
