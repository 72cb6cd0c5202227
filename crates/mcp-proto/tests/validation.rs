//! Message validation: every invalid shape is refused with its reason; valid messages
//! round-trip.

use maljan_mcp_proto::jsonrpc::{
    DecodedLine, ErrorObject, ErrorResponse, InvalidReason, JsonKind, Message, Notification,
    RawJson, Request, RequestId, Response, decode_line, decode_line_buffer,
};
use maljan_mcp_proto::large_buffers::{LARGE_BUFFERS, MIN_KEPT_BYTES};
use proptest::prelude::*;
use serde_json::value::RawValue;
use serde_json::{Value, json};

fn invalid(line: &str) -> (InvalidReason, Option<RequestId>) {
    match decode_line(line.as_bytes(), false) {
        DecodedLine::Invalid(i) => (i.reason, i.id),
        other => panic!("{line} should be invalid, got {other:?}"),
    }
}

#[test]
fn each_invalid_shape_is_refused_with_its_reason() {
    let table: &[(&str, &str)] = &[
        (r#"{"jsonrpc":"2.0","id":null,"result":{}}"#, "id is null"),
        (
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            r#"jsonrpc is "1.0""#,
        ),
        (r#"{"jsonrpc":2,"id":1,"result":{}}"#, "jsonrpc is 2"),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#,
            "both result and error",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#,
            "id is a fractional number, not a string or an integer",
        ),
        (
            r#"{"jsonrpc":"2.0","id":{},"result":{}}"#,
            "id is an object, not a string or an integer",
        ),
        (
            r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#,
            "id is a boolean, not a string or an integer",
        ),
        (
            r#"{"jsonrpc":"2.0","id":99999999999999999999,"result":{}}"#,
            "id is an integer outside the 64-bit range",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            "method is an integer, not a string",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":"p"}"#,
            "params is a string, not an object or an array",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"x","result":{}}"#,
            "a message with method also has result",
        ),
        (r#"{"jsonrpc":"2.0","result":{}}"#, "result without id"),
        (
            r#"{"jsonrpc":"2.0","id":1}"#,
            "none of method, result or error",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"error":"boom"}"#,
            "error is a string, not an object",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":"x","message":"m"}}"#,
            "error.code is a string, not an integer",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"error":{"message":"m"}}"#,
            "error.code is missing, not an integer",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":null}}"#,
            "error.message is null, not a string",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"id":2,"result":{}}"#,
            "member id appears twice",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":"#,
            "not valid JSON: EOF while parsing a value at line 1 column 33",
        ),
        (
            r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
            "a batch (JSON array) of messages, allowed only under protocol 2025-03-26",
        ),
    ];
    for (line, reason) in table {
        assert_eq!(invalid(line).0.to_string(), *reason, "for {line}");
    }
}

#[test]
fn a_readable_id_is_kept_with_the_reason() {
    let (reason, id) =
        invalid(r#"{"jsonrpc":"2.0","id":"a-1","result":{},"error":{"code":1,"message":"m"}}"#);
    assert_eq!(reason, InvalidReason::ResultAndError);
    assert_eq!(id, Some(RequestId::from("a-1")));
    let (_, id) = invalid(r#"{"jsonrpc":"2.0","id":null,"result":{}}"#);
    assert_eq!(id, None);
}

#[test]
fn lines_that_are_not_protocol_claims_are_not_protocol() {
    for line in [
        "Downloading 50%",
        r#"{"level":"info","msg":"x"}"#,
        "42",
        r#""a string""#,
        "[1, 2, 3]",
        "{not json at all",
        "",
    ] {
        assert!(
            matches!(
                decode_line(line.as_bytes(), false),
                DecodedLine::NotProtocol
            ),
            "{line}"
        );
    }
    assert_eq!(JsonKind::of_raw("-3"), JsonKind::Integer);
}

#[test]
fn batches_are_read_when_allowed_and_each_element_validated() {
    let batch = r#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","method":"n"}]"#;
    match decode_line(batch.as_bytes(), true) {
        DecodedLine::Batch(messages) => assert_eq!(messages.len(), 2),
        other => panic!("{other:?}"),
    }
    let bad = r#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":null,"result":{}}]"#;
    match decode_line(bad.as_bytes(), true) {
        DecodedLine::Invalid(i) => assert_eq!(i.reason.to_string(), "batch element 1: id is null"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_error_response_may_lack_an_id() {
    let line = r#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"parse error"}}"#;
    match decode_line(line.as_bytes(), false) {
        DecodedLine::Message(Message::Error(e)) => {
            assert_eq!(e.id, None);
            assert_eq!(e.error.code, -32700);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_long_request_decoded_in_its_buffer_gives_the_buffer_back() {
    let data = "A".repeat(MIN_KEPT_BYTES);
    let line =
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"d":"{data}"}}}}"#);
    let kept = LARGE_BUFFERS.kept_count();
    let DecodedLine::Message(Message::Request(request)) =
        decode_line_buffer(line.into_bytes(), false)
    else {
        panic!("a request");
    };
    assert_eq!(request.params.expect("params").get().len(), data.len() + 8);
    assert_eq!(
        LARGE_BUFFERS.kept_count(),
        kept + 1,
        "the line's buffer, its params copied out, is kept for the next long line"
    );
}

fn raw(value: &Value) -> Box<RawValue> {
    serde_json::value::to_raw_value(value).expect("serializable")
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[ -~\\PC]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn structured() -> impl Strategy<Value = Value> {
    prop_oneof![
        prop::collection::btree_map("[a-z_]{1,6}", json_value(), 0..4)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        prop::collection::vec(json_value(), 0..4).prop_map(Value::from),
    ]
}

fn request_id() -> impl Strategy<Value = RequestId> {
    prop_oneof![
        any::<i64>().prop_map(RequestId::Integer),
        "[ -~\\PC]{0,16}".prop_map(RequestId::String),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        (
            request_id(),
            "[a-z/_]{1,20}",
            prop::option::of(structured())
        )
            .prop_map(|(id, method, params)| {
                Message::Request(Request {
                    id,
                    method,
                    params: params.as_ref().map(raw),
                })
            }),
        ("[a-z/_]{1,20}", prop::option::of(structured())).prop_map(|(method, params)| {
            Message::Notification(Notification {
                method,
                params: params.as_ref().map(raw),
            })
        }),
        (request_id(), json_value()).prop_map(|(id, result)| {
            Message::Response(Response {
                id,
                result: RawJson::from(raw(&result)),
            })
        }),
        (
            prop::option::of(request_id()),
            any::<i64>(),
            "[ -~]{0,20}",
            prop::option::of(json_value())
        )
            .prop_map(|(id, code, message, data)| {
                Message::Error(ErrorResponse {
                    id,
                    error: ErrorObject {
                        code,
                        message,
                        data: data.as_ref().map(raw),
                    },
                })
            }),
    ]
}

proptest! {
    #[test]
    fn valid_messages_round_trip(message in message()) {
        let line = message.to_json();
        match decode_line(line.as_bytes(), false) {
            DecodedLine::Message(decoded) => {
                prop_assert_eq!(decoded.to_json(), line);
                prop_assert_eq!(std::mem::discriminant(&decoded), std::mem::discriminant(&message));
                prop_assert_eq!(decoded.id(), message.id());
            }
            other => prop_assert!(false, "{line} decoded as {other:?}"),
        }
    }

    #[test]
    fn objects_without_jsonrpc_are_never_protocol(fields in prop::collection::btree_map("[a-z_]{1,8}", json_value(), 0..6)) {
        let mut object: serde_json::Map<String, Value> = fields.into_iter().collect();
        object.remove("jsonrpc");
        let line = Value::Object(object).to_string();
        prop_assert!(matches!(decode_line(line.as_bytes(), false), DecodedLine::NotProtocol));
    }

    #[test]
    fn a_line_decodes_alike_in_its_own_buffer(
        message in message(),
        lead in "[ \t]{0,2}",
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
        allow_batch in any::<bool>(),
    ) {
        let mut line = format!("{lead}{}", message.to_json()).into_bytes();
        for (at, byte) in flips {
            let i = at.index(line.len());
            line[i] = byte;
        }
        prop_assert_eq!(
            format!("{:?}", decode_line_buffer(line.clone(), allow_batch)),
            format!("{:?}", decode_line(&line, allow_batch))
        );
    }

    #[test]
    fn any_bytes_decode_without_panicking(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = decode_line(&bytes, true);
    }

    #[test]
    fn a_null_id_is_always_refused(method in prop::option::of("[a-z]{1,8}"), result in json_value()) {
        let line = match method {
            Some(m) => json!({"jsonrpc": "2.0", "id": null, "method": m}),
            None => json!({"jsonrpc": "2.0", "id": null, "result": result}),
        }
        .to_string();
        prop_assert_eq!(invalid(&line).0, InvalidReason::NullId);
    }
}
