//! 256 MiB up to the reference sidecar in chunks and back through `get_file`, with the
//! client's memory bounded: this test has its own process, so its peak resident memory
//! (VmHWM) is the client's.

use std::io::Write;
use std::sync::Arc;

use maljan_client::{
    ClientSettings, ConnectionContext, Job, ServerCommand, ServerConfig, ServerConnection,
};
use maljan_staging::{CHUNK_BYTES, Origin, UploadMode, download, upload};
use sha2::{Digest, Sha256};

const SIDECAR: &str = env!("CARGO_BIN_EXE_maljan-sidecar");
const SIZE: usize = 256 * 1024 * 1024;

/// Peak resident memory of this process, in KiB.
fn vm_hwm_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_256_mib_file_goes_up_in_chunks_and_comes_back_with_its_digest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = Arc::new(Job::create(dir.path().join("job")).expect("job"));
    let sample = job.dir().join("big.bin");
    let mut hasher = Sha256::new();
    {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&sample).expect("create"));
        let mut block = vec![0u8; 1 << 20];
        for i in 0..SIZE / block.len() {
            for (j, b) in block.iter_mut().enumerate() {
                *b = ((i * 31 + j * 7) ^ (j >> 9)) as u8;
            }
            hasher.update(&block);
            file.write_all(&block).expect("write");
        }
    }
    let expected = format!("{:x}", hasher.finalize());
    let before = vm_hwm_kib();

    let context = ConnectionContext::default().with_job(job.clone());
    let config = ServerConfig::stdio("sidecar", ServerCommand::new(SIDECAR));
    let server = ServerConnection::connect(&config, ClientSettings::default(), context)
        .await
        .expect("sets up");

    let receipt = upload(
        &server,
        &sample,
        "big.bin",
        UploadMode::Chunked,
        CHUNK_BYTES as usize,
        |_, _| {},
    )
    .await
    .expect("uploaded");
    assert_eq!(receipt.sha256, expected);
    assert_eq!(receipt.size, SIZE as u64);
    let after_upload = vm_hwm_kib();

    let origin = Origin {
        step: None,
        server: "sidecar".into(),
        tool: "get_file".into(),
    };
    let stored = download(
        &server,
        &receipt.remote_path,
        job.store(),
        origin,
        CHUNK_BYTES,
        |_, _| {},
    )
    .await
    .expect("downloaded");
    assert_eq!(stored.sha256, expected);
    assert_eq!(stored.size, SIZE as u64);
    server.close().await;

    let peak = vm_hwm_kib();
    eprintln!(
        "client peak resident memory: {} MiB (before the transfers: {} MiB, after the upload: \
         {} MiB)",
        peak / 1024,
        before / 1024,
        after_upload / 1024
    );
    assert!(
        peak < 64 * 1024,
        "the client's peak resident memory was {} MiB",
        peak / 1024
    );
}
