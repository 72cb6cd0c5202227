//! Reading a request's id from the first bytes of a line too long to parse whole.

use super::RequestId;

/// The id of the JSON-RPC object a line begins with, read from its first bytes (`head`),
/// when its top-level `id` member comes whole within them: an integer, or a string without
/// escapes. An `id` nested deeper (inside `params`) is not the request's and is skipped.
///
/// For answering a line over the cap with an error its sender can match, without parsing
/// (or keeping) the line.
///
/// ```
/// use maljan_mcp_proto::jsonrpc::{RequestId, id_in_head};
/// let head = r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"argum"#;
/// assert_eq!(id_in_head(head), Some(RequestId::Integer(42)));
/// let nested = r#"{"params":{"id":1},"id":"a","#;
/// assert_eq!(id_in_head(nested), Some(RequestId::from("a")));
/// assert_eq!(id_in_head(r#"{"jsonrpc":"2.0","method":"x","params":{"id":1"#), None);
/// assert_eq!(id_in_head(r#"{"id":12"#), None); // the number may go on
/// ```
pub fn id_in_head(head: &str) -> Option<RequestId> {
    let bytes = head.as_bytes();
    let mut depth = 0usize;
    let mut i = skip_space(bytes, 0);
    if bytes.get(i) != Some(&b'{') {
        return None;
    }
    while i < bytes.len() {
        match bytes[i] {
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.checked_sub(1)?,
            b'"' => {
                let end = string_end(bytes, i)?;
                let key = &bytes[i + 1..end];
                i = end + 1;
                let after = skip_space(bytes, i);
                if depth == 1 && key == b"id" && bytes.get(after) == Some(&b':') {
                    return id_value(bytes, skip_space(bytes, after + 1));
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

fn skip_space(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).is_some_and(u8::is_ascii_whitespace) {
        i += 1;
    }
    i
}

/// The index of the quote closing the string opened at `open`.
fn string_end(bytes: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn id_value(bytes: &[u8], at: usize) -> Option<RequestId> {
    match bytes.get(at)? {
        b'"' => {
            let end = string_end(bytes, at)?;
            let text = std::str::from_utf8(&bytes[at + 1..end]).ok()?;
            (!text.contains('\\')).then(|| RequestId::from(text))
        }
        b'-' | b'0'..=b'9' => {
            let len = bytes[at + 1..]
                .iter()
                .take_while(|b| b.is_ascii_digit())
                .count()
                + 1;
            let end = at + len;
            // The number must be seen to end: the head may cut it short.
            if !matches!(bytes.get(skip_space(bytes, end)), Some(b',' | b'}')) {
                return None;
            }
            std::str::from_utf8(&bytes[at..end])
                .ok()?
                .parse()
                .ok()
                .map(RequestId::Integer)
        }
        _ => None,
    }
}
