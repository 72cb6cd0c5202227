//! A whole run driven over the in-memory transport: a pack of twenty-two steps with fan-out
//! over globs, skipped steps, a server that cannot be set up, one that dies and a resting
//! one, and no process.
//! The clock is paused (a call never answered times out as soon as nothing else can run), so
//! the run is the same every time; it is carried out a hundred times in a row.

mod support;

use std::collections::BTreeMap;

use maljan_client::{StepOutcome, StepStatus, distinct_failures};
use serde_json::json;
use support::memory_run::{InMemoryRun, run_pack};

/// Each step's outcomes as `status` words, runs sorted by instance.
fn statuses(outcomes: &[StepOutcome]) -> BTreeMap<String, Vec<String>> {
    let mut by_step: BTreeMap<String, Vec<(Option<String>, String)>> = BTreeMap::new();
    for outcome in outcomes {
        let status = match &outcome.status {
            StepStatus::Completed => "completed".to_owned(),
            StepStatus::Failed { failure } => format!("failed {}", failure.code.as_str()),
            StepStatus::Skipped { .. } => "skipped".to_owned(),
            other => format!("{other:?}"),
        };
        by_step
            .entry(outcome.step.clone())
            .or_default()
            .push((outcome.instance.clone(), status));
    }
    by_step
        .into_iter()
        .map(|(step, mut runs)| {
            runs.sort();
            (step, runs.into_iter().map(|(_, s)| s).collect())
        })
        .collect()
}

fn check(run: &InMemoryRun) {
    let statuses = statuses(&run.outcomes);
    let expected: BTreeMap<String, Vec<String>> = [
        ("unpack", vec!["completed"]),
        ("info", vec!["completed"; 4]),
        ("scripts", vec!["completed"; 2]),
        ("all_hashes", vec!["completed"]),
        ("payload", vec!["completed"]),
        ("extract", vec!["completed"]),
        ("configs", vec!["completed"; 2]),
        ("config_words", vec!["completed"]),
        ("quiet", vec!["completed"]),
        ("entropy", vec!["completed"; 4]),
        ("pair", vec!["completed"]),
        ("sample_info", vec!["completed"]),
        ("refused", vec!["failed tool_failed"]),
        ("missing", vec!["skipped"]),
        ("broken_sample", vec!["failed server_unavailable"]),
        ("broken_text", vec!["failed server_unavailable"]),
        ("after_broken", vec!["skipped"]),
        ("ping", vec!["failed server_resting"]),
        ("ping_file", vec!["failed server_resting"]),
        ("crash", vec!["failed connection_lost"]),
        ("outside", vec!["completed"]),
        ("last_words", vec!["completed"]),
    ]
    .into_iter()
    .map(|(step, s)| (step.to_owned(), s.into_iter().map(str::to_owned).collect()))
    .collect();
    assert_eq!(statuses, expected);

    let words = |step: &str| {
        run.outcomes
            .iter()
            .find(|o| o.step == step)
            .and_then(|o| o.answer.clone())
    };
    assert_eq!(words("all_hashes"), Some(json!({"hashed": 4})));
    assert_eq!(words("pair"), Some(json!({"hashed": 2})));
    assert_eq!(
        words("config_words"),
        Some(json!({"strings": ["size", "5"]})),
        "extract read the d.bin unpack handed over"
    );
    let failures = distinct_failures(&run.outcomes);
    let broken: Vec<_> = failures.iter().filter(|f| f.server == "broken").collect();
    assert_eq!(
        broken.len(),
        1,
        "one distinct failure for the broken server"
    );
    assert_eq!(broken[0].count, 2);
    assert!(
        broken[0].failure.message.contains("1999-01-01"),
        "{}",
        broken[0].failure.message
    );
    let resting: Vec<_> = failures.iter().filter(|f| f.server == "slowpoke").collect();
    assert_eq!(
        resting.len(),
        1,
        "one distinct failure for the resting server"
    );
    // The handed files: unpack's four, extract's two.
    let handed: usize = run.outcomes.iter().map(|o| o.handed.len()).sum();
    assert_eq!(handed, 6);
    // Every call made is ledgered once, the one that made slowpoke rest included; refused
    // calls (resting, unavailable) are ledgered too when they reached a connection.
    let ledgered = run.ledger.entries().len();
    let calls: usize = run
        .outcomes
        .iter()
        .filter(|o| {
            !matches!(&o.status, StepStatus::Skipped { .. })
                && !matches!(&o.status, StepStatus::Failed { failure }
                    if failure.code.as_str() == "server_unavailable")
        })
        .count();
    assert_eq!(ledgered, calls + 1, "{ledgered} ledgered");
    let servers: BTreeMap<&str, (u32, usize)> = run
        .end
        .servers
        .iter()
        .map(|s| (s.server.as_str(), (s.restarts, s.losses.len())))
        .collect();
    assert_eq!(
        servers,
        BTreeMap::from([
            ("analyser", (0, 0)),
            ("broken", (0, 0)),
            ("fragile", (0, 1)),
            ("slowpoke", (0, 0)),
            ("unpacker", (0, 0))
        ]),
        "fragile died under its one call, and nothing called it again"
    );
    let outside = run
        .outcomes
        .iter()
        .find(|o| o.step == "outside")
        .expect("run");
    assert!(
        matches!(&outside.taken[..], [maljan_client::TakenFile::NotTaken { reason, .. }]
            if reason.contains("/etc/hostname is refused")),
        "{:?}",
        outside.taken
    );
    assert!(run.job.dir().join("outputs/unpack/a.js").is_file());

    // The recorder heard every run start and every outcome, each start before its end,
    // and the one server lost.
    let count = |prefix: &str| run.events.iter().filter(|e| e.starts_with(prefix)).count();
    assert_eq!(count("finished "), run.outcomes.len());
    let ran = run
        .outcomes
        .iter()
        .filter(|o| !matches!(o.status, StepStatus::Skipped { .. }))
        .count();
    assert_eq!(count("started "), ran);
    assert_eq!(count("lost "), 1);
    let started = run.events.iter().position(|e| e == "started unpack");
    let finished = run.events.iter().position(|e| e == "finished unpack");
    assert!(started < finished, "{:?}", run.events);

    // Every call the ledger kept was an event; so was every file a step took or refused,
    // each before its step finished; the report's fold kept every step in the same order.
    assert_eq!(count("call "), run.ledger.entries().len());
    let taken: usize = run.outcomes.iter().map(|o| o.taken.len()).sum();
    assert_eq!(count("taken ") + count("not taken "), taken);
    let taken_a = run
        .events
        .iter()
        .position(|e| e.starts_with("taken ") && e.ends_with("/a.js"))
        .expect("a.js taken");
    assert!(Some(taken_a) < finished, "{:?}", run.events);
    let folded: Vec<_> = run.report.steps().iter().map(|o| o.step.clone()).collect();
    let outcomes: Vec<_> = run.outcomes.iter().map(|o| o.step.clone()).collect();
    assert_eq!(folded, outcomes);
    assert_eq!(run.report.taken().len(), taken);
}

#[tokio::test(start_paused = true)]
async fn a_twenty_two_step_pack_runs_in_memory_the_same_way_a_hundred_times() {
    for _ in 0..100 {
        let run = run_pack().await;
        check(&run);
    }
}
