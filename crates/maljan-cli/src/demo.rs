//! `maljan demo`: a generated sample, the bundled pack, the reference sidecar twice (on
//! this host over stdio, and served over HTTP on loopback), and the run's report.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use maljan_client::{Job, Pack, ServerConfig};

use crate::config::{BUNDLED, Config};
use crate::error::CliError;
use crate::run::{PackRun, StopSignals};
use crate::{Format, ledger_file};

/// The demo's pack.
pub(crate) const PACK: &str = include_str!("../packs/demo.toml");

/// The `demo` subcommand's options.
#[derive(Debug, clap::Args)]
pub(crate) struct DemoCommand {
    /// The job's directory (default: a new one beside the ledger).
    #[arg(long, value_name = "DIR")]
    job: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// The JSON Lines file the calls are recorded in (default as for `maljan call`).
    #[arg(long, env = "MALJAN_LEDGER", value_name = "PATH")]
    ledger: Option<PathBuf>,
    /// Run the demo pack over a batch of generated samples through the fleet's stores
    /// (`[store]` of --config) with workers on this host, instead of once here.
    #[arg(long, conflicts_with = "job")]
    fleet: bool,
    /// With --fleet: the samples generated, one run each.
    #[arg(long, requires = "fleet", default_value_t = 12)]
    samples: u32,
    /// With --fleet: the workers started.
    #[arg(long, requires = "fleet", default_value_t = 3)]
    workers: u32,
}

impl DemoCommand {
    /// The fleet's demo, when asked for.
    pub(crate) fn fleet(&self) -> Option<crate::fleet::demo::FleetDemo> {
        self.fleet.then_some(crate::fleet::demo::FleetDemo {
            samples: self.samples,
            workers: self.workers.max(1),
        })
    }
}

/// The bundled sidecar served over HTTP by a child `maljan sidecar --http`, stopped when
/// dropped.
pub(crate) struct HttpSidecar {
    child: Child,
    pub(crate) url: String,
}

/// How long the HTTP sidecar is given to remove its sessions' job directories once asked
/// to stop, before it is killed.
const SIDECAR_STOP_GRACE: Duration = Duration::from_secs(5);

impl Drop for HttpSidecar {
    /// SIGTERM first, so that the sidecar removes the job directories of its sessions (the
    /// uploaded members) from the temporary directory; SIGKILL past the grace.
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        if nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).is_ok() {
            let deadline = Instant::now() + SIDECAR_STOP_GRACE;
            while Instant::now() < deadline {
                if !matches!(self.child.try_wait(), Ok(None)) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn demo_error(detail: String) -> CliError {
    CliError::Demo(detail)
}

/// Starts `maljan sidecar --http 127.0.0.1:0` and reads the endpoint it announces.
pub(crate) fn serve_http_sidecar() -> Result<HttpSidecar, CliError> {
    let exe = std::env::current_exe().map_err(CliError::OwnExecutable)?;
    let mut child = Command::new(exe)
        .args(["sidecar", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| demo_error(format!("the HTTP sidecar could not start: {e}")))?;
    let Some(stderr) = child.stderr.take() else {
        return Err(demo_error("the HTTP sidecar has no stderr".to_owned()));
    };
    let mut stderr = BufReader::new(stderr);
    let mut line = String::new();
    let read = stderr.read_line(&mut line);
    let url = line.trim().strip_prefix("listening on ").map(str::to_owned);
    let sidecar = HttpSidecar {
        child,
        url: url.unwrap_or_default(),
    };
    if read.is_err() || sidecar.url.is_empty() {
        return Err(demo_error(format!(
            "the HTTP sidecar did not say where it listens (it said {:?})",
            line.trim()
        )));
    }
    // Its log lines are drained so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in stderr.lines() {});
    Ok(sidecar)
}

/// A ZIP archive: a script, a UTF-16 text, and a nested archive holding a text; `variant`
/// numbers the text, so that the archives of a batch differ.
pub(crate) fn sample_archive(variant: u32) -> Result<Vec<u8>, CliError> {
    let zip_error = |e: zip::result::ZipError| demo_error(format!("the demo sample: {e}"));
    let io_error = |e: std::io::Error| demo_error(format!("the demo sample: {e}"));
    let options = zip::write::SimpleFileOptions::default();
    let mut inner = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    inner.start_file("readme.txt", options).map_err(zip_error)?;
    inner
        .write_all(
            format!("fetch the next stage from http://update.example.test/stage{variant}\n")
                .as_bytes(),
        )
        .map_err(io_error)?;
    let inner = inner.finish().map_err(zip_error)?.into_inner();
    let mut notes = vec![0xFF, 0xFE];
    for unit in "meeting notes: invoice attached, enable macros".encode_utf16() {
        notes.extend_from_slice(&unit.to_le_bytes());
    }
    let mut outer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in [
        (
            "payload.js",
            &b"var s = atob('ZXZhbCgiYWxlcnQoMSkiKQ=='); eval(s);\n"[..],
        ),
        ("notes-utf16.txt", &notes[..]),
        ("inner.zip", &inner[..]),
    ] {
        outer.start_file(name, options).map_err(zip_error)?;
        outer.write_all(bytes).map_err(io_error)?;
    }
    Ok(outer.finish().map_err(zip_error)?.into_inner())
}

fn job_directory(options: &DemoCommand) -> PathBuf {
    options.job.clone().unwrap_or_else(|| {
        let ledger = options
            .ledger
            .clone()
            .unwrap_or_else(ledger_file::default_path);
        ledger_file::new_job_dir(&ledger)
    })
}

/// Writes the sample into the job's directory as its sample.
fn add_sample(job: &Job, dir: &Path) -> Result<(), CliError> {
    let staging = dir.join(".demo-sample");
    std::fs::create_dir_all(&staging).map_err(|e| CliError::Job {
        path: staging.clone(),
        source: e,
    })?;
    let source = staging.join("sample.zip");
    std::fs::write(&source, sample_archive(2)?).map_err(|e| CliError::Job {
        path: source.clone(),
        source: e,
    })?;
    let added = job.add_sample(&source).map_err(|e| CliError::Job {
        path: source.clone(),
        source: e,
    });
    let _ = std::fs::remove_dir_all(&staging);
    added.map(drop)
}

pub(crate) async fn run(config: Config, options: DemoCommand) -> Result<ExitCode, CliError> {
    let pack = Pack::parse(PACK, "packs/demo.toml").map_err(|e| demo_error(e.to_string()))?;
    let dir = job_directory(&options);
    let job = Arc::new(Job::create(&dir).map_err(|e| CliError::Job {
        path: dir.clone(),
        source: e,
    })?);
    add_sample(&job, job.dir())?;
    let http = serve_http_sidecar()?;
    let servers = vec![
        config.server(Some(BUNDLED))?,
        ServerConfig::http("remote", &http.url),
    ];
    let ledger = options.ledger.unwrap_or_else(ledger_file::default_path);
    let code = PackRun {
        pack: &pack,
        job,
        servers,
        settings: config.settings.clone(),
    }
    .carry_out(ledger, options.format, StopSignals::catch()?)
    .await;
    drop(http);
    code
}
