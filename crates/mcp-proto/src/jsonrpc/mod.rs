//! JSON-RPC 2.0 messages: the model, decoding with validation, and encoding.
//!
//! Decoding dispatches explicitly on the members `method`, `id`, `result` and `error`; there
//! is no untagged union whose variant order decides the outcome. A line is parsed once:
//! `params` stay unparsed [`RawValue`](serde_json::value::RawValue)s, and `result` a
//! [`RawJson`], which can keep the line's own buffer ([`decode_line_buffer`]).

mod decode;
mod id;
mod id_in_head;
mod invalid;
mod message;
mod raw_json;

pub use decode::{DecodedLine, decode_line, decode_line_buffer};
pub use id::RequestId;
pub use id_in_head::id_in_head;
pub use invalid::{InvalidMessage, InvalidReason, JsonKind};
pub use message::{ErrorObject, ErrorResponse, Message, Notification, Reply, Request, Response};
pub use raw_json::RawJson;

/// The standard JSON-RPC error codes.
pub mod error_codes {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist or is not available.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid method parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Internal JSON-RPC error.
    pub const INTERNAL_ERROR: i64 = -32603;
}
