//! Search arguments as a shell would have quoted them, read back.

/// A search argument read unquoted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unquoted {
    /// What the argument was read as.
    pub read_as: String,
    /// Whether quotes were removed.
    pub was_quoted: bool,
}

const QUOTE_PAIRS: [(char, char); 6] = [
    ('"', '"'),
    ('\'', '\''),
    ('`', '`'),
    ('\u{201C}', '\u{201D}'),
    ('\u{2018}', '\u{2019}'),
    ('\u{00AB}', '\u{00BB}'),
];

/// Reads a search argument without the quotes a model or a person put around it:
/// `"evil.com"`, `'x'`, typographic quotes, backticks, and quotes within quotes.
///
/// ```
/// use maljan_sidecar_kit::unquote;
/// assert_eq!(unquote("\"needle\"").read_as, "needle");
/// assert_eq!(unquote("“evil.com”").read_as, "evil.com");
/// assert_eq!(unquote("'\"both\"'").read_as, "both");
/// assert!(!unquote("plain").was_quoted);
/// assert_eq!(unquote("\"").read_as, "\"", "a lone quote is kept");
/// ```
pub fn unquote(argument: &str) -> Unquoted {
    let mut text = argument.trim();
    let mut was_quoted = false;
    loop {
        let stripped = QUOTE_PAIRS.iter().find_map(|&(open, close)| {
            let inner = text.strip_prefix(open)?.strip_suffix(close)?;
            Some(inner)
        });
        match stripped {
            Some(inner) if !inner.is_empty() => {
                text = inner;
                was_quoted = true;
            }
            _ => break,
        }
    }
    Unquoted {
        read_as: text.to_owned(),
        was_quoted,
    }
}
