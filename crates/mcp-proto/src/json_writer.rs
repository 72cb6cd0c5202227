//! Writing JSON in one pass, fast for what MCP tools move: long strings that need no
//! escaping (a base64 file chunk, most text) are copied between quotes after a check that
//! runs 64 bytes at a time, rather than escaped one byte at a time as `serde_json` does.
//! Everything written is byte for byte what `serde_json::to_vec` writes (property-tested).

use serde_json::Value;

use crate::jsonrpc::RequestId;
use crate::large_buffers::LARGE_BUFFERS;

/// Appends `value` as compact JSON: byte for byte what `serde_json::to_writer` writes.
///
/// ```
/// use maljan_mcp_proto::json_writer::write_value;
/// let value = serde_json::json!({"content_base64": "QUJD", "offset": 0});
/// let mut out = Vec::new();
/// write_value(&mut out, &value);
/// assert_eq!(out, serde_json::to_vec(&value).unwrap());
/// ```
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, key);
                out.push(b':');
                write_value(out, item);
            }
            out.push(b'}');
        }
        // null, booleans and numbers: writing them into a Vec cannot fail.
        scalar => {
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
}

/// Appends a JSON string: copied between quotes when nothing in it needs escaping,
/// escaped by serde_json otherwise.
///
/// ```
/// use maljan_mcp_proto::json_writer::write_str;
/// let mut out = Vec::new();
/// write_str(&mut out, "say \"hi\"");
/// assert_eq!(out, br#""say \"hi\"""#);
/// ```
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    if needs_no_escape(s.as_bytes()) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        // Writing a string into a Vec cannot fail.
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

/// About the bytes `value` takes as JSON when strings dominate it (a file chunk): the
/// length of its keys and strings, a little for the rest. For sizing a buffer.
///
/// ```
/// use maljan_mcp_proto::json_writer::size_hint;
/// let value = serde_json::json!({"content_base64": "A".repeat(1000)});
/// assert!(size_hint(&value) >= serde_json::to_vec(&value).unwrap().len());
/// ```
pub fn size_hint(value: &Value) -> usize {
    match value {
        Value::String(s) => s.len() + 2,
        Value::Array(items) => items.iter().map(size_hint).sum::<usize>() + items.len() + 2,
        Value::Object(map) => {
            map.iter()
                .map(|(k, v)| k.len() + 4 + size_hint(v))
                .sum::<usize>()
                + 2
        }
        _ => 8,
    }
}

/// A JSON-RPC request line, `{"jsonrpc":"2.0","id":…,"method":…,"params":…}` and a
/// newline, written in one pass into a buffer of about its size: byte for byte the line
/// of the same [`Request`](crate::jsonrpc::Request) with its params serialized by serde.
/// A large line's buffer comes from [`LARGE_BUFFERS`]: give it back there once written.
///
/// ```
/// use maljan_mcp_proto::json_writer::request_line;
/// use maljan_mcp_proto::jsonrpc::RequestId;
/// let line = request_line(&RequestId::Integer(7), "tools/call", &serde_json::json!({"name": "t"}));
/// assert_eq!(line, b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"t\"}}\n");
/// ```
pub fn request_line(id: &RequestId, method: &str, params: &Value) -> Vec<u8> {
    let mut line = LARGE_BUFFERS.take(size_hint(params) + method.len() + 64);
    line.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    // Writing an id (a number or a string) into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut line, id);
    line.extend_from_slice(b",\"method\":");
    write_str(&mut line, method);
    line.extend_from_slice(b",\"params\":");
    write_value(&mut line, params);
    line.extend_from_slice(b"}\n");
    line
}

/// Whether no byte is a control character, `"` or `\`: the bytes JSON escapes. Checked 64
/// bytes at a time without branching inside a block, which the compiler turns into wide
/// vector compares.
fn needs_no_escape(bytes: &[u8]) -> bool {
    bytes.chunks(64).all(|block| {
        block.iter().fold(0u8, |escape, &b| {
            escape | u8::from(b < 0x20) | u8::from(b == b'"') | u8::from(b == b'\\')
        }) == 0
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::value::to_raw_value;

    use super::*;
    use crate::jsonrpc::{Message, Request};

    fn any_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            "[ -~\\n\\t\"\\\\\u{7f}\u{e9}\u{1f600}]{0,80}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::btree_map(any::<String>(), inner, 0..8)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn any_id() -> impl Strategy<Value = RequestId> {
        prop_oneof![
            any::<i64>().prop_map(RequestId::Integer),
            any::<String>().prop_map(RequestId::String),
        ]
    }

    proptest! {
        #[test]
        fn values_are_written_byte_for_byte_as_serde_json_writes_them(value in any_json()) {
            let mut fast = Vec::new();
            write_value(&mut fast, &value);
            prop_assert_eq!(fast, serde_json::to_vec(&value).expect("serializes"));
        }

        #[test]
        fn request_lines_are_the_lines_of_the_same_request(
            id in any_id(),
            method in any::<String>(),
            params in any_json(),
        ) {
            let line = request_line(&id, &method, &params);
            let through_serde = Message::Request(Request {
                id,
                method,
                params: Some(to_raw_value(&params).expect("serializes")),
            })
            .to_line();
            prop_assert_eq!(line, through_serde);
        }
    }
}
