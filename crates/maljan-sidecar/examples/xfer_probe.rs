#![allow(missing_docs)]
use maljan_client::{ClientSettings, Job, ServerCommand, ServerConfig, ServerConnection};
use maljan_staging::{CHUNK_BYTES, Origin, UploadMode, download, upload};
use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

fn cpu() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap();
    let f: Vec<&str> = s.rsplit(')').next().unwrap().split_whitespace().collect();
    (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0
}
fn child_cpu(pid: u32) -> f64 {
    let mut t = 0.0;
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let s = std::fs::read_to_string(e.unwrap().path().join("stat")).unwrap();
        let f: Vec<&str> = s.rsplit(')').next().unwrap().split_whitespace().collect();
        t += (f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap()) / 100.0;
    }
    t
}
fn sidecar_pid() -> u32 {
    let me = std::process::id();
    for e in std::fs::read_dir("/proc").unwrap() {
        let e = e.unwrap();
        if let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() {
            if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) {
                let f: Vec<&str> = s.rsplit(')').next().unwrap().split_whitespace().collect();
                if f[1].parse::<u32>().unwrap() == me {
                    return pid;
                }
            }
        }
    }
    panic!("no child")
}
fn main() {
    let size: usize = 256 << 20;
    let sidecar = std::env::var("SIDECAR").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let job = Arc::new(Job::create(dir.path().join("job")).unwrap());
    let sample = job.dir().join("big.bin");
    {
        let mut file = std::io::BufWriter::new(std::fs::File::create(&sample).unwrap());
        let mut block = vec![0u8; 1 << 20];
        for i in 0..size / block.len() {
            for (j, b) in block.iter_mut().enumerate() {
                *b = ((i * 31 + j * 7) ^ (j >> 9)) as u8;
            }
            file.write_all(&block).unwrap();
        }
    }
    let rt = if let Ok(w) = std::env::var("WORKERS") {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(w.parse().unwrap())
            .enable_all()
            .build()
            .unwrap()
    } else if std::env::var("CT").is_ok() {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    } else {
        tokio::runtime::Runtime::new().unwrap()
    };
    let server = rt.block_on(async {
        let settings = ClientSettings {
            job: Some(job.clone()),
            ..ClientSettings::default()
        };
        ServerConnection::connect(
            &ServerConfig::stdio("sidecar", ServerCommand::new(sidecar)),
            settings,
        )
        .await
        .unwrap()
    });
    let pid = sidecar_pid();
    let mut remote = String::new();
    let ups: usize = std::env::var("UPS")
        .map(|v| v.parse().unwrap())
        .unwrap_or(3);
    let downs: usize = std::env::var("DOWNS")
        .map(|v| v.parse().unwrap())
        .unwrap_or(3);
    for round in 0..ups.max(1) {
        let (c0, s0, t0) = (cpu(), child_cpu(pid), Instant::now());
        remote = rt
            .block_on(upload(
                &server,
                &sample,
                "big.bin",
                UploadMode::Chunked,
                CHUNK_BYTES as usize,
                |_, _| {},
            ))
            .unwrap()
            .remote_path;
        let w = t0.elapsed().as_secs_f64();
        println!(
            "hwm {} upload {round}: {:.0} MiB/s wall {:.3}s client cpu {:.2}s server cpu {:.2}s",
            hwm(),
            256.0 / w,
            w,
            cpu() - c0,
            child_cpu(pid) - s0
        );
    }
    for round in 0..downs {
        let (c0, s0, t0) = (cpu(), child_cpu(pid), Instant::now());
        let origin = Origin {
            step: None,
            server: "sidecar".into(),
            tool: "get_file".into(),
        };
        rt.block_on(download(
            &server,
            &remote,
            job.store(),
            origin,
            CHUNK_BYTES,
            |_, _| {},
        ))
        .unwrap();
        let w = t0.elapsed().as_secs_f64();
        println!(
            "hwm {} download {round}: {:.0} MiB/s wall {:.3}s client cpu {:.2}s server cpu {:.2}s",
            hwm(),
            256.0 / w,
            w,
            cpu() - c0,
            child_cpu(pid) - s0
        );
    }
    rt.block_on(server.close());
}

fn hwm() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .unwrap()
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .unwrap()
        / 1024
}
