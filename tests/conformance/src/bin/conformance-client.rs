//! The Maljan client as the conformance suite's client under test: `conformance-client URL`,
//! with the scenario in `MCP_CONFORMANCE_SCENARIO`. Exits 0 when it did what the scenario
//! asks; the suite's own checks say whether it did it right.

use std::future::Future;
use std::pin::Pin;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use maljan_mcp_http::AuthorizationError;
use maljan_mcp_http::oauth::{
    IdentityProvider, OAuth, OAuthClient, OAuthGrant, OAuthSettings, UserAgent,
};

use maljan_client::{
    ClientSettings, ConnectionContext, ElicitationPolicy, ServerConfig, ServerConnection,
};
use serde_json::{Value, json};

/// The tool each scenario's server offers, and the arguments to call it with.
fn call_of(scenario: &str) -> Result<Option<(&'static str, Value)>, String> {
    if scenario.starts_with("auth/") {
        return Ok(Some(("test-tool", json!({}))));
    }
    Ok(match scenario {
        "initialize" => None,
        "tools_call" => Some(("add_numbers", json!({"a": 5, "b": 3}))),
        "elicitation-sep1034-client-defaults" => {
            Some(("test_client_elicitation_defaults", json!({})))
        }
        "sse-retry" => Some(("test_reconnection", json!({}))),
        other => return Err(format!("scenario {other:?} is not one this adapter plays")),
    })
}

async fn play(url: &str, scenario: &str) -> Result<(), String> {
    let call = call_of(scenario)?;
    let mut settings = ClientSettings::default();
    settings.default_timeout = Duration::from_secs(20);
    if scenario.starts_with("elicitation") {
        settings.elicitation = ElicitationPolicy::Defaults;
    }
    let mut config = ServerConfig::http("conformance", url);
    if scenario.starts_with("auth/") {
        config = config.with_authorizer(authorizer(url, scenario)?);
    }
    let server = ServerConnection::connect(&config, settings, ConnectionContext::default())
        .await
        .map_err(|e| e.to_string())?;
    let outcome = match call {
        None => Ok(()),
        Some((tool, arguments)) => match server.call(tool, arguments).await {
            Ok(answer) => match answer.failure() {
                None => Ok(()),
                Some(failure) => Err(format!("{tool}: {}: {}", failure.code, failure.message)),
            },
            Err(e) => Err(e.to_string()),
        },
    };
    server.close().await;
    outcome
}

/// The client ID metadata document the scenarios expect a client to name itself by.
const METADATA_DOCUMENT: &str = "https://conformance-test.local/client-metadata.json";

/// The user agent of a scenario: it visits the authorization URL, which the suite's
/// authorization server answers at once with a redirect, and comes back with where that
/// redirect points, as a browser would.
#[derive(Debug)]
struct Headless {
    http: reqwest::Client,
}

impl UserAgent for Headless {
    fn redirect_uri(&self) -> String {
        "http://localhost:3000/callback".to_owned()
    }

    fn visit<'a>(
        &'a self,
        authorization_url: &'a url::Url,
    ) -> Pin<Box<dyn Future<Output = Result<url::Url, AuthorizationError>> + Send + 'a>> {
        Box::pin(async move {
            let failed = |what: String| AuthorizationError::new(what, "the scenario's server");
            let response = self
                .http
                .get(authorization_url.clone())
                .send()
                .await
                .map_err(|e| failed(format!("the authorization URL: {e}")))?;
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .ok_or_else(|| failed(format!("no redirect, but HTTP {}", response.status())))?;
            url::Url::parse(location).map_err(|e| failed(format!("the redirect: {e}")))
        })
    }
}

/// The OAuth client a scenario's context describes: its own credentials when it gives
/// them, a client ID metadata document (or registration on the spot) otherwise.
fn authorizer(url: &str, scenario: &str) -> Result<Arc<OAuth>, String> {
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default();
    let text = |key: &str| context[key].as_str().map(str::to_owned);
    let client = match (text("client_id"), text("private_key_pem")) {
        (Some(id), Some(private_key_pem)) => OAuthClient::KeyRegistered {
            id,
            private_key_pem,
            algorithm: text("signing_algorithm").unwrap_or_else(|| "ES256".to_owned()),
        },
        (Some(id), None) => OAuthClient::Registered {
            id,
            secret: text("client_secret"),
        },
        (None, _) => OAuthClient::MetadataDocument {
            url: METADATA_DOCUMENT.to_owned(),
        },
    };
    let grant = if scenario.starts_with("auth/client-credentials") {
        OAuthGrant::ClientCredentials
    } else if let (Some(token_endpoint), Some(client_id), Some(id_token)) = (
        text("idp_token_endpoint"),
        text("idp_client_id"),
        text("idp_id_token"),
    ) {
        OAuthGrant::IdentityAssertion(IdentityProvider {
            token_endpoint,
            client_id,
            id_token,
        })
    } else {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        OAuthGrant::AuthorizationCode(Arc::new(Headless { http }))
    };
    OAuth::new(url, OAuthSettings::new(client, grant))
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Some(url) = std::env::args().nth(1) else {
        eprintln!("usage: conformance-client URL (the scenario in MCP_CONFORMANCE_SCENARIO)");
        return ExitCode::from(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    match play(&url, &scenario).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance-client: {scenario}: {e}");
            ExitCode::FAILURE
        }
    }
}
