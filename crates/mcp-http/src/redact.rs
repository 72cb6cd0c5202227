//! Keeping credentials written into a URL (`https://user:password@host/…`, or a token in
//! its query string, `…/mcp?key=…`) out of logs, errors, ledgers and reports.

/// `text` with the user information of every URL in it (what stands between `://` and an
/// `@` before the host) and every URL's query string replaced by `***`.
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
/// assert_eq!(
///     redact_credentials("https://h/mcp?api_key=s3cret#top failed"),
///     "https://h/mcp?***#top failed"
/// );
/// assert_eq!(redact_credentials("http://example.org/a@b"), "http://example.org/a@b");
/// ```
pub fn redact_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, after) = rest.split_at(at + 3);
        out.push_str(before);
        let url_end = after
            .find(|c: char| c.is_whitespace() || matches!(c, ')' | '"' | '<' | '>'))
            .unwrap_or(after.len());
        let (mut url, tail) = after.split_at(url_end);
        let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
        if let Some(userinfo_end) = url[..authority_end].rfind('@') {
            out.push_str("***");
            url = &url[userinfo_end..];
        }
        match url.split_once('?') {
            Some((path, query)) => {
                out.push_str(path);
                out.push_str("?***");
                if let Some(fragment) = query.find('#') {
                    out.push_str(&query[fragment..]);
                }
            }
            None => out.push_str(url),
        }
        rest = tail;
    }
    out.push_str(rest);
    out
}
