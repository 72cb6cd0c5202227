//! `maljan submit`, `maljan worker` and the commands that read the fleet, against a real
//! PostgreSQL and a real Garage node: `cargo xtask fleet` starts both and runs these (they
//! are ignored otherwise). Workers are real processes, killed and stopped for real.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

const MALJAN: &str = env!("CARGO_BIN_EXE_maljan");

/// How long a test waits for something a worker must do before it fails.
const PATIENCE: Duration = Duration::from_secs(60);

fn variable(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set: run `cargo xtask fleet`"))
}

/// A fleet of one's own: a new database, a prefix of the bucket, a config file naming
/// both, and a directory for samples, packs and the workers' jobs.
struct Fleet {
    dir: tempfile::TempDir,
    config: PathBuf,
    database: String,
}

impl Fleet {
    fn new(lease_s: u32) -> Fleet {
        static COUNT: AtomicU32 = AtomicU32::new(0);
        let n = COUNT.fetch_add(1, Ordering::Relaxed);
        let server = variable("MALJAN_TEST_POSTGRES");
        let name = format!("cli_{}_{n}", std::process::id());
        psql(&server, &format!("CREATE DATABASE {name}"));
        let base = server.rsplit_once('/').map_or(server.as_str(), |(b, _)| b);
        let database = format!("{base}/{name}");
        let dir = tempfile::tempdir().expect("dir");
        let config = dir.path().join("maljan.toml");
        let text = format!(
            "[store]\npostgres = \"{database}\"\nobjects = \"s3://{}/{name}\"\n\
             endpoint = \"{}\"\nregion = \"garage\"\naccess_key_id = \"{}\"\n\
             secret_access_key_file = \"{}\"\nlease_s = {lease_s}\n\
             max_attempts = 3\n\n[servers.gate]\ncommand = \"python3\"\nargs = [\"{}\"]\n",
            variable("MALJAN_TEST_S3_BUCKET"),
            variable("MALJAN_TEST_S3_ENDPOINT"),
            variable("MALJAN_TEST_S3_KEY_ID"),
            variable("MALJAN_TEST_S3_SECRET_FILE"),
            dir.path().join("gate.py").display(),
        );
        std::fs::write(&config, text).expect("config");
        std::fs::write(dir.path().join("gate.py"), GATE_SERVER).expect("gate server");
        Fleet {
            dir,
            config,
            database,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(MALJAN);
        command
            .args(args)
            .env("MALJAN_CONFIG", &self.config)
            .env("MALJAN_LEDGER", self.path("ledger.jsonl"))
            .env("MALJAN_GATE_DIR", self.dir.path())
            .env("RUST_LOG", "warn");
        command
    }

    fn maljan(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("maljan runs")
    }

    /// `maljan worker --name NAME ARGS`, its stderr piped.
    fn worker(&self, name: &str, args: &[&str]) -> Child {
        let jobs = self.path(&format!("jobs-{name}"));
        let jobs = jobs.display().to_string();
        let mut all = vec!["worker", "--name", name, "--jobs", &jobs];
        all.extend_from_slice(args);
        self.command(&all)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("a worker")
    }

    fn query(&self, sql: &str) -> String {
        psql(&self.database, sql)
    }

    /// Waits until `sql` answers `expected`.
    fn await_query(&self, sql: &str, expected: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let answer = self.query(sql);
            if answer == expected {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{sql} answers {answer:?}, not {expected:?}"
            );
            std::thread::yield_now();
        }
    }

    /// Writes a pack and `count` samples (the last two with the same bytes); submits them.
    fn submit(&self, pack: &str, count: usize) -> Vec<String> {
        std::fs::write(self.path("pack.toml"), pack).expect("pack");
        let mut samples = Vec::new();
        for i in 0..count {
            let sample = self.path(&format!("sample-{i}.txt"));
            let bytes = format!(
                "sample {} with eval( inside",
                i.min(count.saturating_sub(2))
            );
            std::fs::write(&sample, bytes).expect("sample");
            samples.push(sample.display().to_string());
        }
        let pack = self.path("pack.toml").display().to_string();
        let mut args = vec!["submit", pack.as_str()];
        args.extend(samples.iter().map(String::as_str));
        let output = self.maljan(&args);
        assert!(output.status.success(), "{}", text(&output));
        stdout(&output)
            .lines()
            .map(|line| line.split_whitespace().next().expect("an id").to_owned())
            .collect()
    }
}

fn psql(url: &str, sql: &str) -> String {
    let output = Command::new("psql")
        .args(["-X", "-q", "-t", "-A", "-c", sql, url])
        .output()
        .expect("psql runs");
    assert!(output.status.success(), "{sql}: {}", text(&output));
    stdout(&output).trim().to_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// A stdio server with one tool, `gate`: it touches `entered` in $MALJAN_GATE_DIR when
/// called and answers once `open` is there, so a test holds a run mid-step for as long as
/// it needs.
const GATE_SERVER: &str = r#"
import json, os, sys, time
gate = os.environ["MALJAN_GATE_DIR"]
for line in sys.stdin:
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "gate", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "gate", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        open(os.path.join(gate, "entered"), "w").close()
        while not os.path.exists(os.path.join(gate, "open")):
            time.sleep(0.01)
        result = {"content": [{"type": "text", "text": "{\"passed\": true}"}]}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": ident,
                          "error": {"code": -32601, "message": "no such method"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}), flush=True)
"#;

/// One quick call on the bundled sidecar.
const QUICK_PACK: &str = "[pack]\nname = \"quick\"\n\n[[step]]\nid = \"info\"\nserver = \"sidecar\"\n\
                          tool = \"file_info\"\narguments = { path = \"$sample\" }\n";

/// A quick call, then the gate.
const GATED_PACK: &str = "[pack]\nname = \"gated\"\n\n[[step]]\nid = \"info\"\nserver = \"sidecar\"\n\
                          tool = \"file_info\"\narguments = { path = \"$sample\" }\n\n[[step]]\n\
                          id = \"gate\"\nserver = \"gate\"\ntool = \"gate\"\n";

fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + PATIENCE;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::yield_now();
    }
}

fn finish(mut worker: Child) -> (bool, String) {
    let mut err = String::new();
    if let Some(stderr) = worker.stderr.take() {
        for line in BufReader::new(stderr).lines() {
            err.push_str(&line.expect("line"));
            err.push('\n');
        }
    }
    let status = worker.wait().expect("the worker ends");
    (status.success(), err)
}

#[test]
#[ignore = "needs PostgreSQL and Garage: cargo xtask fleet starts both"]
fn a_batch_is_carried_out_by_a_worker_and_its_reports_and_ledger_are_read_from_the_stores() {
    let fleet = Fleet::new(30);
    let runs = fleet.submit(QUICK_PACK, 3);
    assert_eq!(runs.len(), 3);
    // The last two samples hold the same bytes: stored once.
    let submitted = fleet.query("SELECT count(DISTINCT sample_sha256) FROM maljan_runs");
    assert_eq!(submitted, "2");
    let worker = fleet.worker("w1", &["--until-empty"]);
    let (ok, err) = finish(worker);
    assert!(ok, "{err}");
    assert_eq!(
        fleet.query("SELECT string_agg(state || ':' || attempts, ',') FROM maljan_runs"),
        "completed:1,completed:1,completed:1"
    );
    // Exactly one ledger row per call, each with its run and attempt.
    assert_eq!(
        fleet.query("SELECT count(*), count(DISTINCT fleet_run), min(attempt), max(attempt) FROM maljan_ledger"),
        "3|3|1|1"
    );
    let report = fleet.maljan(&["report", &runs[0]]);
    assert!(report.status.success(), "{}", text(&report));
    let markdown = stdout(&report);
    assert!(
        markdown.contains(&format!("# Run {}", runs[0])),
        "{markdown}"
    );
    assert!(markdown.contains("Attempts: 1"), "{markdown}");
    let json = fleet.maljan(&["report", &runs[1], "--format", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    assert_eq!(json["run"], runs[1].as_str());
    assert_eq!(json["verdict"], "completed");
    let ledger = fleet.maljan(&["ledger", "--fleet", "--run", &runs[2], "--format", "json"]);
    assert!(ledger.status.success(), "{}", text(&ledger));
    let ledger: serde_json::Value = serde_json::from_slice(&ledger.stdout).expect("JSON");
    assert_eq!(ledger["entries"].as_array().map(Vec::len), Some(1));
    assert_eq!(ledger["entries"][0]["tool"], "file_info");
    let job = ledger["entries"][0]["job"]
        .as_str()
        .expect("a job")
        .to_owned();
    let by_job = fleet.maljan(&["ledger", "--fleet", "--fleet-job", &job, "--format", "json"]);
    let by_job: serde_json::Value = serde_json::from_slice(&by_job.stdout).expect("JSON");
    assert_eq!(by_job["entries"].as_array().map(Vec::len), Some(1));
    assert_eq!(by_job["entries"][0]["run"], runs[2].as_str());
    let listed = fleet.maljan(&["runs"]);
    assert!(stdout(&listed).contains("3 completed"), "{}", text(&listed));
    let unknown = fleet.maljan(&["report", "no-such-run"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown));
}

#[test]
#[ignore = "needs PostgreSQL and Garage: cargo xtask fleet starts both"]
fn a_worker_killed_mid_run_leaves_the_run_to_another_and_the_report_shows_two_attempts() {
    let fleet = Fleet::new(2);
    let runs = fleet.submit(GATED_PACK, 1);
    let mut doomed = fleet.worker("doomed", &[]);
    wait_for_file(&fleet.path("entered"));
    fleet.await_query(
        "SELECT count(*) FROM maljan_ledger WHERE attempt = 1 AND tool = 'file_info'",
        "1",
    );
    doomed.kill().expect("SIGKILL");
    doomed.wait().expect("reaped");
    std::fs::write(fleet.path("open"), "").expect("open the gate");
    let (ok, err) = finish(fleet.worker("heir", &["--until-empty"]));
    assert!(ok, "{err}");
    assert_eq!(
        fleet.query("SELECT state || ':' || attempts || ':' || lease_owner FROM maljan_runs"),
        "completed:2:heir"
    );
    // Every call once, with its attempt: the first attempt's quick call, then both of the
    // second's; the gate call the dead worker never saw answered is not there.
    assert_eq!(
        fleet.query(
            "SELECT string_agg(attempt || ':' || tool, ',' ORDER BY attempt, tool) FROM maljan_ledger"
        ),
        "1:file_info,2:file_info,2:gate"
    );
    let report = stdout(&fleet.maljan(&["report", &runs[0]]));
    assert!(report.contains("Attempts: 2"), "{report}");
}

#[test]
#[ignore = "needs PostgreSQL and Garage: cargo xtask fleet starts both"]
fn sigterm_hands_the_run_under_way_back_and_it_is_not_an_attempt_lost() {
    let fleet = Fleet::new(30);
    fleet.submit(GATED_PACK, 1);
    let stopping = fleet.worker("stopping", &[]);
    wait_for_file(&fleet.path("entered"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(stopping.id()).expect("pid")),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("SIGTERM");
    let (ok, err) = finish(stopping);
    assert!(ok, "{err}");
    assert!(err.contains("handed back"), "{err}");
    assert_eq!(
        fleet.query("SELECT state || ':' || attempts || ':' || handed_back FROM maljan_runs"),
        "queued:1:1"
    );
    std::fs::write(fleet.path("open"), "").expect("open the gate");
    let (ok, err) = finish(fleet.worker("next", &["--until-empty"]));
    assert!(ok, "{err}");
    assert_eq!(
        fleet.query("SELECT state || ':' || attempts FROM maljan_runs"),
        "completed:2"
    );
}

#[test]
#[ignore = "needs PostgreSQL and Garage: cargo xtask fleet starts both"]
fn a_batch_goes_on_when_postgresql_restarts_mid_run_and_nothing_is_lost() {
    let fleet = Fleet::new(30);
    fleet.submit(GATED_PACK, 3);
    let mut worker = fleet.worker("steady", &["--until-empty"]);
    wait_for_file(&fleet.path("entered"));
    let pg_ctl = variable("MALJAN_TEST_PG_CTL");
    let pg_ctl: Vec<&str> = pg_ctl.split(' ').collect();
    let run_pg_ctl = |args: &[&str]| {
        let status = Command::new(pg_ctl[0])
            .args(&pg_ctl[1..])
            .args(args)
            .stdout(Stdio::null())
            .status()
            .expect("pg_ctl runs");
        assert!(status.success(), "pg_ctl {args:?}");
    };
    run_pg_ctl(&["-m", "fast", "stop"]);
    // The gate opens while the server is down: the worker must keep the gate call's entry
    // until the server is back.
    std::fs::write(fleet.path("open"), "").expect("open the gate");
    let stderr = worker.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let mut seen = String::new();
    for line in lines.by_ref() {
        let line = line.expect("line");
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("could not reach PostgreSQL") || line.contains("trying again") {
            break;
        }
    }
    run_pg_ctl(&["start"]);
    for line in lines {
        seen.push_str(&line.expect("line"));
        seen.push('\n');
    }
    let status = worker.wait().expect("the worker ends");
    assert!(status.success(), "{seen}");
    assert!(
        seen.contains("trying again"),
        "the worker waited for the server: {seen}"
    );
    assert_eq!(
        fleet.query("SELECT string_agg(state || ':' || attempts, ',') FROM maljan_runs"),
        "completed:1,completed:1,completed:1",
        "{seen}"
    );
    assert_eq!(
        fleet.query("SELECT count(*) FROM maljan_ledger"),
        "6",
        "{seen}"
    );
}

#[test]
#[ignore = "needs PostgreSQL and Garage: cargo xtask fleet starts both"]
fn the_fleet_demo_carries_the_demo_pack_over_a_batch_with_three_workers() {
    let fleet = Fleet::new(30);
    let output = fleet.maljan(&["demo", "--fleet", "--samples", "6"]);
    assert!(output.status.success(), "{}", text(&output));
    let shown = stdout(&output);
    assert_eq!(
        shown
            .lines()
            .filter(|l| l.contains("  completed  "))
            .count(),
        6,
        "{shown}"
    );
    assert!(shown.contains("reports: in s3://"), "{shown}");
    assert_eq!(
        fleet.query("SELECT count(*) FROM maljan_runs WHERE state = 'completed' AND attempts = 1"),
        "6"
    );
    // Every run made the same calls, each ledgered once: the demo pack's steps over
    // archives of the same shape.
    assert_eq!(
        fleet
            .query(
                "SELECT count(DISTINCT n) || ':' || min(n) FROM \
             (SELECT count(*) AS n FROM maljan_ledger GROUP BY fleet_run) AS per_run"
            )
            .split(':')
            .next(),
        Some("1")
    );
    let run = shown.split_whitespace().next().expect("a run id");
    let report = stdout(&fleet.maljan(&["report", run]));
    assert!(report.contains("an archive across two servers"), "{report}");
    // Each file a step took is in the object store, read back anywhere by its digest.
    let json = fleet.maljan(&["report", run, "--format", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let taken: Vec<&serde_json::Value> = json["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .flat_map(|s| s["taken"].as_array().into_iter().flatten())
        .filter(|t| t["status"] == "taken")
        .collect();
    assert!(taken.len() >= 4, "{json}");
    for (i, file) in taken.iter().enumerate() {
        let copy = fleet.path(&format!("artefact-{i}"));
        let fetched = fleet.maljan(&[
            "artefact",
            file["sha256"].as_str().expect("sha256"),
            "--out",
            copy.to_str().expect("utf-8"),
        ]);
        assert!(fetched.status.success(), "{}", text(&fetched));
        assert_eq!(
            std::fs::metadata(&copy).expect("fetched").len(),
            file["size"].as_u64().expect("size")
        );
    }
}

/// A TCP relay to the object store that a test can cut: every connection through it is
/// shut and new ones are refused, as when the store stops.
struct Relay {
    address: std::net::SocketAddr,
    open: std::sync::Arc<std::sync::atomic::AtomicBool>,
    connections: std::sync::Arc<std::sync::Mutex<Vec<std::net::TcpStream>>>,
}

impl Relay {
    fn to(endpoint: &str) -> Relay {
        let target = endpoint.trim_start_matches("http://").to_owned();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("relay");
        let address = listener.local_addr().expect("address");
        let open = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let connections = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (still_open, kept) = (open.clone(), connections.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if !still_open.load(Ordering::SeqCst) {
                    // The listener goes with this thread: later connections are refused.
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = std::net::TcpStream::connect(&target) else {
                    continue;
                };
                let mut kept = kept.lock().expect("lock");
                for stream in [&client, &server] {
                    kept.push(stream.try_clone().expect("clone"));
                }
                for (mut from, mut to) in [
                    (
                        client.try_clone().expect("clone"),
                        server.try_clone().expect("clone"),
                    ),
                    (server, client),
                ] {
                    std::thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(std::net::Shutdown::Write);
                    });
                }
            }
        });
        Relay {
            address,
            open,
            connections,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Cuts every connection and refuses new ones.
    fn cut(&self) {
        self.open.store(false, Ordering::SeqCst);
        // Wakes the accepting thread, which then ends and closes the listener.
        let _ = std::net::TcpStream::connect(self.address);
        for stream in self.connections.lock().expect("lock").drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }
}

#[test]
#[ignore = "needs PostgreSQL and Garage: cargo xtask fleet starts both"]
fn a_run_goes_on_when_the_object_store_stops_and_says_where_its_report_is() {
    let fleet = Fleet::new(30);
    let relay = Relay::to(&variable("MALJAN_TEST_S3_ENDPOINT"));
    let config = std::fs::read_to_string(&fleet.config)
        .expect("config")
        .replace(
            &format!("endpoint = \"{}\"", variable("MALJAN_TEST_S3_ENDPOINT")),
            &format!("endpoint = \"{}\"\npatience_s = 1", relay.endpoint()),
        );
    std::fs::write(&fleet.config, config).expect("config through the relay");
    let runs = fleet.submit(GATED_PACK, 1);
    let worker = fleet.worker("w1", &["--until-empty"]);
    wait_for_file(&fleet.path("entered"));
    relay.cut();
    std::fs::write(fleet.path("open"), "").expect("open the gate");
    let (ok, err) = finish(worker);
    assert!(ok, "{err}");
    assert_eq!(
        fleet.query("SELECT state || ':' || verdict FROM maljan_runs"),
        "completed:completed",
        "{err}"
    );
    assert_eq!(fleet.query("SELECT count(*) FROM maljan_ledger"), "2");
    let report = fleet.maljan(&["report", &runs[0]]);
    assert_eq!(report.status.code(), Some(2), "{}", text(&report));
    let said = text(&report);
    assert!(
        said.contains("the report is not in the object store"),
        "{said}"
    );
    let kept = fleet.path("jobs-w1");
    assert!(said.contains(&kept.display().to_string()), "{said}");
    let dir = std::fs::read_dir(&kept)
        .expect("jobs")
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("fleet-"))
        .expect("the job is kept");
    assert!(dir.path().join("report.html").is_file());
}
