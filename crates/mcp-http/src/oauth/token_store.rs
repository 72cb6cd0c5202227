//! Where an [`OAuth`](super::OAuth) authorizer keeps its tokens between processes, so that
//! a person approves once and later runs refresh what they were given.

use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::AuthorizationError;

/// What is kept of one server's authorization: the tokens, what they are good for, and the
/// client they were issued to (a refresh token is bound to it).
///
/// Its `Debug` hides every secret; its serialized form holds them (keep it where only its
/// owner can read it).
///
/// ```
/// use maljan_mcp_http::oauth::StoredTokens;
/// let stored: StoredTokens = serde_json::from_str(
///     r#"{"access_token":"at-1","refresh_token":"rt-1","scopes":["tools"],"expires_at":1}"#,
/// ).unwrap();
/// assert!(stored.refresh_token.is_some());
/// assert!(!format!("{stored:?}").contains("at-1"));
/// ```
#[derive(Clone, Default, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StoredTokens {
    /// The access token.
    pub access_token: String,
    /// The refresh token, when the authorization server gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// The scopes the access token was granted.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// When the access token expires, in seconds since the Unix epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
    /// The client the tokens were issued to, when the authorization server registered it
    /// on the spot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<StoredClient>,
}

impl fmt::Debug for StoredTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredTokens")
            .field("access_token", &"<hidden>")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<hidden>"),
            )
            .field("scopes", &self.scopes)
            .field("expires_at", &self.expires_at)
            .field("client", &self.client)
            .finish()
    }
}

impl StoredTokens {
    /// When the access token expires, as an instant of this process (one already past
    /// when it expired before now).
    pub(crate) fn expires(&self) -> Option<Instant> {
        let at = UNIX_EPOCH + Duration::from_secs(self.expires_at?);
        let now = SystemTime::now();
        Some(match at.duration_since(now) {
            Ok(ahead) => Instant::now() + ahead,
            Err(past) => Instant::now()
                .checked_sub(past.duration())
                .unwrap_or_else(Instant::now),
        })
    }

    /// `expires`, an instant of this process, as seconds since the Unix epoch.
    pub(crate) fn expires_at(expires: Instant) -> u64 {
        let ahead = expires.saturating_duration_since(Instant::now());
        (SystemTime::now() + ahead)
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }
}

/// A client registered on the spot (RFC 7591), kept with the tokens issued to it.
#[derive(Clone, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StoredClient {
    /// Its `client_id`.
    pub id: String,
    /// Its `client_secret`, when it was given one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// Its token endpoint authentication method.
    pub method: String,
    /// The authorization server it is registered with (its issuer, else its token
    /// endpoint): it is not used with another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

impl fmt::Debug for StoredClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoredClient")
            .field("id", &self.id)
            .field("secret", &self.secret.as_ref().map(|_| "<hidden>"))
            .field("method", &self.method)
            .field("server", &self.server)
            .finish()
    }
}

/// Keeps one server's [`StoredTokens`]: the system's keyring, a file only its owner can
/// read, or memory in a test. Loaded when the authorizer is made; saved each time it
/// obtains or refreshes a token.
///
/// ```
/// use std::sync::Mutex;
/// use maljan_mcp_http::AuthorizationError;
/// use maljan_mcp_http::oauth::{StoredTokens, TokenStore};
///
/// #[derive(Debug, Default)]
/// struct InMemory(Mutex<Option<StoredTokens>>);
///
/// impl TokenStore for InMemory {
///     fn load(&self) -> Result<Option<StoredTokens>, AuthorizationError> {
///         Ok(self.0.lock().unwrap().clone())
///     }
///     fn save(&self, tokens: &StoredTokens) -> Result<(), AuthorizationError> {
///         *self.0.lock().unwrap() = Some(tokens.clone());
///         Ok(())
///     }
/// }
/// let store = InMemory::default();
/// store.save(&StoredTokens::default()).unwrap();
/// assert!(store.load().unwrap().is_some());
/// ```
pub trait TokenStore: Send + Sync + fmt::Debug {
    /// The tokens kept, if any.
    fn load(&self) -> Result<Option<StoredTokens>, AuthorizationError>;

    /// Keeps `tokens` in place of those kept before.
    fn save(&self, tokens: &StoredTokens) -> Result<(), AuthorizationError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_expiry_survives_the_trip_through_the_epoch_within_a_second() {
        let expires = Instant::now() + Duration::from_secs(600);
        let stored = StoredTokens {
            expires_at: Some(StoredTokens::expires_at(expires)),
            ..StoredTokens::default()
        };
        let back = stored.expires().expect("an expiry");
        let gap = if back > expires {
            back - expires
        } else {
            expires - back
        };
        assert!(gap <= Duration::from_secs(1), "{gap:?}");
        let past = StoredTokens {
            expires_at: Some(1),
            ..StoredTokens::default()
        };
        assert!(past.expires().expect("an expiry") <= Instant::now());
    }
}
