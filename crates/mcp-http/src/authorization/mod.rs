//! Authorization as the transport sees it: a token to send, and what to do when the server
//! refuses. The OAuth 2.1 flows that obtain tokens (the `oauth` feature) are one
//! [`Authorizer`]; a caller may bring its own.

mod challenge;

use std::fmt;
use std::future::Future;
use std::pin::Pin;

pub use challenge::Challenge;

/// What an [`Authorizer`] answers, later.
pub type AuthorizeFuture<'a> =
    Pin<Box<dyn Future<Output = Result<(), AuthorizationError>> + Send + 'a>>;

/// Why no token could be obtained: what went wrong and what to do about it. Never holds a
/// token or a secret.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what}; {remedy}")]
pub struct AuthorizationError {
    /// What went wrong.
    pub what: String,
    /// What to do about it.
    pub remedy: String,
}

impl AuthorizationError {
    /// An error saying `what` went wrong and what to do (`remedy`).
    pub fn new(what: impl Into<String>, remedy: impl Into<String>) -> AuthorizationError {
        AuthorizationError {
            what: what.into(),
            remedy: remedy.into(),
        }
    }
}

/// An access token: shown nowhere (`Debug` hides it).
#[derive(Clone, PartialEq, Eq)]
pub struct AccessToken(String);

impl AccessToken {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> AccessToken {
        AccessToken(token.into())
    }

    /// The token itself, for the `Authorization` header.
    pub fn secret(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken(<hidden>)")
    }
}

/// Where a connection's access tokens come from. The transport sends [`token`](Self::token)
/// with each request; when the server refuses (401, or 403 with `insufficient_scope`), it
/// hands the server's [`Challenge`] to [`authorize`](Self::authorize) and sends the request
/// again with the new token, at most three times in all.
///
/// ```
/// use maljan_mcp_http::{AccessToken, AuthorizeFuture, Authorizer, Challenge};
/// #[derive(Debug)]
/// struct Fixed;
/// impl Authorizer for Fixed {
///     fn token(&self) -> Option<AccessToken> {
///         Some(AccessToken::new("t"))
///     }
///     fn authorize<'a>(&'a self, _: &'a Challenge) -> AuthorizeFuture<'a> {
///         Box::pin(async { Ok(()) })
///     }
/// }
/// assert_eq!(Fixed.token().unwrap().secret(), "t");
/// ```
pub trait Authorizer: Send + Sync + fmt::Debug {
    /// The token to send now, when there is one.
    fn token(&self) -> Option<AccessToken>;

    /// Obtains a token that answers `challenge` (the server's refusal of the last one).
    fn authorize<'a>(&'a self, challenge: &'a Challenge) -> AuthorizeFuture<'a>;

    /// Renews the token before a request when it is about to expire (a refresh ahead of
    /// time, saving the server's refusal); `None`, the default, when nothing is due. A
    /// renewal that fails is not an error: the request goes with the token as it is.
    fn renew(&self) -> Option<AuthorizeFuture<'_>> {
        None
    }
}
