//! Showing text a peer wrote (a server's name, a tool's description or answer, an error
//! message, a file name, a sample's name) without letting it steer a terminal: control
//! characters that a terminal or a text viewer acts on are shown escaped instead.

use std::borrow::Cow;

/// Whether a terminal or a viewer may act on `c` rather than show it: C0 controls, DEL,
/// C1 controls (CSI and OSC among them) and the bidirectional overrides and isolates that
/// reorder what is shown.
pub fn is_active_control(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{61c}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

/// `text` with every active control character but the line feed and the tab shown as
/// `\u{…}`: what is printed is what was written, and the terminal does nothing of it.
///
/// ```
/// use maljan_mcp_proto::untrusted_text::escape_controls;
/// assert_eq!(escape_controls("ok"), "ok");
/// assert_eq!(
///     escape_controls("\u{1b}]52;c;cHduZWQ=\u{7}evil"),
///     "\\u{1b}]52;c;cHduZWQ=\\u{7}evil"
/// );
/// assert_eq!(escape_controls("two\nlines\r"), "two\nlines\\u{d}");
/// ```
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    escape_where(text, |c| is_active_control(c) && c != '\n' && c != '\t')
}

/// `text` (a JSON document) with every active control character that JSON leaves raw
/// (DEL, the C1 controls, the bidirectional overrides) written as a JSON escape, `\u009b`:
/// still the same JSON, and inert on a terminal. Such characters can stand only inside
/// strings, where the escape means the same character.
///
/// ```
/// use maljan_mcp_proto::untrusted_text::escape_json_controls;
/// let json = serde_json::json!({"name": "a\u{9b}31mb"}).to_string();
/// let shown = escape_json_controls(&json);
/// assert_eq!(shown, r#"{"name":"a\u009b31mb"}"#);
/// let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
/// assert_eq!(back["name"], "a\u{9b}31mb");
/// ```
pub fn escape_json_controls(json: &str) -> Cow<'_, str> {
    if !json.chars().any(|c| is_active_control(c) && c > '\u{7e}') {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if is_active_control(c) && c > '\u{7e}' {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn escape_where(text: &str, escaped: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(&escaped) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if escaped(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn no_active_control_but_line_feed_and_tab_comes_out(text in any::<String>()) {
            let shown = escape_controls(&text);
            prop_assert!(shown.chars().all(|c| !is_active_control(c) || c == '\n' || c == '\t'));
        }

        #[test]
        fn text_without_controls_is_kept_as_written(text in "[ -~\u{a0}-\u{5ff}]{0,60}") {
            prop_assert_eq!(escape_controls(&text), text.as_str());
        }

        #[test]
        fn escaped_json_is_the_same_json_and_inert(text in any::<String>()) {
            let json = serde_json::json!({"text": text}).to_string();
            let shown = escape_json_controls(&json);
            prop_assert!(shown.chars().all(|c| !is_active_control(c)));
            let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
            prop_assert_eq!(back["text"].as_str(), Some(text.as_str()));
        }
    }
}
