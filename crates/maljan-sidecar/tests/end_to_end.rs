//! The real `maljan-sidecar` binary, driven by the real client over stdio.

use std::io::Write;

use maljan_client::{
    ClientSettings, ConnectionContext, ServerCommand, ServerConfig, ServerConnection,
};
use maljan_mcp_proto::maljan::ErrorCode;
use serde_json::json;
use sha2::{Digest, Sha256};

const SIDECAR: &str = env!("CARGO_BIN_EXE_maljan-sidecar");

/// A ZIP archive with two stored members: `readme.txt` and `bin/payload.exe`.
const ZIP_HEX: &str = "504b03041400000000009770825d86a6103605000000050000000a000000726561646d652e74787468656c6c6f504b03041400000000009770825d5d9bb08f02000000020000000f00000062696e2f7061796c6f61642e6578654d5a504b010214031400000000009770825d86a6103605000000050000000a0000000000000000000000800100000000726561646d652e747874504b010214031400000000009770825d5d9bb08f02000000020000000f000000000000000000000080012d00000062696e2f7061796c6f61642e657865504b05060000000002000200750000005c0000000000";

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

async fn connect(command: ServerCommand) -> ServerConnection {
    ServerConnection::connect(
        &ServerConfig::stdio("sidecar", command),
        ClientSettings::default(),
        ConnectionContext::default(),
    )
    .await
    .expect("the sidecar sets up")
}

/// The sidecar, reading files beneath `dir` as an operator's root.
async fn connect_reading(dir: &tempfile::TempDir) -> ServerConnection {
    let root = dir.path().to_str().expect("utf-8 path");
    connect(ServerCommand::new(SIDECAR).arg("--root").arg(root)).await
}

#[tokio::test]
async fn setup_card_and_file_info_give_the_true_size_and_digest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = connect_reading(&dir).await;
    let card = server.card();
    let tools: Vec<&str> = card.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["file_info", "strings", "archive_list", "unpack"]);
    assert_eq!(
        card.primitives,
        [
            "capabilities",
            "put_sample",
            "put_sample_begin",
            "put_sample_chunk",
            "put_sample_finish",
            "get_file"
        ]
    );
    assert!(card.manifest.is_some());
    assert_eq!(card.stdout.stray, 0);

    let mut sample = tempfile::NamedTempFile::new_in(&dir).expect("temp file");
    let bytes: Vec<u8> = (0..100_000u32).map(|i| (i * 7 % 251) as u8).collect();
    sample.write_all(&bytes).expect("write");
    let path = sample.path().to_str().expect("utf-8 path");
    let answer = server
        .call("file_info", json!({"path": path}))
        .await
        .expect("call");
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(answer.value["size"], 100_000);
    assert_eq!(
        answer.value["sha256"],
        format!("{:x}", Sha256::digest(&bytes))
    );
    let entropy = answer.value["entropy"].as_f64().expect("entropy");
    assert!(entropy > 7.9 && entropy <= 8.0, "{entropy}");

    let missing = server
        .call("file_info", json!({"path": "no/such/file"}))
        .await
        .expect("call");
    assert_eq!(
        missing.failure().map(|f| &f.code),
        Some(&ErrorCode::NoSuchFile)
    );
    // A host file outside the server's roots is refused, whether it exists or not: the
    // answer does not tell which.
    for outside in ["/etc/passwd", "/no/such/file", "../../../../etc/passwd"] {
        let refused = server
            .call("strings", json!({"path": outside}))
            .await
            .expect("call");
        let failure = refused.failure().expect("refused");
        assert_eq!(
            failure.code,
            ErrorCode::BadArgument,
            "{outside}: {failure:?}"
        );
        assert!(failure.message.contains("refused"), "{failure:?}");
    }

    let report = server.close().await;
    assert!(report.status.is_some_and(|s| s.success()), "{report:?}");
}

#[tokio::test]
async fn a_quoted_search_argument_is_read_unquoted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = connect_reading(&dir).await;
    let mut sample = tempfile::NamedTempFile::new_in(&dir).expect("temp file");
    sample
        .write_all(b"\x00\x01header\x00\xffthe needle is here\x00")
        .expect("write");
    let path = sample.path().to_str().expect("utf-8 path");
    let answer = server
        .call("strings", json!({"path": path, "search": "\"needle\""}))
        .await
        .expect("call");
    assert!(answer.is_ok(), "{answer:?}");
    let search = &answer.value["searches"][0];
    assert_eq!(search["search"], "\"needle\"");
    assert_eq!(search["read_as"], "needle");
    assert_eq!(search["found"], true);
    assert_eq!(search["offsets"], json!([14]));
    let texts: Vec<&str> = answer.value["strings"]
        .as_array()
        .expect("strings")
        .iter()
        .filter_map(|s| s["text"].as_str())
        .collect();
    assert_eq!(texts, ["header", "the needle is here"]);
    server.close().await;
}

#[tokio::test]
async fn the_optional_program_tool_without_its_program_answers_missing_dependency() {
    let empty_path = tempfile::tempdir().expect("temp dir");
    let command =
        ServerCommand::new(SIDECAR).env("PATH", empty_path.path().to_str().expect("utf-8"));
    let server = connect(command).await;
    let card = server.card();
    assert_eq!(card.unavailable.len(), 1);
    let unavailable = &card.unavailable[0];
    assert_eq!(unavailable.name, "archive_list");
    assert!(
        unavailable.reason.contains("zipinfo"),
        "{}",
        unavailable.reason
    );
    assert!(
        unavailable
            .remediation
            .as_deref()
            .is_some_and(|r| r.contains("apt-get install unzip"))
    );
    assert!(
        card.tools
            .iter()
            .any(|t| t.name == "archive_list" && !t.available)
    );

    let answer = server
        .call("archive_list", json!({"path": "/etc/hostname"}))
        .await
        .expect("call");
    let failure = answer.failure().expect("a failure");
    assert_eq!(failure.code, ErrorCode::MissingDependency);
    assert!(
        failure
            .remediation
            .as_deref()
            .is_some_and(|r| r.contains("apt-get install unzip"))
    );
    server.close().await;
}

#[tokio::test]
async fn the_optional_program_tool_with_its_program_lists_members() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = connect_reading(&dir).await;
    let card = server.card();
    assert!(
        card.unavailable.is_empty(),
        "zipinfo must be installed for the tests (cargo xtask ci installs unzip): {:?}",
        card.unavailable
    );
    let mut archive = tempfile::NamedTempFile::new_in(&dir).expect("temp file");
    archive.write_all(&unhex(ZIP_HEX)).expect("write");
    let path = archive.path().to_str().expect("utf-8 path");
    let answer = server
        .call("archive_list", json!({"path": path}))
        .await
        .expect("call");
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(
        answer.value["members"],
        json!(["readme.txt", "bin/payload.exe"])
    );
    server.close().await;
}

#[tokio::test]
async fn an_unknown_tool_is_refused_naming_the_tools() {
    let server = connect(ServerCommand::new(SIDECAR)).await;
    let error = server
        .call("no_such_tool", json!({}))
        .await
        .expect_err("refused");
    let text = error.to_string();
    assert!(
        text.contains("no_such_tool") && text.contains("file_info"),
        "{text}"
    );
    server.close().await;
}

#[test]
fn stdin_and_stdout_that_are_files_not_pipes_are_served_too() {
    let dir = tempfile::tempdir().expect("temp dir");
    let requests = dir.path().join("requests.jsonl");
    let answers = dir.path().join("answers.jsonl");
    std::fs::write(
        &requests,
        concat!(
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"capabilities","arguments":{}}}"#,
            "\n",
        ),
    )
    .expect("write");
    let status = std::process::Command::new(SIDECAR)
        .stdin(std::fs::File::open(&requests).expect("open"))
        .stdout(std::fs::File::create(&answers).expect("create"))
        .stderr(std::process::Stdio::null())
        .status()
        .expect("the sidecar runs");
    assert!(status.success());
    let text = std::fs::read_to_string(&answers).expect("answers");
    let replies: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(replies.len(), 2, "{text}");
    assert!(
        replies
            .iter()
            .any(|r| r["id"] == 1 && r["result"] == json!({}))
    );
    assert!(
        replies
            .iter()
            .any(|r| r["id"] == 2 && r["result"]["structuredContent"]["server"].is_string()),
        "{text}"
    );
}
