//! The kit as an OAuth 2.1 protected resource: it publishes its protected resource metadata
//! (RFC 9728) and lets in a caller only with an access token its authorization server
//! issued for it: a JWT signed by one of that server's keys, for this resource (audience),
//! from that issuer, not expired, holding the scopes required. A refusal says why in its
//! `WWW-Authenticate` challenge, naming the metadata so that a client finds where to get a
//! token.

use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::issuer_keys::{self, IssuerError, IssuerKeys};

/// A resource's authorization: who issues its tokens, with which keys, and the scopes
/// every request needs.
///
/// ```
/// use maljan_sidecar_kit::{HttpOptions, ProtectedResource};
/// let keys = r#"{"keys": []}"#;
/// let resource = ProtectedResource::new(
///     "https://analysis.example.com/mcp",
///     "https://auth.example.com",
///     keys,
/// )
/// .unwrap()
/// .require_scopes(["tools:call"]);
/// assert_eq!(resource.metadata_path(), "/.well-known/oauth-protected-resource/mcp");
/// let options = HttpOptions::default().protected_resource(resource);
/// ```
///
/// Or with the keys the authorization server publishes, fetched from its `jwks_uri`:
///
/// ```no_run
/// # async fn demo() -> Result<(), maljan_sidecar_kit::IssuerError> {
/// use maljan_sidecar_kit::ProtectedResource;
/// let resource =
///     ProtectedResource::discover("https://analysis.example.com/mcp", "https://auth.example.com")
///         .await?
///         .require_scopes(["tools:call"]);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct ProtectedResource {
    resource: String,
    issuer: String,
    keys: IssuerKeys,
    scopes: Vec<String>,
}

/// Why a caller's token was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum TokenRefusal {
    /// No token: 401, the challenge naming the metadata.
    Missing,
    /// A token that is not one of this resource's: 401 `invalid_token`.
    Invalid(String),
    /// A good token without the scopes required: 403 `insufficient_scope`.
    Scope,
}

#[derive(Deserialize)]
struct Claims {
    iss: String,
    sub: Option<String>,
    #[serde(default)]
    scope: Option<String>,
    #[serde(default)]
    scp: Option<Vec<String>>,
}

impl ProtectedResource {
    /// The resource at `resource` (this server's URL, the audience its tokens name), whose
    /// tokens `issuer` issues, signed with one of the keys of `keys` (a JWK set, as the
    /// authorization server publishes at its `jwks_uri`).
    pub fn new(
        resource: impl Into<String>,
        issuer: impl Into<String>,
        keys: &str,
    ) -> Result<ProtectedResource, serde_json::Error> {
        Ok(ProtectedResource {
            resource: resource.into(),
            issuer: issuer.into(),
            keys: IssuerKeys::Given(Arc::new(serde_json::from_str(keys)?)),
            scopes: Vec::new(),
        })
    }

    /// The resource at `resource`, whose tokens `issuer` issues, signed with the keys it
    /// publishes: its metadata (RFC 8414, else OpenID Connect discovery) is fetched from
    /// the issuer's URL (https, or http on this host) and must name the issuer itself; the
    /// key set at its `jwks_uri` is fetched now, again when a token names a key not in it
    /// (at most every 30 seconds), and again once it is an hour old.
    pub async fn discover(
        resource: impl Into<String>,
        issuer: impl Into<String>,
    ) -> Result<ProtectedResource, IssuerError> {
        let issuer = issuer.into();
        Ok(ProtectedResource {
            resource: resource.into(),
            keys: issuer_keys::published(&issuer).await?,
            issuer,
            scopes: Vec::new(),
        })
    }

    /// Fetches the published keys again at most every `every` (30 seconds by default),
    /// however many tokens name keys the issuer does not have. No effect on keys handed
    /// over by [`new`](Self::new).
    #[must_use]
    pub fn refetch_keys_at_most_every(mut self, every: Duration) -> Self {
        self.keys = self.keys.refetch_every(every);
        self
    }

    /// Requires `scopes` of every request's token (none by default).
    #[must_use]
    pub fn require_scopes<S: Into<String>>(mut self, scopes: impl IntoIterator<Item = S>) -> Self {
        self.scopes = scopes.into_iter().map(Into::into).collect();
        self
    }

    /// Where the metadata is served: the well-known path with the resource's path.
    pub fn metadata_path(&self) -> String {
        let path = url_path(&self.resource).trim_end_matches('/');
        format!("/.well-known/oauth-protected-resource{path}")
    }

    /// The metadata document.
    pub(super) fn metadata(&self) -> serde_json::Value {
        let mut metadata = serde_json::json!({
            "resource": self.resource,
            "authorization_servers": [self.issuer],
            "bearer_methods_supported": ["header"],
        });
        if !self.scopes.is_empty() {
            metadata["scopes_supported"] = serde_json::json!(self.scopes);
        }
        metadata
    }

    /// The `WWW-Authenticate` value of a refusal.
    pub(super) fn challenge(&self, refusal: &TokenRefusal) -> String {
        let path = url_path(&self.resource);
        let origin = self.resource.strip_suffix(path).unwrap_or(&self.resource);
        let metadata = format!("{}{}", origin.trim_end_matches('/'), self.metadata_path());
        let scope = self.scopes.join(" ");
        match refusal {
            TokenRefusal::Missing => {
                format!(r#"Bearer resource_metadata="{metadata}", scope="{scope}""#)
            }
            TokenRefusal::Invalid(_) => format!(
                r#"Bearer error="invalid_token", resource_metadata="{metadata}", scope="{scope}""#
            ),
            TokenRefusal::Scope => format!(
                r#"Bearer error="insufficient_scope", resource_metadata="{metadata}", scope="{scope}""#
            ),
        }
    }

    /// Checks `token`; answers what a caller's jobs are bound to (the sha256 of its issuer
    /// and subject, so that a refreshed token reaches the same jobs).
    pub(super) async fn check(&self, token: Option<&str>) -> Result<[u8; 32], TokenRefusal> {
        let token = token.ok_or(TokenRefusal::Missing)?;
        let invalid = |why: &str| TokenRefusal::Invalid(why.to_owned());
        let header = jsonwebtoken::decode_header(token).map_err(|_| invalid("not a JWT"))?;
        if matches!(
            header.alg,
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
        ) {
            return Err(invalid("signed with a shared secret, not the issuer's key"));
        }
        let jwk = self
            .keys
            .key(header.kid.as_deref())
            .await
            .ok_or_else(|| invalid("signed with a key the issuer does not publish"))?;
        let key =
            DecodingKey::from_jwk(&jwk).map_err(|_| invalid("the issuer's key is not usable"))?;
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.resource]);
        validation.set_required_spec_claims(&["exp", "iss", "aud"]);
        let claims = jsonwebtoken::decode::<Claims>(token, &key, &validation)
            .map_err(|e| {
                use jsonwebtoken::errors::ErrorKind;
                invalid(match e.kind() {
                    ErrorKind::ExpiredSignature => "expired",
                    ErrorKind::InvalidAudience => "issued for another resource",
                    ErrorKind::InvalidIssuer => "issued by another authorization server",
                    ErrorKind::InvalidSignature => "its signature does not verify",
                    _ => "not a token of this resource",
                })
            })?
            .claims;
        let held: Vec<&str> = match (&claims.scope, &claims.scp) {
            (Some(scope), _) => scope.split_ascii_whitespace().collect(),
            (None, Some(scp)) => scp.iter().map(String::as_str).collect(),
            (None, None) => Vec::new(),
        };
        if !self.scopes.iter().all(|s| held.contains(&s.as_str())) {
            return Err(TokenRefusal::Scope);
        }
        let mut binding = Sha256::new();
        binding.update(claims.iss.as_bytes());
        binding.update([0]);
        binding.update(claims.sub.unwrap_or_default().as_bytes());
        Ok(binding.finalize().into())
    }
}

/// The path of a URL (`/` when it has none).
fn url_path(url: &str) -> &str {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = after_scheme.find('/').map_or("/", |i| &after_scheme[i..]);
    path.split(['?', '#']).next().unwrap_or("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_is_served_under_the_resources_path() {
        let at = |url: &str| {
            ProtectedResource::new(url, "https://a", r#"{"keys":[]}"#)
                .unwrap()
                .metadata_path()
        };
        assert_eq!(
            at("https://h.example/mcp"),
            "/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            at("https://h.example"),
            "/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            at("https://h.example/a/mcp/?x=1"),
            "/.well-known/oauth-protected-resource/a/mcp"
        );
    }

    /// `check`, awaited: keys handed over need no I/O.
    fn check_now(
        resource: &ProtectedResource,
        token: Option<&str>,
    ) -> Result<[u8; 32], TokenRefusal> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime")
            .block_on(resource.check(token))
    }

    proptest::proptest! {
        #[test]
        fn any_bearer_value_is_refused_without_panicking(token in "[A-Za-z0-9._~+/=-]{0,400}") {
            let keys = r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"k","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#;
            let resource = ProtectedResource::new("https://h/mcp", "https://a", keys).unwrap();
            proptest::prop_assert!(check_now(&resource, Some(&token)).is_err());
        }
    }

    #[test]
    fn what_is_no_token_of_the_issuers_is_refused_as_invalid() {
        let resource =
            ProtectedResource::new("https://h/mcp", "https://a", r#"{"keys":[]}"#).unwrap();
        assert_eq!(check_now(&resource, None), Err(TokenRefusal::Missing));
        for garbage in ["", "abc", "a.b.c", "eyJhbGciOiJIUzI1NiJ9.e30.sig"] {
            assert!(
                matches!(
                    check_now(&resource, Some(garbage)),
                    Err(TokenRefusal::Invalid(_))
                ),
                "{garbage}"
            );
        }
    }
}
