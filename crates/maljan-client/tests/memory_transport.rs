//! A connection over the in-memory transport: setup and a call go through the same stack as
//! over stdio or HTTP, and the transport learns the agreed version and the end of setup.

use maljan_client::{ClientSettings, ConnectionContext, ServerConnection};
use maljan_mcp_proto::jsonrpc::{ErrorObject, Message, Reply};
use maljan_mcp_proto::mcp::ProtocolVersion;
use maljan_mcp_transport::memory::{self, MemoryPeer};
use serde_json::{Value, json};

fn raw(value: Value) -> maljan_mcp_proto::jsonrpc::RawJson {
    serde_json::value::to_raw_value(&value)
        .expect("JSON")
        .into()
}

/// Plays a server with one tool, `echo`, until the client closes.
async fn serve(mut peer: MemoryPeer) -> MemoryPeer {
    while let Some(message) = peer.next_message().await {
        let Message::Request(request) = message else {
            continue;
        };
        let params: Value = request.params.as_ref().map_or(Value::Null, |p| {
            serde_json::from_str(p.get()).expect("JSON")
        });
        if request.method == "server/discover" {
            // A legacy server refuses the method it does not know.
            peer.answer(
                &request.id,
                Reply::Error(ErrorObject::new(-32601, "method not found")),
            );
            continue;
        }
        let result = match request.method.as_str() {
            "initialize" => json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                "serverInfo": {"name": "memory", "version": "1"}}),
            "tools/list" => json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}),
            "tools/call" => {
                json!({"content": [], "structuredContent": params["arguments"]})
            }
            other => panic!("unexpected {other}"),
        };
        peer.answer(&request.id, Reply::Result(raw(result)));
        if request.method == "tools/call" {
            return peer;
        }
    }
    peer
}

#[tokio::test]
async fn setup_and_a_call_go_through_the_stack_over_memory() {
    let (transport, peer) = memory::pair("memory");
    let server = tokio::spawn(serve(peer));
    let connection = ServerConnection::over(
        transport,
        ClientSettings::default(),
        ConnectionContext::default(),
    );
    let connection = connection.set_up().await.expect("set up");
    let setup = connection.setup();
    assert_eq!(
        setup.protocol,
        ProtocolVersion::parse_session("2025-06-18").expect("known")
    );
    let answer = connection
        .call("echo", json!({"said": "hi"}))
        .await
        .expect("a call");
    assert_eq!(answer.value, json!({"said": "hi"}));
    let peer = server.await.expect("the peer");
    assert_eq!(peer.protocol(), Some(setup.protocol));
    assert!(peer.setup_ended(), "the transport was told setup is over");
    let card = connection.card();
    assert_eq!(card.transport, "memory");
    assert_eq!(card.era.as_str(), "session");
    assert_eq!(
        card.stdout.messages, 4,
        "server/discover's refusal, then initialize, tools/list and the call's answers"
    );
    let report = connection.close().await;
    assert!(report.status.is_none());
}
