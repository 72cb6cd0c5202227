//! A run's servers against a misbehaving process: the breaker holds across steps (a server
//! that rested still rests when a later step calls it, and the call is not sent), and a server
//! whose stdout stops being UTF-8 is started again for the next call.

use std::sync::Arc;
use std::time::Duration;

use maljan_client::{
    BreakerSettings, CallOptions, ClientSettings, ConnectionContext, Job, Ledger, Pack, Run,
    ServerCommand, ServerConfig, StepStatus,
};
use maljan_ledger::MemorySink;
use maljan_mcp_proto::maljan::ErrorCode;
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_misbehaving-server");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resting_server_stays_resting_across_steps() {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = Arc::new(Job::create(dir.path()).expect("job"));
    let mut settings = ClientSettings::default();
    settings.default_timeout = Duration::from_millis(200);
    settings.breaker = BreakerSettings {
        unanswered_threshold: 2,
        ..BreakerSettings::default()
    };
    let memory = MemorySink::default();
    let context = ConnectionContext::default().with_ledger(Arc::new(Ledger::from(memory.clone())));
    let servers = [ServerConfig::stdio("slow", ServerCommand::new(SERVER))];
    let run = Run::new(job, servers, settings, context);

    for step in ["first", "second"] {
        let options = CallOptions::default().in_step(step);
        let answer = run.call("slow", "never", json!({}), &options).await;
        assert_eq!(
            answer.failure().map(|f| &f.code),
            Some(&ErrorCode::Unanswered),
            "{step}"
        );
    }
    let pack = Pack::parse(
        "[[step]]\nid = \"later\"\nserver = \"slow\"\ntool = \"echo\"\narguments = { x = 1 }\n",
        "p.toml",
    )
    .expect("pack");
    let outcomes = run.execute(&pack).await.expect("accepted");
    let StepStatus::Failed { failure } = &outcomes[0].status else {
        panic!("refused while resting: {:?}", outcomes[0]);
    };
    assert_eq!(
        failure.code,
        ErrorCode::ServerResting,
        "{}",
        failure.message
    );

    let end = run.finish().await;
    let report = &end.servers[0].connections[0];
    assert!(
        !report.stderr_tail.contains("received tools/call echo"),
        "the later step's call was never sent:\n{}",
        report.stderr_tail
    );
    let steps: Vec<Option<String>> = memory
        .entries()
        .iter()
        .filter(|e| e.call.tool != "capabilities")
        .map(|e| e.call.scope.step.clone())
        .collect();
    assert_eq!(
        steps,
        [
            Some("first".to_owned()),
            Some("second".to_owned()),
            Some("later".to_owned())
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_whose_stdout_is_not_utf8_is_started_again_for_the_next_call() {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = Arc::new(Job::create(dir.path()).expect("job"));
    let servers = [ServerConfig::stdio("garbled", ServerCommand::new(SERVER))];
    let run = Run::new(
        job,
        servers,
        ClientSettings::default(),
        ConnectionContext::default(),
    );
    let options = CallOptions::default().in_step("bytes");
    let broken = run.call("garbled", "not_utf8", json!({}), &options).await;
    assert_eq!(
        broken.failure().map(|f| &f.code),
        Some(&ErrorCode::ConnectionLost),
        "{broken:?}"
    );
    let again = run.call("garbled", "echo", json!({"n": 1}), &options).await;
    assert!(again.is_ok(), "{again:?}");
    let end = run.finish().await;
    assert_eq!(end.servers[0].restarts, 1);
    assert_eq!(end.servers[0].connections.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_stated_larger_than_the_disk_is_refused_at_its_first_answer() {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = Arc::new(Job::create(dir.path()).expect("job"));
    // Reached through a mount, so its files are taken through get_file.
    let mount = maljan_client::SampleMount {
        local: dir.path().to_owned(),
        remote: "/jobs".to_owned(),
    };
    let servers = [
        ServerConfig::stdio("boaster", ServerCommand::new(SERVER).arg("--boast-files"))
            .with_sample_mount(mount),
    ];
    let run = Run::new(
        job,
        servers,
        ClientSettings::default(),
        ConnectionContext::default(),
    );
    let pack = Pack::parse(
        "[[step]]\nid = \"names\"\nserver = \"boaster\"\ntool = \"echo\"\narguments = { files = [{ path = \"/jobs/big.bin\" }] }\noutputs = [\"*\"]\n",
        "p.toml",
    )
    .expect("pack");
    let outcomes = run.execute(&pack).await.expect("accepted");
    let taken = &outcomes[0].taken;
    assert_eq!(taken.len(), 1, "{:?}", outcomes[0]);
    let maljan_client::TakenFile::NotTaken { reason: words, .. } = &taken[0] else {
        panic!("taken: {taken:?}");
    };
    assert!(words.contains("1125899906842624 bytes"), "{words}");
    let end = run.finish().await;
    let tail = &end.servers[0].connections[0].stderr_tail;
    assert_eq!(
        tail.matches("received tools/call get_file").count(),
        1,
        "one answer read, not the file:\n{tail}"
    );
}
