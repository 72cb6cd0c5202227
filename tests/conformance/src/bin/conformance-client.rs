//! The Maljan client as the conformance suite's client under test: `conformance-client URL`,
//! with the scenario in `MCP_CONFORMANCE_SCENARIO`. Exits 0 when it did what the scenario
//! asks; the suite's own checks say whether it did it right.

use std::process::ExitCode;
use std::time::Duration;

use maljan_client::{
    ClientSettings, ConnectionContext, ElicitationPolicy, ServerConfig, ServerConnection,
};
use serde_json::{Value, json};

/// The tool each scenario's server offers, and the arguments to call it with.
fn call_of(scenario: &str) -> Result<Option<(&'static str, Value)>, String> {
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
    let config = ServerConfig::http("conformance", url);
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
