//! Entry points for fuzzing and for replaying fuzz corpora in tests: each takes raw bytes
//! and panics when an invariant breaks.

use crate::jsonrpc::{DecodedLine, Message, decode_line, decode_line_buffer};

/// Decodes `data` as a line (batches allowed when its length is odd, to reach both paths)
/// and checks that every valid message re-encodes to a line that decodes to the same
/// message, that every refusal has a reason, and that decoding the line in its own buffer
/// ([`decode_line_buffer`]) comes to the same outcome.
///
/// ```
/// maljan_mcp_proto::fuzzing::decode_and_reencode(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
/// maljan_mcp_proto::fuzzing::decode_and_reencode(b"\xff not even UTF-8");
/// ```
pub fn decode_and_reencode(data: &[u8]) {
    let allow_batch = data.len() % 2 == 1;
    let decoded = decode_line(data, allow_batch);
    assert_eq!(
        format!("{:?}", decode_line_buffer(data.to_vec(), allow_batch)),
        format!("{decoded:?}"),
        "decoding in the line's buffer came to another outcome"
    );
    match decoded {
        DecodedLine::Message(message) => check_round_trip(&message),
        DecodedLine::Batch(messages) => {
            assert!(!messages.is_empty(), "an empty batch was accepted");
            messages.iter().for_each(check_round_trip);
        }
        DecodedLine::Invalid(invalid) => {
            assert!(
                !invalid.reason.to_string().is_empty(),
                "a refusal without a reason"
            );
        }
        DecodedLine::NotProtocol => {}
    }
}

fn check_round_trip(message: &Message) {
    let line = message.to_json();
    match decode_line(line.as_bytes(), false) {
        DecodedLine::Message(again) => {
            assert_eq!(again.to_json(), line, "re-encoding changed the message");
            assert_eq!(again.id(), message.id());
        }
        other => panic!("a valid message re-encoded to {line:?}, which decodes as {other:?}"),
    }
}
