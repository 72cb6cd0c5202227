//! OAuth 2.1 for servers that follow the MCP specification's authorization: an
//! [`Authorizer`] that discovers the server's authorization server from its refusal, knows
//! its client (pre-registered, a client ID metadata document, or registered on the spot),
//! obtains a token for the server's own resource only (the authorization code with PKCE
//! S256, or client credentials), asks for more scope when the server says so, and uses a
//! refresh token when it has one. The flows are the `oauth2` crate's.
//!
//! ```rust,no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use maljan_mcp_http::oauth::{OAuth, OAuthClient, OAuthGrant, OAuthSettings};
//! use maljan_mcp_http::{HttpConfig, HttpTransport};
//! let url = "https://mcp.example.com/mcp";
//! let settings = OAuthSettings::new(
//!     OAuthClient::Registered { id: "triage-worker".into(), secret: Some("…".into()) },
//!     OAuthGrant::ClientCredentials,
//! );
//! let mut config = HttpConfig::new("remote", url);
//! config.authorizer = Some(Arc::new(OAuth::new(url, settings)?));
//! let transport = HttpTransport::new(config)?;
//! # Ok(()) }
//! ```

mod assertion;
mod discovery;
mod identity_assertion;
mod oauth_http;
mod registration;
mod token_store;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use oauth2::basic::BasicClient;
use oauth2::{
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, PkceCodeChallenge,
    RedirectUrl, RefreshToken, Scope, TokenResponse, TokenUrl,
};
use url::Url;

use crate::{AccessToken, AuthorizationError, AuthorizeFuture, Authorizer, Challenge};
use discovery::Discovered;
pub use identity_assertion::IdentityProvider;
use oauth_http::OAuthHttp;
pub use registration::OAuthClient;
use registration::RegisteredClient;
pub use token_store::{StoredClient, StoredTokens, TokenStore};

/// Where a person approves the authorization: a browser the client opens, or any other way
/// to visit the authorization URL and come back with the address it redirected to.
///
/// ```
/// use std::{future::Future, pin::Pin};
/// use maljan_mcp_http::AuthorizationError;
/// use maljan_mcp_http::oauth::UserAgent;
/// use url::Url;
///
/// /// Prints the URL and reads back, from standard input, the address the browser ended on.
/// #[derive(Debug)]
/// struct Terminal;
///
/// impl UserAgent for Terminal {
///     fn redirect_uri(&self) -> String {
///         "http://127.0.0.1:8976/callback".to_owned()
///     }
///     fn visit<'a>(
///         &'a self,
///         url: &'a Url,
///     ) -> Pin<Box<dyn Future<Output = Result<Url, AuthorizationError>> + Send + 'a>> {
///         Box::pin(async move {
///             eprintln!("open {url} and paste the address you end on:");
///             let mut line = String::new();
///             std::io::stdin().read_line(&mut line).map_err(|e| {
///                 AuthorizationError::new(e.to_string(), "paste the address")
///             })?;
///             Url::parse(line.trim()).map_err(|e| AuthorizationError::new(e.to_string(), "paste the whole address"))
///         })
///     }
/// }
/// assert!(Terminal.redirect_uri().starts_with("http://127.0.0.1"));
/// ```
pub trait UserAgent: Send + Sync + fmt::Debug {
    /// The redirect URI the authorization server sends the person back to.
    fn redirect_uri(&self) -> String;

    /// Has `authorization_url` visited and answers the URL the authorization server
    /// redirected back to (holding `code` and `state`, or `error`).
    fn visit<'a>(
        &'a self,
        authorization_url: &'a Url,
    ) -> Pin<Box<dyn Future<Output = Result<Url, AuthorizationError>> + Send + 'a>>;
}

/// How tokens are obtained.
///
/// ```
/// use maljan_mcp_http::oauth::{IdentityProvider, OAuthGrant};
/// let unattended = OAuthGrant::ClientCredentials;
/// let enterprise = OAuthGrant::IdentityAssertion(IdentityProvider {
///     token_endpoint: "https://idp.example.com/token".into(),
///     client_id: "maljan".into(),
///     id_token: "eyJ…".into(),
/// });
/// assert!(!format!("{enterprise:?}").contains("eyJ"));
/// # let _ = unattended;
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum OAuthGrant {
    /// A person approves, through this user agent: the authorization code with PKCE S256.
    AuthorizationCode(Arc<dyn UserAgent>),
    /// Nobody watches: the client's own credentials (`client_credentials`).
    ClientCredentials,
    /// The person's identity provider vouches for them (SEP-990): its ID token exchanged
    /// for an identity assertion grant, exchanged in turn for the access token.
    IdentityAssertion(IdentityProvider),
}

/// An OAuth client's settings for one server.
///
/// ```
/// use maljan_mcp_http::oauth::{OAuthClient, OAuthGrant, OAuthSettings};
/// let settings = OAuthSettings::new(
///     OAuthClient::Registered { id: "worker-7".into(), secret: Some("from-a-file".into()) },
///     OAuthGrant::ClientCredentials,
/// );
/// assert!(!format!("{settings:?}").contains("from-a-file"));
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct OAuthSettings {
    /// How the authorization server knows this client.
    pub client: OAuthClient,
    /// How tokens are obtained.
    pub grant: OAuthGrant,
    /// The name a dynamically registered client gives itself.
    pub client_name: String,
    /// The scopes to ask for, instead of those the server names.
    pub scopes: Option<Vec<String>>,
    /// Ask for `offline_access` (a refresh token) where the authorization server offers
    /// it, so that a person approves once.
    pub offline_access: bool,
    /// Where the tokens are kept between processes (none: for this authorizer's life).
    pub store: Option<Arc<dyn TokenStore>>,
}

impl OAuthSettings {
    /// Settings for `client` and `grant`, the rest by default.
    pub fn new(client: OAuthClient, grant: OAuthGrant) -> OAuthSettings {
        OAuthSettings {
            client,
            grant,
            client_name: "maljan".to_owned(),
            scopes: None,
            offline_access: true,
            store: None,
        }
    }
}

/// A token held, with what it is good for.
#[derive(Clone)]
struct Held {
    access: AccessToken,
    refresh: Option<RefreshToken>,
    scopes: Vec<String>,
    expires: Option<Instant>,
}

/// What the authorizer learnt of the server's authorization, kept for the next refusal.
#[derive(Default)]
struct Learnt {
    discovered: Option<Discovered>,
    client: Option<RegisteredClient>,
    /// The authorization server the client is known to (its issuer, else its token
    /// endpoint): a client and tokens of one are never taken to another.
    client_server: Option<String>,
}

/// Who an authorization server is: its issuer, else its token endpoint.
fn server_identity(discovered: &Discovered) -> String {
    discovered
        .server
        .issuer
        .clone()
        .unwrap_or_else(|| discovered.server.token_endpoint.clone())
}

/// How long before a token expires the authorizer refreshes it, when it can.
const RENEW_AHEAD: Duration = Duration::from_secs(60);

/// The [`Authorizer`] of OAuth 2.1 for the server at one URL.
pub struct OAuth {
    server: Url,
    settings: OAuthSettings,
    http: OAuthHttp,
    held: Mutex<Option<Held>>,
    learnt: tokio::sync::Mutex<Learnt>,
}

impl fmt::Debug for OAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuth")
            .field("server", &crate::redact_credentials(self.server.as_str()))
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

fn oauth_error(what: impl fmt::Display, remedy: &str) -> AuthorizationError {
    AuthorizationError::new(what.to_string(), remedy)
}

/// The scopes the request asks for, each once: the settings', else the challenge's, else
/// those the resource supports, else none; and the scopes held before, when the server asks
/// for more.
fn scopes_to_ask(
    settings: &OAuthSettings,
    challenge: &Challenge,
    discovered: &Discovered,
    held: Option<&[String]>,
) -> Vec<String> {
    let mut scopes: Vec<String> = match (&settings.scopes, challenge.scope.as_deref()) {
        (Some(own), _) => own.clone(),
        (None, Some(_)) => challenge.scopes().into_iter().map(str::to_owned).collect(),
        (None, None) => discovered.resource_scopes.clone().unwrap_or_default(),
    };
    if challenge.wants_more_scope() {
        for scope in held.unwrap_or_default() {
            if !scopes.contains(scope) {
                scopes.push(scope.clone());
            }
        }
    }
    let offered = discovered
        .server
        .scopes_supported
        .as_ref()
        .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
    let interactive = matches!(settings.grant, OAuthGrant::AuthorizationCode(_));
    if settings.offline_access
        && interactive
        && offered
        && !scopes.iter().any(|s| s == "offline_access")
    {
        scopes.push("offline_access".to_owned());
    }
    scopes
}

impl OAuth {
    /// An authorizer for the server at `server_url`.
    ///
    /// ```
    /// use maljan_mcp_http::Authorizer;
    /// use maljan_mcp_http::oauth::{OAuth, OAuthClient, OAuthGrant, OAuthSettings};
    /// let settings = OAuthSettings::new(OAuthClient::Dynamic, OAuthGrant::ClientCredentials);
    /// let oauth = OAuth::new("https://mcp.example.com/mcp", settings).unwrap();
    /// assert!(oauth.token().is_none(), "no token before the server asks");
    /// assert!(OAuth::new("not a url", OAuthSettings::new(OAuthClient::Dynamic, OAuthGrant::ClientCredentials)).is_err());
    /// ```
    pub fn new(server_url: &str, settings: OAuthSettings) -> Result<OAuth, AuthorizationError> {
        let server = Url::parse(server_url).map_err(|e| {
            oauth_error(
                format!("the server's URL is not one: {e}"),
                "check the server's URL",
            )
        })?;
        // Never redirected: a metadata or token request followed elsewhere would take the
        // client's credentials with it.
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| oauth_error(e, "the HTTP client cannot be built"))?;
        let mut held = None;
        let mut learnt = Learnt::default();
        if let Some(store) = &settings.store {
            match store.load() {
                Ok(Some(stored)) => {
                    held = Some(Held {
                        access: AccessToken::new(stored.access_token.as_str()),
                        refresh: stored.refresh_token.clone().map(RefreshToken::new),
                        scopes: stored.scopes.clone(),
                        expires: stored.expires(),
                    });
                    // A refresh token is bound to the client it was issued to: one
                    // registered on the spot is used again, not registered anew.
                    if matches!(
                        settings.client,
                        OAuthClient::Dynamic | OAuthClient::MetadataDocument { .. }
                    ) && let Some(c) = stored.client
                    {
                        learnt.client_server = c.server;
                        learnt.client = Some(RegisteredClient {
                            id: c.id,
                            secret: c.secret,
                            method: c.method,
                            key: None,
                        });
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::warn!("the kept tokens are not used: {e}"),
            }
        }
        Ok(OAuth {
            http: OAuthHttp::for_server(http, &server),
            server,
            settings,
            held: Mutex::new(held),
            learnt: tokio::sync::Mutex::new(learnt),
        })
    }

    /// Holds `token`, issued to `client` by the authorization server `discovered`, and keeps
    /// it in the store.
    fn hold(
        &self,
        token: &oauth2::basic::BasicTokenResponse,
        asked: &[String],
        client: &RegisteredClient,
        discovered: &Discovered,
    ) {
        let scopes = token
            .scopes()
            .map(|s| s.iter().map(|s| s.to_string()).collect())
            .unwrap_or_else(|| asked.to_vec());
        let previous_refresh = self.held().and_then(|h| h.refresh);
        let held = Held {
            access: AccessToken::new(token.access_token().secret()),
            refresh: token.refresh_token().cloned().or(previous_refresh),
            scopes,
            expires: token.expires_in().map(|d| Instant::now() + d),
        };
        if let Some(store) = &self.settings.store {
            let registered_here = client.key.is_none()
                && matches!(
                    self.settings.client,
                    OAuthClient::Dynamic | OAuthClient::MetadataDocument { .. }
                );
            let stored = StoredTokens {
                access_token: held.access.secret().to_owned(),
                refresh_token: held.refresh.as_ref().map(|r| r.secret().clone()),
                scopes: held.scopes.clone(),
                expires_at: held.expires.map(StoredTokens::expires_at),
                client: registered_here.then(|| StoredClient {
                    id: client.id.clone(),
                    secret: client.secret.clone(),
                    method: client.method.clone(),
                    server: Some(server_identity(discovered)),
                }),
            };
            if let Err(e) = store.save(&stored) {
                tracing::warn!("the token is used but not kept for the next process: {e}");
            }
        }
        *self.held.lock().unwrap_or_else(|p| p.into_inner()) = Some(held);
    }

    /// Whether the token held expires within [`RENEW_AHEAD`] and a refresh token could
    /// replace it.
    fn renewal_due(&self) -> bool {
        self.held().is_some_and(|h| {
            h.refresh.is_some()
                && h.expires
                    .is_some_and(|at| at.saturating_duration_since(Instant::now()) < RENEW_AHEAD)
        })
    }

    /// Refreshes the token held before it expires.
    async fn renew_ahead(&self) -> Result<(), AuthorizationError> {
        let mut learnt = self.learnt.lock().await;
        // Another request may have renewed it while this one waited for the lock.
        if !self.renewal_due() {
            return Ok(());
        }
        let (discovered, client) = self
            .learn(&mut learnt, &Challenge::default(), false)
            .await?;
        if !self.refresh(&client, &discovered).await {
            tracing::debug!("the token could not be refreshed ahead of its expiry");
        }
        Ok(())
    }

    /// The server's authorization (discovered again on a refusal, as the server may have
    /// moved to another authorization server) and this client's registration with it.
    async fn learn(
        &self,
        learnt: &mut Learnt,
        challenge: &Challenge,
        rediscover: bool,
    ) -> Result<(Discovered, RegisteredClient), AuthorizationError> {
        let discovered = match &learnt.discovered {
            Some(discovered) if !rediscover => discovered.clone(),
            _ => {
                let discovered = discovery::discover(&self.http, &self.server, challenge).await?;
                learnt.discovered = Some(discovered.clone());
                discovered
            }
        };
        let identity = server_identity(&discovered);
        if learnt
            .client_server
            .as_ref()
            .is_some_and(|known| *known != identity)
        {
            tracing::debug!("the server moved to another authorization server; registering anew");
            learnt.client = None;
            *self.held.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        learnt.client_server = Some(identity);
        let client = match &learnt.client {
            Some(client) => client.clone(),
            None => {
                let redirect = match &self.settings.grant {
                    OAuthGrant::AuthorizationCode(agent) => Some(agent.redirect_uri()),
                    OAuthGrant::ClientCredentials | OAuthGrant::IdentityAssertion(_) => None,
                };
                let client = registration::client_for(
                    &self.http,
                    &self.settings,
                    &discovered.server,
                    redirect.as_deref(),
                )
                .await?;
                learnt.client = Some(client.clone());
                client
            }
        };
        Ok((discovered, client))
    }

    /// Exchanges the refresh token held, if any, for a new token: whether it was.
    async fn refresh(&self, client: &RegisteredClient, discovered: &Discovered) -> bool {
        let Some(held) = self.held() else {
            return false;
        };
        let Some(refresh) = held.refresh else {
            return false;
        };
        let request = async {
            let oauth = self.client(client, discovered, None)?;
            let request = oauth
                .exchange_refresh_token(&refresh)
                .map_err(|e| oauth_error(e, "the authorization server has no token endpoint"))?
                .add_extra_param("resource", discovered.resource.clone());
            assertion_params(client, discovered)?
                .into_iter()
                .fold(request, |r, (k, v)| r.add_extra_param(k, v))
                .request_async(&self.http.client)
                .await
                .map_err(|e| token_refused(&e))
        };
        match request.await {
            Ok(token) => {
                self.hold(&token, &held.scopes, client, discovered);
                true
            }
            Err(e) => {
                tracing::debug!("the refresh token was refused ({e}); authorizing anew");
                false
            }
        }
    }

    fn held(&self) -> Option<Held> {
        self.held.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    async fn obtain(&self, challenge: &Challenge) -> Result<(), AuthorizationError> {
        let mut learnt = self.learnt.lock().await;
        let (discovered, client) = self.learn(&mut learnt, challenge, true).await?;
        // An expired token with a refresh token: refreshed, unless more scope is wanted.
        if !challenge.wants_more_scope() && self.refresh(&client, &discovered).await {
            return Ok(());
        }
        let held = self.held();
        let scopes = scopes_to_ask(
            &self.settings,
            challenge,
            &discovered,
            held.as_ref().map(|h| h.scopes.as_slice()),
        );
        match &self.settings.grant {
            OAuthGrant::ClientCredentials => {
                let oauth = self.client(&client, &discovered, None)?;
                let request = oauth
                    .exchange_client_credentials()
                    .map_err(|e| oauth_error(e, "the authorization server has no token endpoint"))?
                    .add_scopes(scopes.iter().cloned().map(Scope::new))
                    .add_extra_param("resource", discovered.resource.clone());
                let token = assertion_params(&client, &discovered)?
                    .into_iter()
                    .fold(request, |r, (k, v)| r.add_extra_param(k, v))
                    .request_async(&self.http.client)
                    .await
                    .map_err(|e| token_refused(&e))?;
                self.hold(&token, &scopes, &client, &discovered);
            }
            OAuthGrant::IdentityAssertion(provider) => {
                let token = self
                    .by_identity_assertion(provider, &client, &discovered, &scopes)
                    .await?;
                self.hold(&token, &scopes, &client, &discovered);
            }
            OAuthGrant::AuthorizationCode(agent) => {
                let redirect = agent.redirect_uri();
                let oauth = self.client(&client, &discovered, Some(&redirect))?;
                let methods = &discovered.server.code_challenge_methods_supported;
                if methods
                    .as_ref()
                    .is_some_and(|m| !m.iter().any(|m| m == "S256"))
                {
                    return Err(oauth_error(
                        "the authorization server does not support PKCE with S256",
                        "an authorization code without PKCE is not asked for",
                    ));
                }
                let (pkce, verifier) = PkceCodeChallenge::new_random_sha256();
                let (url, state) = oauth
                    .authorize_url(CsrfToken::new_random)
                    .map_err(|e| {
                        oauth_error(e, "the authorization server has no authorization endpoint")
                    })?
                    .add_scopes(scopes.iter().cloned().map(Scope::new))
                    .set_pkce_challenge(pkce)
                    .add_extra_param("resource", discovered.resource.clone())
                    .url();
                let back = agent.visit(&url).await?;
                let code = code_from(&back, state.secret(), &discovered.server)?;
                let request = oauth
                    .exchange_code(AuthorizationCode::new(code))
                    .map_err(|e| oauth_error(e, "the authorization server has no token endpoint"))?
                    .set_pkce_verifier(verifier)
                    .add_extra_param("resource", discovered.resource.clone());
                let token = assertion_params(&client, &discovered)?
                    .into_iter()
                    .fold(request, |r, (k, v)| r.add_extra_param(k, v))
                    .request_async(&self.http.client)
                    .await
                    .map_err(|e| token_refused(&e))?;
                self.hold(&token, &scopes, &client, &discovered);
            }
        }
        Ok(())
    }

    /// The access token the identity provider's assertion buys at the authorization server.
    async fn by_identity_assertion(
        &self,
        provider: &IdentityProvider,
        client: &RegisteredClient,
        discovered: &Discovered,
        scopes: &[String],
    ) -> Result<oauth2::basic::BasicTokenResponse, AuthorizationError> {
        let audience = discovered
            .server
            .issuer
            .clone()
            .unwrap_or_else(|| discovered.server.token_endpoint.clone());
        let scope = scopes.join(" ");
        let assertion = identity_assertion::identity_assertion(
            &self.http,
            provider,
            &audience,
            &discovered.resource,
            &scope,
        )
        .await?;
        let mut form = vec![
            ("grant_type", identity_assertion::JWT_BEARER),
            ("assertion", assertion.as_str()),
            ("resource", discovered.resource.as_str()),
        ];
        if !scope.is_empty() {
            form.push(("scope", scope.as_str()));
        }
        let secret = client.secret.as_deref();
        let basic = match (client.method.as_str(), secret) {
            ("client_secret_basic", Some(secret)) => Some((client.id.as_str(), secret)),
            ("client_secret_post", Some(secret)) => {
                form.push(("client_id", client.id.as_str()));
                form.push(("client_secret", secret));
                None
            }
            _ => {
                form.push(("client_id", client.id.as_str()));
                None
            }
        };
        let body = identity_assertion::post_form(
            &self.http,
            &discovered.server.token_endpoint,
            &form,
            basic,
            "the token endpoint",
        )
        .await?;
        serde_json::from_slice(&body).map_err(|e| {
            oauth_error(
                format!("the token endpoint's answer is not a token: {e}"),
                "check the authorization server",
            )
        })
    }

    /// The `oauth2` client for the authorization server, authenticating as `client` says.
    fn client(
        &self,
        client: &RegisteredClient,
        discovered: &Discovered,
        redirect: Option<&str>,
    ) -> Result<
        BasicClient<
            oauth2::EndpointMaybeSet,
            oauth2::EndpointNotSet,
            oauth2::EndpointNotSet,
            oauth2::EndpointNotSet,
            oauth2::EndpointMaybeSet,
        >,
        AuthorizationError,
    > {
        let server = &discovered.server;
        let endpoint = |text: &str, what: &str| -> Result<Url, AuthorizationError> {
            let url = Url::parse(text).map_err(|e| {
                oauth_error(
                    format!("the {what} {text:?} is not a URL: {e}"),
                    "the server's metadata is not usable",
                )
            })?;
            self.http.check(&url, what)?;
            Ok(url)
        };
        let token = endpoint(&server.token_endpoint, "token endpoint")?;
        let authorize = server
            .authorization_endpoint
            .as_deref()
            .map(|a| endpoint(a, "authorization endpoint"))
            .transpose()?;
        let mut oauth = BasicClient::new(ClientId::new(client.id.clone()))
            .set_auth_uri_option(authorize.map(AuthUrl::from_url))
            .set_token_uri_option(Some(TokenUrl::from_url(token)))
            .set_auth_type(if client.method == "client_secret_basic" {
                AuthType::BasicAuth
            } else {
                AuthType::RequestBody
            });
        if let Some(secret) = &client.secret
            && client.method != "none"
        {
            oauth = oauth.set_client_secret(ClientSecret::new(secret.clone()));
        }
        if let Some(redirect) = redirect {
            let redirect = RedirectUrl::new(redirect.to_owned()).map_err(|e| {
                oauth_error(
                    format!("the redirect URI is not a URL: {e}"),
                    "check the user agent's redirect URI",
                )
            })?;
            oauth = oauth.set_redirect_uri(redirect);
        }
        Ok(oauth)
    }
}

/// The token request's client assertion, for a client that signs them.
fn assertion_params(
    client: &RegisteredClient,
    discovered: &Discovered,
) -> Result<Vec<(&'static str, String)>, AuthorizationError> {
    let Some(key) = client
        .key
        .as_ref()
        .filter(|_| client.method == "private_key_jwt")
    else {
        return Ok(Vec::new());
    };
    // RFC 7523bis: the audience is the authorization server's issuer identifier.
    let audience = discovered
        .server
        .issuer
        .clone()
        .unwrap_or_else(|| discovered.server.token_endpoint.clone());
    let signed = assertion::client_assertion(&client.id, key, &audience)?;
    Ok(vec![
        (
            "client_assertion_type",
            assertion::ASSERTION_TYPE.to_owned(),
        ),
        ("client_assertion", signed),
    ])
}

/// The code the authorization server sent back, once its `state` is checked and the `iss`
/// it names, if any (required when its metadata says it sends one), is its issuer exactly
/// as its metadata names it (RFC 9207: no normalization), so that a response from another
/// authorization server (a mix-up) is not used.
fn code_from(
    back: &Url,
    state: &str,
    server: &discovery::ServerMetadata,
) -> Result<String, AuthorizationError> {
    let param = |name: &str| {
        back.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    if let Some(error) = param("error") {
        let description = param("error_description").unwrap_or_default();
        return Err(oauth_error(
            format!(
                "the authorization was refused: {}",
                maljan_mcp_proto::untrusted_text::escape_controls(&format!(
                    "{error} {description}"
                ))
            ),
            "approve the authorization, or check the client's registration",
        ));
    }
    if param("state").as_deref() != Some(state) {
        return Err(oauth_error(
            "the authorization came back with another state than the one sent",
            "start the authorization again (a stale or forged redirect is not used)",
        ));
    }
    match (param("iss"), &server.issuer) {
        (Some(iss), Some(issuer)) if &iss != issuer => {
            return Err(oauth_error(
                format!(
                    "the authorization came back from issuer {}, not {issuer}",
                    maljan_mcp_proto::untrusted_text::escape_controls(&iss)
                ),
                "start the authorization again (a response of another authorization server is not used)",
            ));
        }
        (None, _) if server.authorization_response_iss_parameter_supported => {
            return Err(oauth_error(
                "the authorization came back without the issuer its server says it names",
                "start the authorization again (an unattributed response is not used)",
            ));
        }
        _ => {}
    }
    param("code").ok_or_else(|| {
        oauth_error(
            "the authorization came back without a code",
            "start the authorization again",
        )
    })
}

fn token_refused<RE: std::error::Error + 'static>(
    e: &oauth2::RequestTokenError<RE, oauth2::basic::BasicErrorResponse>,
) -> AuthorizationError {
    let what = match e {
        oauth2::RequestTokenError::ServerResponse(refusal) => format!(
            "the token endpoint refused: {}",
            maljan_mcp_proto::untrusted_text::escape_controls(&refusal.to_string())
        ),
        oauth2::RequestTokenError::Request(e) => {
            format!("the token endpoint could not be reached: {e}")
        }
        other => format!("the token endpoint's answer is not usable: {other}"),
    };
    oauth_error(
        what,
        "check the client's registration and the authorization server",
    )
}

impl Authorizer for OAuth {
    fn token(&self) -> Option<AccessToken> {
        let held = self.held()?;
        // A token about to expire is not sent: the server's refusal brings a fresh one.
        if held
            .expires
            .is_some_and(|at| at.saturating_duration_since(Instant::now()) < Duration::from_secs(5))
            && held.refresh.is_none()
        {
            return None;
        }
        Some(held.access)
    }

    fn authorize<'a>(&'a self, challenge: &'a Challenge) -> AuthorizeFuture<'a> {
        Box::pin(self.obtain(challenge))
    }

    fn renew(&self) -> Option<AuthorizeFuture<'_>> {
        self.renewal_due()
            .then(|| Box::pin(self.renew_ahead()) as AuthorizeFuture<'_>)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn discovered(resource_scopes: Option<&[&str]>, server_scopes: Option<&[&str]>) -> Discovered {
        let owned = |s: &[&str]| s.iter().map(|s| (*s).to_owned()).collect();
        Discovered {
            resource: "https://mcp.example.com/mcp".into(),
            resource_scopes: resource_scopes.map(owned),
            server: discovery::ServerMetadata {
                issuer: None,
                authorization_endpoint: None,
                token_endpoint: "https://auth.example.com/token".into(),
                registration_endpoint: None,
                scopes_supported: server_scopes.map(owned),
                token_endpoint_auth_methods_supported: None,
                code_challenge_methods_supported: None,
                client_id_metadata_document_supported: false,
                authorization_response_iss_parameter_supported: false,
            },
        }
    }

    #[derive(Debug)]
    struct Nobody;

    impl UserAgent for Nobody {
        fn redirect_uri(&self) -> String {
            "http://127.0.0.1:1/callback".into()
        }
        fn visit<'a>(
            &'a self,
            _: &'a Url,
        ) -> Pin<Box<dyn Future<Output = Result<Url, AuthorizationError>> + Send + 'a>> {
            Box::pin(async { Err(AuthorizationError::new("nobody", "none")) })
        }
    }

    #[test]
    fn scopes_come_from_the_challenge_then_the_resource_and_grow_on_step_up() {
        let settings = OAuthSettings::new(
            OAuthClient::Dynamic,
            OAuthGrant::AuthorizationCode(Arc::new(Nobody)),
        );
        let from_header = Challenge {
            scope: Some("a b".into()),
            ..Challenge::default()
        };
        assert_eq!(
            scopes_to_ask(
                &settings,
                &from_header,
                &discovered(Some(&["c"]), None),
                None
            ),
            ["a", "b"]
        );
        let none = Challenge::default();
        assert_eq!(
            scopes_to_ask(&settings, &none, &discovered(Some(&["c", "d"]), None), None),
            ["c", "d"]
        );
        assert!(scopes_to_ask(&settings, &none, &discovered(None, None), None).is_empty());
        let more = Challenge {
            error: Some("insufficient_scope".into()),
            scope: Some("write".into()),
            ..Challenge::default()
        };
        let held = ["read".to_owned()];
        assert_eq!(
            scopes_to_ask(&settings, &more, &discovered(None, None), Some(&held)),
            ["write", "read"]
        );
        let offered = discovered(None, Some(&["offline_access"]));
        assert_eq!(
            scopes_to_ask(&settings, &none, &offered, None),
            ["offline_access"]
        );
        let unattended = OAuthSettings::new(OAuthClient::Dynamic, OAuthGrant::ClientCredentials);
        assert!(scopes_to_ask(&unattended, &none, &offered, None).is_empty());
    }

    #[test]
    fn a_redirect_is_used_only_with_the_state_sent_and_a_refusal_is_said() {
        let back = |q: &str| Url::parse(&format!("http://127.0.0.1/cb?{q}")).unwrap();
        let server = discovered(None, None).server;
        assert_eq!(
            code_from(&back("code=c1&state=s1"), "s1", &server).unwrap(),
            "c1"
        );
        let forged = code_from(&back("code=c1&state=other"), "s1", &server).unwrap_err();
        assert!(forged.what.contains("another state"), "{forged}");
        assert!(code_from(&back("state=s1"), "s1", &server).is_err());
        let refused = code_from(
            &back("error=access_denied&error_description=%1b%5b31mno"),
            "s1",
            &server,
        )
        .unwrap_err();
        assert!(refused.what.contains("access_denied"), "{refused}");
        assert!(!refused.what.contains('\u{1b}'), "{refused}");
    }

    #[test]
    fn a_redirect_naming_another_issuer_or_none_where_one_is_promised_is_refused() {
        let back = |q: &str| Url::parse(&format!("http://127.0.0.1/cb?{q}")).unwrap();
        let mut server = discovered(None, None).server;
        server.issuer = Some("https://auth.example.com".into());
        let ok = "code=c&state=s&iss=https%3A%2F%2Fauth.example.com";
        assert_eq!(code_from(&back(ok), "s", &server).unwrap(), "c");
        assert!(code_from(&back("code=c&state=s"), "s", &server).is_ok());
        for other in [
            "https%3A%2F%2Fevil.example",
            "https%3A%2F%2FAUTH.example.com",
            "https%3A%2F%2Fauth.example.com%2F",
        ] {
            let mixed_up = code_from(&back(&format!("code=c&state=s&iss={other}")), "s", &server);
            assert!(mixed_up.is_err(), "{other}");
        }
        server.authorization_response_iss_parameter_supported = true;
        assert!(code_from(&back("code=c&state=s"), "s", &server).is_err());
        assert!(code_from(&back(ok), "s", &server).is_ok());
    }
}
