//! The kit as an OAuth 2.1 protected resource, against a token issuer the test starts: an
//! authorization server on loopback with its own signing key, its metadata, its JWK set and
//! a token endpoint. Tokens it did not issue for this resource, expired ones and ones
//! without the scope are refused with the status and challenge a client acts on; the
//! client of `maljan-mcp-http` gets a token from it and is let in.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use maljan_mcp_http::oauth::{OAuth, OAuthClient, OAuthGrant, OAuthSettings};
use maljan_mcp_http::{HttpConfig, HttpTransport};
use maljan_sidecar_kit::{HttpOptions, ProtectedResource, Server, ToolSpec};
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

/// The issuer's signing keys (the last one current) and the keys it publishes.
struct Issuer {
    url: String,
    keys: Mutex<Vec<(String, EncodingKey, Value)>>,
    published: Mutex<Value>,
}

/// A new P-256 key named `kid`: the signing half and the public JWK.
fn new_key(kid: &str) -> (String, EncodingKey, Value) {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).expect("key");
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng)
        .expect("key");
    let point = pair.public_key().as_ref();
    let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let jwk = json!({"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256",
        "use": "sig", "x": b64(&point[1..33]), "y": b64(&point[33..65])});
    (
        kid.to_owned(),
        EncodingKey::from_ec_der(pkcs8.as_ref()),
        jwk,
    )
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("time")
        .as_secs()
}

impl Issuer {
    /// A token of this issuer for `audience`, expiring `expires_in` seconds from now,
    /// signed with its current key.
    fn token(&self, audience: &str, scope: &str, expires_in: i64) -> String {
        let kid = self
            .keys
            .lock()
            .expect("keys")
            .last()
            .expect("a key")
            .0
            .clone();
        self.token_signed_by(&kid, audience, scope, expires_in)
    }

    /// The same, signed with the key `kid`.
    fn token_signed_by(&self, kid: &str, audience: &str, scope: &str, expires_in: i64) -> String {
        let exp = now().saturating_add_signed(expires_in);
        let claims = json!({"iss": self.url, "sub": "worker-7", "aud": audience,
            "iat": now(), "exp": exp, "scope": scope});
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(kid.to_owned());
        let keys = self.keys.lock().expect("keys");
        let (_, key, _) = keys.iter().find(|(k, _, _)| k == kid).expect("the key");
        jsonwebtoken::encode(&header, &claims, key).expect("signed")
    }

    /// The key set it publishes, as a JSON text.
    fn jwks(&self) -> String {
        self.published.lock().expect("keys").to_string()
    }

    /// Signs with a new key `kid` from now on and publishes it alone.
    fn rotate(&self, kid: &str) {
        let key = new_key(kid);
        *self.published.lock().expect("keys") = json!({"keys": [key.2.clone()]});
        self.keys.lock().expect("keys").push(key);
    }
}

/// Starts the issuer: metadata, JWK set, and a token endpoint granting `client_credentials`
/// for the resource the request names, with the scope it asks for.
async fn start_issuer() -> Arc<Issuer> {
    let key = new_key("k1");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    let issuer = Arc::new(Issuer {
        url: url.clone(),
        published: Mutex::new(json!({"keys": [key.2.clone()]})),
        keys: Mutex::new(vec![key]),
    });
    async fn token(State(issuer): State<Arc<Issuer>>, body: String) -> axum::Json<Value> {
        let form: std::collections::HashMap<String, String> =
            url::form_urlencoded::parse(body.as_bytes())
                .into_owned()
                .collect();
        let resource = form.get("resource").cloned().unwrap_or_default();
        let scope = form.get("scope").cloned().unwrap_or_default();
        axum::Json(json!({"access_token": issuer.token(&resource, &scope, 300),
            "token_type": "Bearer", "expires_in": 300}))
    }
    let metadata = json!({"issuer": url, "token_endpoint": format!("{url}/token"),
        "jwks_uri": format!("{url}/jwks"), "grant_types_supported": ["client_credentials"],
        "token_endpoint_auth_methods_supported": ["client_secret_post"]});
    let app = Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            get(move || async move { axum::Json(metadata) }),
        )
        .route(
            "/jwks",
            get(|State(issuer): State<Arc<Issuer>>| async move { issuer.jwks() }),
        )
        .route("/token", post(token))
        .with_state(issuer.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });
    issuer
}

/// The kit on loopback, protected by `issuer`'s tokens with scope `tools`, its keys as they
/// are now; its MCP URL.
async fn start_kit(issuer: &Issuer) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let resource = ProtectedResource::new(&url, &issuer.url, &issuer.jwks()).expect("keys");
    serve_kit(listener, resource).await;
    url
}

/// The kit on `listener`, protected as `resource` says with scope `tools` required.
async fn serve_kit(listener: tokio::net::TcpListener, resource: ProtectedResource) {
    let resource = resource.require_scopes(["tools"]);
    let server = Server::builder("protected", "1")
        .tool(ToolSpec::new("echo", "answers"), |_, _| {
            Ok(json!({"ok": true}))
        })
        .build();
    let options = HttpOptions::default().protected_resource(resource);
    tokio::spawn(server.serve_http_with(listener, options, std::future::pending()));
}

async fn post_initialize(url: &str, token: Option<&str>) -> (u16, String) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}})
            .to_string(),
        );
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.expect("answered");
    let challenge = response
        .headers()
        .get("www-authenticate")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (response.status().as_u16(), challenge)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_not_issued_for_this_resource_expired_or_without_the_scope_are_refused() {
    let issuer = start_issuer().await;
    let url = start_kit(&issuer).await;
    let metadata_url = url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp");
    let metadata: Value = reqwest::get(&metadata_url)
        .await
        .expect("metadata")
        .text()
        .await
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .expect("JSON");
    assert_eq!(metadata["resource"], url.as_str());
    assert_eq!(metadata["authorization_servers"][0], issuer.url.as_str());

    let (status, challenge) = post_initialize(&url, None).await;
    assert_eq!(status, 401);
    assert!(
        challenge.contains(&format!("resource_metadata=\"{metadata_url}\"")),
        "{challenge}"
    );

    for (why, token) in [
        ("expired", issuer.token(&url, "tools", -120)),
        (
            "for another resource",
            issuer.token("http://127.0.0.1:1/mcp", "tools", 300),
        ),
        ("not a JWT", "opaque".to_owned()),
    ] {
        let (status, challenge) = post_initialize(&url, Some(&token)).await;
        assert_eq!(status, 401, "{why}");
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{why}: {challenge}"
        );
    }
    let (status, challenge) = post_initialize(&url, Some(&issuer.token(&url, "other", 300))).await;
    assert_eq!(status, 403, "without the scope");
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"tools\""),
        "{challenge}"
    );

    let (status, _) = post_initialize(&url, Some(&issuer.token(&url, "tools other", 300))).await;
    assert_eq!(status, 200, "a token of this resource with the scope");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oauth_client_finds_the_issuer_from_the_refusal_and_is_let_in() {
    let issuer = start_issuer().await;
    let url = start_kit(&issuer).await;
    let settings = OAuthSettings::new(
        OAuthClient::Registered {
            id: "worker-7".into(),
            secret: Some("s".into()),
        },
        OAuthGrant::ClientCredentials,
    );
    let mut config = HttpConfig::new("protected", &url);
    config.authorizer = Some(Arc::new(OAuth::new(&url, settings).expect("oauth")));
    let http = HttpTransport::new(config).expect("transport");
    let params = serde_json::value::to_raw_value(&json!({"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}))
    .expect("params");
    let reply = http
        .request(http.next_id(), "initialize", Some(params))
        .await
        .expect("let in once authorized");
    assert!(matches!(reply, maljan_mcp_proto::jsonrpc::Reply::Result(_)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_come_from_the_issuers_jwks_uri_and_follow_its_rotation() {
    let issuer = start_issuer().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let resource = ProtectedResource::discover(&url, &issuer.url)
        .await
        .expect("the issuer's metadata and keys")
        .refetch_keys_at_most_every(Duration::ZERO);
    serve_kit(listener, resource).await;
    let (status, _) = post_initialize(&url, Some(&issuer.token(&url, "tools", 300))).await;
    assert_eq!(status, 200, "a token signed with the published key");

    issuer.rotate("k2");
    let (status, _) = post_initialize(&url, Some(&issuer.token(&url, "tools", 300))).await;
    assert_eq!(status, 200, "the new key is fetched when a token names it");
    let withdrawn = issuer.token_signed_by("k1", &url, "tools", 300);
    let (status, challenge) = post_initialize(&url, Some(&withdrawn)).await;
    assert_eq!(status, 401, "a key no longer published is not trusted");
    assert!(challenge.contains("invalid_token"), "{challenge}");

    let other = ProtectedResource::discover(&url, format!("{}/", issuer.url))
        .await
        .expect_err("metadata naming another issuer");
    assert!(
        other.to_string().contains("names another issuer"),
        "{other}"
    );
    let missing = ProtectedResource::discover(&url, format!("{}/tenant", issuer.url))
        .await
        .expect_err("no metadata there");
    assert!(missing.to_string().contains("404"), "{missing}");
}
