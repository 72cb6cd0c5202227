//! A whole run driven over the in-memory transport: a pack of twenty steps with fan-out over
//! globs, skipped steps, a server that cannot be set up and a resting one, and no process.
//! The clock is paused (a call never answered times out as soon as nothing else can run), so
//! the run is the same every time; it is carried out a hundred times in a row.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use maljan_client::{
    BreakerSettings, CallOptions, ClientSettings, ConnectionContext, Job, Ledger, Pack, Run,
    ServerCommand, ServerConfig, StepOutcome, StepStatus, distinct_failures,
};
use maljan_ledger::MemorySink;
use maljan_mcp_proto::maljan::ErrorCode;
use serde_json::json;
use support::memory_servers::InMemory;

/// Twenty steps over four servers.
const PACK: &str = r#"
[pack]
name = "in-memory triage"

[[step]]
id = "unpack"
server = "unpacker"
tool = "unpack"
arguments = { path = "$sample" }
outputs = ["*"]

[[step]]
id = "info"
server = "analyser"
tool = "info"
arguments = { path = "$unpack/*" }

[[step]]
id = "scripts"
server = "analyser"
tool = "strings"
arguments = { path = "$unpack/*.js" }

[[step]]
id = "all_hashes"
server = "analyser"
tool = "hash"
arguments = { paths = ["$unpack/*"] }

[[step]]
id = "payload"
server = "analyser"
tool = "info"
arguments = { path = "$unpack/a.js" }

[[step]]
id = "extract"
server = "unpacker"
tool = "extract"
arguments = { path = "$unpack/d.bin" }
outputs = ["*.cfg"]

[[step]]
id = "configs"
server = "analyser"
tool = "info"
arguments = { path = "$extract/*.cfg" }

[[step]]
id = "config_words"
server = "analyser"
tool = "strings"
arguments = { path = "$extract/x.cfg" }

[[step]]
id = "quiet"
server = "analyser"
tool = "entropy"
arguments = { path = "$extract/y.cfg" }

[[step]]
id = "entropy"
server = "analyser"
tool = "entropy"
arguments = { path = "$unpack/*" }

[[step]]
id = "pair"
server = "analyser"
tool = "hash"
arguments = { inner = { list = ["$unpack/a.js", "$unpack/b.js"] } }

[[step]]
id = "sample_info"
server = "analyser"
tool = "info"
arguments = { path = "$sample" }

[[step]]
id = "refused"
server = "analyser"
tool = "fail"
arguments = {}

[[step]]
id = "missing"
server = "analyser"
tool = "info"
arguments = { path = "$unpack/nope.exe" }

[[step]]
id = "broken_sample"
server = "broken"
tool = "scan"
arguments = { path = "$sample" }
outputs = ["out.txt"]

[[step]]
id = "broken_text"
server = "broken"
tool = "scan"
arguments = { path = "$unpack/c.txt" }

[[step]]
id = "after_broken"
server = "analyser"
tool = "info"
arguments = { path = "$broken_sample/out.txt" }

[[step]]
id = "ping"
server = "slowpoke"
tool = "ping"
arguments = {}

[[step]]
id = "ping_file"
server = "slowpoke"
tool = "ping"
arguments = { path = "$unpack/a.js" }

[[step]]
id = "last_words"
server = "analyser"
tool = "strings"
arguments = { path = "$unpack/c.txt" }
"#;

/// What a run of [`PACK`] came to, with its job kept alive.
struct InMemoryRun {
    outcomes: Vec<StepOutcome>,
    end: maljan_client::RunEnd,
    job: Arc<Job>,
    ledger: MemorySink,
    _dir: tempfile::TempDir,
}

fn config(name: &str) -> ServerConfig {
    // The connector plays every server in memory: the command is never run.
    ServerConfig::stdio(name, ServerCommand::new("/nonexistent/in-memory"))
}

/// Carries out [`PACK`] over the scripted servers, after one call to `slowpoke` that is
/// never answered has made it rest.
async fn run_pack() -> InMemoryRun {
    let dir = tempfile::tempdir().expect("temp dir");
    let sample = dir.path().join("sample.bin");
    std::fs::write(&sample, b"MZ sample bytes").expect("sample");
    let job = Arc::new(Job::create(dir.path().join("job")).expect("job"));
    job.add_sample(&sample).expect("sample added");
    let mut settings = ClientSettings::default();
    settings.default_timeout = Duration::from_secs(30);
    settings.breaker = BreakerSettings {
        unanswered_threshold: 1,
        rest_s: 600,
        ..BreakerSettings::default()
    };
    let ledger = MemorySink::default();
    let context = ConnectionContext::default().with_ledger(Arc::new(Ledger::from(ledger.clone())));
    let servers = ["unpacker", "analyser", "slowpoke", "broken"].map(config);
    let run = Run::new(job.clone(), servers, settings, context).connecting_with(InMemory);
    let hung = run
        .call(
            "slowpoke",
            "hang",
            json!({}),
            &CallOptions::default().in_step("warm_up"),
        )
        .await;
    assert_eq!(
        hung.failure().map(|f| &f.code),
        Some(&ErrorCode::Unanswered)
    );
    let pack = Pack::parse(PACK, "in-memory.toml").expect("pack");
    let outcomes = run.execute(&pack).await.expect("accepted");
    let end = run.finish().await;
    InMemoryRun {
        outcomes,
        end,
        job,
        ledger,
        _dir: dir,
    }
}

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
    let servers: BTreeMap<&str, u32> = run
        .end
        .servers
        .iter()
        .map(|s| (s.server.as_str(), s.restarts))
        .collect();
    assert_eq!(
        servers,
        BTreeMap::from([
            ("analyser", 0),
            ("broken", 0),
            ("slowpoke", 0),
            ("unpacker", 0)
        ])
    );
    assert!(run.job.dir().join("outputs/unpack/a.js").is_file());
}

#[tokio::test(start_paused = true)]
async fn a_twenty_step_pack_runs_in_memory_the_same_way_a_hundred_times() {
    for _ in 0..100 {
        let run = run_pack().await;
        check(&run);
    }
}
