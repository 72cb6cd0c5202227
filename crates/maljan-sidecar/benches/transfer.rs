//! 256 MiB up to and back from the reference sidecar over stdio and over Streamable HTTP on
//! loopback, next to the single-core
//! limit measured in the same run, before and after the transfers: sha256 plus base64
//! decoding of the same bytes. Each transfer goes where the file is not yet, as in a job.
//!
//! The limit is measured on both sides because a machine's speed can drift over minutes: a
//! transfer is compared with the limit next to it.
//!
//! Each transfer ends with its file written and made durable, so the disk is measured
//! beside the limit, before and after the transfers too: 256 MiB written the way the
//! transfers write (one 4 MiB direct write at a time, synced as it goes and at the end),
//! back to back. Where that is slower than the limit, the transfers' writes wait on a
//! device that cannot keep the limit's pace; it is no strict bound, as a transfer leaves
//! the device gaps between its writes.
//!
//! The upload is the job's sample, as the client stages it: its digest was taken when it
//! was copied into the job, so it is announced without a first read (the same goes for a
//! file of the artefact store, named by its digest). A file whose digest is not known is
//! measured twice more: sent to the kit, which takes the digest at the finish, in one read
//! (`upload_digest_at_finish`), and sent to a server that wants it at the beginning (the
//! sidecar behind a caller refusing to begin without it, as such a server does), hashed
//! first (`upload_hashed_first`).

// criterion_group! generates an undocumented public function.
#![allow(missing_docs)]

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use criterion::measurement::WallTime;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use maljan_client::{
    ClientSettings, ConnectionContext, Job, ServerCommand, ServerConfig, ServerConnection,
};
use maljan_direct_write::{DirectWriter, pad_to_aligned};
use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
use maljan_staging::{
    CHUNK_BYTES, Origin, ToolCaller, UploadMode, UploadReceipt, download, upload,
    upload_with_digest,
};
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::runtime::Runtime;

const SIDECAR: &str = env!("CARGO_BIN_EXE_maljan-sidecar");
const SIZE: usize = 256 * 1024 * 1024;
/// The sidecar's budget for the job's files: its job counts every byte uploaded to it,
/// and this bench uploads the file dozens of times into one job.
const JOB_BYTES: u64 = 1 << 40;

/// Writes the file's size to a new file in `dir` as the transfers write theirs, 4 MiB at a
/// time from one aligned buffer, and makes it durable: the disk's own speed.
fn bench_disk(group: &mut criterion::BenchmarkGroup<'_, WallTime>, name: &str, dir: &Path) {
    let chunk = CHUNK_BYTES as usize;
    let mut buffer = Vec::new();
    let start = pad_to_aligned(&mut buffer, chunk);
    buffer.extend((0..chunk).map(|i| ((i * 13) ^ (i >> 11)) as u8));
    let aligned = &buffer[start..];
    let path = dir.join("disk-alone.bin");
    group.bench_function(name, |b| {
        b.iter_batched(
            || remove_if_there(&path),
            |()| {
                let mut file = DirectWriter::create(&path).expect("the disk's file");
                for _ in 0..SIZE / chunk {
                    file.write_all(aligned).expect("written");
                }
                file.finish().expect("made durable")
            },
            BatchSize::PerIteration,
        )
    });
    // Not there when the bench was filtered out.
    remove_if_there(&path);
}

fn remove_if_there(path: &Path) {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => panic!("{e}"),
        _ => {}
    }
}

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

/// The sidecar over one wire: the connection, and the server process (for its CPU time).
struct Wire {
    name: &'static str,
    server: ServerConnection,
    server_pid: String,
    /// The HTTP sidecar, which this bench started (a stdio one is the connection's).
    process: Option<std::process::Child>,
}

impl Wire {
    fn stdio(runtime: &Runtime, job: &Arc<Job>) -> Wire {
        let server = connect(
            runtime,
            job,
            ServerConfig::stdio(
                "sidecar",
                ServerCommand::new(SIDECAR)
                    .arg("--job-bytes")
                    .arg(JOB_BYTES.to_string()),
            ),
        );
        let server_pid = server.server_pid().expect("a spawned server").to_string();
        Wire {
            name: "stdio",
            server,
            server_pid,
            process: None,
        }
    }

    /// The sidecar serving Streamable HTTP on a free loopback port.
    fn http(runtime: &Runtime, job: &Arc<Job>) -> Wire {
        let mut process = std::process::Command::new(SIDECAR)
            .args([
                "--http",
                "127.0.0.1:0",
                "--job-bytes",
                &JOB_BYTES.to_string(),
            ])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("the HTTP sidecar starts");
        let mut stderr = std::io::BufReader::new(process.stderr.take().expect("stderr"));
        let mut announcement = String::new();
        std::io::BufRead::read_line(&mut stderr, &mut announcement).expect("its endpoint");
        let url = announcement
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("an endpoint, not {announcement:?}"))
            .to_owned();
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        let server = connect(runtime, job, ServerConfig::http("sidecar", &url));
        Wire {
            name: "http",
            server,
            server_pid: process.id().to_string(),
            process: Some(process),
        }
    }

    fn close(self, runtime: &Runtime) {
        runtime.block_on(self.server.close());
        if let Some(mut process) = self.process {
            let _ = process.kill();
            let _ = process.wait();
        }
    }
}

fn connect(runtime: &Runtime, job: &Arc<Job>, config: ServerConfig) -> ServerConnection {
    runtime.block_on(async {
        ServerConnection::connect(
            &config,
            ClientSettings::default(),
            ConnectionContext::default().with_job(job.clone()),
        )
        .await
        .expect("sets up")
    })
}

/// What one wire's transfers cost beyond their time.
struct WireCosts {
    peak: String,
    cpu: [String; 4],
}

/// A server that wants an upload's digest when it begins: it refuses
/// `put_sample_begin` without `sha256` and passes every other call on.
struct DigestFirst<'a, C>(&'a C);

impl<C: ToolCaller + Sync> ToolCaller for DigestFirst<'_, C> {
    async fn call_tool(&self, tool: &str, arguments: Value) -> Result<Value, ToolFailure> {
        if tool == "put_sample_begin" && arguments.get("sha256").is_none() {
            return Err(ToolFailure::new(
                ErrorCode::BadArgument,
                "the argument sha256 is missing",
                None,
            ));
        }
        self.0.call_tool(tool, arguments).await
    }
}

/// Uploads the sample to `caller` as if its digest were not known.
fn upload_unknown_digest(
    runtime: &Runtime,
    caller: &impl ToolCaller,
    path: &Path,
) -> UploadReceipt {
    runtime
        .block_on(upload(
            caller,
            path,
            "big.bin",
            UploadMode::Chunked,
            CHUNK_BYTES as usize,
            |_, _| {},
        ))
        .expect("uploaded")
}

/// Uploads (known digest; not known, given at the finish; not known, hashed first) and
/// downloads 256 MiB over one wire.
fn bench_wire(
    group: &mut criterion::BenchmarkGroup<'_, WallTime>,
    runtime: &Runtime,
    job: &Arc<Job>,
    sample: &maljan_client::Sample,
    wire: &Wire,
) -> WireCosts {
    let server = &wire.server;
    let upload_sample = || {
        runtime
            .block_on(upload_with_digest(
                server,
                &sample.path,
                "big.bin",
                (sample.size, sample.sha256.clone()),
                UploadMode::Chunked,
                CHUNK_BYTES as usize,
                |_, _| {},
            ))
            .expect("uploaded")
    };
    let upload_digest_at_finish = || upload_unknown_digest(runtime, server, &sample.path);
    let upload_hashed_first = || upload_unknown_digest(runtime, &DigestFirst(server), &sample.path);
    let remote_path = upload_sample().remote_path;
    let stored_path = job.store().root().join(&sample.sha256);
    let remove_upload = || remove_if_there(Path::new(&remote_path));
    let hwm_reset = reset_vm_hwm();
    let hwm_before = vm_hwm_mib();
    // In a job a file goes to a server once: each upload is timed into a directory that
    // does not hold the file yet (replacing a 256 MiB file costs ext4 a flush of its own).
    let mut time_upload = |name: &str, what: &str, upload: &dyn Fn() -> UploadReceipt| {
        let cpu = CpuPerTransfer::start(&wire.server_pid);
        group.bench_function(format!("{name}_over_{}", wire.name), |b| {
            b.iter_batched(
                remove_upload,
                |()| {
                    cpu.count();
                    upload()
                },
                BatchSize::PerIteration,
            )
        });
        cpu.report(what)
    };
    let upload_cpu = time_upload("upload_chunked", "upload", &upload_sample);
    let at_finish_cpu = time_upload(
        "upload_digest_at_finish",
        "upload, digest at the finish",
        &upload_digest_at_finish,
    );
    let hashed_first_cpu = time_upload(
        "upload_hashed_first",
        "upload, hashed first",
        &upload_hashed_first,
    );
    let uploads_peak = vm_hwm_mib();
    let download_cpu = CpuPerTransfer::start(&wire.server_pid);
    // Likewise each download is timed into a store that does not hold the file yet.
    group.bench_function(format!("download_over_{}", wire.name), |b| {
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
                        server,
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
    let peak = vm_hwm_mib();
    let since = if hwm_reset {
        "since they began"
    } else {
        "since the process began (the peak could not be reset)"
    };
    WireCosts {
        peak: format!(
            "client peak resident memory during the transfers over {}: {peak} MiB {since} \
             ({hwm_before} MiB when they began, {uploads_peak} MiB after the uploads)",
            wire.name
        ),
        cpu: [upload_cpu, at_finish_cpu, hashed_first_cpu, download_cpu],
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
    let mut group = c.benchmark_group("transfer_256_mib");
    group.throughput(Throughput::Bytes(SIZE as u64));
    group.sample_size(10);
    let encoded = EncodedFile::read(&sample.path);
    bench_limit(&mut group, "single_core_limit_before_transfers", &encoded);
    drop(encoded);
    bench_disk(&mut group, "disk_alone_before_transfers", dir.path());
    let mut costs = Vec::new();
    for connect in [Wire::stdio, Wire::http] {
        let wire = connect(&runtime, &job);
        costs.push(bench_wire(&mut group, &runtime, &job, &sample, &wire));
        wire.close(&runtime);
    }
    bench_disk(&mut group, "disk_alone_after_transfers", dir.path());
    let encoded = EncodedFile::read(&sample.path);
    bench_limit(&mut group, "single_core_limit_after_transfers", &encoded);
    group.finish();
    for wire in costs {
        eprintln!("{}", wire.peak);
        for cpu in wire.cpu {
            eprintln!("  {cpu}");
        }
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
