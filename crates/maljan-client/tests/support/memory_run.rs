//! A run of a twenty-step pack over the scripted in-memory servers: what the run and the
//! report tests share.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use maljan_client::{
    BreakerSettings, CallOptions, ClientSettings, ConnectionContext, Job, Ledger, Pack,
    ReportBuilder, Run, RunEvent, ServerCommand, ServerConfig, StepOutcome, TakenFile,
};
use maljan_ledger::MemorySink;
use maljan_mcp_proto::maljan::ErrorCode;
use serde_json::json;

use super::memory_servers::InMemory;

/// Twenty-two steps over five servers.
pub(crate) const PACK: &str = r#"
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
id = "crash"
server = "fragile"
tool = "crash"
arguments = {}

[[step]]
id = "outside"
server = "unpacker"
tool = "escape"
arguments = {}
outputs = ["*"]

[[step]]
id = "last_words"
server = "analyser"
tool = "strings"
arguments = { path = "$unpack/c.txt" }
"#;

/// What a run of [`PACK`] came to, with its job kept alive.
pub(crate) struct InMemoryRun {
    /// What the run's recorder heard, in order: `started STEP`, `finished STEP`, `lost
    /// SERVER`, `call TOOL`, `taken PATH`, `not taken PATH`, `upload NAME`, `uploaded NAME`,
    /// `degraded SUBJECT`.
    pub(crate) events: Vec<String>,
    /// The report's fold of the same events.
    pub(crate) report: Arc<ReportBuilder>,
    pub(crate) outcomes: Vec<StepOutcome>,
    pub(crate) end: maljan_client::RunEnd,
    pub(crate) job: Arc<Job>,
    pub(crate) ledger: MemorySink,
    pub(crate) dir: tempfile::TempDir,
}

fn config(name: &str) -> ServerConfig {
    // The connector plays every server in memory: the command is never run.
    ServerConfig::stdio(name, ServerCommand::new("/nonexistent/in-memory"))
}

/// Carries out [`PACK`] over the scripted servers, after one call to `slowpoke` that is
/// never answered has made it rest.
pub(crate) async fn run_pack() -> InMemoryRun {
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
    let servers = ["unpacker", "analyser", "slowpoke", "broken", "fragile"].map(config);
    let events: Arc<Mutex<Vec<String>>> = Arc::default();
    let heard = events.clone();
    let report = Arc::new(ReportBuilder::default());
    let run = Run::new(job.clone(), servers, settings, context)
        .connecting_with(InMemory)
        .recording_to(report.clone())
        .recording_to(move |event: &RunEvent<'_>| {
            let word = match event {
                RunEvent::StepStarted { step, .. } => format!("started {step}"),
                RunEvent::StepFinished(outcome) => format!("finished {}", outcome.step),
                RunEvent::ServerLost { server, .. } => format!("lost {server}"),
                RunEvent::CallMade(call) => format!("call {}", call.tool),
                RunEvent::FileTaken(TakenFile::Taken { path, .. }) => format!("taken {path}"),
                RunEvent::FileTaken(TakenFile::NotTaken { path, .. }) => {
                    format!("not taken {path}")
                }
                RunEvent::UploadStarted { disclosure, .. } => format!("upload {}", disclosure.name),
                RunEvent::UploadEnded { disclosure, .. } => format!("uploaded {}", disclosure.name),
                RunEvent::Degraded(degradation) => format!("degraded {}", degradation.subject),
                _ => format!("{event:?}"),
            };
            heard.lock().expect("events").push(word);
        });
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
    let events = std::mem::take(&mut *events.lock().expect("events"));
    InMemoryRun {
        events,
        report,
        outcomes,
        end,
        job,
        ledger,
        dir,
    }
}
