//! Runs end to end with real processes: the reference sidecar over stdio ("local") and over
//! Streamable HTTP ("remote"), a server that cannot start, a server killed mid-run.

mod support;

use std::process::Command;
use std::sync::Arc;

use maljan_client::{
    CallOptions, ClientSettings, ConnectionContext, EraChoice, Job, Ledger, Pack, PackInfo,
    ReportBuilder, Run, ServerCommand, ServerConfig, StepOutcome, StepStatus, distinct_failures,
};
use maljan_ledger::MemorySink;
use maljan_staging::{Disclosed, DisclosureOutcome};
use serde_json::json;
use support::{SIDECAR, start_http_sidecar, zip_with};

struct Setup {
    _dir: tempfile::TempDir,
    job: Arc<Job>,
    memory: MemorySink,
    /// What the run told its report.
    heard: Arc<ReportBuilder>,
    run: Run,
}

/// A job with a ZIP sample holding `payload.js` and `notes.txt`, and a run over `servers`.
fn run_over(servers: Vec<ServerConfig>) -> Setup {
    let members: [(&str, &[u8]); 2] = [
        ("payload.js", b"eval(atob('ZXZpbA=='))"),
        ("docs/notes.txt", b"nothing to see here"),
    ];
    run_of(&members, servers, ClientSettings::default())
}

/// A job with a ZIP sample of `members`, and a run over `servers` under `settings`.
fn run_of(
    members: &[(&str, &[u8])],
    servers: Vec<ServerConfig>,
    settings: ClientSettings,
) -> Setup {
    let dir = tempfile::tempdir().expect("temp dir");
    let archive = dir.path().join("sample.zip");
    std::fs::write(&archive, zip_with(members)).expect("sample");
    let job = Arc::new(Job::create(dir.path().join("job")).expect("job"));
    job.add_sample(&archive).expect("sample added");
    let memory = MemorySink::default();
    let context = ConnectionContext::default().with_ledger(Arc::new(Ledger::from(memory.clone())));
    let heard = Arc::new(ReportBuilder::default());
    let run = Run::new(job.clone(), servers, settings, context).recording_to(heard.clone());
    Setup {
        _dir: dir,
        job,
        memory,
        heard,
        run,
    }
}

fn local() -> ServerConfig {
    ServerConfig::stdio("local", ServerCommand::new(SIDECAR))
}

fn outcome<'a>(outcomes: &'a [StepOutcome], step: &str) -> Vec<&'a StepOutcome> {
    outcomes.iter().filter(|o| o.step == step).collect()
}

const TRIAGE: &str = r#"
[pack]
name = "archive triage"

[[step]]
id = "unpack"
server = "local"
tool = "unpack"
arguments = { path = "$sample" }
outputs = ["*"]

[[step]]
id = "info"
server = "remote"
tool = "file_info"
arguments = { path = "$unpack/*" }

[[step]]
id = "scripts"
server = "remote"
tool = "strings"
arguments = { path = "$unpack/payload.js", search = "eval" }
timeout_s = 60
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpack_on_one_server_hands_its_members_to_tools_on_another() {
    let http = start_http_sidecar();
    let setup = run_over(vec![local(), ServerConfig::http("remote", &http.url)]);
    let pack = Pack::parse(TRIAGE, "triage.toml").expect("pack");
    let outcomes = setup.run.execute(&pack).await.expect("accepted");

    let unpack = outcome(&outcomes, "unpack");
    assert_eq!(unpack.len(), 1);
    assert_eq!(unpack[0].status, StepStatus::Completed, "{:?}", unpack[0]);
    let mut names: Vec<&str> = unpack[0].handed.iter().map(|h| h.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["notes.txt", "payload.js"]);
    let payload = unpack[0]
        .handed
        .iter()
        .find(|h| h.name == "payload.js")
        .expect("payload handed");
    assert!(payload.path.ends_with("outputs/unpack/payload.js"));
    assert!(payload.path.starts_with(setup.job.dir()));

    // One run of file_info per member, on the other server.
    let info = outcome(&outcomes, "info");
    let mut instances: Vec<&str> = info.iter().filter_map(|o| o.instance.as_deref()).collect();
    instances.sort_unstable();
    assert_eq!(instances, ["notes.txt", "payload.js"]);
    for run in &info {
        assert_eq!(run.status, StepStatus::Completed, "{run:?}");
    }

    let scripts = outcome(&outcomes, "scripts");
    assert_eq!(scripts[0].status, StepStatus::Completed, "{:?}", scripts[0]);
    let answer = scripts[0].answer.as_ref().expect("an answer").to_string();
    assert!(answer.contains("eval"), "{answer}");

    // payload.js went to the remote server once, though two steps used it, under its name.
    let disclosures = setup.heard.disclosures();
    let payload_uploads: Vec<_> = disclosures
        .iter()
        .filter(|d| d.server == "remote" && d.name == "payload.js")
        .collect();
    assert_eq!(payload_uploads.len(), 1, "{disclosures:?}");
    assert!(matches!(
        &payload_uploads[0].what,
        Disclosed::ToolOutput { step: Some(step), tool } if step == "unpack" && tool == "unpack"
    ));
    assert!(
        matches!(
            payload_uploads[0].needed_by.as_deref(),
            Some("info" | "scripts")
        ),
        "sent for the step that named it: {:?}",
        payload_uploads[0].needed_by
    );
    let DisclosureOutcome::Sent { remote_path } = &payload_uploads[0].outcome else {
        panic!("sent: {:?}", payload_uploads[0]);
    };
    assert!(remote_path.ends_with("payload.js"), "{remote_path}");
    assert!(
        disclosures.iter().all(|d| d.server == "remote"),
        "the local server is never uploaded to"
    );

    // Every ledger entry names the job and run; each call its step, uploads included.
    let entries = setup.memory.entries();
    let run_id = setup.run.id().to_owned();
    for entry in &entries {
        assert_eq!(entry.call.scope.run.as_deref(), Some(run_id.as_str()));
        assert_eq!(
            entry.call.scope.job.as_deref(),
            Some(setup.job.dir().display().to_string().as_str())
        );
    }
    let upload_steps: Vec<_> = entries
        .iter()
        .filter(|e| e.call.tool.starts_with("put_sample"))
        .map(|e| e.call.scope.step.clone())
        .collect();
    assert!(!upload_steps.is_empty());
    assert!(
        upload_steps
            .iter()
            .all(|s| matches!(s.as_deref(), Some("info" | "scripts"))),
        "{upload_steps:?}"
    );

    let end = setup.run.finish().await;
    assert_eq!(end.servers.len(), 2);
    for server in &end.servers {
        assert_eq!(server.restarts, 0);
        assert!(server.card.is_some());
        assert!(server.counts().messages > 0, "{}", server.server);
    }

    // The report, as written into the job's directory.
    let info = PackInfo {
        origin: pack.origin().to_owned(),
        name: pack.name().map(str::to_owned),
    };
    assert_eq!(setup.heard.steps(), outcomes, "the report hears every step");
    let report = setup.heard.report(info, &setup.job, &end, false);
    let files = report.write(setup.job.dir()).expect("written");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&files.json).expect("report.json")).expect("JSON");
    assert_eq!(json["schema_version"], 1);
    assert_eq!(json["verdict"], "completed");
    assert_eq!(json["pack"]["name"], "archive triage");
    assert_eq!(json["sample"]["name"], "sample.zip");
    assert_eq!(json["failures"], json!([]));
    let scripts = json["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["step"] == "scripts")
        .expect("the scripts step");
    assert!(
        scripts["resolved"]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("outputs/unpack/payload.js")),
        "{scripts}"
    );
    assert!(
        scripts["sent_arguments"]["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("samples/payload.js")),
        "what the remote server was sent: {scripts}"
    );
    assert!(scripts["queued_ms"].is_u64());
    let uploads = json["disclosures"].as_array().expect("disclosures");
    assert!(uploads.iter().any(|d| d["name"] == "payload.js"
        && d["server"] == "remote"
        && d["what"]["step"] == "unpack"));
    let servers = json["servers"].as_array().expect("servers");
    assert_eq!(servers.len(), 2);
    assert!(servers.iter().all(|s| s["card"]["tools"].is_array()));
    let page = std::fs::read_to_string(&files.html).expect("report.html");
    assert!(page.contains("payload.js"));
    assert!(
        std::fs::read_to_string(&files.markdown)
            .expect("report.md")
            .contains("**RunVerdict: completed**")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_cannot_start_fails_its_steps_once_and_the_rest_goes_on() {
    let broken = ServerConfig::stdio(
        "broken",
        ServerCommand::new("sh")
            .arg("-c")
            .arg("echo 'libyara.so.10: cannot open shared object file' >&2; exit 3"),
    );
    let setup = run_over(vec![local(), broken]);
    let pack = Pack::parse(
        r#"
[[step]]
id = "yara"
server = "broken"
tool = "scan"
arguments = { path = "$sample" }
outputs = ["*.json"]

[[step]]
id = "yara-again"
server = "broken"
tool = "scan"
arguments = { path = "$sample" }

[[step]]
id = "matches"
server = "local"
tool = "strings"
arguments = { path = "$yara/hits.json" }

[[step]]
id = "info"
server = "local"
tool = "file_info"
arguments = { path = "$sample" }
"#,
        "p.toml",
    )
    .expect("pack");
    let outcomes = setup.run.execute(&pack).await.expect("accepted");
    assert_eq!(outcome(&outcomes, "info")[0].status, StepStatus::Completed);
    let failures = distinct_failures(&outcomes);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].server, "broken");
    assert_eq!(failures[0].count, 2);
    assert_eq!(failures[0].steps, ["yara", "yara-again"]);
    assert_eq!(failures[0].failure.code.as_str(), "server_unavailable");
    assert!(
        failures[0].failure.message.contains("libyara.so.10"),
        "the server's stderr tail: {}",
        failures[0].failure.message
    );
    let StepStatus::Skipped { reason } = &outcome(&outcomes, "matches")[0].status else {
        panic!("skipped");
    };
    assert!(
        reason.contains("its input $yara/hits.json never came: step yara failed"),
        "{reason}"
    );
    let end = setup.run.finish().await;
    let broken = end
        .servers
        .iter()
        .find(|s| s.server == "broken")
        .expect("broken");
    assert!(broken.card.is_none());
    assert_eq!(
        broken.restarts, 0,
        "a server that cannot start is not tried again"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_killed_mid_run_is_started_again_a_bounded_number_of_times() {
    let setup = run_over(vec![local()]);
    let sample = setup
        .job
        .sample()
        .expect("sample")
        .path
        .display()
        .to_string();
    let options = CallOptions::default().in_step("info");
    let call = || {
        setup
            .run
            .call("local", "file_info", json!({"path": sample}), &options)
    };
    assert!(call().await.is_ok());
    for round in 1..=3 {
        let connection = setup.run.connection("local").await.expect("connection");
        let pid = connection.server_pid().expect("a process");
        drop(connection);
        let killed = Command::new("kill").args(["-9", &pid.to_string()]).status();
        assert!(killed.expect("kill runs").success());
        // A call written before the kernel closed the dead server's stdin was in flight at
        // its death and fails connection_lost; one written after never reached it and goes
        // to the server started again. Which one the first call after the kill is, is the
        // kernel's timing: the call after it is the second kind either way.
        let mut again = call().await;
        if again.failure().map(|f| f.code.as_str()) == Some("connection_lost") {
            again = call().await;
        }
        if round <= 2 {
            assert!(again.is_ok(), "round {round}: {again:?}");
            let pid_now = setup
                .run
                .connection("local")
                .await
                .expect("connection")
                .server_pid();
            assert_ne!(pid_now, Some(pid), "a new process");
        } else {
            let failure = again.failure().expect("given up");
            assert!(
                failure
                    .message
                    .contains("is not started again (at most 2 restarts)")
                    && failure.message.contains("signal: 9 (SIGKILL)"),
                "{}",
                failure.message
            );
        }
    }
    let end = setup.run.finish().await;
    assert_eq!(end.servers[0].restarts, 2);
    assert_eq!(end.servers[0].connections.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pack_with_errors_is_refused_before_anything_runs() {
    let setup = run_over(vec![local()]);
    let pack = Pack::parse(
        r#"
[[step]]
id = "info"
server = "local"
tool = "file_info"
arguments = { path = "$sample" }

[[step]]
id = "yara"
server = "local"
tool = "yara_scan"
arguments = { path = "$sample" }
"#,
        "p.toml",
    )
    .expect("parsed");
    let errors = setup.run.execute(&pack).await.expect_err("refused");
    assert_eq!(errors.errors().len(), 1, "{errors}");
    assert_eq!(errors.errors()[0].line, 8);
    assert!(errors.to_string().contains("does not offer it"), "{errors}");
    let calls: Vec<_> = setup
        .memory
        .entries()
        .into_iter()
        .filter(|e| e.call.tool != "capabilities")
        .collect();
    assert!(calls.is_empty(), "nothing ran: {calls:?}");

    let unknown_server = Pack::parse(
        "[[step]]\nid = \"a\"\nserver = \"elsewhere\"\ntool = \"t\"\n",
        "p.toml",
    )
    .expect("parsed");
    let errors = setup
        .run
        .execute(&unknown_server)
        .await
        .expect_err("refused");
    assert!(
        errors
            .to_string()
            .contains("the configuration does not name"),
        "{errors}"
    );
    setup.run.finish().await;
}

const FAN_OUT: &str = r#"
[[step]]
id = "unpack"
server = "local"
tool = "unpack"
arguments = { path = "$sample" }
outputs = ["*"]

[[step]]
id = "info"
server = "local"
tool = "file_info"
arguments = { path = "$unpack/*" }
"#;

/// A run of [`FAN_OUT`] on an archive of `members` small files, under `settings`: the
/// outcomes and the tools the ledger saw called.
async fn fan_out(members: usize, settings: ClientSettings) -> (Vec<StepOutcome>, Vec<String>) {
    let names: Vec<String> = (0..members).map(|i| format!("m{i}.txt")).collect();
    let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), &b"x"[..])).collect();
    let setup = run_of(&files, vec![local()], settings);
    let pack = Pack::parse(FAN_OUT, "fan-out.toml").expect("pack");
    let outcomes = setup.run.execute(&pack).await.expect("runs");
    setup.run.finish().await;
    let called = setup
        .memory
        .entries()
        .into_iter()
        .map(|e| e.call.tool)
        .collect();
    (outcomes, called)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_glob_over_more_files_than_a_step_may_run_for_fails_the_step_without_a_call() {
    // The sidecar unpacks the first 10,000 members of 100,000 (its own cap): a glob over
    // them would be 10,000 calls.
    let (outcomes, called) = fan_out(100_000, ClientSettings::default()).await;
    let info = outcome(&outcomes, "info");
    assert_eq!(info.len(), 1, "one failed outcome, not 10,000 runs");
    let StepStatus::Failed { failure } = &info[0].status else {
        panic!("{:?}", info[0].status);
    };
    assert_eq!(failure.code.as_str(), "over_limit");
    assert!(
        failure.message.contains("10000") && failure.message.contains("1000 a step may"),
        "{failure:?}"
    );
    assert!(
        failure
            .remediation
            .as_deref()
            .is_some_and(|r| r.contains("core.run.max_instances_per_step")),
        "{failure:?}"
    );
    assert!(!called.iter().any(|t| t == "file_info"), "{called:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_stops_calling_at_its_cap_and_says_which_setting_raises_it() {
    let mut settings = ClientSettings::default();
    settings.run.max_calls = 3;
    let (outcomes, called) = fan_out(5, settings).await;
    let info = outcome(&outcomes, "info");
    assert_eq!(info.len(), 5);
    let refused: Vec<_> = info
        .iter()
        .filter_map(|o| match &o.status {
            StepStatus::Failed { failure } => Some(failure),
            _ => None,
        })
        .collect();
    assert_eq!(
        refused.len(),
        3,
        "the unpack and two runs of info were made"
    );
    for failure in refused {
        assert_eq!(failure.code.as_str(), "over_limit");
        assert!(failure.message.contains("3 calls"), "{failure:?}");
        assert!(
            failure
                .remediation
                .as_deref()
                .is_some_and(|r| r.contains("core.run.max_calls")),
            "{failure:?}"
        );
    }
    assert_eq!(
        called.iter().filter(|t| *t == "file_info").count(),
        2,
        "{called:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_stopped_during_an_upload_discloses_it_as_interrupted() {
    let remote = start_http_sidecar();
    let dir = tempfile::tempdir().expect("temp dir");
    let sample = dir.path().join("big.bin");
    let bytes: Vec<u8> = (0..64 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&sample, &bytes).expect("sample");
    let job = Arc::new(Job::create(dir.path().join("job")).expect("job"));
    job.add_sample(&sample).expect("sample added");
    let sending = Arc::new(tokio::sync::Notify::new());
    let told = sending.clone();
    let context = ConnectionContext::default().with_progress(maljan_client::ProgressReporter::new(
        move |p| {
            if p.direction == "upload" && p.done > 0 {
                told.notify_one();
            }
        },
    ));
    let heard = Arc::new(ReportBuilder::default());
    let run = Run::new(
        job.clone(),
        vec![ServerConfig::http("remote", &remote.url)],
        ClientSettings::default(),
        context,
    )
    .recording_to(heard.clone());
    let pack = Pack::parse(
        "[[step]]\nid = \"info\"\nserver = \"remote\"\ntool = \"file_info\"\narguments = { path = \"$sample\" }\n",
        "stop.toml",
    )
    .expect("pack");
    // Stopped as the run's stop signals stop it: the run's future is dropped mid-upload.
    tokio::select! {
        biased;
        () = sending.notified() => {}
        _ = run.execute(&pack) => panic!("the upload ended before the stop came"),
    }
    let end = run.finish().await;
    let info = PackInfo {
        origin: "stop.toml".to_owned(),
        name: None,
    };
    let report = heard.report(info, &job, &end, true);
    assert_eq!(report.disclosures.len(), 1, "{:?}", report.disclosures);
    let upload = &report.disclosures[0];
    assert_eq!(upload.server, "remote");
    assert_eq!(upload.name, "big.bin");
    assert_eq!(upload.size, bytes.len() as u64);
    assert_eq!(
        upload.outcome,
        maljan_client::report::v1::Upload::Interrupted
    );
    let markdown = report.to_markdown();
    assert!(markdown.contains("interrupted"), "{markdown}");
    assert!(!markdown.contains("Nothing was uploaded"), "{markdown}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_the_http_server_forgot_gets_a_new_one_and_the_sample_again() {
    let remote = start_http_sidecar();
    let mut settings = ClientSettings::default();
    settings.era = EraChoice::Session;
    let setup = run_of(
        &[("readme.txt", b"hello")],
        vec![ServerConfig::http("remote", &remote.url)],
        settings,
    );
    let sample = setup.job.sample().expect("a sample").path;
    let arguments = json!({"path": sample.display().to_string()});
    let options = CallOptions::default().in_step("info");
    let first = setup
        .run
        .call("remote", "file_info", arguments.clone(), &options)
        .await;
    assert!(first.is_ok(), "{first:?}");

    // The server restarts: the session the client holds, and the sample it was sent, are
    // gone. The next call finds 404 on its session before the server ran anything.
    let remote = remote.restart();
    let second = setup
        .run
        .call("remote", "file_info", arguments, &options)
        .await;
    assert!(second.is_ok(), "{second:?}");
    assert_eq!(second.value["size"], first.value["size"]);
    assert_eq!(second.value["sha256"], first.value["sha256"]);

    // The sample went to each server once; the call the lost session refused is
    // ledgered once, when it was made.
    let uploads = setup.heard.disclosures();
    assert_eq!(uploads.len(), 2, "{uploads:?}");
    assert!(
        uploads
            .iter()
            .all(|u| matches!(u.outcome, DisclosureOutcome::Sent { .. }))
    );
    let infos = setup
        .memory
        .entries()
        .iter()
        .filter(|e| e.call.tool == "file_info")
        .count();
    assert_eq!(infos, 2);

    let end = setup.run.finish().await;
    let server = &end.servers[0];
    assert_eq!(server.restarts, 1, "one new session");
    assert_eq!(server.losses.len(), 1);
    assert!(
        server.losses[0].failure.contains("session expired"),
        "{}",
        server.losses[0].failure
    );
    assert_eq!(server.losses[0].exit, None, "no process of its own");
    drop(remote);
}
