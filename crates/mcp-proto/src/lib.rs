//! JSON-RPC 2.0 and Model Context Protocol messages, with Maljan's tool conventions.
//!
//! This crate is sans-IO: it never reads or writes, and it has no runtime. Transports
//! (`maljan-mcp-stdio`, `maljan-mcp-http`) frame bytes and hand lines to
//! [`jsonrpc::decode_line`], which validates a message and, when it is invalid, says what
//! failed. Servers and clients then read `params` and `result` into the [`mcp`] types.
//!
//! ```
//! use maljan_mcp_proto::jsonrpc::{decode_line, DecodedLine, Message};
//! use maljan_mcp_proto::mcp::CallToolResult;
//! use maljan_mcp_proto::maljan::ToolAnswer;
//!
//! let line = br#"{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"{\"size\":12}"}]}}"#;
//! let DecodedLine::Message(Message::Response(response)) = decode_line(line, false) else {
//!     panic!("a valid response");
//! };
//! let result: CallToolResult = serde_json::from_str(response.result.get()).unwrap();
//! let answer = ToolAnswer::read(&result);
//! assert!(answer.is_ok());
//! assert_eq!(answer.value["size"], 12);
//! ```
//!
//! # Limits
//!
//! Decoding holds the whole line in memory; the transport bounds the line length.
//! Request ids are strings or 64-bit signed integers.

// Not public API: the fuzz targets' and corpus replays' entry points, behind a feature of
// their own so that a user never sees them.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod json_writer;
pub mod jsonrpc;
pub mod maljan;
pub mod mcp;
pub mod untrusted_text;
