//! Enterprise-managed authorization (SEP-990): the person's identity provider exchanges
//! the ID token it issued for an identity assertion grant (ID-JAG, RFC 8693 token
//! exchange) naming the server's resource, and the authorization server exchanges that for
//! an access token (RFC 7523 JWT bearer grant). No browser is involved.

use serde::Deserialize;
use url::Url;

use super::oauth_http::OAuthHttp;
use crate::AuthorizationError;

const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
const ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
/// The grant type of the authorization server's exchange.
pub(crate) const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

/// What the identity provider is, and the ID token it gave the person.
#[derive(Clone)]
pub struct IdentityProvider {
    /// The identity provider's token endpoint.
    pub token_endpoint: String,
    /// This client's id at the identity provider.
    pub client_id: String,
    /// The ID token it issued for the person (shown nowhere).
    pub id_token: String,
}

impl std::fmt::Debug for IdentityProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdentityProvider")
            .field("token_endpoint", &self.token_endpoint)
            .field("client_id", &self.client_id)
            .field("id_token", &"<hidden>")
            .finish()
    }
}

#[derive(Deserialize)]
struct Exchanged {
    access_token: String,
}

/// POSTs a token request form and reads its JSON answer, bounded.
pub(crate) async fn post_form(
    http: &OAuthHttp,
    endpoint: &str,
    form: &[(&str, &str)],
    basic: Option<(&str, &str)>,
    what: &str,
) -> Result<Vec<u8>, AuthorizationError> {
    let url = Url::parse(endpoint).map_err(|e| {
        AuthorizationError::new(
            format!("{what} {endpoint:?} is not a URL: {e}"),
            "check its metadata",
        )
    })?;
    http.check(&url, what)?;
    let mut request = http.client.post(url).form(form);
    if let Some((id, secret)) = basic {
        request = request.basic_auth(id, Some(secret));
    }
    let response = request.send().await.map_err(|e| {
        AuthorizationError::new(
            format!("{what} could not be reached: {}", e.without_url()),
            "check that it runs",
        )
    })?;
    let status = response.status();
    let body = OAuthHttp::read_bounded(response, &format!("{what}'s answer")).await?;
    if !status.is_success() {
        // The error's code and description only: the body of a refusal is the server's.
        #[derive(Deserialize)]
        struct Refusal {
            error: Option<String>,
            error_description: Option<String>,
        }
        let refusal: Option<Refusal> = serde_json::from_slice(&body).ok();
        let words = refusal
            .map(|r| {
                format!(
                    "{} {}",
                    r.error.unwrap_or_default(),
                    r.error_description.unwrap_or_default()
                )
            })
            .unwrap_or_default();
        return Err(AuthorizationError::new(
            format!(
                "{what} refused (HTTP {}): {}",
                status.as_u16(),
                maljan_mcp_proto::untrusted_text::escape_controls(words.trim())
            ),
            "check the client's registration with it",
        ));
    }
    Ok(body)
}

/// The identity assertion grant for `resource` at the authorization server `audience`.
pub(crate) async fn identity_assertion(
    http: &OAuthHttp,
    provider: &IdentityProvider,
    audience: &str,
    resource: &str,
    scope: &str,
) -> Result<String, AuthorizationError> {
    let mut form = vec![
        ("grant_type", TOKEN_EXCHANGE),
        ("requested_token_type", ID_JAG),
        ("subject_token", provider.id_token.as_str()),
        ("subject_token_type", ID_TOKEN),
        ("audience", audience),
        ("resource", resource),
        ("client_id", provider.client_id.as_str()),
    ];
    if !scope.is_empty() {
        form.push(("scope", scope));
    }
    let body = post_form(
        http,
        &provider.token_endpoint,
        &form,
        None,
        "the identity provider's token endpoint",
    )
    .await?;
    let exchanged: Exchanged = serde_json::from_slice(&body).map_err(|e| {
        AuthorizationError::new(
            format!("the identity provider's answer holds no assertion: {e}"),
            "check the identity provider",
        )
    })?;
    Ok(exchanged.access_token)
}
