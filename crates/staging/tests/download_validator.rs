//! The download validator against a model of a server that may lie.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use maljan_staging::{ChunkRequest, DownloadError, DownloadValidator};
use proptest::prelude::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

fn sha(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

/// An honest answer: at most `choice` bytes of what was asked.
fn honest(file: &[u8], request: &ChunkRequest, choice: u64) -> Value {
    let start = request.offset.min(file.len() as u64) as usize;
    let len = request.length.min(choice.max(1)) as usize;
    let end = (start + len).min(file.len());
    json!({"size": file.len(), "sha256": sha(file), "offset": request.offset,
        "content_base64": STANDARD.encode(&file[start..end])})
}

#[derive(Debug, Clone, Copy)]
enum Lie {
    NoSize,
    OtherSize,
    PastSize,
    LongerThanAsked,
    Empty,
    WrongOffset,
    OtherSha,
    WrongFinalSha,
}

fn lie() -> impl Strategy<Value = Lie> {
    prop_oneof![
        Just(Lie::NoSize),
        Just(Lie::OtherSize),
        Just(Lie::PastSize),
        Just(Lie::LongerThanAsked),
        Just(Lie::Empty),
        Just(Lie::WrongOffset),
        Just(Lie::OtherSha),
        Just(Lie::WrongFinalSha),
    ]
}

/// Runs a download against the model; `lie_at` picks the answer that lies.
fn run(
    file: &[u8],
    asked: u64,
    choices: &[u64],
    lie: Option<(Lie, usize)>,
) -> Result<Vec<u8>, DownloadError> {
    let mut v = DownloadValidator::new("out/f", asked);
    let mut got = Vec::new();
    // One buffer for every chunk, as the driver does: what a longer chunk left in it must
    // not show in a shorter one.
    let mut buffer = Vec::new();
    let mut index = 0;
    while let Some(request) = v.poll_request() {
        let mut answer = honest(file, &request, choices[index % choices.len()]);
        match lie {
            Some((Lie::WrongFinalSha, _)) => answer["sha256"] = json!(sha(b"something else")),
            Some((kind, at)) if at == index => {
                let size = file.len() as u64;
                match kind {
                    Lie::NoSize => drop(answer.as_object_mut().map(|m| m.remove("size"))),
                    Lie::OtherSize => answer["size"] = json!(size + 1),
                    Lie::PastSize => {
                        // Everything that remains and one byte more.
                        let tail: Vec<u8> = file[request.offset as usize..]
                            .iter()
                            .copied()
                            .chain([0u8])
                            .collect();
                        answer["content_base64"] = json!(STANDARD.encode(&tail));
                    }
                    Lie::LongerThanAsked => {
                        answer["content_base64"] =
                            json!(STANDARD.encode(vec![7u8; request.length as usize + 1]));
                    }
                    Lie::Empty => answer["content_base64"] = json!(""),
                    Lie::WrongOffset => answer["offset"] = json!(request.offset + 1),
                    Lie::OtherSha => answer["sha256"] = json!(sha(b"another file")),
                    Lie::WrongFinalSha => unreachable!(),
                }
            }
            _ => {}
        }
        let handled = v.handle_answer_into(&answer, &mut buffer);
        if handled.is_err() {
            assert!(buffer.is_empty(), "a refused answer leaves no bytes behind");
        }
        handled?;
        got.extend_from_slice(&buffer);
        index += 1;
    }
    v.finish()?;
    Ok(got)
}

proptest! {
    #[test]
    fn an_honest_server_is_always_accepted_whatever_its_chunk_sizes(
        file in prop::collection::vec(any::<u8>(), 0..3000),
        asked in 1u64..700,
        choices in prop::collection::vec(1u64..800, 1..8),
    ) {
        prop_assert_eq!(run(&file, asked, &choices, None).expect("accepted"), file);
    }

    #[test]
    fn every_lie_is_refused_with_its_own_error(
        file in prop::collection::vec(any::<u8>(), 1..3000),
        asked in 1u64..700,
        choices in prop::collection::vec(1u64..800, 1..8),
        lie in lie(),
        at in any::<prop::sample::Index>(),
    ) {
        // How many answers an honest download takes, to pick the lying one among them.
        let answers = {
            let mut v = DownloadValidator::new("out/f", asked);
            let mut n = 0;
            while let Some(r) = v.poll_request() {
                v.handle_answer(&honest(&file, &r, choices[n % choices.len()])).expect("honest");
                n += 1;
            }
            n
        };
        let at = at.index(answers);
        // Changing size or digest needs an earlier answer to change from.
        let needs_earlier = matches!(lie, Lie::OtherSize | Lie::OtherSha);
        prop_assume!(!needs_earlier || at >= 1);
        let error = run(&file, asked, &choices, Some((lie, at))).expect_err("a lie is refused");
        let matched = match lie {
            Lie::NoSize => matches!(error, DownloadError::MissingSize { .. }),
            Lie::OtherSize => matches!(error, DownloadError::SizeChanged { .. }),
            Lie::PastSize => matches!(error, DownloadError::ChunkPastSize { .. }),
            // More than asked is also past the size when the request reached the end.
            Lie::LongerThanAsked => matches!(error, DownloadError::ChunkLongerThanAsked { .. } | DownloadError::ChunkPastSize { .. }),
            Lie::Empty => matches!(error, DownloadError::EmptyChunkBeforeSize { .. }),
            Lie::WrongOffset => matches!(error, DownloadError::WrongOffset { .. }),
            Lie::OtherSha => matches!(error, DownloadError::DigestChanged { .. }),
            Lie::WrongFinalSha => matches!(error, DownloadError::DigestMismatch { .. }),
        };
        prop_assert!(matched, "{:?} refused as {:?}", lie, error);
    }
}

#[test]
fn a_refusal_carries_the_servers_words() {
    let mut v = DownloadValidator::new("../x", 4);
    let error = v
        .handle_answer(&json!({"error": "path escapes the job directory"}))
        .expect_err("refused");
    assert!(
        matches!(
            &error,
            DownloadError::NotServed { path, words }
                if path == "../x" && words == "path escapes the job directory"
        ),
        "{error:?}"
    );
}

#[test]
fn an_empty_file_is_one_empty_answer() {
    let mut v = DownloadValidator::new("empty", 4);
    let bytes = v
        .handle_answer(&json!({"size": 0, "sha256": sha(b""), "offset": 0, "content_base64": ""}))
        .expect("accepted");
    assert!(bytes.is_empty());
    assert_eq!(v.poll_request(), None);
    assert_eq!(v.finish().expect("complete").size, 0);
}
