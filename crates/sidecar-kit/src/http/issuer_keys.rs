//! The keys an authorization server signs its access tokens with: a JWK set handed over
//! once, or the one its metadata's `jwks_uri` publishes, fetched again when a token names a
//! key not seen yet (the server rotated its keys) and when the set is an hour old (a key it
//! withdrew stops being trusted).

use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{Jwk, JwkSet};
use serde::Deserialize;

/// How long a fetched key set is trusted before it is fetched again.
const MAX_AGE: Duration = Duration::from_secs(3600);
/// The most an authorization server's metadata or key set may be.
const MAX_DOCUMENT_BYTES: usize = 1 << 20;
/// How long a fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the authorization server's keys could not be had: what went wrong and the remedy.
///
/// ```
/// use maljan_sidecar_kit::ProtectedResource;
/// let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// let refused = runtime
///     .block_on(ProtectedResource::discover(
///         "https://a.example/mcp",
///         "http://auth.example.com",
///     ))
///     .unwrap_err();
/// assert!(refused.to_string().contains("neither https nor on this host"), "{refused}");
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what}; {remedy}")]
pub struct IssuerError {
    /// What went wrong.
    pub what: String,
    /// What to do about it.
    pub remedy: &'static str,
}

fn issuer_error(what: impl Into<String>, remedy: &'static str) -> IssuerError {
    IssuerError {
        what: what.into(),
        remedy,
    }
}

/// The keys tokens are checked against.
#[derive(Clone, Debug)]
pub(super) enum IssuerKeys {
    /// A set handed over, used as it is.
    Given(Arc<JwkSet>),
    /// The set the authorization server publishes, fetched as needed.
    Published(Arc<PublishedKeys>),
}

/// The key set of a `jwks_uri`, with when it was fetched and last tried.
#[derive(Debug)]
pub(super) struct PublishedKeys {
    jwks_uri: reqwest::Url,
    http: reqwest::Client,
    /// The shortest time between two fetches, so that tokens naming unknown keys cannot
    /// have the resource hammer its authorization server.
    refetch_every: Duration,
    state: tokio::sync::Mutex<Fetched>,
}

#[derive(Debug)]
struct Fetched {
    keys: JwkSet,
    fetched: Instant,
    tried: Instant,
}

/// The key `kid` names in `keys`, or its one key when the token names none.
fn find(keys: &JwkSet, kid: Option<&str>) -> Option<Jwk> {
    match kid {
        Some(kid) => keys.find(kid).cloned(),
        None if keys.keys.len() == 1 => keys.keys.first().cloned(),
        None => None,
    }
}

impl IssuerKeys {
    /// The key a token signed with `kid` is checked against, if the issuer has it.
    pub(super) async fn key(&self, kid: Option<&str>) -> Option<Jwk> {
        match self {
            IssuerKeys::Given(keys) => find(keys, kid),
            IssuerKeys::Published(published) => published.key(kid).await,
        }
    }

    /// The same keys, fetched again at most every `every` (published keys only).
    pub(super) fn refetch_every(self, every: Duration) -> IssuerKeys {
        match self {
            IssuerKeys::Published(published) => match Arc::try_unwrap(published) {
                Ok(mut published) => {
                    published.refetch_every = every;
                    IssuerKeys::Published(Arc::new(published))
                }
                Err(shared) => IssuerKeys::Published(shared),
            },
            given => given,
        }
    }
}

impl PublishedKeys {
    async fn key(&self, kid: Option<&str>) -> Option<Jwk> {
        let mut state = self.state.lock().await;
        let known = find(&state.keys, kid);
        let due = known.is_none() || state.fetched.elapsed() >= MAX_AGE;
        if !due || state.tried.elapsed() < self.refetch_every {
            return known;
        }
        state.tried = Instant::now();
        match fetch_json::<JwkSet>(&self.http, &self.jwks_uri).await {
            Ok(keys) => {
                state.keys = keys;
                state.fetched = Instant::now();
            }
            Err(e) => tracing::warn!("the authorization server's keys were not fetched again: {e}"),
        }
        find(&state.keys, kid)
    }
}

/// Whether `url` may be fetched: https, or http to this host only.
fn check_url(url: &reqwest::Url, what: &str) -> Result<(), IssuerError> {
    let loopback = match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if url.scheme() == "https" || (url.scheme() == "http" && loopback) {
        Ok(())
    } else {
        Err(issuer_error(
            format!("the {what} {url} is neither https nor on this host"),
            "name the authorization server by its https URL",
        ))
    }
}

/// The JSON document at `url`, read to at most [`MAX_DOCUMENT_BYTES`].
async fn fetch_json<T: for<'de> Deserialize<'de>>(
    http: &reqwest::Client,
    url: &reqwest::Url,
) -> Result<T, IssuerError> {
    let unreachable = |e: reqwest::Error| {
        issuer_error(
            format!("{url} could not be fetched: {e}"),
            "check that the authorization server is up and reachable from here",
        )
    };
    let mut response = http
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(unreachable)?;
    if !response.status().is_success() {
        return Err(issuer_error(
            format!("{url} answered {}", response.status()),
            "check the authorization server's URL",
        ));
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(unreachable)? {
        if body.len() + chunk.len() > MAX_DOCUMENT_BYTES {
            return Err(issuer_error(
                format!("{url} is larger than {MAX_DOCUMENT_BYTES} bytes"),
                "check the authorization server's URL",
            ));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|e| {
        issuer_error(
            format!("{url} is not the document expected: {e}"),
            "check the authorization server's URL",
        )
    })
}

#[derive(Deserialize)]
struct ServerMetadata {
    issuer: String,
    jwks_uri: Option<String>,
}

/// The keys `issuer` publishes: its metadata found at RFC 8414's well-known URL, else
/// OpenID Connect's, checked to name `issuer` itself, then its `jwks_uri` fetched.
pub(super) async fn published(issuer: &str) -> Result<IssuerKeys, IssuerError> {
    let issuer_url = reqwest::Url::parse(issuer).map_err(|e| {
        issuer_error(
            format!("the issuer {issuer:?} is not a URL: {e}"),
            "name the authorization server by its issuer URL",
        )
    })?;
    check_url(&issuer_url, "issuer")?;
    let http = reqwest::Client::builder()
        // Never followed elsewhere: the metadata must come from the issuer itself.
        .redirect(reqwest::redirect::Policy::none())
        .timeout(FETCH_TIMEOUT)
        .build()
        .map_err(|e| issuer_error(e.to_string(), "report this as a bug"))?;
    let path = issuer_url.path().trim_end_matches('/');
    let mut oauth = issuer_url.clone();
    oauth.set_path(&format!("/.well-known/oauth-authorization-server{path}"));
    oauth.set_query(None);
    let mut openid = issuer_url.clone();
    openid.set_path(&format!("{path}/.well-known/openid-configuration"));
    openid.set_query(None);
    let metadata = match fetch_json::<ServerMetadata>(&http, &oauth).await {
        Ok(metadata) => metadata,
        Err(first) => fetch_json::<ServerMetadata>(&http, &openid)
            .await
            .map_err(|_| first)?,
    };
    if metadata.issuer != issuer {
        return Err(issuer_error(
            format!(
                "the metadata of {issuer} names another issuer, {:?}",
                metadata.issuer
            ),
            "name the authorization server exactly as its metadata's issuer",
        ));
    }
    let jwks_uri = metadata.jwks_uri.ok_or_else(|| {
        issuer_error(
            format!("the metadata of {issuer} names no jwks_uri"),
            "hand the resource the server's keys (ProtectedResource::new)",
        )
    })?;
    let jwks_uri = reqwest::Url::parse(&jwks_uri).map_err(|e| {
        issuer_error(
            format!("the jwks_uri {jwks_uri:?} is not a URL: {e}"),
            "check the authorization server's metadata",
        )
    })?;
    check_url(&jwks_uri, "jwks_uri")?;
    let keys = fetch_json::<JwkSet>(&http, &jwks_uri).await?;
    let now = Instant::now();
    Ok(IssuerKeys::Published(Arc::new(PublishedKeys {
        jwks_uri,
        http,
        refetch_every: Duration::from_secs(30),
        state: tokio::sync::Mutex::new(Fetched {
            keys,
            fetched: now,
            tried: now,
        }),
    })))
}
