//! The queue, the ledger and the object store against a real PostgreSQL and a real Garage
//! node: `cargo xtask fleet` starts both and runs these (they are ignored otherwise).

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime};

use maljan_fleet::{
    LedgerQuery, Objects, ObjectsSettings, PostgresLedger, PostgresSettings, Queue, RunState,
    Secret, Submission, ledger_entries, ledger_failures,
};
use maljan_ledger::{CallRecord, CallScope, Ledger};
use maljan_mcp_proto::maljan::{ErrorCode, Outcome, ToolFailure};

fn variable(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run `cargo xtask fleet`"))
}

/// A new, empty database of the test cluster, and settings that name it.
async fn fresh_database() -> PostgresSettings {
    static COUNT: AtomicU32 = AtomicU32::new(0);
    let server = variable("MALJAN_TEST_POSTGRES");
    let name = format!(
        "fleet_{}_{}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed)
    );
    let admin = Queue::connect(&PostgresSettings::new(&server).expect("URL"))
        .await
        .expect("the test cluster answers");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(admin.pool())
        .await
        .expect("a database");
    let base = server
        .rsplit_once('/')
        .map_or(server.as_str(), |(base, _)| base);
    PostgresSettings::new(&format!("{base}/{name}")).expect("URL")
}

async fn migrated_queue() -> (Queue, PostgresSettings) {
    let settings = fresh_database().await;
    let queue = Queue::connect(&settings).await.expect("connected");
    queue.migrate().await.expect("migrated");
    (queue, settings)
}

fn submission(sample: &str, max_attempts: u32) -> Submission {
    Submission {
        pack_origin: "triage.toml".to_owned(),
        pack_text: "[[step]]\nid = \"a\"\nserver = \"s\"\ntool = \"t\"\n".to_owned(),
        sample_sha256: "0".repeat(64),
        sample_name: sample.to_owned(),
        max_attempts,
    }
}

#[tokio::test]
#[ignore = "needs PostgreSQL and Garage: cargo xtask fleet starts both"]
async fn the_schema_is_migrated_once_and_a_second_migration_applies_nothing() {
    let settings = fresh_database().await;
    let queue = Queue::connect(&settings).await.expect("connected");
    assert_eq!(queue.migrate().await.expect("first"), vec![1, 2]);
    assert!(queue.migrate().await.expect("second").is_empty());
}

#[tokio::test]
#[ignore = "needs PostgreSQL and Garage: cargo xtask fleet starts both"]
async fn two_workers_never_take_the_same_run_and_a_lost_lease_is_taken_again() {
    let (queue, _) = migrated_queue().await;
    let first = queue.submit(&submission("a.bin", 2)).await.expect("a");
    let second = queue.submit(&submission("b.bin", 2)).await.expect("b");
    let lease = Duration::from_secs(60);
    let (one, two) = tokio::join!(queue.take("w1", lease), queue.take("w2", lease));
    let (one, two) = (
        one.expect("w1").expect("a run"),
        two.expect("w2").expect("a run"),
    );
    assert_ne!(one.id, two.id);
    let mut taken = [one.id.clone(), two.id.clone()];
    taken.sort();
    let mut submitted = [first.clone(), second.clone()];
    submitted.sort();
    assert_eq!(taken, submitted);
    assert!(
        queue.take("w3", lease).await.expect("w3").is_none(),
        "both are leased"
    );

    // w1 stops renewing (as a killed worker would): once its lease runs out, w3 takes it.
    assert!(
        queue
            .renew(&one.id, "w1", Duration::from_millis(1))
            .await
            .expect("renew")
    );
    let again = loop {
        if let Some(run) = queue.take("w3", lease).await.expect("w3") {
            break run;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(again.id, one.id);
    assert_eq!(again.attempt, 2);
    assert!(
        !queue.renew(&one.id, "w1", lease).await.expect("renew"),
        "w1 lost it"
    );
    assert!(
        !queue
            .complete(&one.id, "w1", "completed", None)
            .await
            .expect("late"),
        "w1's end is not recorded"
    );
    assert!(
        queue
            .complete(&one.id, "w3", "completed", None)
            .await
            .expect("end")
    );
    let status = queue.status(&one.id).await.expect("status").expect("known");
    assert_eq!(status.state, RunState::Completed);
    assert_eq!(status.attempts, 2);
    assert_eq!(status.verdict.as_deref(), Some("completed"));
}

#[tokio::test]
#[ignore = "needs PostgreSQL and Garage: cargo xtask fleet starts both"]
async fn a_run_whose_workers_keep_dying_is_failed_with_why_and_a_hand_back_is_not_an_attempt() {
    let (queue, _) = migrated_queue().await;
    let id = queue.submit(&submission("a.bin", 2)).await.expect("a");
    let short = Duration::from_millis(1);
    let taken = queue
        .take("w1", Duration::from_secs(60))
        .await
        .expect("take")
        .expect("run");
    assert!(queue.hand_back(&taken.id, "w1").await.expect("back"));
    for worker in ["w2", "w3"] {
        let run = loop {
            if let Some(run) = queue.take(worker, short).await.expect("take") {
                break run;
            }
            tokio::task::yield_now().await;
        };
        assert_eq!(run.id, id);
    }
    // Both attempts lost their leases; the next take fails the run instead of a third try.
    let status = loop {
        assert!(queue.take("w4", short).await.expect("take").is_none());
        let status = queue.status(&id).await.expect("status").expect("known");
        if status.state == RunState::Failed {
            break status;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(status.attempts, 3);
    assert_eq!(status.handed_back, 1);
    let why = status.why.expect("why");
    assert!(why.contains("taken 2 times") && why.contains("w3"), "{why}");
    assert_eq!(queue.unfinished().await.expect("count"), 0);
}

fn call(run: &str, server: &str, failure: Option<&str>) -> CallRecord {
    CallRecord {
        scope: CallScope::default().job("/jobs/j1").run(run).step("s1"),
        server: server.to_owned(),
        protocol_version: Some("2025-06-18".to_owned()),
        tool: "file_info".to_owned(),
        arguments: serde_json::json!({"path": "$sample"}),
        sent_arguments: Some(serde_json::json!({"path": "/jobs/j1/sample.bin"})),
        answer: serde_json::json!({"ok": true}),
        outcome: match failure {
            None => Outcome::Ok,
            Some(message) => Outcome::Failed(ToolFailure::new(
                ErrorCode::ToolFailed,
                message.to_owned(),
                Some("try again in 5 s".to_owned()),
            )),
        },
        started_at: SystemTime::now(),
        duration: Duration::from_micros(1500),
        queued: Duration::ZERO,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs PostgreSQL and Garage: cargo xtask fleet starts both"]
async fn every_call_is_one_row_and_the_database_folds_failures_that_differ_by_a_number() {
    let (queue, settings) = migrated_queue().await;
    let ledger = PostgresLedger::start(&settings).expect("ledger");
    let calls = Ledger::new().with_sink(ledger.sink_for("fleet-run", 2));
    calls.record(call("r1", "sidecar", None)).expect("ok call");
    calls
        .record(call("r1", "sidecar", Some("pid 4012 died after 3.5 s")))
        .expect("1");
    calls
        .record(call("r1", "sidecar", Some("pid 977 died after 12.25 s")))
        .expect("2");
    calls
        .record(call("r1", "remote", Some("no such file")))
        .expect("3");
    calls
        .record(call("r2", "sidecar", Some("pid 1 died after 1 s")))
        .expect("other run");
    let pool = queue.pool();
    let one_run = LedgerQuery {
        run: Some("r1".to_owned()),
        ..LedgerQuery::default()
    };
    let (entries, unreadable) = ledger_entries(pool, &one_run, 100).await.expect("read");
    assert_eq!((entries.len(), unreadable), (4, 0));
    assert_eq!(
        entries[1].call.sent_arguments,
        call("r1", "s", None).sent_arguments
    );
    let failures = ledger_failures(pool, &one_run).await.expect("summary");
    assert_eq!(failures.len(), 2, "{failures:?}");
    assert_eq!(
        (failures[0].server.as_str(), failures[0].count),
        ("sidecar", 2)
    );
    assert_eq!(
        failures[0].message, "pid 4012 died after 3.5 s",
        "the first one's words"
    );
    assert_eq!(failures[0].code, ErrorCode::ToolFailed);
    assert_eq!(
        (failures[1].server.as_str(), failures[1].count),
        ("remote", 1)
    );
    let by_fleet_run = LedgerQuery {
        run: Some("fleet-run".to_owned()),
        server: Some("sidecar".to_owned()),
        ..LedgerQuery::default()
    };
    let (entries, _) = ledger_entries(pool, &by_fleet_run, 100)
        .await
        .expect("read");
    assert_eq!(entries.len(), 4, "every sidecar call of the fleet's run");
    let later = LedgerQuery {
        since: Some(SystemTime::now() + Duration::from_secs(3600)),
        ..LedgerQuery::default()
    };
    assert!(
        ledger_failures(pool, &later)
            .await
            .expect("none")
            .is_empty()
    );
}

fn garage() -> Objects {
    let settings = ObjectsSettings::new(format!(
        "s3://{}/objects-test-{}",
        variable("MALJAN_TEST_S3_BUCKET"),
        std::process::id()
    ))
    .with_endpoint(variable("MALJAN_TEST_S3_ENDPOINT"))
    .with_region("garage")
    .with_credentials(
        variable("MALJAN_TEST_S3_KEY_ID"),
        Secret::from_file(std::path::Path::new(&variable(
            "MALJAN_TEST_S3_SECRET_FILE",
        )))
        .expect("the key's secret"),
    );
    Objects::open(&settings).expect("the store")
}

#[tokio::test]
#[ignore = "needs PostgreSQL and Garage: cargo xtask fleet starts both"]
async fn a_sample_goes_to_the_object_store_once_and_comes_back_checked() {
    let objects = garage();
    let dir = tempfile::tempdir().expect("dir");
    let sample = dir.path().join("sample.bin");
    // Over the store's part size, so that it goes up in parts.
    let bytes: Vec<u8> = (0..11 * 1024 * 1024)
        .map(|i: u32| (i % 253) as u8)
        .collect();
    std::fs::write(&sample, &bytes).expect("sample");
    let first = objects.put_sample(&sample).await.expect("put");
    let second = objects.put_sample(&sample).await.expect("put again");
    assert!(first.uploaded && !second.uploaded);
    assert!(objects.has_sample(&first.sha256).await.expect("head"));
    let copy = dir.path().join("copy.bin");
    objects
        .fetch_sample(&first.sha256, &copy)
        .await
        .expect("get");
    assert_eq!(std::fs::read(&copy).expect("copy"), bytes);
    objects
        .put_report("run-1", "report.md", bytes::Bytes::from_static(b"# Run"))
        .await
        .expect("report");
    let report = objects.report("run-1", "report.md").await.expect("read");
    assert_eq!(report.as_deref(), Some(&b"# Run"[..]));
    assert!(
        objects
            .report("run-2", "report.md")
            .await
            .expect("read")
            .is_none()
    );
}
