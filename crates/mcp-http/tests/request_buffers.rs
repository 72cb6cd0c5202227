//! A large request's buffer goes back to the process's kept buffers once the request is
//! sent, for the next one to be written into. A test binary of its own: the kept buffers
//! are the process's, and no other test may take them meanwhile.

use axum::Router;
use axum::body::Bytes;
use axum::response::IntoResponse;
use axum::routing::post;
use maljan_mcp_http::{HttpConfig, HttpTransport};
use maljan_mcp_proto::jsonrpc::{DecodedLine, Message, Reply, decode_line};
use maljan_mcp_proto::large_buffers::LARGE_BUFFERS;
use serde_json::json;

/// Answers each request with an empty result, after reading it whole.
async fn answer(body: Bytes) -> impl IntoResponse {
    let id = match decode_line(&body, false) {
        DecodedLine::Message(Message::Request(request)) => request.id,
        other => panic!("not a request: {other:?}"),
    };
    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": {"length": body.len()}}))
}

#[tokio::test]
async fn a_large_requests_buffer_is_kept_for_the_next_once_sent() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}/mcp", listener.local_addr().expect("addr"));
    let app = Router::new().route("/mcp", post(answer));
    tokio::spawn(async move { axum::serve(listener, app).await });
    let http = HttpTransport::new(HttpConfig::new("kept", &url)).expect("a connection");

    // Two thousand short strings: a 2 MB request line, and no large string of its own to
    // be kept beside it.
    let params = json!({"pieces": vec!["p".repeat(1000); 2000]});
    let room = 3 << 20;
    let buffer = LARGE_BUFFERS.take(room);
    let address = buffer.as_ptr();
    LARGE_BUFFERS.give(buffer);

    let reply = http
        .request_json(http.next_id(), "tools/call", params, None)
        .await
        .expect("answered");
    let Reply::Result(result) = reply else {
        panic!("an error reply")
    };
    let length: serde_json::Value = serde_json::from_str(result.get()).expect("JSON");
    assert!(length["length"].as_u64().expect("a length") > 2_000_000);
    let next = LARGE_BUFFERS.take(room);
    assert_eq!(
        next.as_ptr(),
        address,
        "the line was written into the kept buffer and given back once sent"
    );
}
