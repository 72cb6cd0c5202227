//! Uploads to a server that offers only `put_sample`.

use maljan_client::{
    ClientSettings, ConnectionContext, ServerCommand, ServerConfig, ServerConnection,
};
use maljan_staging::{CHUNK_BYTES, UploadMode, upload};

const SERVER: &str = env!("CARGO_BIN_EXE_misbehaving-server");

#[tokio::test]
async fn a_server_offering_only_put_sample_receives_exactly_one_upload_call() {
    let config = ServerConfig::stdio("single", ServerCommand::new(SERVER).arg("--put-sample"));
    let server = ServerConnection::connect(
        &config,
        ClientSettings::default(),
        ConnectionContext::default(),
    )
    .await
    .expect("sets up");
    let tools: Vec<String> = server
        .setup()
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    let mode = UploadMode::offered(tools.iter().map(String::as_str)).expect("an upload tool");
    assert_eq!(mode, UploadMode::Single);

    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("sample.bin");
    let bytes: Vec<u8> = (0..(CHUNK_BYTES as usize * 2 + 5))
        .map(|i| (i % 253) as u8)
        .collect();
    std::fs::write(&file, &bytes).expect("write");
    let receipt = upload(
        &server,
        &file,
        "sample.bin",
        mode,
        CHUNK_BYTES as usize,
        |_, _| {},
    )
    .await
    .expect("uploaded");
    assert_eq!(receipt.remote_path, "/uploads/sample.bin");
    assert_eq!(receipt.size, bytes.len() as u64);

    let report = server.close().await;
    let calls = report
        .stderr_tail
        .lines()
        .filter(|l| l.starts_with("received tools/call put_sample"))
        .count();
    assert_eq!(calls, 1, "{}", report.stderr_tail);
}
