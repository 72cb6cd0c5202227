//! The reference sidecar over Streamable HTTP, end to end: setup, card, calls, a staged
//! sample uploaded in chunks, and a file `unpack` wrote taken back through `get_file`.

mod support;

use std::io::Write;
use std::sync::Arc;

use maljan_client::{
    ClientSettings, ConnectionContext, Job, ReportBuilder, ServerConfig, ServerConnection,
    TakenFile,
};
use maljan_staging::{Disclosed, DisclosureOutcome, UploadMode};
use serde_json::json;
use sha2::{Digest, Sha256};
use support::start_http_sidecar;

/// Sets up over HTTP with a job in `dir`; what its calls did to files is told to the
/// builder returned.
async fn connect_with_job(
    sidecar: &support::HttpSidecar,
    dir: &std::path::Path,
) -> (Arc<Job>, ServerConnection, Arc<ReportBuilder>) {
    let job = Arc::new(Job::create(dir.join("job")).expect("job"));
    let heard = Arc::new(ReportBuilder::default());
    let server = ServerConnection::connect(
        &ServerConfig::http("remote", &sidecar.url),
        ClientSettings::default(),
        ConnectionContext::default()
            .with_job(job.clone())
            .recording_to(heard.clone()),
    )
    .await
    .expect("sets up over HTTP");
    (job, server, heard)
}

#[tokio::test]
async fn over_http_a_staged_sample_is_unpacked_and_a_member_taken_back() {
    let sidecar = start_http_sidecar();
    let dir = tempfile::tempdir().expect("temp dir");
    let (job, server, heard) = connect_with_job(&sidecar, dir.path()).await;
    let card = server.card();
    assert_eq!(card.server_info.name, "maljan-sidecar");
    assert!(card.tools.iter().any(|t| t.name == "unpack"));
    assert!(card.primitives.contains(&"get_file".to_owned()));

    let answer = server
        .call("file_info", json!({"path": "no/such/file"}))
        .await
        .expect("call");
    assert_eq!(
        answer.failure().map(|f| f.code.as_str()),
        Some("no_such_file")
    );
    // The host's files are not the session's: refused over HTTP as over stdio.
    let refused = server
        .call("strings", json!({"path": "/etc/passwd"}))
        .await
        .expect("call");
    assert_eq!(
        refused.failure().map(|f| f.code.as_str()),
        Some("bad_argument")
    );

    let archive = dir.path().join("sample.zip");
    let mut writer = zip::ZipWriter::new(std::fs::File::create(&archive).expect("create"));
    writer
        .start_file("report.txt", zip::write::SimpleFileOptions::default())
        .expect("member");
    writer.write_all(b"found it").expect("write");
    writer.finish().expect("finish");
    let sample = job.add_sample(&archive).expect("sample").path;
    let answer = server
        .call("unpack", json!({"path": sample.display().to_string()}))
        .await
        .expect("call");
    assert!(answer.is_ok(), "{answer:?}");

    let disclosures = heard.disclosures();
    assert_eq!(
        disclosures.len(),
        1,
        "the transport is not stdio, so the sample was staged"
    );
    assert_eq!(disclosures[0].what, Disclosed::Sample);
    assert_eq!(disclosures[0].mode, UploadMode::Chunked);
    assert!(matches!(
        disclosures[0].outcome,
        DisclosureOutcome::Sent { .. }
    ));

    let taken = server.take_files("unpack", &answer, Some("triage")).await;
    let expected = format!("{:x}", Sha256::digest(b"found it"));
    assert!(
        matches!(&taken[..], [TakenFile::Taken { sha256, .. }] if *sha256 == expected),
        "{taken:?}"
    );
    let report = server.close().await;
    assert_eq!(report.counts.invalid, 0);
}

#[tokio::test]
async fn a_request_from_another_origin_is_refused() {
    let sidecar = start_http_sidecar();
    let config = ServerConfig::http("remote", &sidecar.url);
    let mut config = config;
    if let maljan_client::ServerTransport::Http(http) = &mut config.transport {
        http.headers = vec![("Origin".into(), "http://evil.example".into())];
    }
    let error = ServerConnection::connect(
        &config,
        ClientSettings::default(),
        ConnectionContext::default(),
    )
    .await
    .expect_err("refused");
    assert!(error.to_string().contains("403"), "{error}");
}

#[tokio::test]
async fn a_file_of_several_chunks_goes_up_and_comes_back_over_http() {
    let sidecar = start_http_sidecar();
    let dir = tempfile::tempdir().expect("temp dir");
    let (job, server, _) = connect_with_job(&sidecar, dir.path()).await;
    let bytes: Vec<u8> = (0..9 * 1024 * 1024 + 17)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    let local = job.dir().join("three-chunks.bin");
    std::fs::write(&local, &bytes).expect("write");
    let chunk = maljan_staging::CHUNK_BYTES;
    let receipt = maljan_staging::upload(
        &server,
        &local,
        "three-chunks.bin",
        UploadMode::Chunked,
        chunk as usize,
        |_, _| {},
    )
    .await
    .expect("uploaded over HTTP");
    let origin = maljan_staging::Origin {
        step: None,
        server: "remote".into(),
        tool: "get_file".into(),
    };
    let stored = maljan_staging::download(
        &server,
        &receipt.remote_path,
        job.store(),
        origin,
        chunk,
        |_, _| {},
    )
    .await
    .expect("downloaded over HTTP");
    assert_eq!(stored.sha256, format!("{:x}", Sha256::digest(&bytes)));
    server.close().await;
}
