//! A run's report, field by field, for a run with a failure, a degraded staging, a file not
//! taken and an upload: the misbehaving server over stdio ("local") and a kit server over
//! Streamable HTTP that takes uploads of at most 16 bytes ("remote").

use std::sync::Arc;

use maljan_client::{
    ClientSettings, ConnectionContext, Job, Pack, PackInfo, ReportBuilder, Run, ServerCommand,
    ServerConfig,
};
use maljan_sidecar_kit::{Server, ToolSpec, TransferLimits};
use serde_json::{Value, json};

const SERVER: &str = env!("CARGO_BIN_EXE_misbehaving-server");

const PACK: &str = r#"
[pack]
name = "report fields"

[[step]]
id = "echo"
server = "local"
tool = "echo"
arguments = { files = [{ path = "big.bin" }, { path = "/etc/hostname" }] }
outputs = ["*"]

[[step]]
id = "big"
server = "remote"
tool = "look"
arguments = { path = "$echo/big.bin" }

[[step]]
id = "small"
server = "remote"
tool = "look"
arguments = { path = "$sample" }

[[step]]
id = "stuck"
server = "local"
tool = "never"
timeout_s = 0.3
"#;

/// A kit server over HTTP on loopback: `look {path}` answers the path it was given.
async fn remote() -> String {
    let server = Server::builder("remote-kit", "1")
        .file_transfer_with(TransferLimits::default().max_upload_bytes(16))
        .tool(
            ToolSpec::new("look", "Answers the path it was given")
                .required_string("path", "a file"),
            |args, _ctx| Ok(json!({"looked_at": args.string("path")?})),
        )
        .build();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a port");
    let url = format!("http://{}/mcp", listener.local_addr().expect("bound"));
    tokio::spawn(server.serve_http(listener));
    url
}

fn step<'a>(report: &'a Value, id: &str) -> &'a Value {
    report["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .find(|s| s["step"] == id)
        .unwrap_or_else(|| panic!("step {id} in {report}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_names_a_failure_a_degraded_staging_a_file_not_taken_and_an_upload() {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = Arc::new(Job::create(dir.path().join("job")).expect("job"));
    let sample = dir.path().join("sample.bin");
    std::fs::write(&sample, b"ten bytes!").expect("sample");
    job.add_sample(&sample).expect("sample added");
    // The file the local server's echo names, in its own staging directory.
    let server_dir = job.server_dir("local");
    std::fs::create_dir_all(&server_dir).expect("server dir");
    std::fs::write(server_dir.join("big.bin"), vec![7u8; 100]).expect("big.bin");

    let servers = [
        ServerConfig::stdio("local", ServerCommand::new(SERVER)),
        ServerConfig::http("remote", remote().await),
    ];
    let heard = Arc::new(ReportBuilder::default());
    let run = Run::new(
        job.clone(),
        servers,
        ClientSettings::default(),
        ConnectionContext::default(),
    )
    .recording_to(heard.clone());
    let pack = Pack::parse(PACK, "fields.toml").expect("pack");
    let outcomes = run.execute(&pack).await.expect("accepted");
    assert_eq!(outcomes.len(), heard.steps().len());
    let end = run.finish().await;
    let info = PackInfo {
        origin: pack.origin().to_owned(),
        name: pack.name().map(str::to_owned),
    };
    let files = heard
        .report(info, &job, &end, false)
        .write(job.dir())
        .expect("written");
    let report: Value =
        serde_json::from_slice(&std::fs::read(&files.json).expect("report.json")).expect("JSON");

    assert_eq!(report["schema_version"], 1);
    assert_eq!(report["verdict"], "degraded");
    assert_eq!(
        report["pack"],
        json!({"origin": "fields.toml", "name": "report fields"})
    );
    assert_eq!(report["sample"]["name"], "sample.bin");
    assert_eq!(report["sample"]["size"], 10);

    // The failure, once, with its step.
    let failures = report["failures"].as_array().expect("failures");
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["server"], "local");
    assert_eq!(failures[0]["failure"]["code"], "unanswered");
    assert_eq!(failures[0]["count"], 1);
    assert_eq!(failures[0]["steps"], json!(["stuck"]));
    assert!(failures[0]["failure"]["remediation"].is_string());

    // A file taken and one not taken, with the client's words.
    let echo = step(&report, "echo");
    assert_eq!(echo["status"]["status"], "completed");
    let taken = echo["taken"].as_array().expect("taken");
    assert_eq!(taken.len(), 2);
    assert_eq!(taken[0]["status"], "taken");
    assert_eq!(taken[0]["path"], "big.bin");
    assert_eq!(taken[0]["size"], 100);
    assert_eq!(taken[1]["status"], "not_taken");
    assert_eq!(taken[1]["path"], "/etc/hostname");
    assert!(
        taken[1]["words"]
            .as_str()
            .is_some_and(|w| w.contains("refused")),
        "{}",
        taken[1]
    );
    assert_eq!(echo["handed"][0]["name"], "big.bin");

    // The upload that was refused as too large: a degradation, the call made with the
    // local path.
    let degradations = report["degradations"].as_array().expect("degradations");
    assert_eq!(degradations.len(), 1, "{degradations:?}");
    assert_eq!(degradations[0]["server"], "remote");
    assert!(
        degradations[0]["subject"]
            .as_str()
            .is_some_and(|s| s.ends_with("outputs/echo/big.bin"))
    );
    assert!(
        degradations[0]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("put_sample_begin") && r.contains("local path")),
        "{}",
        degradations[0]
    );
    let big = step(&report, "big");
    assert_eq!(big["sent_arguments"], Value::Null, "sent as written");

    // The upload that went: in the disclosure block, and what the step was sent.
    let disclosures = report["disclosures"].as_array().expect("disclosures");
    let sent = disclosures
        .iter()
        .find(|d| d["name"] == "sample.bin")
        .expect("the sample's upload");
    assert_eq!(sent["server"], "remote");
    assert_eq!(sent["what"]["kind"], "sample", "{sent}");
    assert_eq!(sent["needed_by"], "small");
    assert_eq!(sent["size"], 10);
    assert_eq!(sent["mode"], "chunked");
    let remote_path = sent["remote_path"].as_str().expect("sent");
    let small = step(&report, "small");
    assert_eq!(small["sent_arguments"]["path"], remote_path);
    assert_eq!(small["answer"]["looked_at"], remote_path);
    assert!(small["queued_ms"].is_u64() && small["duration_ms"].is_u64());
    let refused = disclosures
        .iter()
        .find(|d| d["name"] == "big.bin")
        .expect("the refused upload is disclosed too");
    assert!(refused["reason"].is_string(), "{refused}");

    // The servers, each with its card and its connections' counts.
    let servers = report["servers"].as_array().expect("servers");
    let transports: Vec<&str> = servers
        .iter()
        .filter_map(|s| s["card"]["transport"].as_str())
        .collect();
    assert_eq!(transports, ["stdio", "http"]);
    assert!(
        servers
            .iter()
            .all(|s| s["connections"][0]["messages"].as_u64() > Some(0))
    );
}
