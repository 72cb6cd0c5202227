//! Finding who issues tokens for a server: its protected resource metadata (RFC 9728),
//! then its authorization server's metadata (RFC 8414, or OpenID discovery), in the MCP
//! specification's order, with the 2025-03-26 fall-backs for a server that publishes
//! neither. Every document is the network's: fetched without redirects, bounded, and only
//! from `https` or a loopback `http` address.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use url::Url;

use super::oauth_http::OAuthHttp;
use crate::{AuthorizationError, Challenge};

/// A server's protected resource metadata.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ResourceMetadata {
    pub(crate) resource: String,
    #[serde(default)]
    pub(crate) authorization_servers: Vec<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
}

/// An authorization server's metadata.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct ServerMetadata {
    pub(crate) issuer: Option<String>,
    pub(crate) authorization_endpoint: Option<String>,
    pub(crate) token_endpoint: String,
    pub(crate) registration_endpoint: Option<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
    pub(crate) token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub(crate) code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub(crate) client_id_metadata_document_supported: bool,
    /// Whether the server names itself (`iss`) in its authorization responses (RFC 9207).
    #[serde(default)]
    pub(crate) authorization_response_iss_parameter_supported: bool,
}

/// What discovery found for a server.
#[derive(Debug, Clone)]
pub(crate) struct Discovered {
    /// The resource tokens are asked for (RFC 8707): the metadata's, or the server's URL.
    pub(crate) resource: String,
    /// The scopes the resource says it supports.
    pub(crate) resource_scopes: Option<Vec<String>>,
    pub(crate) server: ServerMetadata,
}

/// Whether the metadata's `resource` names this server: the same origin, and a path that
/// is the server's or one of its parents (segment by segment).
pub(crate) fn resource_covers(resource: &str, server: &Url) -> bool {
    let Ok(resource) = Url::parse(resource) else {
        return false;
    };
    if resource.origin() != server.origin() || resource.query().is_some() {
        return false;
    }
    let parent = resource.path().trim_end_matches('/');
    let path = server.path().trim_end_matches('/');
    path == parent || path.starts_with(&format!("{parent}/"))
}

/// Where the protected resource metadata may be, in order: the challenge's
/// `resource_metadata`, then the well-known path with the server's path, then at the root.
pub(crate) fn resource_metadata_urls(server: &Url, challenge: &Challenge) -> Vec<Url> {
    let mut urls = Vec::new();
    if let Some(named) = challenge
        .resource_metadata
        .as_deref()
        .and_then(|u| Url::parse(u).ok())
    {
        urls.push(named);
    }
    let path = server.path().trim_end_matches('/');
    for suffix in [path, ""] {
        if let Ok(url) = server.join(&format!("/.well-known/oauth-protected-resource{suffix}"))
            && !urls.contains(&url)
        {
            urls.push(url);
        }
    }
    urls
}

/// Where an authorization server's metadata may be, in the specification's order: for an
/// issuer with a path, OAuth's then OpenID's with the path inserted, then OpenID's
/// appended; for one without, OAuth's then OpenID's.
pub(crate) fn server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let candidates = if path.is_empty() {
        vec![
            "/.well-known/oauth-authorization-server".to_owned(),
            "/.well-known/openid-configuration".to_owned(),
        ]
    } else {
        vec![
            format!("/.well-known/oauth-authorization-server{path}"),
            format!("/.well-known/openid-configuration{path}"),
            format!("{path}/.well-known/openid-configuration"),
        ]
    };
    candidates
        .iter()
        .filter_map(|p| issuer.join(p).ok())
        .collect()
}

/// GETs a JSON document: `None` when the server has none there (any 4xx).
pub(crate) async fn fetch_json<T: DeserializeOwned>(
    http: &OAuthHttp,
    url: &Url,
    what: &str,
) -> Result<Option<T>, AuthorizationError> {
    http.check(url, what)?;
    let shown = crate::redact_credentials(url.as_str());
    let response = http
        .client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|e| {
            AuthorizationError::new(
                format!("{what} at {shown} could not be read: {}", e.without_url()),
                "check that the server is reachable",
            )
        })?;
    if response.status().is_client_error() || response.status().is_redirection() {
        return Ok(None);
    }
    if !response.status().is_success() {
        return Err(AuthorizationError::new(
            format!("{what} at {shown}: HTTP {}", response.status().as_u16()),
            "try again once the server is well",
        ));
    }
    let body = OAuthHttp::read_bounded(response, &format!("{what} at {shown}")).await?;
    serde_json::from_slice(&body).map(Some).map_err(|e| {
        AuthorizationError::new(
            format!("{what} at {shown} is not metadata this client reads: {e}"),
            "the server's metadata is not usable",
        )
    })
}

/// Finds the authorization server for `server` from its refusal.
pub(crate) async fn discover(
    http: &OAuthHttp,
    server: &Url,
    challenge: &Challenge,
) -> Result<Discovered, AuthorizationError> {
    let mut found = None;
    for url in resource_metadata_urls(server, challenge) {
        if let Some(metadata) =
            fetch_json::<ResourceMetadata>(http, &url, "the protected resource metadata").await?
        {
            found = Some(metadata);
            break;
        }
    }
    let Some(resource) = found else {
        return legacy(http, server).await;
    };
    if !resource_covers(&resource.resource, server) {
        return Err(AuthorizationError::new(
            format!(
                "the protected resource metadata is for {}, not for {}",
                resource.resource,
                crate::redact_credentials(server.as_str())
            ),
            "a token for another resource is never asked for: check the server's URL",
        ));
    }
    let issuer = resource.authorization_servers.first().ok_or_else(|| {
        AuthorizationError::new(
            "the protected resource metadata names no authorization server",
            "the server's metadata is not usable",
        )
    })?;
    let issuer_url = Url::parse(issuer).map_err(|e| {
        AuthorizationError::new(
            format!("the authorization server {issuer:?} is not a URL: {e}"),
            "the server's metadata is not usable",
        )
    })?;
    for url in server_metadata_urls(&issuer_url) {
        if let Some(metadata) =
            fetch_json::<ServerMetadata>(http, &url, "the authorization server's metadata").await?
        {
            if let Some(named) = &metadata.issuer
                && named.trim_end_matches('/') != issuer.trim_end_matches('/')
            {
                return Err(AuthorizationError::new(
                    format!("the metadata of {issuer} names another issuer, {named}"),
                    "the authorization server's metadata is not its own: it is not used",
                ));
            }
            return Ok(Discovered {
                resource: resource.resource,
                resource_scopes: resource.scopes_supported,
                server: metadata,
            });
        }
    }
    Err(AuthorizationError::new(
        format!("the authorization server {issuer} publishes no metadata"),
        "check the authorization server's URL in the resource's metadata",
    ))
}

/// A 2025-03-26 server: no resource metadata, its own origin the authorization server, its
/// metadata at the root or, failing that, the default endpoints there.
async fn legacy(http: &OAuthHttp, server: &Url) -> Result<Discovered, AuthorizationError> {
    let origin = server.join("/").map_err(|e| {
        AuthorizationError::new(format!("the server's URL has no origin: {e}"), "check it")
    })?;
    let resource = server.as_str().to_owned();
    for url in server_metadata_urls(&origin) {
        if let Some(metadata) =
            fetch_json::<ServerMetadata>(http, &url, "the authorization server's metadata").await?
        {
            return Ok(Discovered {
                resource,
                resource_scopes: None,
                server: metadata,
            });
        }
    }
    let endpoint = |path: &str| origin.join(path).map(String::from).unwrap_or_default();
    Ok(Discovered {
        resource,
        resource_scopes: None,
        server: ServerMetadata {
            issuer: None,
            authorization_endpoint: Some(endpoint("/authorize")),
            token_endpoint: endpoint("/token"),
            registration_endpoint: Some(endpoint("/register")),
            scopes_supported: None,
            token_endpoint_auth_methods_supported: None,
            code_challenge_methods_supported: None,
            client_id_metadata_document_supported: false,
            authorization_response_iss_parameter_supported: false,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn a_resource_covers_its_own_path_and_those_below_and_nothing_else() {
        let server = url("https://mcp.example.com/tenant/mcp");
        for covering in [
            "https://mcp.example.com/tenant/mcp",
            "https://mcp.example.com/tenant/",
            "https://mcp.example.com",
        ] {
            assert!(resource_covers(covering, &server), "{covering}");
        }
        for other in [
            "https://mcp.example.com/ten",
            "https://mcp.example.com/tenant/mcp/more",
            "https://evil.example.com/tenant/mcp",
            "http://mcp.example.com/tenant/mcp",
            "https://mcp.example.com:8443/tenant/mcp",
            "not a url",
        ] {
            assert!(!resource_covers(other, &server), "{other}");
        }
    }

    #[test]
    fn metadata_is_looked_for_in_the_specifications_order() {
        let server = url("https://mcp.example.com/public/mcp");
        let challenge = Challenge {
            resource_metadata: Some("https://mcp.example.com/custom.json".into()),
            ..Challenge::default()
        };
        let urls: Vec<String> = resource_metadata_urls(&server, &challenge)
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            urls,
            [
                "https://mcp.example.com/custom.json",
                "https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp",
                "https://mcp.example.com/.well-known/oauth-protected-resource",
            ]
        );
        let with_path: Vec<String> = server_metadata_urls(&url("https://auth.example.com/tenant1"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            with_path,
            [
                "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.example.com/.well-known/openid-configuration/tenant1",
                "https://auth.example.com/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            server_metadata_urls(&url("https://auth.example.com")).len(),
            2
        );
    }
}
