//! `private_key_jwt` (RFC 7523): the client proves who it is with a short-lived JWT signed
//! by its own key, never sending a secret.

use std::time::{SystemTime, UNIX_EPOCH};

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use oauth2::CsrfToken;
use serde::Serialize;

use crate::AuthorizationError;

/// How long an assertion is good for.
const LIFETIME_S: u64 = 300;

/// The type of a JWT client assertion, as the token request names it.
pub(crate) const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// A client's signing key: its PEM (PKCS#8 for EC keys, PKCS#1 or #8 for RSA) and the
/// algorithm it signs with.
#[derive(Clone)]
pub(crate) struct SigningKey {
    pub(crate) pem: String,
    pub(crate) algorithm: String,
}

#[derive(Serialize)]
struct Claims<'a> {
    iss: &'a str,
    sub: &'a str,
    aud: &'a str,
    iat: u64,
    exp: u64,
    jti: String,
}

/// A fresh assertion that `client_id` is this client, for the authorization server whose
/// issuer is `audience`.
pub(crate) fn client_assertion(
    client_id: &str,
    key: &SigningKey,
    audience: &str,
) -> Result<String, AuthorizationError> {
    let unusable = |what: String| {
        AuthorizationError::new(
            what,
            "configure the client's private key as PEM and an algorithm it signs with (ES256, ES384, RS256, PS256, EdDSA…)",
        )
    };
    let algorithm: Algorithm = key
        .algorithm
        .parse()
        .map_err(|_| unusable(format!("{:?} is not a signing algorithm", key.algorithm)))?;
    let pem = key.pem.as_bytes();
    let encoding = match algorithm {
        Algorithm::ES256 | Algorithm::ES384 => EncodingKey::from_ec_pem(pem),
        Algorithm::RS256
        | Algorithm::RS384
        | Algorithm::RS512
        | Algorithm::PS256
        | Algorithm::PS384
        | Algorithm::PS512 => EncodingKey::from_rsa_pem(pem),
        Algorithm::EdDSA => EncodingKey::from_ed_pem(pem),
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => {
            return Err(unusable(format!(
                "{} is a shared-secret algorithm, not a private key's",
                key.algorithm
            )));
        }
    }
    .map_err(|e| unusable(format!("the client's private key is not usable: {e}")))?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let claims = Claims {
        iss: client_id,
        sub: client_id,
        aud: audience,
        iat: now,
        exp: now + LIFETIME_S,
        jti: CsrfToken::new_random().secret().clone(),
    };
    jsonwebtoken::encode(&Header::new(algorithm), &claims, &encoding)
        .map_err(|e| unusable(format!("the assertion could not be signed: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_that_is_not_one_and_a_shared_secret_algorithm_are_refused_by_name() {
        let key = |algorithm: &str| SigningKey {
            pem: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".into(),
            algorithm: algorithm.into(),
        };
        let bad = client_assertion("c", &key("ES256"), "https://a").unwrap_err();
        assert!(bad.what.contains("not usable"), "{bad}");
        let shared = client_assertion("c", &key("HS256"), "https://a").unwrap_err();
        assert!(shared.what.contains("shared-secret"), "{shared}");
        let unknown = client_assertion("c", &key("XX1"), "https://a").unwrap_err();
        assert!(
            unknown.what.contains("not a signing algorithm"),
            "{unknown}"
        );
    }
}
