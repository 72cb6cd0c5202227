//! Keeping credentials written into a URL (`https://user:password@host/…`) out of logs,
//! errors and ledgers.

/// `text` with the user information of every URL in it (what stands between `://` and an
/// `@` before the host) replaced by `***`.
///
/// ```
/// use maljan_mcp_http::redact_credentials;
/// assert_eq!(
///     redact_credentials("http://ann:s3cret@example.org:8080/mcp"),
///     "http://***@example.org:8080/mcp"
/// );
/// assert_eq!(
///     redact_credentials("error sending request for url (https://t0ken@h/mcp): refused"),
///     "error sending request for url (https://***@h/mcp): refused"
/// );
/// assert_eq!(redact_credentials("http://example.org/a@b"), "http://example.org/a@b");
/// ```
pub fn redact_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let authority_end = after
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace() || c == ')')
            .unwrap_or(after.len());
        match after[..authority_end].rfind('@') {
            Some(userinfo_end) => {
                out.push_str("***");
                rest = &after[userinfo_end..];
            }
            None => rest = after,
        }
    }
    out.push_str(rest);
    out
}
