//! The JSON Lines sink under any entries and any crash point, and the failure summary.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use maljan_ledger::{
    CallRecord, CallScope, JsonLinesSink, Ledger, LedgerEntry, LedgerSink, MemorySink,
    failure_summary, message_shape, read_json_lines, render_summary, render_table,
};
use maljan_mcp_proto::maljan::{ErrorCode, Outcome, ToolFailure};
use proptest::prelude::*;
use serde_json::{Value, json};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(2, 12, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,5}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn outcome() -> impl Strategy<Value = Outcome> {
    prop_oneof![
        Just(Outcome::Ok),
        ("[a-z_]{1,20}", "\\PC{0,30}", prop::option::of("\\PC{0,30}")).prop_map(
            |(code, message, remediation)| {
                Outcome::Failed(ToolFailure::new(
                    ErrorCode::from(code.as_str()),
                    message,
                    remediation,
                ))
            }
        ),
    ]
}

fn entry() -> impl Strategy<Value = CallRecord> {
    (
        ("[a-z-]{1,10}", "[a-z_]{1,12}"),
        (json_value(), prop::option::of(json_value()), json_value()),
        outcome(),
        (0u64..4_000_000_000_000, any::<u32>(), any::<u32>()),
        (
            prop::option::of("/[a-z/]{1,12}"),
            prop::option::of("[0-9a-f]{1,8}"),
            prop::option::of("[a-z-]{1,8}"),
        ),
    )
        .prop_map(
            |(
                (server, tool),
                (arguments, sent_arguments, answer),
                outcome,
                (ms, dur, queued),
                (job, run, step),
            )| {
                let mut scope = CallScope::default();
                scope.job = job;
                scope.run = run;
                scope.step = step;
                CallRecord {
                    scope,
                    server,
                    protocol_version: None,
                    tool,
                    arguments,
                    sent_arguments,
                    answer,
                    outcome,
                    started_at: UNIX_EPOCH + Duration::from_millis(ms),
                    duration: Duration::from_micros(u64::from(dur)),
                    queued: Duration::from_micros(u64::from(queued)),
                }
            },
        )
}

fn write_all(path: &std::path::Path, calls: &[CallRecord]) -> Vec<LedgerEntry> {
    let ledger = Ledger::json_lines(path).expect("opens");
    calls
        .iter()
        .map(|c| ledger.record(c.clone()).expect("written"))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_entries_read_back_equal(calls in prop::collection::vec(entry(), 0..12)) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ledger.jsonl");
        let written = write_all(&path, &calls);
        let file = read_json_lines(&path).expect("reads");
        prop_assert_eq!(file.entries, written);
        prop_assert!(file.skipped.is_empty());
    }

    #[test]
    fn a_file_cut_anywhere_keeps_every_entry_completed_before_the_cut(
        calls in prop::collection::vec(entry(), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ledger.jsonl");
        let written = write_all(&path, &calls);
        let bytes = std::fs::read(&path).expect("read");
        let at = cut.index(bytes.len() + 1);
        std::fs::write(&path, &bytes[..at]).expect("cut");
        let complete = bytes[..at].iter().filter(|&&b| b == b'\n').count();
        let file = read_json_lines(&path).expect("reads");
        // A cut just before a newline leaves a whole entry without its newline: still read.
        let whole_tail = at > 0 && at < bytes.len() && bytes[at] == b'\n';
        let expected = complete + usize::from(whole_tail);
        prop_assert_eq!(&file.entries[..], &written[..expected]);
        let torn = at > 0 && bytes[at - 1] != b'\n' && !whole_tail;
        prop_assert_eq!(file.skipped.len(), usize::from(torn));
        if torn {
            prop_assert!(file.skipped[0].torn);
        }
    }
}

fn failed(server: &str, tool: &str, failure: ToolFailure) -> CallRecord {
    CallRecord {
        scope: Default::default(),
        server: server.into(),
        protocol_version: None,
        tool: tool.into(),
        arguments: json!({}),
        sent_arguments: None,
        answer: Value::Null,
        outcome: Outcome::Failed(failure),
        started_at: SystemTime::now(),
        duration: Duration::from_millis(1),
        queued: Duration::ZERO,
    }
}

#[test]
fn identical_failures_are_listed_once_with_their_count() {
    let memory = MemorySink::default();
    let ledger = Ledger::new().with_sink(memory.clone());
    let missing = ToolFailure::new(
        ErrorCode::MissingDependency,
        "zipinfo is not on PATH",
        Some("apt-get install unzip".into()),
    );
    let timeout = ToolFailure::new(ErrorCode::Unanswered, "no answer within 30 s", None);
    ledger
        .record(failed("sidecar", "archive_list", missing.clone()))
        .expect("recorded");
    ledger
        .record(failed("remote", "scan", timeout))
        .expect("recorded");
    ledger
        .record(failed("sidecar", "archive_list", missing))
        .expect("recorded");
    let summary = failure_summary(&memory.entries());
    assert_eq!(summary.len(), 2);
    assert_eq!(
        (summary[0].code.as_str(), summary[0].count),
        ("missing_dependency", 2)
    );
    assert_eq!(
        (summary[1].code.as_str(), summary[1].count),
        ("unanswered", 1)
    );
    let text = render_summary(&summary);
    assert!(
        text.contains("2× sidecar/archive_list: missing_dependency: zipinfo is not on PATH"),
        "{text}"
    );
    assert!(
        text.contains("remediation: apt-get install unzip"),
        "{text}"
    );
    let table = render_table(&memory.entries());
    assert_eq!(table.lines().count(), 4);
    assert!(
        table
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("1 ") && l.contains("missing_dependency"))
    );
}

#[test]
fn a_reopened_ledger_numbers_under_a_new_writer_and_ends_a_torn_line_first() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("nested/ledger.jsonl");
    let missing = ToolFailure::new(ErrorCode::MissingDependency, "m", None);
    write_all(&path, &[failed("s", "t", missing.clone())]);
    let mut bytes = std::fs::read(&path).expect("read");
    bytes.extend_from_slice(br#"{"seq":2,"server":"s""#);
    std::fs::write(&path, &bytes).expect("tear");
    let again = write_all(&path, &[failed("s", "t", missing)]);
    assert_eq!(again[0].seq, 1, "a new writer numbers from 1");
    let file = read_json_lines(&path).expect("reads");
    assert_eq!(
        file.entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
        [1, 1]
    );
    assert_ne!(file.entries[0].writer, file.entries[1].writer);
    assert_eq!(file.skipped.len(), 1);
    assert!(!file.skipped[0].torn, "ended with a newline by the reopen");
    let mut sink = JsonLinesSink::open(&path).expect("opens");
    assert!(sink.write(&file.entries[0]).is_ok());
}

#[test]
fn several_writers_appending_to_one_file_never_number_two_entries_alike() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ledger.jsonl");
    let writers: Vec<_> = (0..4)
        .map(|_| {
            let path = path.clone();
            std::thread::spawn(move || {
                let ledger = maljan_ledger::Ledger::json_lines(&path).expect("opens");
                for _ in 0..250 {
                    ledger
                        .record(failed(
                            "s",
                            "t",
                            ToolFailure::new(ErrorCode::Timeout, "t", None),
                        ))
                        .expect("records");
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().expect("a writer");
    }
    let file = read_json_lines(&path).expect("reads");
    assert!(
        file.skipped.is_empty(),
        "no line was torn or interleaved: {:?}",
        file.skipped
    );
    assert_eq!(file.entries.len(), 1000);
    let ids: std::collections::HashSet<(&str, u64)> = file
        .entries
        .iter()
        .map(|e| (e.writer.as_str(), e.seq))
        .collect();
    assert_eq!(
        ids.len(),
        1000,
        "every entry is told apart by its writer and number"
    );
}

#[test]
fn entries_written_before_writer_ids_are_still_read() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("old.jsonl");
    std::fs::write(
        &path,
        concat!(
            r#"{"seq":7,"server":"s","tool":"t","arguments":{},"answer":null,"#,
            r#""outcome":{"status":"ok"},"started_at":"2025-01-01T00:00:00.000Z","#,
            r#""duration_us":5,"queued_us":0}"#,
            "\n"
        ),
    )
    .expect("write");
    let file = read_json_lines(&path).expect("reads");
    assert!(file.skipped.is_empty(), "{:?}", file.skipped);
    assert_eq!(
        (file.entries[0].seq, file.entries[0].writer.as_str()),
        (7, "")
    );
}

#[test]
fn failures_that_differ_only_in_a_changing_number_are_one() {
    let memory = MemorySink::default();
    let ledger = Ledger::new().with_sink(memory.clone());
    for seconds in [60, 59, 7] {
        let resting = ToolFailure::new(
            ErrorCode::ServerResting,
            format!("server slow is resting for {seconds} s more after 3 unanswered calls"),
            Some("wait for the rest to end".to_owned()),
        );
        ledger
            .record(failed("slow", "scan", resting))
            .expect("recorded");
    }
    let other = ToolFailure::new(
        ErrorCode::ServerResting,
        "server slow is being probed",
        None,
    );
    ledger
        .record(failed("slow", "scan", other))
        .expect("recorded");
    let summary = failure_summary(&memory.entries());
    assert_eq!(summary.len(), 2, "{summary:?}");
    assert_eq!(summary[0].count, 3);
    assert!(
        summary[0].message.contains("60 s more"),
        "the first one's words"
    );
    assert_eq!(summary[1].count, 1);
}

proptest! {
    /// Replacing the numbers of a text by any others keeps its shape; changing a word does
    /// not.
    #[test]
    fn a_shape_is_the_text_without_its_numbers(
        words in prop::collection::vec("[a-z]{1,6}", 1..6),
        numbers in prop::collection::vec((0u64..100_000, 0u64..100_000), 1..6),
    ) {
        let text = |pick: fn(&(u64, u64)) -> u64| {
            words
                .iter()
                .zip(numbers.iter().cycle())
                .map(|(w, n)| format!("{w} {}", pick(n)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        prop_assert_eq!(message_shape(&text(|n| n.0)), message_shape(&text(|n| n.1)));
        let changed = format!("{} zz", text(|n| n.0));
        prop_assert_ne!(message_shape(&changed), message_shape(&text(|n| n.0)));
    }
}
