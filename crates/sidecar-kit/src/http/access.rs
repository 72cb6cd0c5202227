//! Who is calling: the bearer token, the `Host` and the `Origin` of a request, checked from
//! its headers alone, before its body is read or anything is kept for it.

use std::net::{IpAddr, SocketAddr};

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::HttpOptions;
use super::protected_resource::TokenRefusal;

/// A caller let in: where it calls from, and the token it showed (its sha256), to which
/// its stateless jobs are bound.
#[derive(Debug, Clone, Copy)]
pub(super) struct Caller {
    pub(super) peer: IpAddr,
    pub(super) token: Option<[u8; 32]>,
}

/// The host part of a `Host` header or of an origin's authority, without its port.
pub(super) fn host_name(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    match authority.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => authority,
    }
}

fn is_loopback_name(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether an `Origin` header names this host (the spec requires refusing others).
pub(super) fn origin_is_loopback(origin: &str) -> bool {
    let authority = origin
        .split_once("://")
        .map_or(origin, |(_, rest)| rest)
        .split('/')
        .next()
        .unwrap_or_default();
    is_loopback_name(host_name(authority))
}

pub(super) fn refuse(status: StatusCode, why: String) -> Response {
    tracing::warn!("refused an HTTP request: {why}");
    (status, why).into_response()
}

/// Why a request was refused before anything was read of its body.
#[derive(Debug)]
pub(super) enum CallerRefusal {
    /// No token, or a wrong one (401).
    Token,
    /// A `Host` not served here (403).
    Host(String),
    /// A browser's `Origin` not allowed (403).
    Origin(String),
    /// OAuth: no token, a token not of this resource (401) or without its scopes (403),
    /// with the challenge to send.
    Authorization(TokenRefusal, String),
}

impl IntoResponse for CallerRefusal {
    fn into_response(self) -> Response {
        match self {
            CallerRefusal::Token => {
                let mut response = refuse(
                    StatusCode::UNAUTHORIZED,
                    "a bearer token is required (Authorization: Bearer TOKEN); ask the \
                     server's operator for it"
                        .to_owned(),
                );
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                response
            }
            CallerRefusal::Authorization(refusal, challenge) => {
                let (status, why) = match refusal {
                    TokenRefusal::Missing => (
                        StatusCode::UNAUTHORIZED,
                        "an access token is required; the WWW-Authenticate header names where to get one".to_owned(),
                    ),
                    TokenRefusal::Invalid(why) => (
                        StatusCode::UNAUTHORIZED,
                        format!("the access token is refused: {why}"),
                    ),
                    TokenRefusal::Scope => (
                        StatusCode::FORBIDDEN,
                        "the access token lacks the scopes this server requires".to_owned(),
                    ),
                };
                let mut response = refuse(status, why);
                if let Ok(value) = HeaderValue::try_from(challenge) {
                    response
                        .headers_mut()
                        .insert(header::WWW_AUTHENTICATE, value);
                }
                response
            }
            CallerRefusal::Host(host) => refuse(
                StatusCode::FORBIDDEN,
                format!("host {host:?} is not served here"),
            ),
            CallerRefusal::Origin(origin) => refuse(
                StatusCode::FORBIDDEN,
                format!("origin {origin} is not allowed"),
            ),
        }
    }
}

/// The caller of a request, or its refusal: a missing or wrong token, a `Host` or an
/// `Origin` not served here.
pub(super) async fn check_caller(
    options: &HttpOptions,
    loopback: bool,
    peer: SocketAddr,
    headers: &HeaderMap,
) -> Result<Caller, CallerRefusal> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    let mut given = bearer.map(|token| <[u8; 32]>::from(Sha256::digest(token.as_bytes())));
    if let Some(resource) = &options.protected {
        match resource.check(bearer).await {
            Ok(binding) => given = Some(binding),
            Err(refusal) => {
                let challenge = resource.challenge(&refusal);
                return Err(CallerRefusal::Authorization(refusal, challenge));
            }
        }
    } else if let Some(expected) = &options.token_digest {
        let matches = given.is_some_and(|given| bool::from(given.ct_eq(expected)));
        if !matches {
            return Err(CallerRefusal::Token);
        }
    }
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let host_allowed = if options.allowed_hosts.is_empty() {
        !loopback || is_loopback_name(host_name(&host))
    } else {
        options.allowed_hosts.contains(&host)
            || options
                .allowed_hosts
                .iter()
                .any(|allowed| allowed == host_name(&host))
            || (loopback && is_loopback_name(host_name(&host)))
    };
    if !host_allowed {
        return Err(CallerRefusal::Host(host));
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        let authority = origin.split_once("://").map_or(origin, |(_, rest)| rest);
        let allowed = origin_is_loopback(origin)
            || options
                .allowed_hosts
                .iter()
                .any(|h| authority.eq_ignore_ascii_case(h));
        if !allowed {
            return Err(CallerRefusal::Origin(origin.to_owned()));
        }
    }
    let bound = options.token_digest.is_some() || options.protected.is_some();
    Ok(Caller {
        peer: peer.ip(),
        token: given.filter(|_| bound),
    })
}

#[cfg(test)]
mod tests {
    use super::{host_name, origin_is_loopback};

    #[test]
    fn only_loopback_origins_are_allowed() {
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:8443/x",
            "http://127.1.2.3",
        ] {
            assert!(origin_is_loopback(ok), "{ok}");
        }
        for bad in [
            "http://evil.example",
            "http://localhost.evil.example",
            "http://10.0.0.1:80",
            "http://127.evil.example",
            "http://[::2]:80",
        ] {
            assert!(!origin_is_loopback(bad), "{bad}");
        }
    }

    #[test]
    fn a_host_header_is_read_without_its_port() {
        assert_eq!(host_name("localhost:8080"), "localhost");
        assert_eq!(host_name("[::1]:8080"), "::1");
        assert_eq!(host_name("example.org"), "example.org");
    }
}
