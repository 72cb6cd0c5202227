//! How the authorization server knows this client: registered beforehand, by a client ID
//! metadata document (the client's id is the URL of its metadata), or registered on the
//! spot (RFC 7591); and how it authenticates at the token endpoint.

use std::fmt;

use serde::Deserialize;
use url::Url;

use super::assertion::SigningKey;
use super::discovery::ServerMetadata;
use super::oauth_http::OAuthHttp;
use super::{OAuthGrant, OAuthSettings};
use crate::AuthorizationError;

/// How the authorization server knows this client.
#[derive(Clone)]
#[non_exhaustive]
pub enum OAuthClient {
    /// Registered beforehand: its id, and its secret when it has one.
    Registered {
        /// The client id.
        id: String,
        /// The client secret (a public client has none).
        secret: Option<String>,
    },
    /// Registered beforehand with its public key: it authenticates with a JWT its private
    /// key signs (`private_key_jwt`), never sending a secret.
    KeyRegistered {
        /// The client id.
        id: String,
        /// The private key, as PEM (PKCS#8 for EC and Ed25519 keys, PKCS#1 or #8 for RSA).
        private_key_pem: String,
        /// The algorithm it signs with: `ES256`, `RS256`, `EdDSA`…
        algorithm: String,
    },
    /// Its id is the URL of its client ID metadata document, where the authorization
    /// server supports those; registered on the spot where it does not.
    MetadataDocument {
        /// The document's `https` URL.
        url: String,
    },
    /// Registered on the spot (RFC 7591), where the authorization server allows it.
    Dynamic,
}

impl fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OAuthClient::Registered { id, secret } => f
                .debug_struct("Registered")
                .field("id", id)
                .field("secret", &secret.as_ref().map(|_| "<hidden>"))
                .finish(),
            OAuthClient::KeyRegistered { id, algorithm, .. } => f
                .debug_struct("KeyRegistered")
                .field("id", id)
                .field("private_key_pem", &"<hidden>")
                .field("algorithm", algorithm)
                .finish(),
            OAuthClient::MetadataDocument { url } => f
                .debug_struct("MetadataDocument")
                .field("url", url)
                .finish(),
            OAuthClient::Dynamic => f.write_str("Dynamic"),
        }
    }
}

/// A client as the authorization server knows it.
#[derive(Clone)]
pub(crate) struct RegisteredClient {
    pub(crate) id: String,
    pub(crate) secret: Option<String>,
    /// `client_secret_basic`, `client_secret_post`, `private_key_jwt` or `none`.
    pub(crate) method: String,
    /// The key its assertions are signed with (`private_key_jwt`).
    pub(crate) key: Option<SigningKey>,
}

/// The token endpoint authentication a client with (or without) a secret uses, among
/// those the server supports (`client_secret_basic` when it names none, as RFC 8414 says).
fn method_for(supported: Option<&[String]>, has_secret: bool) -> String {
    if !has_secret {
        return "none".to_owned();
    }
    let supports = |m: &str| supported.is_none_or(|s| s.iter().any(|x| x == m));
    let method = if supports("client_secret_basic") {
        "client_secret_basic"
    } else if supports("client_secret_post") {
        "client_secret_post"
    } else {
        "client_secret_basic"
    };
    method.to_owned()
}

/// The client to use with the authorization server `server`.
pub(crate) async fn client_for(
    http: &OAuthHttp,
    settings: &OAuthSettings,
    server: &ServerMetadata,
    redirect_uri: Option<&str>,
) -> Result<RegisteredClient, AuthorizationError> {
    let supported = server.token_endpoint_auth_methods_supported.as_deref();
    match &settings.client {
        OAuthClient::Registered { id, secret } => Ok(RegisteredClient {
            id: id.clone(),
            secret: secret.clone(),
            method: method_for(supported, secret.is_some()),
            key: None,
        }),
        OAuthClient::KeyRegistered {
            id,
            private_key_pem,
            algorithm,
        } => Ok(RegisteredClient {
            id: id.clone(),
            secret: None,
            method: "private_key_jwt".to_owned(),
            key: Some(SigningKey {
                pem: private_key_pem.clone(),
                algorithm: algorithm.clone(),
            }),
        }),
        OAuthClient::MetadataDocument { url } if server.client_id_metadata_document_supported => {
            Ok(RegisteredClient {
                id: url.clone(),
                secret: None,
                method: "none".to_owned(),
                key: None,
            })
        }
        OAuthClient::MetadataDocument { .. } | OAuthClient::Dynamic => {
            register(http, settings, server, redirect_uri).await
        }
    }
}

#[derive(Deserialize)]
struct Registration {
    client_id: String,
    client_secret: Option<String>,
    token_endpoint_auth_method: Option<String>,
}

/// Registers on the spot (RFC 7591).
/// The registration's `application_type` (SEP-837): `web` for a client the browser comes back
/// to on another host over https, `native` for the rest (a program on this host, coming back
/// to loopback or to no browser at all).
fn application_type(redirect_uri: Option<&str>) -> &'static str {
    let remote_web = redirect_uri
        .and_then(|r| Url::parse(r).ok())
        .is_some_and(|url| {
            url.scheme() == "https"
                && match url.host() {
                    Some(url::Host::Domain(name)) => !name.eq_ignore_ascii_case("localhost"),
                    Some(url::Host::Ipv4(ip)) => !ip.is_loopback(),
                    Some(url::Host::Ipv6(ip)) => !ip.is_loopback(),
                    None => false,
                }
        });
    if remote_web { "web" } else { "native" }
}

async fn register(
    http: &OAuthHttp,
    settings: &OAuthSettings,
    server: &ServerMetadata,
    redirect_uri: Option<&str>,
) -> Result<RegisteredClient, AuthorizationError> {
    let endpoint = server.registration_endpoint.as_deref().ok_or_else(|| {
        AuthorizationError::new(
            "the authorization server registers no clients on the spot and this client is not registered with it",
            "register a client with the authorization server and configure its id (and secret)",
        )
    })?;
    let url = Url::parse(endpoint).map_err(|e| {
        AuthorizationError::new(
            format!("the registration endpoint {endpoint:?} is not a URL: {e}"),
            "the server's metadata is not usable",
        )
    })?;
    http.check(&url, "the registration endpoint")?;
    let supported = server.token_endpoint_auth_methods_supported.as_deref();
    let (grant_types, asked_method) = match settings.grant {
        OAuthGrant::AuthorizationCode(_) => {
            // A public client where the server allows it: no secret to keep.
            let public = supported.is_none_or(|s| s.iter().any(|m| m == "none"));
            let method = if public {
                "none".to_owned()
            } else {
                method_for(supported, true)
            };
            (vec!["authorization_code", "refresh_token"], method)
        }
        OAuthGrant::ClientCredentials => (vec!["client_credentials"], method_for(supported, true)),
        OAuthGrant::IdentityAssertion(_) => (
            vec![super::identity_assertion::JWT_BEARER],
            method_for(supported, true),
        ),
    };
    let mut body = serde_json::json!({
        "client_name": settings.client_name,
        "grant_types": grant_types,
        "token_endpoint_auth_method": asked_method,
        "application_type": application_type(redirect_uri),
    });
    if let Some(redirect) = redirect_uri {
        body["redirect_uris"] = serde_json::json!([redirect]);
        body["response_types"] = serde_json::json!(["code"]);
    }
    let refused = |what: String| {
        AuthorizationError::new(
            what,
            "register a client with the authorization server and configure its id instead",
        )
    };
    let response = http
        .client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| {
            refused(format!(
                "the registration endpoint could not be reached: {}",
                e.without_url()
            ))
        })?;
    let status = response.status();
    let answer = OAuthHttp::read_bounded(response, "the registration answer").await?;
    if !status.is_success() {
        return Err(refused(format!(
            "the registration was refused: HTTP {}: {}",
            status.as_u16(),
            maljan_mcp_proto::untrusted_text::escape_controls(
                &String::from_utf8_lossy(&answer)
                    .chars()
                    .take(200)
                    .collect::<String>()
            )
        )));
    }
    let registration: Registration = serde_json::from_slice(&answer)
        .map_err(|e| refused(format!("the registration answer is not one: {e}")))?;
    let method = registration
        .token_endpoint_auth_method
        .unwrap_or(asked_method);
    Ok(RegisteredClient {
        id: registration.client_id,
        secret: registration.client_secret,
        method,
        key: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_program_on_this_host_registers_as_native_a_remote_web_client_as_web() {
        assert_eq!(application_type(None), "native");
        assert_eq!(
            application_type(Some("http://127.0.0.1:9/callback")),
            "native"
        );
        assert_eq!(application_type(Some("https://localhost/cb")), "native");
        assert_eq!(application_type(Some("com.example.app:/cb")), "native");
        assert_eq!(
            application_type(Some("https://triage.example.com/cb")),
            "web"
        );
    }

    #[test]
    fn a_client_authenticates_as_the_server_allows() {
        let only = |m: &str| Some(vec![m.to_owned()]);
        assert_eq!(method_for(None, true), "client_secret_basic");
        assert_eq!(
            method_for(only("client_secret_post").as_deref(), true),
            "client_secret_post"
        );
        assert_eq!(
            method_for(only("client_secret_basic").as_deref(), true),
            "client_secret_basic"
        );
        assert_eq!(
            method_for(only("client_secret_post").as_deref(), false),
            "none"
        );
    }
}
