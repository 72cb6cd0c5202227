//! A server's `WWW-Authenticate` Bearer challenge (RFC 6750 §3, RFC 9728 §5.1): why it
//! refused, which scopes it wants, where its protected resource metadata is. The header is
//! the server's, so hostile: parsed in one pass, bounded, never failing (what cannot be read
//! is left out).

/// The most bytes of `WWW-Authenticate` values read: a longer header is cut there.
const MAX_CHALLENGE_BYTES: usize = 8 * 1024;

/// What a server's refusal asked for.
///
/// ```
/// use maljan_mcp_http::Challenge;
/// let challenge = Challenge::parse(
///     403,
///     [r#"Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp""#],
/// );
/// assert!(challenge.wants_more_scope());
/// assert_eq!(challenge.scopes(), ["files:read", "files:write"]);
/// assert_eq!(challenge.resource_metadata.as_deref(), Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Challenge {
    /// The response's status: 401 (no usable token) or 403 (not enough).
    pub status: u16,
    /// `error`: `invalid_token`, `insufficient_scope`, `invalid_request`.
    pub error: Option<String>,
    /// `error_description`, as the server wrote it (show it as untrusted text).
    pub error_description: Option<String>,
    /// `scope`: the scopes the request needs, space separated.
    pub scope: Option<String>,
    /// `resource_metadata`: the URL of the server's protected resource metadata.
    pub resource_metadata: Option<String>,
}

impl Challenge {
    /// The Bearer challenge among the values of a response's `WWW-Authenticate` headers
    /// (each may hold several challenges); an empty one when there is none.
    pub fn parse<'a>(status: u16, values: impl IntoIterator<Item = &'a str>) -> Challenge {
        let mut challenge = Challenge {
            status,
            ..Challenge::default()
        };
        let mut budget = MAX_CHALLENGE_BYTES;
        for value in values {
            let value = cut_to(value, budget);
            budget -= value.len();
            if let Some(params) = bearer_params(value) {
                for (name, value) in params {
                    let slot = match name.to_ascii_lowercase().as_str() {
                        "error" => &mut challenge.error,
                        "error_description" => &mut challenge.error_description,
                        "scope" => &mut challenge.scope,
                        "resource_metadata" => &mut challenge.resource_metadata,
                        _ => continue,
                    };
                    slot.get_or_insert(value);
                }
                return challenge;
            }
            if budget == 0 {
                break;
            }
        }
        challenge
    }

    /// Whether the server asks for a token with more scope (`insufficient_scope`).
    pub fn wants_more_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }

    /// The scopes the challenge names, each once, in its order.
    pub fn scopes(&self) -> Vec<&str> {
        let mut scopes: Vec<&str> = Vec::new();
        for scope in self
            .scope
            .as_deref()
            .unwrap_or_default()
            .split_ascii_whitespace()
        {
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        scopes
    }
}

/// `value` cut to at most `bytes`, on a character boundary.
fn cut_to(value: &str, bytes: usize) -> &str {
    if value.len() <= bytes {
        return value;
    }
    let mut end = bytes;
    while !value.is_char_boundary(end) {
        end -= 1;
    }
    &value[..end]
}

/// A reader of one header value, by RFC 9110's grammar of challenges.
struct Reader<'a> {
    text: &'a str,
    at: usize,
}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

impl<'a> Reader<'a> {
    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    fn skip_space(&mut self) {
        let rest = self.rest();
        self.at += rest.len() - rest.trim_start_matches([' ', '\t']).len();
    }

    fn skip_commas(&mut self) {
        loop {
            self.skip_space();
            if !self.eat(',') {
                return;
            }
        }
    }

    fn eat(&mut self, c: char) -> bool {
        if self.rest().starts_with(c) {
            self.at += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn token(&mut self) -> Option<&'a str> {
        let rest = self.rest();
        let len = rest.find(|c| !is_tchar(c)).unwrap_or(rest.len());
        (len > 0).then(|| {
            self.at += len;
            &rest[..len]
        })
    }

    /// A quoted string, its escapes undone; `None` (and nothing read) when unterminated.
    fn quoted(&mut self) -> Option<String> {
        let rest = self.rest();
        let mut chars = rest.char_indices().skip(1);
        let mut value = String::new();
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.at += i + 1;
                    return Some(value);
                }
                '\\' => value.push(chars.next()?.1),
                c => value.push(c),
            }
        }
        None
    }

    /// Another scheme's `token68` credentials (`abc+/==`), when they come next: only when
    /// they end the challenge (a comma or the end follows), so that a following scheme's
    /// name is not taken for them.
    fn skip_token68(&mut self) {
        let rest = self.rest();
        let body = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || "-._~+/".contains(c)))
            .unwrap_or(rest.len());
        let padded = body + rest[body..].len() - rest[body..].trim_start_matches('=').len();
        let after = rest[padded..].trim_start_matches([' ', '\t']);
        if body > 0 && (after.is_empty() || after.starts_with(',')) {
            self.at += padded;
        }
    }

    /// `name=value` when one comes next; the reader is left where it was otherwise.
    fn param(&mut self) -> Option<(&'a str, String)> {
        let start = self.at;
        let found = (|| {
            let name = self.token()?;
            self.skip_space();
            if !self.eat('=') {
                return None;
            }
            self.skip_space();
            let value = if self.rest().starts_with('"') {
                self.quoted()?
            } else {
                self.token()?.to_owned()
            };
            Some((name, value))
        })();
        if found.is_none() {
            self.at = start;
        }
        found
    }
}

/// The parameters of the `Bearer` challenge in one header value, when it holds one.
fn bearer_params(value: &str) -> Option<Vec<(&str, String)>> {
    let mut reader = Reader { text: value, at: 0 };
    loop {
        reader.skip_commas();
        let scheme = reader.token()?;
        let bearer = scheme.eq_ignore_ascii_case("bearer");
        let mut params = Vec::new();
        loop {
            reader.skip_commas();
            match reader.param() {
                Some(param) => params.push(param),
                None => break,
            }
        }
        if bearer {
            return Some(params);
        }
        if params.is_empty() {
            reader.skip_token68();
        }
        // A stray character where a scheme should start: stepped over.
        if !reader.rest().starts_with(is_tchar) && !reader.rest().starts_with(',') {
            let mut chars = reader.rest().chars();
            reader.at += chars.next().map_or(0, char::len_utf8);
        }
        if reader.rest().is_empty() {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_bearer_challenge_is_found_among_others_with_its_escapes_undone() {
        let challenge = Challenge::parse(
            401,
            [
                r#"Basic realm="x", Bearer realm="mcp", error="invalid_token", error_description="the \"token\" expired", resource_metadata="https://a.example/prm""#,
            ],
        );
        assert_eq!(challenge.error.as_deref(), Some("invalid_token"));
        assert_eq!(
            challenge.error_description.as_deref(),
            Some(r#"the "token" expired"#)
        );
        assert_eq!(
            challenge.resource_metadata.as_deref(),
            Some("https://a.example/prm")
        );
        assert!(!challenge.wants_more_scope());
    }

    #[test]
    fn a_second_header_value_and_a_bare_bearer_are_read() {
        let challenge = Challenge::parse(401, ["Basic abc==", "bearer scope=files"]);
        assert_eq!(challenge.scopes(), ["files"]);
        let bare = Challenge::parse(401, ["Bearer"]);
        assert_eq!(
            bare,
            Challenge {
                status: 401,
                ..Challenge::default()
            }
        );
    }

    #[test]
    fn a_value_without_bearer_or_cut_mid_quote_gives_what_it_can() {
        assert_eq!(
            Challenge::parse(401, ["Basic realm=\"x\""]),
            Challenge {
                status: 401,
                ..Challenge::default()
            }
        );
        let cut = Challenge::parse(401, [r#"Bearer error="invalid_token", scope="a b"#]);
        assert_eq!(cut.error.as_deref(), Some("invalid_token"));
        assert_eq!(cut.scope, None);
    }

    proptest! {
        #[test]
        fn any_header_is_read_without_panicking_and_in_bounded_work(
            values in proptest::collection::vec(".{0,300}", 0..4),
            status in 400u16..500,
        ) {
            let challenge = Challenge::parse(status, values.iter().map(String::as_str));
            prop_assert_eq!(challenge.status, status);
            let total: usize = values.iter().map(String::len).sum();
            for field in [&challenge.error, &challenge.error_description, &challenge.scope, &challenge.resource_metadata] {
                prop_assert!(field.as_ref().map_or(0, String::len) <= total);
            }
        }

        #[test]
        fn a_written_challenge_is_read_back(
            scope in "[a-z:]{1,10}( [a-z:]{1,10}){0,3}",
            description in "[ -~]{0,40}",
        ) {
            let quoted = description.replace('\\', "\\\\").replace('"', "\\\"");
            let header = format!(r#"Bearer error="insufficient_scope", scope="{scope}", error_description="{quoted}""#);
            let challenge = Challenge::parse(403, [header.as_str()]);
            prop_assert!(challenge.wants_more_scope());
            prop_assert_eq!(challenge.scope.as_deref(), Some(scope.as_str()));
            prop_assert_eq!(challenge.error_description.as_deref(), Some(description.as_str()));
        }
    }
}
