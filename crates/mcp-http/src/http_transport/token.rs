//! Where a bearer token comes from: a value, a file read again for every request (a token
//! rotated on disk is picked up), or the caller's own function (a token cache, a secret
//! store). The token is never logged, and neither `Debug` nor an error shows it.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;

/// The caller's function that gives the current token; its error says why there is none.
pub type TokenFn =
    dyn Fn() -> Result<String, Box<dyn std::error::Error + Send + Sync>> + Send + Sync;

/// Where the bearer token sent as `Authorization: Bearer …` comes from.
///
/// ```
/// use maljan_mcp_http::BearerToken;
/// let fixed = BearerToken::Value("s3cret".into());
/// assert!(!format!("{fixed:?}").contains("s3cret"));
/// assert_eq!(fixed.current().unwrap(), "s3cret");
/// let rotating = BearerToken::from_fn(|| Ok("fresh".to_owned()));
/// assert_eq!(rotating.current().unwrap(), "fresh");
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub enum BearerToken {
    /// This token.
    Value(String),
    /// The contents of this file (surrounding whitespace trimmed), read for every request.
    File(PathBuf),
    /// What this function gives, asked for every request.
    Fn(Arc<TokenFn>),
}

impl BearerToken {
    /// A token the function `current` gives, asked for every request.
    pub fn from_fn(
        current: impl Fn() -> Result<String, Box<dyn std::error::Error + Send + Sync>>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        BearerToken::Fn(Arc::new(current))
    }

    /// The token now.
    pub fn current(&self) -> Result<String, Box<dyn std::error::Error + Send + Sync>> {
        match self {
            BearerToken::Value(token) => Ok(token.clone()),
            BearerToken::File(path) => std::fs::read_to_string(path)
                .map(|text| text.trim().to_owned())
                .map_err(|e| {
                    format!("the token file {} could not be read: {e}", path.display()).into()
                }),
            BearerToken::Fn(current) => current(),
        }
    }
}

impl From<String> for BearerToken {
    fn from(token: String) -> Self {
        BearerToken::Value(token)
    }
}

impl From<&str> for BearerToken {
    fn from(token: &str) -> Self {
        BearerToken::Value(token.to_owned())
    }
}

impl fmt::Debug for BearerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BearerToken::Value(_) => f.write_str("BearerToken::Value(<redacted>)"),
            BearerToken::File(path) => write!(f, "BearerToken::File({})", path.display()),
            BearerToken::Fn(_) => f.write_str("BearerToken::Fn(..)"),
        }
    }
}
