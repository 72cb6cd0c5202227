//! 256 MiB up to and back from the reference sidecar over stdio, next to the single-core
//! limit measured in the same run, before and after the transfers: sha256 plus base64
//! decoding of the same bytes. Each transfer goes where the file is not yet, as in a job.
//!
//! The limit is measured on both sides because a machine's speed can drift over minutes: a
//! transfer is compared with the limit next to it.
//!
//! The upload is the job's sample, as the client stages it: its digest was taken when it
//! was copied into the job, so it is announced without a first read (the same goes for a
//! file of the artefact store, named by its digest). A file whose digest is not known is
//! hashed first: measured too, as `upload_hashed_first`.

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::io::Write;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use criterion::measurement::WallTime;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use maljan_client::{
    ClientSettings, ConnectionContext, Job, ServerCommand, ServerConfig, ServerConnection,
};
use maljan_staging::{CHUNK_BYTES, Origin, UploadMode, download, upload, upload_with_digest};
use sha2::{Digest, Sha256};
use tokio::runtime::Runtime;

const SIDECAR: &str = env!("CARGO_BIN_EXE_maljan-sidecar");
const SIZE: usize = 256 * 1024 * 1024;

/// Resets the peak resident memory to the current one (Linux 4.0 and later), so the peak
/// read later is the transfers' own, not the limit's copy of the file made before them.
fn reset_vm_hwm() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The file, base64 in 4 MiB chunks, as the limit decodes it.
struct EncodedFile {
    /// Every chunk's base64, end to end: one allocation, so large that the allocator gives
    /// it back to the system when it is dropped (5.6 MB strings, one per chunk, could stay
    /// resident as freed heap and be counted in the transfers' peak).
    base64: String,
    /// The length of a whole chunk's base64.
    chunk_len: usize,
}

impl EncodedFile {
    fn read(path: &std::path::Path) -> Self {
        let bytes = std::fs::read(path).expect("read");
        let mut base64 = String::with_capacity(bytes.len().div_ceil(3) * 4 + 4 * 64);
        for chunk in bytes.chunks(CHUNK_BYTES as usize) {
            STANDARD.encode_string(chunk, &mut base64);
        }
        let chunk_len =
            base64::encoded_len(CHUNK_BYTES as usize, true).expect("a chunk's base64 length");
        EncodedFile { base64, chunk_len }
    }

    fn chunks(&self) -> impl Iterator<Item = &[u8]> {
        self.base64.as_bytes().chunks(self.chunk_len)
    }
}

/// sha256 and base64 decoding of the chunks, one after the other, on one core: decoded into
/// one buffer, as the limit is the work itself, not the page faults of a fresh buffer per
/// chunk (which vary with the allocator's state, ±30% between runs).
fn bench_limit(
    group: &mut criterion::BenchmarkGroup<'_, WallTime>,
    name: &str,
    encoded: &EncodedFile,
) {
    let mut decoded = vec![0u8; base64::decoded_len_estimate(encoded.chunk_len)];
    group.bench_function(name, |b| {
        b.iter(|| {
            let mut hasher = Sha256::new();
            for chunk in encoded.chunks() {
                let len = STANDARD.decode_slice(chunk, &mut decoded).expect("base64");
                hasher.update(&decoded[..len]);
            }
            std::hint::black_box(hasher.finalize());
        })
    });
}

fn vm_hwm_mib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or(0, |kib| kib / 1024)
}

/// CPU seconds (user and system, all threads) a process has used so far.
fn cpu_seconds(pid: &str) -> f64 {
    // /proc/PID/stat: fields 14 and 15, after the command in parentheses, in USER_HZ ticks
    // (100 a second on Linux).
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let fields: Vec<u64> = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|f| f.parse().ok())
                .collect();
            Some(fields.iter().sum::<u64>() as f64 / 100.0)
        })
        .unwrap_or(0.0)
}

/// The CPU each side spent per transfer, over every run of a benchmark (warm-up included).
struct CpuPerTransfer {
    server: String,
    client_start: f64,
    server_start: f64,
    transfers: std::cell::Cell<u32>,
}

impl CpuPerTransfer {
    fn start(server: &str) -> Self {
        CpuPerTransfer {
            server: server.to_owned(),
            client_start: cpu_seconds("self"),
            server_start: cpu_seconds(server),
            transfers: std::cell::Cell::new(0),
        }
    }

    fn count(&self) {
        self.transfers.set(self.transfers.get() + 1);
    }

    fn report(&self, what: &str) -> String {
        let n = f64::from(self.transfers.get().max(1));
        format!(
            "{what}: client {:.2} s, server {:.2} s of CPU per 256 MiB",
            (cpu_seconds("self") - self.client_start) / n,
            (cpu_seconds(&self.server) - self.server_start) / n
        )
    }
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = Arc::new(Job::create(dir.path().join("job")).expect("job"));
    let source = dir.path().join("big.bin");
    {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&source).expect("create"));
        let mut block = vec![0u8; 1 << 20];
        for i in 0..SIZE / block.len() {
            for (j, b) in block.iter_mut().enumerate() {
                *b = ((i * 31 + j * 7) ^ (j >> 9)) as u8;
            }
            file.write_all(&block).expect("write");
        }
    }
    let sample = job.add_sample(&source).expect("the job's sample");
    std::fs::remove_file(&source).expect("the source");
    let runtime = Runtime::new().expect("runtime");
    let server = runtime.block_on(async {
        ServerConnection::connect(
            &ServerConfig::stdio("sidecar", ServerCommand::new(SIDECAR)),
            ClientSettings::default(),
            ConnectionContext::default().with_job(job.clone()),
        )
        .await
        .expect("sets up")
    });
    let upload_sample = || {
        runtime
            .block_on(upload_with_digest(
                &server,
                &sample.path,
                "big.bin",
                (sample.size, sample.sha256.clone()),
                UploadMode::Chunked,
                CHUNK_BYTES as usize,
                |_, _| {},
            ))
            .expect("uploaded")
    };
    let upload_hashed_first = || {
        runtime
            .block_on(upload(
                &server,
                &sample.path,
                "big.bin",
                UploadMode::Chunked,
                CHUNK_BYTES as usize,
                |_, _| {},
            ))
            .expect("uploaded")
    };
    let remote_path = upload_sample().remote_path;
    let stored_path = job.store().root().join(&sample.sha256);
    let remove_upload = || match std::fs::remove_file(&remote_path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{e}"),
        _ => {}
    };
    let mut group = c.benchmark_group("transfer_256_mib");
    group.throughput(Throughput::Bytes(SIZE as u64));
    group.sample_size(10);
    let encoded = EncodedFile::read(&sample.path);
    bench_limit(&mut group, "single_core_limit_before_transfers", &encoded);
    drop(encoded);
    let hwm_reset = reset_vm_hwm();
    let server_pid = server.server_pid().expect("a spawned server").to_string();
    let hwm_before = vm_hwm_mib();
    let upload_cpu = CpuPerTransfer::start(&server_pid);
    // In a job a file goes to a server once: each upload is timed into a directory that
    // does not hold the file yet (replacing a 256 MiB file costs ext4 a flush of its own).
    group.bench_function("upload_chunked_over_stdio", |b| {
        b.iter_batched(
            remove_upload,
            |()| {
                upload_cpu.count();
                upload_sample()
            },
            BatchSize::PerIteration,
        )
    });
    let upload_cpu = upload_cpu.report("upload");
    let hashed_first_cpu = CpuPerTransfer::start(&server_pid);
    group.bench_function("upload_hashed_first_over_stdio", |b| {
        b.iter_batched(
            remove_upload,
            |()| {
                hashed_first_cpu.count();
                upload_hashed_first()
            },
            BatchSize::PerIteration,
        )
    });
    let hashed_first_cpu = hashed_first_cpu.report("upload, hashed first");
    let uploads_peak = vm_hwm_mib();
    let download_cpu = CpuPerTransfer::start(&server_pid);
    // Likewise each download is timed into a store that does not hold the file yet.
    group.bench_function("download_over_stdio", |b| {
        b.iter_batched(
            || {
                if stored_path.exists() {
                    std::fs::remove_file(&stored_path).expect("the last download's file");
                }
            },
            |()| {
                download_cpu.count();
                runtime.block_on(async {
                    let origin = Origin {
                        step: None,
                        server: "sidecar".into(),
                        tool: "get_file".into(),
                    };
                    download(
                        &server,
                        &remote_path,
                        job.store(),
                        origin,
                        CHUNK_BYTES,
                        |_, _| {},
                    )
                    .await
                    .expect("downloaded")
                })
            },
            BatchSize::PerIteration,
        )
    });
    let download_cpu = download_cpu.report("download");
    // The transfers' peak, before the limit's base64 copy of the file is made.
    let transfers_peak = vm_hwm_mib();
    let encoded = EncodedFile::read(&sample.path);
    bench_limit(&mut group, "single_core_limit_after_transfers", &encoded);
    group.finish();
    let since = if hwm_reset {
        "since they began"
    } else {
        "since the process began (the peak could not be reset)"
    };
    eprintln!(
        "client peak resident memory during the transfers: {transfers_peak} MiB {since} \
         ({hwm_before} MiB when they began, {uploads_peak} MiB after the uploads)\n\
         {upload_cpu}\n{hashed_first_cpu}\n{download_cpu}"
    );
    runtime.block_on(server.close());
}

criterion_group!(benches, bench);
criterion_main!(benches);
