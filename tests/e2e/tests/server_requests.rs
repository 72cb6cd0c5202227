//! A real server process asking the client things of its own (`ping`, elicitation,
//! sampling, roots): each gets the answer the client's policy gives, never a hang.

use std::sync::Arc;

use maljan_client::{
    ClientSettings, ConnectionContext, ElicitationPolicy, Job, ServerCommand, ServerConfig,
    ServerConnection,
};
use serde_json::{Value, json};

const SERVER: &str = env!("CARGO_BIN_EXE_misbehaving-server");

async fn connect(settings: ClientSettings, context: ConnectionContext) -> ServerConnection {
    let config = ServerConfig::stdio("asker", ServerCommand::new(SERVER));
    ServerConnection::connect(&config, settings, context)
        .await
        .expect("the server sets up")
}

async fn ask(server: &ServerConnection, method: &str, params: Value) -> Value {
    let answer = server
        .call("ask", json!({"method": method, "params": params}))
        .await
        .expect("call");
    assert!(answer.is_ok(), "{answer:?}");
    answer.value
}

/// The capabilities the client declared in `initialize`, as the server saw them.
async fn declared(server: &ServerConnection) -> Value {
    let answer = server
        .call("client_capabilities", json!({}))
        .await
        .expect("call");
    answer.value["capabilities"].clone()
}

fn form() -> Value {
    json!({
        "message": "Which name?",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "verified": {"type": "boolean", "default": true}
            },
            "required": ["name"]
        }
    })
}

#[tokio::test]
async fn an_unattended_client_answers_ping_declines_elicitation_and_refuses_sampling() {
    let server = connect(ClientSettings::default(), ConnectionContext::default()).await;
    assert_eq!(
        ask(&server, "ping", Value::Null).await,
        json!({"answer": {}})
    );
    assert_eq!(
        ask(&server, "elicitation/create", form()).await,
        json!({"answer": {"action": "decline"}})
    );
    let refused = ask(&server, "sampling/createMessage", json!({"messages": []})).await;
    assert_eq!(refused["refused"]["code"], -32601, "{refused}");
    assert!(
        refused["refused"]["message"]
            .as_str()
            .unwrap()
            .contains("no model to ask"),
        "{refused}"
    );
    let roots = ask(&server, "roots/list", json!({})).await;
    assert_eq!(roots["refused"]["code"], -32601, "{roots}");
    assert_eq!(
        declared(&server).await,
        json!({"elicitation": {"form": {}}})
    );
    server.close().await;
}

#[tokio::test]
async fn the_defaults_policy_accepts_and_declared_roots_list_the_job() {
    let dir = tempfile::tempdir().unwrap();
    let job = Arc::new(Job::create(dir.path().join("job")).unwrap());
    let mut settings = ClientSettings::default();
    settings.elicitation = ElicitationPolicy::Defaults;
    settings.declare_roots = true;
    let server = connect(settings, ConnectionContext::default().with_job(job.clone())).await;
    assert_eq!(
        ask(&server, "elicitation/create", form()).await,
        json!({"answer": {"action": "accept", "content": {"name": "John Doe", "verified": true}}})
    );
    let roots = ask(&server, "roots/list", json!({})).await;
    let uri = roots["answer"]["roots"][0]["uri"].as_str().expect("a root");
    assert_eq!(uri, format!("file://{}", job.dir().display()));
    assert_eq!(
        declared(&server).await["roots"],
        json!({"listChanged": false})
    );
    server.close().await;
}

#[tokio::test]
async fn a_malformed_request_is_refused_and_never_taken_for_an_answer_to_a_call() {
    let server = connect(ClientSettings::default(), ConnectionContext::default()).await;
    // The server's request reuses the pending call's id: refused with -32600, and the call
    // still gets its own answer.
    let answer = server.call("ask_malformed", json!({})).await.expect("call");
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(answer.value["refused"]["code"], -32600, "{answer:?}");
    assert_eq!(server.counts().unmatched, 0);
    let stray = server.call("stray_answer", json!({})).await.expect("call");
    assert_eq!(stray.value, json!({"sent": true}));
    assert_eq!(
        server.counts().unmatched,
        1,
        "the answer to an id never sent is counted"
    );
    server.close().await;
}
