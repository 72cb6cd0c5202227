//! The upload validator against servers whose answers are anything at all.

use maljan_staging::{UploadError, UploadMode, UploadValidator};
use proptest::prelude::*;
use serde_json::{Value, json};

const SHA: &str = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9";

/// Any JSON value a server may answer with, shallow.
fn any_answer() -> impl Strategy<Value = Value> {
    let scalar = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (0u64..40).prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "[a-f0-9]{0,64}".prop_map(Value::from),
        Just(Value::from(SHA)),
    ];
    let key = prop_oneof![
        Just("upload_id".to_owned()),
        Just("chunks_in_flight".to_owned()),
        Just("received".to_owned()),
        Just("path".to_owned()),
        Just("size".to_owned()),
        Just("sha256".to_owned()),
        "[a-z]{1,6}",
    ];
    prop_oneof![
        scalar.clone(),
        prop::collection::btree_map(key, scalar, 0..6)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
    ]
}

proptest! {
    /// Whatever the server answers, the validator answers with a result, never a panic, and
    /// completes only with a receipt stating the size and digest announced after every chunk
    /// the client sent was acknowledged up to the bytes sent.
    #[test]
    fn no_answer_makes_it_accept_less_than_the_bytes_announced(
        size in 0u64..40,
        reads in prop::collection::vec(0usize..16, 0..6),
        begin in any_answer(),
        chunks_in_flight in prop::option::of(any::<u64>()),
        chunk_answers in prop::collection::vec(any_answer(), 0..8),
        receipt in any_answer(),
    ) {
        let mut v = UploadValidator::new("l", "n", size, SHA, UploadMode::Chunked);
        if v.handle_begin_answer(&begin).is_ok() {
            prop_assert!(begin.get("upload_id").is_some_and(|id| !id.is_null()));
        }
        // Most of the time, a begin answer that lets the upload go on.
        let mut begun = json!({"upload_id": [begin], "chunks_in_flight": chunks_in_flight});
        if chunks_in_flight.is_none() {
            begun["chunks_in_flight"] = Value::Null;
        }
        v.handle_begin_answer(&begun).expect("an upload_id");
        let mut sent = 0u64;
        let mut answered = 0;
        for (i, len) in reads.iter().enumerate() {
            if !v.has_room() {
                let Some(answer) = chunk_answers.get(answered) else {
                    break;
                };
                answered += 1;
                if v.handle_chunk_answer(answer).is_err() {
                    return Ok(());
                }
            }
            prop_assert!(v.has_room(), "room after an answer (step {})", i);
            let call = v.handle_chunk_read(*len);
            prop_assert_eq!(call.arguments["offset"].as_u64(), Some(sent));
            sent += *len as u64;
            prop_assert_eq!(call.end, sent);
        }
        for answer in &chunk_answers[answered.min(chunk_answers.len())..] {
            if v.handle_chunk_answer(answer).is_err() {
                return Ok(());
            }
        }
        match v.handle_eof(size, SHA) {
            Ok(finish) => {
                prop_assert_eq!(sent, size);
                prop_assert!(finish.get("upload_id").is_some_and(|id| !id.is_null()));
            }
            Err(UploadError::ChangedDuringUpload { .. }) => prop_assert_ne!(sent, size),
            Err(_) => return Ok(()),
        }
        if let Ok(path) = v.finish(&receipt) {
            prop_assert_eq!(receipt["size"].as_u64(), Some(size));
            prop_assert_eq!(receipt["sha256"].as_str(), Some(SHA));
            prop_assert_eq!(receipt["path"].as_str(), Some(path.as_str()));
        }
    }

    /// A chunk answer is accepted only if it is silent about the bytes received or states
    /// exactly those sent up to that chunk.
    #[test]
    fn a_chunk_answer_never_moves_the_upload_elsewhere(
        lens in prop::collection::vec(1usize..10, 1..4),
        answer in any_answer(),
    ) {
        let mut v = UploadValidator::new("l", "n", 100, SHA, UploadMode::Chunked);
        v.handle_begin_answer(&json!({"upload_id": 1, "chunks_in_flight": 3})).expect("begun");
        for len in &lens {
            v.handle_chunk_read(*len);
        }
        let first_end = lens[0] as u64;
        match v.handle_chunk_answer(&answer) {
            Ok(end) => {
                prop_assert_eq!(end, first_end);
                let received = answer.get("received").and_then(Value::as_u64);
                prop_assert!(received.is_none() || received == Some(first_end));
            }
            Err(e) => {
                let refused_as_chunk_answer =
                    matches!(e, UploadError::Answer { tool: "put_sample_chunk", .. });
                prop_assert!(refused_as_chunk_answer, "{}", e);
            }
        }
    }
}
