//! Writing answers as lines of JSON-RPC: a tool's result is written in one pass into a
//! buffer of about its size, with the protocol crate's fast writer (strings that need no
//! escaping, a base64 file chunk, are copied rather than escaped byte by byte).

use maljan_mcp_proto::json_writer::{size_hint, write_str, write_value};
use maljan_mcp_proto::jsonrpc::RequestId;
use serde::Serialize;
use serde_json::Value;

use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};

use crate::ToolResult;
use maljan_mcp_proto::large_buffers::LARGE_BUFFERS;

/// Structured answers holding a string longer than this are not repeated as text.
const TEXT_COPY_MAX_BYTES: usize = 1024 * 1024;

/// The largest answer a tool call may write, about: a `get_file` chunk of the largest size
/// fits; a larger answer is replaced by a `bad_argument` failure naming the limit, so that
/// no client is sent a line over its cap (32 MiB by default) to discard unread.
pub const MAX_ANSWER_BYTES: usize = 24 * 1024 * 1024;

/// A response line serialized in one pass, its result not first turned into raw JSON.
#[derive(Serialize)]
struct ResponseLine<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a T,
}

/// `{"jsonrpc":"2.0","id":…,"result":…}` and a newline.
pub(crate) fn response_line<T: Serialize>(id: &RequestId, result: &T) -> Vec<u8> {
    let mut line = serde_json::to_vec(&ResponseLine {
        jsonrpc: "2.0",
        id,
        result,
    })
    .unwrap_or_default();
    line.push(b'\n');
    line
}

/// The response line of a tool call: an MCP `CallToolResult` whose structured content is
/// the tool's value (or its error envelope, with `isError`), repeated as text for clients
/// that read only text, except when it holds a large string (a file chunk): then the text
/// says where it is, and the answer is not twice its size. The line and the value's large
/// strings come from and go back to the server's kept buffers.
pub(crate) fn tool_reply(id: &RequestId, result: ToolResult, tool: &str) -> Vec<u8> {
    let (value, is_error) = match result {
        Ok(value) => (value, false),
        Err(failure) => (failure.to_envelope(tool), true),
    };
    let structured = value.is_object();
    let repeated_as_text = !(structured && holds_large_string(&value, TEXT_COPY_MAX_BYTES));
    let size = size_hint(&value);
    let answer_bytes = size * (1 + usize::from(repeated_as_text && structured));
    if answer_bytes > MAX_ANSWER_BYTES {
        LARGE_BUFFERS.give_strings(value);
        let failure = ToolFailure::new(
            ErrorCode::BadArgument,
            format!(
                "the answer would be about {answer_bytes} bytes, over this server's limit of \
                 {MAX_ANSWER_BYTES} bytes an answer"
            ),
            Some("ask for less: a smaller limit, a shorter range, fewer search terms".to_owned()),
        );
        return tool_reply(id, Err(failure), tool);
    }
    let mut line = LARGE_BUFFERS.take(size * (1 + usize::from(repeated_as_text)) + 256);
    line.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    // Writing an id (a number or a string) into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut line, id);
    line.extend_from_slice(b",\"result\":{\"content\":[{\"type\":\"text\",\"text\":");
    if repeated_as_text {
        let mut text = Vec::with_capacity(size + 16);
        write_value(&mut text, &value);
        // JSON written from a Value is UTF-8.
        write_str(&mut line, &String::from_utf8_lossy(&text));
    } else {
        write_str(
            &mut line,
            "{\"structuredContent\": \"too large to repeat as text\"}",
        );
    }
    line.extend_from_slice(b"}]");
    if structured {
        line.extend_from_slice(b",\"structuredContent\":");
        write_value(&mut line, &value);
    }
    if is_error {
        line.extend_from_slice(b",\"isError\":true");
    }
    // The modern era requires a result to say its type; a legacy client ignores the field.
    line.extend_from_slice(b",\"resultType\":\"complete\"}}\n");
    LARGE_BUFFERS.give_strings(value);
    line
}

/// Whether any string in the value is longer than `limit` bytes.
fn holds_large_string(value: &Value, limit: usize) -> bool {
    match value {
        Value::String(s) => s.len() > limit,
        Value::Array(items) => items.iter().any(|v| holds_large_string(v, limit)),
        Value::Object(map) => map.values().any(|v| holds_large_string(v, limit)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use maljan_mcp_proto::mcp::{CallToolResult, ContentBlock};
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// A tool's value: a scalar, or an object of strings, numbers and lists (the writing of
    /// any JSON value is property-tested in the protocol crate's writer).
    fn any_tool_value() -> impl Strategy<Value = Value> {
        let field = prop_oneof![
            any::<String>().prop_map(Value::String),
            any::<i64>().prop_map(Value::from),
            prop::collection::vec(any::<String>().prop_map(Value::String), 0..4)
                .prop_map(Value::Array),
        ];
        prop_oneof![
            any::<i64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            prop::collection::btree_map("[a-z_]{1,12}", field, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    }

    /// The reply as the kit wrote it before this module, through serde, with the modern
    /// era's `resultType`.
    fn reply_through_serde(id: &RequestId, result: ToolResult, tool: &str) -> Value {
        let (value, is_error) = match result {
            Ok(value) => (value, None),
            Err(failure) => (failure.to_envelope(tool), Some(true)),
        };
        let structured = value.is_object();
        let text = if structured && holds_large_string(&value, TEXT_COPY_MAX_BYTES) {
            "{\"structuredContent\": \"too large to repeat as text\"}".to_owned()
        } else {
            value.to_string()
        };
        let result = CallToolResult {
            content: vec![ContentBlock::Text { text }],
            structured_content: structured.then_some(value),
            is_error,
        };
        let mut reply: Value = serde_json::from_slice(&response_line(id, &result)).expect("JSON");
        reply["result"]["resultType"] = json!("complete");
        reply
    }

    proptest! {
        #[test]
        fn tool_replies_say_what_serde_would(value in any_tool_value(), id in any::<i64>()) {
            let id = RequestId::Integer(id);
            let line = tool_reply(&id, Ok(value.clone()), "t");
            prop_assert_eq!(line.last(), Some(&b'\n'));
            let written: Value = serde_json::from_slice(&line).expect("one JSON line");
            prop_assert_eq!(written, reply_through_serde(&id, Ok(value), "t"));
        }
    }

    #[test]
    fn a_failure_and_a_file_chunk_are_written_as_serde_would() {
        let id = RequestId::String("a\"b".into());
        let failure = ToolFailure::new(ErrorCode::BadArgument, "bad \"x\"\n", None);
        let line = tool_reply(&id, Err(failure.clone()), "t");
        let written: Value = serde_json::from_slice(&line).expect("JSON");
        assert_eq!(written, reply_through_serde(&id, Err(failure), "t"));
        assert_eq!(written["result"]["isError"], true);

        let chunk = json!({"content_base64": "QUJD".repeat(TEXT_COPY_MAX_BYTES / 3), "size": 1});
        let line = tool_reply(&id, Ok(chunk.clone()), "get_file");
        let written: Value = serde_json::from_slice(&line).expect("JSON");
        assert_eq!(written, reply_through_serde(&id, Ok(chunk), "get_file"));
        assert!(
            written["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("too large"))
        );
    }
}
