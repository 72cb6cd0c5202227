//! The wrapper that carries a header value no HTTP header may hold as written
//! (`=?base64?…?=`), as the modern era (2026-07-28) defines it.

use base64::Engine;
use base64::prelude::BASE64_STANDARD;

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
