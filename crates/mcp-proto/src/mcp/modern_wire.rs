//! The names the modern era (2026-07-28) puts on the wire beside its methods: the `_meta`
//! keys of every request and result, the HTTP headers that repeat a request's body, and
//! the wrapper that carries a header value no header may hold as written.

use base64::Engine;
use base64::prelude::BASE64_STANDARD;

/// The `_meta` keys of the modern era.
pub mod meta_keys {
    /// The request's protocol version (required).
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// The client's capabilities (required; `{}` for none).
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// Who the client is.
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// Who the server is, on a result: for display only.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
}

/// The HTTP headers a modern POST repeats its body in (lower case, as HTTP/2 sends them).
pub mod headers {
    /// The protocol version, equal to the one in `_meta`.
    pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
    /// The request's method.
    pub const METHOD: &str = "mcp-method";
    /// The tool, prompt or resource a `tools/call`, `prompts/get` or `resources/read`
    /// names.
    pub const NAME: &str = "mcp-name";
}

const WRAPPER_START: &str = "=?base64?";
const WRAPPER_END: &str = "?=";

/// A value as a header carries it: as written when it is visible ASCII (inner spaces
/// allowed) and does not look like the wrapper, else `=?base64?…?=` around its UTF-8.
///
/// ```
/// use maljan_mcp_proto::mcp::{decode_header_value, encode_header_value};
/// assert_eq!(encode_header_value("file_info"), "file_info");
/// let wrapped = encode_header_value("größe");
/// assert!(wrapped.starts_with("=?base64?"));
/// assert_eq!(decode_header_value(&wrapped).as_deref(), Some("größe"));
/// ```
pub fn encode_header_value(value: &str) -> String {
    let visible = value.bytes().all(|b| (0x20..0x7f).contains(&b));
    let padded = value.starts_with(' ') || value.ends_with(' ');
    let wrapped = value.starts_with("=?") && value.ends_with(WRAPPER_END);
    if visible && !padded && !wrapped {
        value.to_owned()
    } else {
        format!(
            "{WRAPPER_START}{}{WRAPPER_END}",
            BASE64_STANDARD.encode(value)
        )
    }
}

/// A header's value as its sender meant it: unwrapped from `=?base64?…?=`. `None` when the
/// wrapper holds something that is not base64 of UTF-8.
pub fn decode_header_value(value: &str) -> Option<String> {
    match value
        .strip_prefix(WRAPPER_START)
        .and_then(|v| v.strip_suffix(WRAPPER_END))
    {
        Some(encoded) => BASE64_STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok()),
        None => Some(value.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn any_value_is_sent_as_visible_ascii_and_read_back(value in "\\PC{0,40}") {
            let sent = encode_header_value(&value);
            prop_assert!(sent.bytes().all(|b| (0x20..0x7f).contains(&b)), "{sent:?}");
            prop_assert_eq!(decode_header_value(&sent), Some(value));
        }

        #[test]
        fn any_received_value_is_read_without_panicking(value in "\\PC{0,60}") {
            let _ = decode_header_value(&value);
            let _ = decode_header_value(&format!("=?base64?{value}?="));
        }
    }

    #[test]
    fn a_wrapper_that_is_not_base64_of_utf8_is_refused() {
        assert_eq!(decode_header_value("=?base64?not base64!?="), None);
        assert_eq!(
            decode_header_value("=?base64?/w==?="),
            None,
            "0xFF is not UTF-8"
        );
    }
}
