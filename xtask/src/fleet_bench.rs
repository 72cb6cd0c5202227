//! `cargo xtask fleet-bench [RUNS]`: the fleet under load on this host. RUNS runs (1,000 by
//! default) of a one-call pack are submitted to a throwaway PostgreSQL and Garage node and
//! carried out by 1, 2 and 4 `maljan worker` processes in turn; for each, the wall time
//! until the last worker is done, runs per second, and the check that every run completed
//! and the ledger holds exactly one row per call. Beside them, a local `maljan run` of the
//! same pack, and the fleet's own time per run as the workers measured it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::cargo;
use crate::garage::{BUCKET, Garage};
use crate::postgres::Postgres;

const PACK: &str = "[pack]\nname = \"quick\"\n\n[[step]]\nid = \"info\"\nserver = \"sidecar\"\n\
                    tool = \"file_info\"\narguments = { path = \"$sample\" }\n";

/// Local runs timed for the baseline.
const LOCAL_RUNS: u32 = 20;

fn maljan_binary() -> PathBuf {
    crate::target_dir().join("release").join("maljan")
}

fn psql(url: &str, sql: &str) -> Result<String, String> {
    let output = Command::new("psql")
        .args(["-X", "-q", "-t", "-A", "-c", sql, url])
        .output()
        .map_err(|e| format!("psql could not run: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "psql {sql}: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

struct Bench<'a> {
    postgres: &'a Postgres,
    garage: &'a Garage,
    dir: PathBuf,
    runs: u32,
}

impl Bench<'_> {
    /// A config naming a new database and bucket prefix `name`.
    fn config(&self, name: &str) -> Result<(PathBuf, String), String> {
        let server = self.postgres.url();
        psql(&server, &format!("CREATE DATABASE {name}"))?;
        let base = server.rsplit_once('/').map_or(server.as_str(), |(b, _)| b);
        let database = format!("{base}/{name}");
        let config = self.dir.join(format!("{name}.toml"));
        let secret = self.dir.join("s3-secret");
        std::fs::write(&secret, &self.garage.secret).map_err(|e| e.to_string())?;
        std::fs::write(
            &config,
            format!(
                "[store]\npostgres = \"{database}\"\nobjects = \"s3://{BUCKET}/{name}\"\n\
                 endpoint = \"{}\"\nregion = \"garage\"\naccess_key_id = \"{}\"\n\
                 secret_access_key_file = \"{}\"\n",
                self.garage.endpoint,
                self.garage.key_id,
                secret.display()
            ),
        )
        .map_err(|e| e.to_string())?;
        Ok((config, database))
    }

    fn maljan(&self, config: &Path) -> Command {
        let mut command = Command::new(maljan_binary());
        command
            .env("MALJAN_CONFIG", config)
            .env("MALJAN_LEDGER", self.dir.join("ledger.jsonl"))
            .env("RUST_LOG", "error");
        command
    }

    /// Submits the runs and carries them out with `workers` workers; returns the wall time
    /// and the workers' own accounts of the fleet's time.
    fn measure(&self, workers: u32) -> Result<(Duration, Vec<String>), String> {
        let name = format!("bench_{}_{workers}", std::process::id());
        let (config, database) = self.config(&name)?;
        let samples = self.dir.join(format!("samples-{workers}"));
        std::fs::create_dir_all(&samples).map_err(|e| e.to_string())?;
        let mut submit = self.maljan(&config);
        submit.arg("submit").arg(self.dir.join("pack.toml"));
        for i in 0..self.runs {
            let sample = samples.join(format!("sample-{i}.txt"));
            std::fs::write(&sample, format!("sample {i} of {workers}: eval("))
                .map_err(|e| e.to_string())?;
            submit.arg(sample);
        }
        crate::run(submit.stdout(Stdio::null()))?;
        let started = Instant::now();
        let children = (0..workers)
            .map(|w| {
                self.maljan(&config)
                    .args([
                        "worker",
                        "--until-empty",
                        "--name",
                        &format!("w{w}"),
                        "--jobs",
                    ])
                    .arg(self.dir.join(format!("jobs-{workers}-{w}")))
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .map_err(|e| format!("a worker could not start: {e}"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut accounts = Vec::new();
        for child in children {
            let output = child
                .wait_with_output()
                .map_err(|e| format!("a worker was lost: {e}"))?;
            let text = String::from_utf8_lossy(&output.stderr);
            if !output.status.success() {
                return Err(format!("a worker failed: {text}"));
            }
            accounts.extend(
                text.lines()
                    .filter(|l| l.contains("stopped after"))
                    .map(str::to_owned),
            );
        }
        let wall = started.elapsed();
        let completed = psql(
            &database,
            "SELECT count(*) FROM maljan_runs WHERE state = 'completed'",
        )?;
        let rows = psql(
            &database,
            "SELECT count(*), count(DISTINCT fleet_run) FROM maljan_ledger",
        )?;
        let expected = format!("{}|{}", self.runs, self.runs);
        if completed != self.runs.to_string() || rows != expected {
            return Err(format!(
                "with {workers} worker(s): {completed} of {} runs completed, ledger rows|runs {rows} (expected {expected})",
                self.runs
            ));
        }
        Ok((wall, accounts))
    }

    /// The mean wall time of a local `maljan run` of the pack.
    fn local_run(&self) -> Result<Duration, String> {
        let sample = self.dir.join("local-sample.txt");
        std::fs::write(&sample, "a local sample: eval(").map_err(|e| e.to_string())?;
        let config = self.dir.join("local.toml");
        std::fs::write(&config, "").map_err(|e| e.to_string())?;
        let started = Instant::now();
        for i in 0..LOCAL_RUNS {
            crate::run(
                self.maljan(&config)
                    .arg("run")
                    .arg(self.dir.join("pack.toml"))
                    .arg(&sample)
                    .arg("--job")
                    .arg(self.dir.join(format!("local-job-{i}")))
                    .stdout(Stdio::null())
                    .stderr(Stdio::null()),
            )?;
        }
        Ok(started.elapsed() / LOCAL_RUNS)
    }
}

pub(crate) fn run(runs: Option<&str>) -> Result<(), String> {
    let runs: u32 = runs
        .map(str::parse)
        .transpose()
        .map_err(|e| format!("RUNS is not a count: {e}"))?
        .unwrap_or(1000);
    cargo(&["build", "--release", "-p", "maljan-cli"], &[])?;
    let postgres = Postgres::start()?;
    let garage = Garage::start()?;
    let dir = crate::empty_service_dir("fleet-bench")?;
    std::fs::write(dir.join("pack.toml"), PACK).map_err(|e| e.to_string())?;
    let bench = Bench {
        postgres: &postgres,
        garage: &garage,
        dir,
        runs,
    };
    let local = bench.local_run()?;
    println!(
        "fleet-bench: a local `maljan run` of the pack: {:.1} ms (mean of {LOCAL_RUNS})",
        local.as_secs_f64() * 1000.0
    );
    for workers in [1, 2, 4] {
        let (wall, accounts) = bench.measure(workers)?;
        println!(
            "fleet-bench: {runs} runs, {workers} worker(s): {:.1} s, {:.1} runs/s, {:.1} ms per run per worker; every run completed, one ledger row per call",
            wall.as_secs_f64(),
            f64::from(runs) / wall.as_secs_f64(),
            wall.as_secs_f64() * 1000.0 * f64::from(workers) / f64::from(runs)
        );
        for account in accounts {
            println!("fleet-bench:   {account}");
        }
    }
    Ok(())
}
