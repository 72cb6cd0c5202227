//! The client against a real server process that misbehaves on stdout and stderr.

use std::time::Duration;

use maljan_client::{
    ClientError, ClientSettings, ConnectionContext, ServerCommand, ServerConfig, ServerConnection,
};
use maljan_mcp_proto::maljan::ErrorCode;
use serde_json::json;

const SERVER: &str = env!("CARGO_BIN_EXE_misbehaving-server");
/// Only a guard against a hang turning into a stuck test run; never a measure of speed.
const HANG_GUARD: Duration = Duration::from_secs(60);

fn config(flags: &[&str]) -> ServerConfig {
    let mut command = ServerCommand::new(SERVER);
    command.args = flags.iter().map(|f| (*f).to_owned()).collect();
    ServerConfig::stdio("misbehaving", command)
}

fn patient() -> ClientSettings {
    waiting(Duration::from_secs(600))
}

fn waiting(timeout: Duration) -> ClientSettings {
    let mut settings = ClientSettings::default();
    settings.default_timeout = timeout;
    settings
}

async fn connect(config: &ServerConfig, settings: ClientSettings) -> ServerConnection {
    ServerConnection::connect(config, settings, ConnectionContext::default())
        .await
        .expect("the server sets up")
}

#[tokio::test]
async fn banners_log_lines_and_json_records_on_stdout_do_not_break_calls() {
    let server = connect(&config(&["--banners", "5", "--chatty"]), patient()).await;
    for i in 0..3 {
        let answer = server.call("echo", json!({"i": i})).await.expect("call");
        assert!(answer.is_ok(), "{answer:?}");
        assert_eq!(answer.value, json!({"i": i}));
    }
    let answer = server.call("printed", json!({})).await.expect("call");
    let printed = answer.value["printed"].as_u64().expect("a count");
    // 5 banners, then 2 lines before each of 2 setup answers and 4 tool answers.
    assert_eq!(printed, 5 + 2 * 6);
    let counts = server.counts();
    assert_eq!(counts.stray, printed);
    // server/discover's refusal (a legacy server), 2 setup answers and 4 tool answers.
    assert_eq!(counts.messages, 7);
    assert_eq!(
        (counts.invalid, counts.oversized, counts.salvaged),
        (0, 0, 0)
    );
    let report = server.close().await;
    assert_eq!(report.counts.stray, printed);
}

#[tokio::test]
async fn non_utf8_on_stdout_ends_the_connection_and_fails_pending_calls_at_once() {
    let server = connect(&config(&[]), patient()).await;
    let both = async {
        tokio::join!(
            server.call("never", json!({})),
            server.call("not_utf8", json!({}))
        )
    };
    let (never, not_utf8) = tokio::time::timeout(HANG_GUARD, both)
        .await
        .expect("no hang");
    for answer in [never.expect("call"), not_utf8.expect("call")] {
        let failure = answer.failure().expect("failed").clone();
        assert_eq!(failure.code, ErrorCode::ConnectionLost);
        assert!(failure.message.contains("not UTF-8"), "{}", failure.message);
        assert!(
            failure.message.contains("byte offset"),
            "{}",
            failure.message
        );
    }
    let later = server.call("echo", json!({})).await.expect("call");
    assert_eq!(
        later.failure().map(|f| &f.code),
        Some(&ErrorCode::ConnectionLost)
    );
    let report = server.close().await;
    assert!(
        report.status.is_some(),
        "the child was shut down and reaped"
    );
}

#[tokio::test]
async fn eight_mebibytes_on_stderr_before_an_answer_do_not_block_the_server() {
    let server = connect(&config(&[]), patient()).await;
    let call = server.call("stderr_flood", json!({"bytes": 8 * 1024 * 1024}));
    let answer = tokio::time::timeout(HANG_GUARD, call)
        .await
        .expect("no hang")
        .expect("call");
    assert!(answer.is_ok(), "{answer:?}");
    let report = server.close().await;
    assert!(report.stderr_tail.lines().count() <= maljan_mcp_stdio::STDERR_TAIL_LINES);
    assert!(report.stderr_tail.ends_with(&"e".repeat(64)));
}

#[tokio::test]
async fn a_line_over_the_cap_is_discarded_and_the_next_message_delivered() {
    let mut config = config(&[]);
    config.stdio.classifier.max_line_bytes = 1024 * 1024;
    let server = connect(&config, patient()).await;
    let answer = server
        .call("huge_line", json!({"bytes": 40 * 1024 * 1024}))
        .await
        .expect("call");
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(server.counts().oversized, 1);
    server.close().await;
}

#[tokio::test]
async fn long_stray_lines_under_the_cap_are_counted_and_the_answers_after_them_delivered() {
    // Lines of 3 MiB: over the size the classifier decodes in the buffer it read them into.
    let server = connect(&config(&[]), patient()).await;
    let stray_before = server.counts().stray;
    for _ in 0..3 {
        let answer = server
            .call("huge_line", json!({"bytes": 3 * 1024 * 1024}))
            .await
            .expect("call");
        assert!(answer.is_ok(), "{answer:?}");
    }
    let counts = server.counts();
    assert_eq!(counts.stray, stray_before + 3, "{counts:?}");
    assert_eq!(counts.oversized, 0);
    server.close().await;
}

#[tokio::test]
async fn an_invalid_answer_fails_its_call_at_once_with_the_reason() {
    let server = connect(&config(&[]), patient()).await;
    let answer = tokio::time::timeout(HANG_GUARD, server.call("invalid", json!({})))
        .await
        .expect("no hang")
        .expect("call");
    let failure = answer.failure().expect("failed");
    assert_eq!(failure.code, ErrorCode::InvalidAnswer);
    assert!(
        failure.message.contains("both result and error"),
        "{}",
        failure.message
    );
    assert_eq!(server.counts().invalid, 1);
    server.close().await;
}

#[tokio::test]
async fn an_unanswered_call_is_cancelled_on_the_server() {
    let settings = waiting(Duration::from_millis(300));
    let server = connect(&config(&[]), settings).await;
    let answer = server.call("never", json!({})).await.expect("call");
    assert_eq!(
        answer.failure().map(|f| &f.code),
        Some(&ErrorCode::Unanswered)
    );
    let cancelled = server.call("cancelled", json!({})).await.expect("call");
    // Request ids: 1 server/discover, 2 initialize, 3 tools/list, 4 the `never` call.
    assert_eq!(cancelled.value["cancelled"], json!([4]));
    server.close().await;
}

#[tokio::test]
async fn answers_glued_to_progress_output_are_salvaged_during_setup_only() {
    let settings = waiting(Duration::from_millis(500));
    let server = connect(&config(&["--glue-setup"]), settings).await;
    let counts = server.counts();
    assert_eq!(counts.salvaged, 2, "the initialize and tools/list answers");
    assert_eq!(
        counts.stray, 1,
        "the progress bar; a byte-order mark alone is not stray"
    );
    let answer = server.call("glued", json!({})).await.expect("call");
    assert_eq!(
        answer.failure().map(|f| &f.code),
        Some(&ErrorCode::Unanswered)
    );
    let counts = server.counts();
    assert_eq!(counts.salvaged, 2, "nothing salvaged after setup");
    assert_eq!(counts.stray, 2, "the glued line is a stray line");
    server.close().await;
}

#[tokio::test]
async fn a_server_that_cannot_start_is_reported_with_its_exit_and_stderr() {
    let mut command = ServerCommand::new("sh");
    command.args = vec![
        "-c".into(),
        "echo 'fatal: no licence file' >&2; exit 3".into(),
    ];
    let error = ServerConnection::connect(
        &ServerConfig::stdio("broken", command),
        patient(),
        ConnectionContext::default(),
    )
    .await
    .expect_err("cannot start");
    let text = error.to_string();
    assert!(matches!(error, ClientError::SetupFailed { .. }), "{text}");
    assert!(text.contains("exit status: 3"), "{text}");
    assert!(text.contains("fatal: no licence file"), "{text}");

    let missing = ServerConfig::stdio("missing", ServerCommand::new("/no/such/server"));
    let error = ServerConnection::connect(&missing, patient(), ConnectionContext::default())
        .await
        .expect_err("no program");
    assert!(matches!(error, ClientError::Spawn(_)), "{error}");
    assert!(error.to_string().contains("/no/such/server"));
}

/// The live threads of this process with this name. A joined thread may still be listed
/// for a moment while the kernel releases it; it is then a zombie or dead (`Z`, `X`), not
/// live.
fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("the process's threads")
        .filter_map(|task| {
            let path = task.ok()?.path();
            let comm = std::fs::read_to_string(path.join("comm")).ok()?;
            let stat = std::fs::read_to_string(path.join("stat")).ok()?;
            // The state follows the name, which is in parentheses and may hold spaces.
            let state = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .next()?
                .to_owned();
            Some((comm, state))
        })
        .filter(|(comm, state)| comm.trim_end() == name && state != "Z" && state != "X")
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_multi_thread_runtime_stdout_is_read_on_a_thread_that_is_gone_once_closed() {
    let command = ServerCommand::new(SERVER);
    let server = connect(&ServerConfig::stdio("readerthread", command), patient()).await;
    // Thread names are cut to 15 bytes.
    assert_eq!(threads_named("stdout readerth"), 1);
    let answer = server.call("echo", json!({"i": 1})).await.expect("call");
    assert_eq!(answer.value, json!({"i": 1}));
    server.close().await;
    assert_eq!(threads_named("stdout readerth"), 0);
}

/// On a current-thread runtime the reader is a task of the runtime, which polls stdout
/// briefly after each request; answers come all the same, one call after another.
#[tokio::test(flavor = "current_thread")]
async fn on_a_current_thread_runtime_stdout_is_read_by_a_task() {
    let command = ServerCommand::new(SERVER);
    let server = connect(&ServerConfig::stdio("readertask", command), patient()).await;
    assert_eq!(threads_named("stdout readerta"), 0);
    for i in 0..50 {
        let answer = server.call("echo", json!({"i": i})).await.expect("call");
        assert_eq!(answer.value, json!({"i": i}));
    }
    server.close().await;
}

/// A setup request's `ends_setup` callback runs on the reader: this one panics.
fn panicking_end_of_setup(_: &maljan_mcp_proto::jsonrpc::RawJson) -> bool {
    panic!("a callback with a bug")
}

#[tokio::test]
async fn a_reader_that_panics_fails_every_pending_call_at_once() {
    use maljan_mcp_stdio::{LostBecause, StdioConfig, StdioError, StdioTransport};
    let connection =
        StdioTransport::spawn(&ServerCommand::new(SERVER), StdioConfig::named("panicky"))
            .expect("spawned");
    let raw = |value: serde_json::Value| serde_json::value::to_raw_value(&value).ok();
    let never = connection
        .send_request("tools/call", raw(json!({"name": "never", "arguments": {}})))
        .await
        .expect("sent");
    let initialize = connection
        .send_setup_request(
            "initialize",
            raw(json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "test", "version": "0"}})),
            panicking_end_of_setup,
        )
        .await
        .expect("sent");
    let (never, initialize) =
        tokio::time::timeout(HANG_GUARD, async { tokio::join!(never, initialize) })
            .await
            .expect("the calls fail instead of waiting");
    for failed in [never, initialize] {
        match failed {
            Err(StdioError::ConnectionLost { cause, .. }) => {
                assert!(matches!(cause, LostBecause::ReaderPanicked), "{cause}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(connection.failure().is_some());
    let report = connection.close().await;
    assert_eq!(report.counts.messages, 1, "the initialize answer was read");
}
