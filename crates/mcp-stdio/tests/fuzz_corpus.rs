//! Replays the committed fuzz corpus of the `classifier` target on stable Rust.

#[test]
fn the_classifier_corpus_replays_without_a_broken_invariant() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fuzz/corpus/classifier");
    let mut replayed = 0;
    for entry in std::fs::read_dir(dir).expect("the corpus is committed") {
        let path = entry.expect("a corpus entry").path();
        let data = std::fs::read(&path).expect("readable");
        maljan_mcp_stdio::fuzzing::classify_stream(&data);
        replayed += 1;
    }
    assert!(replayed >= 10, "only {replayed} corpus entries in {dir}");
}
