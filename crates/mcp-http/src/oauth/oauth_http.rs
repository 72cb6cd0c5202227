//! The HTTP the OAuth flows use: never redirected, bounded, and only over https, or plain
//! http to this host when the MCP server itself is on this host (a remote server must not
//! be able to point the client at a service on the client's own machine).

use futures_util::StreamExt;
use url::Url;

use crate::AuthorizationError;

/// The most bytes of any OAuth answer read: metadata, a registration, a token.
pub(crate) const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The client of the OAuth flows, and which URLs it may reach.
pub(crate) struct OAuthHttp {
    pub(crate) client: reqwest::Client,
    /// Whether plain http to a loopback address is allowed: only for a server on loopback.
    loopback_http: bool,
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

impl OAuthHttp {
    /// The OAuth client for the MCP server at `server`.
    pub(crate) fn for_server(client: reqwest::Client, server: &Url) -> OAuthHttp {
        OAuthHttp {
            client,
            loopback_http: is_loopback(server),
        }
    }

    /// Whether `url` may carry OAuth traffic.
    pub(crate) fn check(&self, url: &Url, what: &str) -> Result<(), AuthorizationError> {
        let plain_allowed = self.loopback_http && url.scheme() == "http" && is_loopback(url);
        if url.scheme() == "https" || plain_allowed {
            return Ok(());
        }
        Err(AuthorizationError::new(
            format!(
                "{what} {} is not https{}",
                crate::redact_credentials(url.as_str()),
                if self.loopback_http {
                    " nor on this host"
                } else {
                    ""
                }
            ),
            "OAuth needs TLS: have the server publish https endpoints",
        ))
    }

    /// The body of `response`, at most [`MAX_ANSWER_BYTES`]; `what` names it in errors.
    pub(crate) async fn read_bounded(
        response: reqwest::Response,
        what: &str,
    ) -> Result<Vec<u8>, AuthorizationError> {
        let mut body = Vec::new();
        let mut stream = response.bytes_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| {
                AuthorizationError::new(format!("{what} was cut: {}", e.without_url()), "try again")
            })?;
            if body.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(AuthorizationError::new(
                    format!("{what} is over {MAX_ANSWER_BYTES} bytes"),
                    "the authorization server's answer is not usable",
                ));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(text: &str) -> Url {
        Url::parse(text).unwrap()
    }

    #[test]
    fn plain_http_is_allowed_only_between_this_hosts_own_server_and_itself() {
        let local = OAuthHttp::for_server(reqwest::Client::new(), &url("http://127.0.0.1:9/mcp"));
        for allowed in [
            "https://a.example/x",
            "http://127.0.0.1:8080/x",
            "http://localhost/x",
            "http://[::1]/x",
        ] {
            assert!(local.check(&url(allowed), "t").is_ok(), "{allowed}");
        }
        for refused in [
            "http://a.example/x",
            "ftp://127.0.0.1/x",
            "http://10.0.0.1/x",
        ] {
            assert!(local.check(&url(refused), "t").is_err(), "{refused}");
        }
        // A remote server cannot send the client to a service on the client's own host.
        let remote =
            OAuthHttp::for_server(reqwest::Client::new(), &url("https://mcp.example.com/mcp"));
        assert!(
            remote
                .check(&url("https://auth.example.com/x"), "t")
                .is_ok()
        );
        for refused in ["http://127.0.0.1:5432/x", "http://localhost/x"] {
            assert!(remote.check(&url(refused), "t").is_err(), "{refused}");
        }
    }
}
