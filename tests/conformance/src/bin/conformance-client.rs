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

/// What the client does in a scenario once it is set up (which lists the server's tools).
enum Play {
    /// Nothing more.
    SetUpOnly,
    /// Calls one tool with these arguments.
    Call(&'static str, Value),
    /// Calls `json_schema_echo` with the input schema of `json_schema_2020_12_tool` as it
    /// was listed, so the scenario sees what the client kept of it.
    EchoSchema,
    /// Calls every tool the server lists, with no arguments.
    CallEvery,
    /// Makes the calls the scenario's context lists (`toolCalls`: name and arguments).
    CallsOfContext,
}

/// The play of each scenario.
fn play_of(scenario: &str) -> Result<Play, String> {
    if scenario.starts_with("auth/") {
        return Ok(Play::Call("test-tool", json!({})));
    }
    Ok(match scenario {
        "initialize" | "request-metadata" | "json-schema-ref-no-deref" => Play::SetUpOnly,
        "tools_call" => Play::Call("add_numbers", json!({"a": 5, "b": 3})),
        "elicitation-sep1034-client-defaults" => {
            Play::Call("test_client_elicitation_defaults", json!({}))
        }
        "sse-retry" => Play::Call("test_reconnection", json!({})),
        "json-schema-2020-12-preservation" => Play::EchoSchema,
        "sep-2322-client-request-state" | "http-standard-headers" | "http-invalid-tool-headers" => {
            Play::CallEvery
        }
        "http-custom-headers" => Play::CallsOfContext,
        other => return Err(format!("scenario {other:?} is not one this adapter plays")),
    })
}

/// Calls `tool`; its failure, if any, as an error.
async fn call(server: &ServerConnection, tool: &str, arguments: Value) -> Result<(), String> {
    match server.call(tool, arguments).await {
        Ok(answer) => match answer.failure() {
            None => Ok(()),
            Some(failure) => Err(format!("{tool}: {}: {}", failure.code, failure.message)),
        },
        Err(e) => Err(e.to_string()),
    }
}

async fn play(url: &str, scenario: &str) -> Result<(), String> {
    let play = play_of(scenario)?;
    let mut settings = ClientSettings::default();
    settings.default_timeout = Duration::from_secs(20);
    if scenario.starts_with("elicitation") || scenario.starts_with("sep-2322") {
        settings.elicitation = ElicitationPolicy::Defaults;
    }
    let mut config = ServerConfig::http("conformance", url);
    if scenario.starts_with("auth/") {
        config = config.with_authorizer(authorizer(url, scenario)?);
    }
    let server = ServerConnection::connect(&config, settings, ConnectionContext::default())
        .await
        .map_err(|e| e.to_string())?;
    let outcome = match play {
        Play::SetUpOnly => Ok(()),
        Play::Call(tool, arguments) => call(&server, tool, arguments).await,
        Play::EchoSchema => {
            let schema = server
                .model_tools()
                .iter()
                .find(|t| t.name == "json_schema_2020_12_tool")
                .map(|t| t.input_schema.clone());
            match schema {
                Some(schema) => call(&server, "json_schema_echo", json!({"schema": schema})).await,
                None => Err("the server lists no json_schema_2020_12_tool".to_owned()),
            }
        }
        Play::CallEvery => {
            let tools: Vec<String> = server
                .model_tools()
                .iter()
                .map(|t| t.name.clone())
                .collect();
            let mut outcome = Ok(());
            for tool in tools {
                // Every tool is called, whatever an earlier one answered.
                if let Err(e) = call(&server, &tool, json!({})).await {
                    outcome = outcome.and(Err(e));
                }
            }
            outcome
        }
        Play::CallsOfContext => {
            let mut outcome = Ok(());
            for listed in context()["toolCalls"].as_array().into_iter().flatten() {
                let tool = listed["name"].as_str().unwrap_or_default();
                if let Err(e) = call(&server, tool, listed["arguments"].clone()).await {
                    outcome = outcome.and(Err(e));
                }
            }
            outcome
        }
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

/// The scenario's context, as the suite hands it over.
fn context() -> Value {
    std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default()
}

/// The OAuth client a scenario's context describes: its own credentials when it gives
/// them, a client ID metadata document (or registration on the spot) otherwise.
fn authorizer(url: &str, scenario: &str) -> Result<Arc<OAuth>, String> {
    let context = context();
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
