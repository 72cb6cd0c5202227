#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod as_transport;
mod authorization;
mod error;
mod http_transport;
#[cfg(feature = "oauth")]
#[cfg_attr(docsrs, doc(cfg(feature = "oauth")))]
pub mod oauth;
mod redact;
mod sse;
mod waiting;

pub use authorization::{AccessToken, AuthorizationError, AuthorizeFuture, Authorizer, Challenge};
pub use error::{ConfigProblem, HttpError, ReplyProblem, StreamEnd};
pub use http_transport::{BearerToken, HttpConfig, HttpTransport, MAX_AUTHORIZATIONS, TokenFn};
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
