//! Moving files between the client and the reference sidecar when the sidecar counts as
//! elsewhere: a real sidecar process reached over pipes, declared remote, with a job
//! directory of its own.

mod support;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use maljan_client::{
    ClientSettings, ConnectionContext, Job, Ledger, ProgressReporter, ReportBuilder,
    ServerConnection, StdioConfig, TakenFile,
};
use maljan_ledger::MemorySink;
use maljan_mcp_proto::maljan::{Outcome, ToolAnswer};
use maljan_mcp_stdio::StdioTransport;
use maljan_staging::{CHUNK_BYTES, Disclosed, DisclosureOutcome, UploadMode};
use serde_json::json;
use sha2::{Digest, Sha256};
use support::zip_with;

const SIDECAR: &str = env!("CARGO_BIN_EXE_maljan-sidecar");

struct Remote {
    server: ServerConnection,
    server_dir: tempfile::TempDir,
    _child: tokio::process::Child,
}

/// A real sidecar process over pipes, declared remote, with its own job directory. It may
/// read the client's job directory as one of its roots (a server on the same host), so a
/// call that goes out with a local path still works.
async fn remote_sidecar(context: ConnectionContext) -> Remote {
    let server_dir = tempfile::tempdir().expect("temp dir");
    let job_dir = context.job().map(|job| job.dir().to_owned());
    let mut child = tokio::process::Command::new(SIDECAR)
        .env("MALJAN_JOB_DIR", server_dir.path())
        .env("MALJAN_ROOTS", job_dir.unwrap_or_default())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the sidecar starts");
    let stdout = child.stdout.take().expect("stdout");
    let stdin = child.stdin.take().expect("stdin");
    let connection = StdioTransport::over(stdout, stdin, StdioConfig::named("remote"));
    let server = ServerConnection::over(connection, ClientSettings::default(), context)
        .remote(None)
        .set_up()
        .await
        .expect("sets up");
    Remote {
        server,
        server_dir,
        _child: child,
    }
}

/// Calls within `job`, ledgered in `memory`, their uploads and files told to `heard`.
fn context(job: &Arc<Job>, memory: &MemorySink, heard: &Arc<ReportBuilder>) -> ConnectionContext {
    ConnectionContext::default()
        .with_job(job.clone())
        .with_ledger(Arc::new(Ledger::from(memory.clone())))
        .recording_to(heard.clone())
}

fn sha(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

fn tools_called(memory: &MemorySink) -> Vec<String> {
    memory
        .entries()
        .iter()
        .map(|e| e.call.tool.clone())
        .collect()
}

#[tokio::test]
async fn a_staged_sample_is_unpacked_remotely_and_its_members_taken_through_get_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = Arc::new(Job::create(dir.path().join("job")).expect("job"));
    let heard = Arc::new(ReportBuilder::default());
    let memory = MemorySink::default();
    let remote = remote_sidecar(context(&job, &memory, &heard)).await;
    let archive = dir.path().join("sample.zip");
    std::fs::write(
        &archive,
        zip_with(&[
            ("readme.txt", b"hello"),
            ("bin/payload.exe", b"MZ\x90\x00"),
            ("../evil.txt", b"escape"),
            ("/abs.txt", b"absolute"),
        ]),
    )
    .expect("write");
    let sample = job.add_sample(&archive).expect("sample").path;
    let written = json!({"path": sample.display().to_string()});

    let answer = remote
        .server
        .call("unpack", written.clone())
        .await
        .expect("call");
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(answer.value["count"], 2);
    let refused: Vec<&str> = answer.value["refused"]
        .as_array()
        .expect("refused")
        .iter()
        .filter_map(|r| r["name"].as_str())
        .collect();
    assert_eq!(refused, ["../evil.txt", "/abs.txt"]);

    let disclosures = heard.disclosures();
    assert_eq!(disclosures.len(), 1);
    assert_eq!(disclosures[0].what, Disclosed::Sample);
    assert_eq!(disclosures[0].mode, UploadMode::Chunked);
    assert_eq!(
        disclosures[0].sha256,
        sha(&std::fs::read(&sample).expect("read"))
    );
    let DisclosureOutcome::Sent { remote_path } = &disclosures[0].outcome else {
        panic!("{:?}", disclosures[0]);
    };
    assert!(
        Path::new(remote_path).starts_with(remote.server_dir.path().canonicalize().expect("dir"))
    );

    let entries = memory.entries();
    let unpack = entries
        .iter()
        .find(|e| e.call.tool == "unpack")
        .expect("ledgered");
    assert_eq!(unpack.call.arguments, written, "as written");
    assert_eq!(
        unpack.call.sent_arguments,
        Some(json!({"path": remote_path})),
        "as sent"
    );

    let taken = remote
        .server
        .take_files("unpack", &answer, Some("unpack-sample"))
        .await;
    let digests: Vec<String> = taken
        .iter()
        .map(|t| match t {
            TakenFile::Taken { sha256, .. } => sha256.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(digests, [sha(b"hello"), sha(b"MZ\x90\x00")]);
    let index = job.store().index().expect("index");
    assert_eq!(index.len(), 2);
    assert_eq!(index[0].origin.step.as_deref(), Some("unpack-sample"));
    assert_eq!(
        std::fs::read(&index[1].path).expect("stored"),
        b"MZ\x90\x00"
    );

    // The same file goes to the same server once per job.
    remote.server.call("unpack", written).await.expect("call");
    assert_eq!(heard.disclosures().len(), 1);
    assert_eq!(
        tools_called(&memory)
            .iter()
            .filter(|t| *t == "put_sample_finish")
            .count(),
        1
    );
}

#[tokio::test]
async fn get_file_refusals_are_recorded_as_not_taken_with_the_servers_words() {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = Arc::new(Job::create(dir.path().join("job")).expect("job"));
    let heard = Arc::new(ReportBuilder::default());
    let remote = remote_sidecar(context(&job, &MemorySink::default(), &heard)).await;
    let link = remote.server_dir.path().join("link");
    std::os::unix::fs::symlink("/etc/hostname", &link).expect("symlink");
    let answer = ToolAnswer {
        value: json!({"files": [{"path": "../x"}, {"path": "/etc/passwd"}, {"path": link.display().to_string()}]}),
        outcome: Outcome::Ok,
    };
    let taken = remote.server.take_files("some_tool", &answer, None).await;
    let words: Vec<String> = taken
        .iter()
        .map(|t| match t {
            TakenFile::NotTaken { reason, .. } => reason.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(words[0].contains("\"..\""), "{}", words[0]);
    assert!(words[1].contains("is outside"), "{}", words[1]);
    assert!(words[2].contains("leads out of"), "{}", words[2]);
    assert_eq!(heard.taken(), taken);
    assert!(
        job.store().index().expect("index").is_empty(),
        "nothing left behind"
    );
}

#[tokio::test]
async fn a_file_changed_during_its_upload_is_not_finished_and_the_call_keeps_the_local_path() {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = Arc::new(Job::create(dir.path().join("job")).expect("job"));
    let heard = Arc::new(ReportBuilder::default());
    let sample = job.dir().join("changing.bin");
    // Ten chunks: far more than the upload reads ahead of the server's answers (two chunks
    // in flight, one read buffer), so the last one is read after the change.
    let chunks = 10;
    std::fs::write(&sample, vec![1u8; chunks * CHUNK_BYTES as usize]).expect("write");
    let memory = MemorySink::default();
    let changed = Arc::new(Mutex::new(false));
    let (path, flag) = (sample.clone(), changed.clone());
    // After the first chunk is sent, the file changes under the upload.
    let context = context(&job, &memory, &heard).with_progress(ProgressReporter::new(move |p| {
        let mut changed = flag.lock().expect("lock");
        if p.direction == "upload" && !*changed {
            let mut bytes = std::fs::read(&path).expect("read");
            let last = bytes.len() - 1;
            bytes[last] = 2;
            std::fs::write(&path, bytes).expect("rewrite");
            *changed = true;
        }
    }));
    let remote = remote_sidecar(context).await;
    let written = json!({"path": sample.display().to_string()});
    let answer = remote
        .server
        .call("file_info", written.clone())
        .await
        .expect("call");
    assert!(*changed.lock().expect("lock"));

    let tools = tools_called(&memory);
    let mut expected = vec!["put_sample_begin"];
    expected.extend(std::iter::repeat_n("put_sample_chunk", chunks));
    expected.push("file_info");
    assert_eq!(
        tools, expected,
        "every chunk went, put_sample_finish did not"
    );
    let call = memory.entries().pop().expect("the tool call");
    assert_eq!(call.call.arguments, written);
    assert_eq!(
        call.call.sent_arguments, None,
        "it went out with the local path"
    );
    assert!(answer.is_ok(), "{answer:?}");

    let degradations = heard.degradations();
    assert_eq!(degradations.len(), 1);
    assert!(
        degradations[0].reason.contains("changed while it was sent"),
        "{}",
        degradations[0].reason
    );
    assert!(degradations[0].reason.contains("local path"));
    assert!(matches!(
        heard.disclosures()[0].outcome,
        DisclosureOutcome::Failed { .. }
    ));
}

#[tokio::test]
async fn a_path_outside_the_job_directory_is_never_read_or_uploaded() {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = Arc::new(Job::create(dir.path().join("job")).expect("job"));
    let heard = Arc::new(ReportBuilder::default());
    let memory = MemorySink::default();
    let remote = remote_sidecar(context(&job, &memory, &heard)).await;
    let inside_link: PathBuf = job.dir().join("passwd-link");
    std::os::unix::fs::symlink("/etc/passwd", &inside_link).expect("symlink");
    for path in [
        "/etc/passwd".to_owned(),
        inside_link.display().to_string(),
        format!("{}/../../etc/passwd", job.dir().display()),
    ] {
        remote
            .server
            .call("file_info", json!({"path": path}))
            .await
            .expect("call");
    }
    assert_eq!(
        tools_called(&memory),
        ["file_info", "file_info", "file_info"]
    );
    assert!(
        memory
            .entries()
            .iter()
            .all(|e| e.call.sent_arguments.is_none())
    );
    assert!(heard.disclosures().is_empty());
}

#[tokio::test]
async fn a_stored_artefact_goes_as_the_digest_it_is_named_by_and_not_once_its_bytes_changed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = Arc::new(Job::create(dir.path().join("job")).expect("job"));
    let heard = Arc::new(ReportBuilder::default());
    let origin = maljan_staging::Origin {
        step: Some("2".into()),
        server: "elsewhere".into(),
        tool: "unpack".into(),
    };
    let mut stored = Vec::new();
    for (name, byte) in [("intact.bin", 7u8), ("altered.bin", 8u8)] {
        let source = dir.path().join(name);
        // Chunked: three chunks and a bit.
        std::fs::write(&source, vec![byte; 3 * CHUNK_BYTES as usize + 5]).expect("write");
        let artefact = job
            .store()
            .add_file(&source, name, origin.clone())
            .expect("stored");
        stored.push(artefact.path);
    }
    // The second artefact's bytes change in the store after it was stored, its size kept:
    // its name now claims a digest its bytes do not have.
    let mut bytes = std::fs::read(&stored[1]).expect("read");
    bytes[CHUNK_BYTES as usize] = 9;
    std::fs::write(&stored[1], bytes).expect("rewrite");
    let memory = MemorySink::default();
    let remote = remote_sidecar(context(&job, &memory, &heard)).await;

    let intact = json!({"path": stored[0].display().to_string()});
    let answer = remote.server.call("file_info", intact).await.expect("call");
    assert!(answer.is_ok(), "{answer:?}");
    assert_eq!(answer.value["sha256"], json!(file_name_of(&stored[0])));
    let disclosure = &heard.disclosures()[0];
    assert_eq!(
        disclosure.what,
        Disclosed::ToolOutput {
            step: Some("2".into()),
            tool: "unpack".into()
        }
    );
    assert_eq!(disclosure.sha256, file_name_of(&stored[0]));
    assert!(matches!(disclosure.outcome, DisclosureOutcome::Sent { .. }));

    file_info_goes_out_with_the_local_path(&remote, &memory, &stored[1]).await;
    let finished = tools_called(&memory)
        .iter()
        .filter(|t| *t == "put_sample_finish")
        .count();
    assert_eq!(
        finished, 1,
        "only the intact artefact's upload was finished"
    );
    let degradations = heard.degradations();
    assert_eq!(degradations.len(), 1);
    assert!(
        degradations[0].reason.contains("changed while it was sent")
            && degradations[0].reason.contains(&file_name_of(&stored[1])),
        "{}",
        degradations[0].reason
    );
}

#[tokio::test]
async fn a_sample_goes_as_the_digest_taken_when_it_was_added_and_not_once_its_bytes_changed() {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = Arc::new(Job::create(dir.path().join("job")).expect("job"));
    let heard = Arc::new(ReportBuilder::default());
    let source = dir.path().join("dropper.bin");
    // Chunked: two chunks and a bit.
    std::fs::write(&source, vec![5u8; 2 * CHUNK_BYTES as usize + 3]).expect("write");
    let sample = job.add_sample(&source).expect("added");
    assert_eq!(sample.sha256, sha(&std::fs::read(&source).expect("read")));
    // Its copy in the job changes after it was added, its size kept.
    let mut bytes = std::fs::read(&sample.path).expect("read");
    bytes[CHUNK_BYTES as usize + 1] = 6;
    std::fs::write(&sample.path, &bytes).expect("rewrite");
    let memory = MemorySink::default();
    let remote = remote_sidecar(context(&job, &memory, &heard)).await;

    file_info_goes_out_with_the_local_path(&remote, &memory, &sample.path).await;
    assert!(
        !tools_called(&memory)
            .iter()
            .any(|t| t == "put_sample_finish"),
        "the upload was not finished"
    );
    let disclosure = &heard.disclosures()[0];
    assert_eq!(disclosure.what, Disclosed::Sample);
    assert!(matches!(
        disclosure.outcome,
        DisclosureOutcome::Failed { .. }
    ));
    let degradations = heard.degradations();
    assert_eq!(degradations.len(), 1);
    // It was announced as it was when added.
    assert!(
        degradations[0].reason.contains("changed while it was sent")
            && degradations[0].reason.contains(&sample.sha256),
        "{}",
        degradations[0].reason
    );
}

/// Calls `file_info` on a file of the job through the remote sidecar: the call succeeds,
/// and went out with the local path (the file was not staged).
async fn file_info_goes_out_with_the_local_path(remote: &Remote, memory: &MemorySink, path: &Path) {
    let written = json!({"path": path.display().to_string()});
    let answer = remote
        .server
        .call("file_info", written)
        .await
        .expect("call");
    assert!(answer.is_ok(), "{answer:?}");
    let call = memory.entries().pop().expect("the tool call");
    assert_eq!(
        call.call.sent_arguments, None,
        "it went out with the local path"
    );
}

fn file_name_of(path: &Path) -> String {
    path.file_name()
        .expect("a file name")
        .to_string_lossy()
        .into_owned()
}
