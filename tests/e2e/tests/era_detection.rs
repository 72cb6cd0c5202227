//! The client finds each server's protocol era by the spec's rules, against real servers of
//! each era: the kit (modern and legacy), and a misbehaving server answering
//! `server/discover` each way a server may. Once modern, every request carries the era's
//! `_meta`, an `input_required` call is answered by the client's policies, and the card and
//! the ledger name the version.

use std::sync::Arc;
use std::time::Duration;

use maljan_client::{
    ClientError, ClientSettings, ConnectionContext, ElicitationPolicy, EraChoice, Ledger,
    ServerCommand, ServerConfig, ServerConnection,
};
use maljan_ledger::MemorySink;
use maljan_mcp_proto::maljan::ErrorCode;
use maljan_sidecar_kit::{HttpOptions, Server, ToolSpec};
use serde_json::json;

const MISBEHAVING: &str = env!("CARGO_BIN_EXE_misbehaving-server");
const KIT: &str = env!("CARGO_BIN_EXE_noisy-kit-server");

fn settings() -> ClientSettings {
    let mut settings = ClientSettings::default();
    settings.discover_timeout = Duration::from_millis(500);
    settings
}

fn misbehaving(discover: &str) -> ServerConfig {
    let command = ServerCommand::new(MISBEHAVING)
        .arg("--discover")
        .arg(discover);
    ServerConfig::stdio(format!("discover-{discover}"), command)
}

async fn connect(config: &ServerConfig, settings: ClientSettings) -> ServerConnection {
    ServerConnection::connect(config, settings, ConnectionContext::default())
        .await
        .expect("set up")
}

/// The era and version a server was set up in, and whether a call then works.
async fn agreed(discover: &str) -> (&'static str, String) {
    let server = connect(&misbehaving(discover), settings()).await;
    let card = server.card();
    let echo = server.call("echo", json!({"x": 1})).await.expect("call");
    assert_eq!(echo.value, json!({"x": 1}), "{discover}: {echo:?}");
    server.close().await;
    (card.era.as_str(), card.protocol_version)
}

#[tokio::test]
async fn a_kit_server_over_stdio_is_spoken_to_in_the_modern_era_and_the_ledger_says_so() {
    let memory = MemorySink::default();
    let ledger = Arc::new(Ledger::new().with_sink(memory.clone()));
    let config = ServerConfig::stdio("kit", ServerCommand::new(KIT));
    let server = ServerConnection::connect(
        &config,
        settings(),
        ConnectionContext::default().with_ledger(ledger),
    )
    .await
    .expect("set up");
    let card = server.card();
    assert_eq!(
        (card.era.as_str(), card.protocol_version.as_str()),
        ("stateless", "2026-07-28")
    );
    assert_eq!(
        card.server_info.name, "noisy",
        "from the discover result's _meta"
    );
    let answer = server.call("noisy", json!({})).await.expect("call");
    assert!(answer.is_ok(), "{answer:?}");
    let entries = memory.entries();
    assert_eq!(
        entries[0].call.protocol_version.as_deref(),
        Some("2026-07-28")
    );
    server.close().await;
}

#[tokio::test]
async fn a_legacy_server_refusing_discover_is_set_up_with_initialize() {
    assert_eq!(
        agreed("not-found").await,
        ("session", "2025-11-25".to_owned())
    );
}

#[tokio::test]
async fn a_server_silent_to_discover_is_legacy_after_the_probe_wait() {
    assert_eq!(agreed("silent").await, ("session", "2025-11-25".to_owned()));
}

#[tokio::test]
async fn answers_that_are_not_recognizably_modern_fall_back_to_legacy() {
    for discover in ["bare-32022", "empty", "legacy-listed"] {
        assert_eq!(
            agreed(discover).await,
            ("session", "2025-11-25".to_owned()),
            "{discover}"
        );
    }
}

#[tokio::test]
async fn a_discover_result_or_an_unsupported_version_with_ours_listed_is_modern() {
    assert_eq!(
        agreed("modern").await,
        ("stateless", "2026-07-28".to_owned())
    );
    assert_eq!(
        agreed("retry").await,
        ("stateless", "2026-07-28".to_owned())
    );
}

#[tokio::test]
async fn a_modern_server_speaking_none_of_our_versions_fails_setup_without_falling_back() {
    let error = ServerConnection::connect(
        &misbehaving("future"),
        settings(),
        ConnectionContext::default(),
    )
    .await
    .expect_err("unusable");
    let text = error.to_string();
    assert!(
        matches!(
            error,
            ClientError::SetupFailed {
                step: "server/discover",
                ..
            }
        ) && text.contains("2099-01-01"),
        "{text}"
    );
}

#[tokio::test]
async fn a_fixed_era_is_kept_to() {
    let mut modern_only = settings();
    modern_only.era = EraChoice::Stateless;
    let error = ServerConnection::connect(
        &misbehaving("not-found"),
        modern_only,
        ConnectionContext::default(),
    )
    .await
    .expect_err("not modern");
    assert!(error.to_string().contains("era = \"auto\""), "{error}");

    let mut legacy_only = settings();
    legacy_only.era = EraChoice::Session;
    let server = connect(&misbehaving("modern"), legacy_only.clone()).await;
    assert_eq!(server.card().era.as_str(), "session");
    server.close().await;
    let kit = ServerConfig::stdio("kit", ServerCommand::new(KIT));
    let server = connect(&kit, legacy_only).await;
    assert_eq!(server.card().protocol_version, "2025-11-25");
    let answer = server.call("noisy", json!({})).await.expect("call");
    assert!(answer.is_ok(), "{answer:?}");
    server.close().await;
}

#[tokio::test]
async fn every_modern_request_carries_the_eras_meta() {
    let server = connect(&misbehaving("modern"), settings()).await;
    let answer = server.call("meta", json!({})).await.expect("call");
    let meta = &answer.value["meta"];
    assert_eq!(
        meta["io.modelcontextprotocol/protocolVersion"],
        "2026-07-28"
    );
    assert!(meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"].is_object());
    assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "maljan");
    assert!(meta["traceparent"].is_string(), "the call's own keys kept");
    server.close().await;
}

#[tokio::test]
async fn input_required_is_answered_by_the_policy_or_failed_with_a_clear_code() {
    let mut accepting = settings();
    accepting.elicitation = ElicitationPolicy::Defaults;
    let server = connect(&misbehaving("modern"), accepting).await;
    let schema =
        json!({"type": "object", "properties": {"go": {"type": "boolean", "default": true}}});
    let answer = server
        .call(
            "needs_input",
            json!({"method": "elicitation/create",
                   "params": {"message": "go?", "requestedSchema": schema}}),
        )
        .await
        .expect("call");
    assert_eq!(
        answer.value,
        json!({"inputResponses": {"q": {"action": "accept", "content": {"go": true}}},
               "requestState": "s1"})
    );

    let sampling = server
        .call("needs_input", json!({"method": "sampling/createMessage"}))
        .await
        .expect("call");
    let failure = sampling.failure().expect("refused");
    assert_eq!(failure.code, ErrorCode::InputRequired);
    assert!(
        failure.message.contains("sampling/createMessage"),
        "{}",
        failure.message
    );

    let endless = server
        .call(
            "needs_input",
            json!({"method": "roots/list", "always": true}),
        )
        .await
        .expect("call");
    let failure = endless.failure().expect("gave up");
    assert_eq!(failure.code, ErrorCode::InputRequired);
    server.close().await;
}

#[tokio::test]
async fn over_http_the_kit_is_modern_and_an_origin_found_legacy_is_not_probed_again() {
    let url = maljan_e2e::hello_kit_over_http().await;
    let config = ServerConfig::http("kit", &url);
    let context = ConnectionContext::default();
    let server = ServerConnection::connect(&config, settings(), context.clone())
        .await
        .expect("set up");
    let card = server.card();
    assert_eq!(
        (card.era.as_str(), card.protocol_version.as_str()),
        ("stateless", "2026-07-28")
    );
    let answer = server.call("hello", json!({})).await.expect("call");
    assert_eq!(answer.value, json!({"hello": "world"}));
    server.close().await;

    let mut legacy_only = settings();
    legacy_only.era = EraChoice::Session;
    let legacy = ServerConnection::connect(&config, legacy_only, context.clone())
        .await
        .expect("set up");
    assert_eq!(legacy.card().era.as_str(), "session");
    legacy.close().await;
    // The context now knows the origin as legacy: an automatic setup goes straight to
    // initialize (the kit would have answered server/discover).
    let again = ServerConnection::connect(&config, settings(), context)
        .await
        .expect("set up");
    assert_eq!(again.card().era.as_str(), "session");
    again.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_http_call_given_up_is_cancelled_by_closing_its_stream() {
    let (tx, rx) = std::sync::mpsc::channel::<&'static str>();
    let events = std::sync::Mutex::new(tx);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let server = Server::builder("spinner", "1")
        .tool(
            ToolSpec::new("spin", "works until cancelled"),
            move |_, ctx| {
                let _ = events.lock().expect("lock").send("started");
                while !ctx.is_cancelled() {
                    std::thread::yield_now();
                }
                let _ = events.lock().expect("lock").send("stopped");
                ctx.check_cancelled().map(|()| json!({}))
            },
        )
        .build();
    tokio::spawn(server.serve_http_with(listener, HttpOptions::default(), std::future::pending()));
    let mut impatient = settings();
    impatient.default_timeout = Duration::from_millis(300);
    let server = connect(&ServerConfig::http("spinner", &url), impatient).await;
    assert_eq!(server.card().era.as_str(), "stateless");
    let answer = server.call("spin", json!({})).await.expect("call");
    assert_eq!(
        answer.failure().map(|f| &f.code),
        Some(&ErrorCode::Unanswered)
    );
    // No notifications/cancelled exists in the era over HTTP: the handler stops because the
    // client closed the call's stream.
    let said: Vec<&str> = tokio::task::spawn_blocking(move || {
        (0..2)
            .map_while(|_| rx.recv_timeout(Duration::from_secs(60)).ok())
            .collect()
    })
    .await
    .expect("join");
    assert_eq!(said, ["started", "stopped"]);
    server.close().await;
}
