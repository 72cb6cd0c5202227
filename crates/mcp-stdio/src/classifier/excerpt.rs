//! Excerpts of lines that were not messages, escaped, for logs and errors.

use std::fmt;

/// The first characters of a line, with control characters escaped, for a log or an error.
///
/// ```
/// use maljan_mcp_stdio::Excerpt;
/// let e = Excerpt::of(b"Downloading 50%\r\x1b[2K", 200);
/// assert_eq!(e.to_string(), "Downloading 50%\\r\\u{1b}[2K");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excerpt {
    text: String,
    truncated: bool,
}

impl Excerpt {
    /// The first `max_chars` characters of `bytes` (which should be UTF-8; anything after an
    /// invalid sequence is left out).
    pub fn of(bytes: &[u8], max_chars: usize) -> Excerpt {
        let valid = match std::str::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or_default(),
        };
        let mut text = String::new();
        let mut chars = valid.chars();
        for c in chars.by_ref().take(max_chars) {
            if c.is_control() {
                text.extend(c.escape_default());
            } else {
                text.push(c);
            }
        }
        Excerpt {
            text,
            truncated: chars.next().is_some() || valid.len() < bytes.len(),
        }
    }

    /// The escaped text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the line was longer than the excerpt.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }
}

/// Shown with its control characters escaped: an excerpt is a server's text.
impl fmt::Display for Excerpt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&maljan_mcp_proto::untrusted_text::escape_controls(
            &self.text,
        ))?;
        if self.truncated {
            f.write_str("…")?;
        }
        Ok(())
    }
}
