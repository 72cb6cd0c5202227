//! Each fuzz target's committed corpus, replayed through the target's own entry point.

use std::path::PathBuf;

/// Every entry of `fuzz/corpus/target`, each given to `check`; the number replayed.
fn replay(target: &str, check: fn(&[u8])) -> usize {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).expect("the corpus is committed") {
        let data = std::fs::read(entry.expect("a corpus entry").path()).expect("readable");
        check(&data);
        replayed += 1;
    }
    replayed
}

#[test]
fn the_validator_corpus_replays_without_a_broken_invariant() {
    let replayed = replay("validator", maljan_mcp_proto::fuzzing::decode_and_reencode);
    assert!(replayed >= 10, "only {replayed} validator corpus entries");
}

#[test]
fn the_classifier_corpus_replays_without_a_broken_invariant() {
    let replayed = replay("classifier", maljan_mcp_stdio::fuzzing::classify_stream);
    assert!(replayed >= 10, "only {replayed} classifier corpus entries");
}

#[test]
fn the_sse_corpus_replays_without_a_broken_invariant() {
    let replayed = replay("sse", maljan_mcp_http::fuzzing::parse_sse);
    assert!(replayed >= 5, "only {replayed} sse corpus entries");
}
