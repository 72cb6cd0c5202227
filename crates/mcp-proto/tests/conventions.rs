//! Maljan's conventions: reading a tool's answer, error codes, version negotiation.

use maljan_mcp_proto::jsonrpc::ErrorObject;
use maljan_mcp_proto::maljan::{ErrorCode, Outcome, ToolAnswer, ToolFailure};
use maljan_mcp_proto::mcp::{CallToolResult, ProtocolVersion};
use serde_json::{Value, json};

fn read(result: Value) -> ToolAnswer {
    let result: CallToolResult = serde_json::from_value(result).expect("a CallToolResult");
    ToolAnswer::read(&result)
}

fn text(t: &str) -> Value {
    json!({"content": [{"type": "text", "text": t}]})
}

#[test]
fn structured_content_is_preferred_over_text() {
    let answer = read(json!({
        "content": [{"type": "text", "text": "{\"a\": 1}"}],
        "structuredContent": {"a": 2},
    }));
    assert_eq!(answer.value, json!({"a": 2}));
    assert!(answer.is_ok());
}

#[test]
fn a_single_text_block_is_parsed_as_json_else_kept_as_text() {
    assert_eq!(read(text("{\"size\": 3}")).value, json!({"size": 3}));
    assert_eq!(read(text("[1,2]")).value, json!([1, 2]));
    assert_eq!(read(text("plain words")).value, json!("plain words"));
}

#[test]
fn the_error_envelope_fails_the_call_in_both_forms() {
    let envelope = json!({"error": {"code": "no_such_file", "message": "gone",
        "remediation": "check the path"}, "tool": "file_info"});
    let answer = read(text(&envelope.to_string()));
    assert_eq!(
        answer.outcome,
        Outcome::Failed(ToolFailure::new(
            ErrorCode::NoSuchFile,
            "gone",
            Some("check the path".into())
        ))
    );
    let answer = read(text(r#"{"error": "the file is not served"}"#));
    assert_eq!(
        answer.failure(),
        Some(&ToolFailure::new(
            ErrorCode::ToolFailed,
            "the file is not served",
            None
        ))
    );
}

#[test]
fn an_unknown_code_is_kept_as_written() {
    let answer = read(json!({"content": [], "structuredContent":
        {"error": {"code": "quota_exceeded", "message": "m"}}}));
    assert_eq!(
        answer.failure().map(|f| f.code.as_str()),
        Some("quota_exceeded")
    );
    assert_eq!(
        serde_json::to_value(ErrorCode::from("quota_exceeded")).expect("json"),
        json!("quota_exceeded")
    );
}

#[test]
fn is_error_fails_the_call_with_the_text() {
    let answer = read(json!({"content": [{"type": "text", "text": "disk full"}], "isError": true}));
    assert_eq!(
        answer
            .failure()
            .map(|f| (f.code.clone(), f.message.as_str())),
        Some((ErrorCode::ToolFailed, "disk full"))
    );
}

#[test]
fn a_json_rpc_error_fails_as_rpc_error() {
    let answer = ToolAnswer::from_rpc_error(&ErrorObject::new(-32602, "unknown tool"));
    let failure = answer.failure().expect("failed");
    assert_eq!(failure.code, ErrorCode::RpcError);
    assert!(failure.message.contains("-32602") && failure.message.contains("unknown tool"));
}

#[test]
fn unknown_content_blocks_do_not_stop_the_answer_being_read() {
    let answer = read(json!({"content": [
        {"type": "hologram", "data": "?"},
        {"type": "image", "data": "AAAA", "mimeType": "image/png"}
    ]}));
    assert!(answer.is_ok());
    assert!(answer.value.is_array());
}

#[test]
fn versions_are_negotiated_from_the_supported_list() {
    for v in ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"] {
        assert_eq!(
            ProtocolVersion::parse_session(v)
                .expect("supported")
                .as_str(),
            v
        );
    }
    let refused = ProtocolVersion::parse_session("2026-07-28").expect_err("not spoken");
    assert!(refused.to_string().contains("2026-07-28"));
    assert!(ProtocolVersion::V2025_03_26.allows_batches());
    assert!(!ProtocolVersion::LATEST.allows_batches());
}
