//! The MCP Streamable HTTP client transport (protocol 2025-03-26 and later).
//!
//! One endpoint; each message a POST with `Accept: application/json, text/event-stream`;
//! notifications answered 202; a reply as JSON or as an SSE stream that may carry
//! notifications and server requests before the response; `Mcp-Session-Id` kept and echoed;
//! `MCP-Protocol-Version` sent after setup; 404 on a session reported as an expired session;
//! DELETE on close (405 tolerated); a cut stream resumed by GET with `Last-Event-ID` after the
//! server's `retry` delay. Extra headers and a bearer token (never logged).
//!
//! [`SseParser`] is sans-IO and bounds each event: an event over the bound is dropped as it
//! arrives, so memory stays bounded whatever the server sends.
//!
//! ```
//! use maljan_mcp_http::{SseItem, SseParser};
//! let mut parser = SseParser::new(64);
//! parser.handle_bytes(b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n");
//! assert!(matches!(parser.poll_item(), Some(SseItem::Event(e)) if e.event == "message"));
//! ```

#![forbid(unsafe_code)]

mod as_transport;
mod error;
mod http_transport;
mod redact;
mod sse;
mod waiting;

pub use error::{ConfigProblem, HttpError, ReplyProblem, StreamEnd};
pub use http_transport::{HttpConfig, HttpTransport};
pub use maljan_mcp_transport::session::{Session, SessionError, SessionSettings};
pub use redact::redact_credentials;
pub use sse::{DEFAULT_MAX_EVENT_BYTES, SseEvent, SseItem, SseParser};

// Not public API: the fuzz targets' and corpus replays' entry points, behind a feature of
// their own so that a user never sees them.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    use crate::{SseItem, SseParser};

    /// Feeds `data` to a parser with a small bound, in chunks the first byte sizes, and checks
    /// that memory stays bounded and that no event is over the bound.
    ///
    /// ```
    /// maljan_mcp_http::fuzzing::parse_sse(b"\x05data: x\n\nid: 1\ndata: y\n\n");
    /// ```
    pub fn parse_sse(data: &[u8]) {
        let Some((&chunk, rest)) = data.split_first() else {
            return;
        };
        let bound = 64;
        let mut parser = SseParser::new(bound);
        let chunk = usize::from(chunk % 32) + 1;
        for piece in rest.chunks(chunk) {
            parser.handle_bytes(piece);
            assert!(
                parser.buffered() <= bound + 16 + chunk,
                "memory bounded by the event bound"
            );
            while let Some(item) = parser.poll_item() {
                if let SseItem::Event(event) = item {
                    assert!(
                        event.data.len() <= bound,
                        "an event over the bound was delivered"
                    );
                }
            }
        }
        parser.handle_eof();
    }
}
