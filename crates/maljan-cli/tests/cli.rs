//! The `maljan` binary as a user runs it.

use std::io::Read;
use std::process::{Command, Output};

const MALJAN: &str = env!("CARGO_BIN_EXE_maljan");

/// Runs `maljan`, recording calls in a ledger of this test process's own.
fn maljan(args: &[&str]) -> Output {
    let ledger =
        std::env::temp_dir().join(format!("maljan-cli-tests-{}.jsonl", std::process::id()));
    maljan_with_ledger(args, &ledger)
}

fn maljan_with_ledger(args: &[&str], ledger: &std::path::Path) -> Output {
    Command::new(MALJAN)
        .args(args)
        .env_remove("MALJAN_CONFIG")
        .env("MALJAN_LEDGER", ledger)
        .output()
        .expect("maljan runs")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_call_prints_the_card_and_a_file_info_answer() {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let output = maljan(&[
        "call",
        "sidecar",
        "file_info",
        &format!("path={manifest}"),
        "--card",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("server sidecar: maljan-sidecar"), "{text}");
    assert!(
        text.contains("file_info") && text.contains("archive_list"),
        "{text}"
    );
    assert!(text.contains("\nok\n"), "{text}");
    let size = std::fs::metadata(manifest).expect("the manifest").len();
    assert!(text.contains(&format!("\"size\": {size}")), "{text}");
}

#[test]
fn probe_prints_the_card_and_json_on_request() {
    let output = maljan(&["probe"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("stdout: "), "{}", stdout(&output));
    let output = maljan(&["probe", "sidecar", "--json"]);
    let card: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(card["server"], "sidecar");
    assert_eq!(card["stdout"]["stray"], 0);
}

#[test]
fn tools_leaves_out_the_platform_primitives() {
    let output = maljan(&["tools", "--json"]);
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(document["schema_version"], 1, "{document}");
    assert_eq!(document["server"], "sidecar", "{document}");
    let names: Vec<&str> = document["tools"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["file_info", "strings", "archive_list", "unpack"]);
}

#[test]
fn tools_shows_each_parameter_and_a_call_types_its_text_by_the_schema() {
    let output = maljan(&["tools", "sidecar", "strings"]);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.starts_with("strings  "), "{text}");
    assert!(
        !text.contains("file_info"),
        "only the tool asked for: {text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("min_length") && l.contains("integer, default 4")),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.contains("path") && l.contains("string, required")),
        "{text}"
    );

    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let path = format!("path={manifest}");
    let output = maljan(&[
        "call",
        "sidecar",
        "strings",
        &path,
        "min_length=30",
        "limit=1",
        "--format",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(answer["answer"]["value"]["min_length"], 30, "{answer}");

    let output = maljan(&["call", "sidecar", "strings", &path, "min_length=many"]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    let error = stderr(&output);
    assert!(
        error.contains("min_length is integer") && error.contains("min_length:=JSON"),
        "{error}"
    );
    let output = maljan(&["tools", "sidecar", "no_such_tool"]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("strings"), "{}", stderr(&output));
}

#[test]
fn a_server_named_after_double_dash_or_in_mcp_servers_json_is_called_like_a_configured_one() {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let output = maljan(&["tools", "file_info", "--", MALJAN, "sidecar"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("file_info  "),
        "{}",
        stdout(&output)
    );

    let path = format!("path={manifest}");
    let output = maljan(&[
        "call",
        "strings",
        &path,
        "min_length=40",
        "--format",
        "json",
        "--",
        MALJAN,
        "sidecar",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let answer: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(answer["answer"]["value"]["min_length"], 40, "{answer}");

    let output = maljan(&["probe", "--", MALJAN, "sidecar"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).contains("maljan-sidecar"),
        "{}",
        stdout(&output)
    );

    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("claude_desktop_config.json");
    let servers = serde_json::json!({"mcpServers": {
        "analysis": {"command": MALJAN, "args": ["sidecar"], "disabled": false}
    }});
    std::fs::write(&config, servers.to_string()).expect("write");
    let config = config.display().to_string();
    let output = maljan(&["--config", &config, "tools", "analysis", "file_info"]);
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).starts_with("file_info  "),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_failed_call_exits_one_with_the_code_and_remediation() {
    let output = maljan(&["call", "sidecar", "file_info", "path=no/such/file"]);
    assert_eq!(output.status.code(), Some(1));
    let text = stdout(&output);
    assert!(text.contains("failed: no_such_file"), "{text}");
    assert!(text.contains("remediation:"), "{text}");
}

#[test]
fn each_kind_of_ending_has_its_own_exit_status_naming_the_remedy() {
    let cases: [(&[&str], i32, &str); 7] = [
        (&["call", "sidecar", "nope"], 2, "maljan tools sidecar"),
        (&["call", "sidecar", "file_info", "path"], 2, "key=value"),
        (
            &["call", "sidecar", "file_info", "--no-such-option"],
            2,
            "--no-such-option",
        ),
        (&["probe", "elsewhere"], 5, "known servers: sidecar"),
        (
            &["--config", "/no/such/maljan.toml", "probe"],
            5,
            "cannot read it",
        ),
        (&["probe", "--", "/no/such/server"], 6, "/no/such/server"),
        (
            &["call", "sidecar", "file_info", "path=/no/such/file"],
            1,
            "remediation: ",
        ),
    ];
    for (args, status, remedy) in cases {
        let output = maljan(args);
        assert_eq!(
            output.status.code(),
            Some(status),
            "{args:?}: {}",
            stderr(&output)
        );
        // A tool's own failure is its answer, on standard output; the rest are errors.
        let shown = format!("{}{}", stdout(&output), stderr(&output));
        assert!(shown.contains(remedy), "{args:?}: {shown}");
    }
}

#[test]
fn a_configured_server_that_cannot_start_shows_its_stderr() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("maljan.toml");
    std::fs::write(
        &config,
        "[servers.broken]\ncommand = \"sh\"\nargs = [\"-c\", \"echo missing licence >&2; exit 4\"]\n",
    )
    .expect("write");
    let output = maljan(&[
        "--config",
        config.to_str().expect("utf-8"),
        "probe",
        "broken",
    ]);
    assert_eq!(output.status.code(), Some(6));
    let text = stderr(&output);
    assert!(
        text.contains("missing licence") && text.contains("exit status: 4"),
        "{text}"
    );
}

#[test]
fn calls_are_ledgered_and_the_ledger_lists_each_failure_once() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = dir.path().join("calls.jsonl");
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    for args in [
        ["call", "sidecar", "file_info", "path=no/such/file"],
        ["call", "sidecar", "file_info", "path=no/such/file"],
        ["call", "sidecar", "file_info", &format!("path={manifest}")],
        ["call", "sidecar", "strings", "path=no/such/dir/"],
    ] {
        maljan_with_ledger(&args, &ledger);
    }
    let path = ledger.to_str().expect("utf-8");
    let output = maljan_with_ledger(&["ledger", path], &ledger);
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(
        text.contains("2× sidecar/file_info: no_such_file: no/such/file does not exist"),
        "{text}"
    );
    assert!(text.contains("1× sidecar/strings: no_such_file"), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.contains(" ok ")).count(),
        1,
        "{text}"
    );

    let output = maljan_with_ledger(&["ledger", path, "--json"], &ledger);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["entries"].as_array().map(Vec::len), Some(4));
    assert_eq!(report["failures"][0]["count"], 2);
    assert_eq!(
        report["entries"][0]["arguments"],
        serde_json::json!({"path": "no/such/file"})
    );

    let mut bytes = std::fs::read(&ledger).expect("read");
    bytes.extend_from_slice(b"{\"seq\":5,\"ser");
    std::fs::write(&ledger, bytes).expect("tear");
    let output = maljan_with_ledger(&["ledger", path, "--json"], &ledger);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["entries"].as_array().map(Vec::len), Some(4));
    assert!(
        stderr(&output).contains("line 5 skipped, a torn last line"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_file_goes_as_the_jobs_copy_to_a_server_that_reads_only_its_job_and_the_setting_overrides_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sample = dir.path().join("notes.txt");
    std::fs::write(&sample, "the needle is here").expect("write");
    let path = format!("path={}", sample.display());
    let config = dir.path().join("maljan.toml");
    let config_arg = config.display().to_string();
    let ledger = dir.path().join("ledger.jsonl");
    let answered_path = |staging: &str| {
        let entry = format!(
            "[servers.kit]\ncommand = {MALJAN:?}\nargs = [\"sidecar\"]\nstaging = \"{staging}\"\n"
        );
        std::fs::write(&config, entry).expect("write");
        let output = maljan_with_ledger(
            &[
                "--config",
                &config_arg,
                "call",
                "kit",
                "file_info",
                &path,
                "--format",
                "json",
            ],
            &ledger,
        );
        let document: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("one JSON document");
        (output.status.code(), document)
    };
    // The kit's manifest says it reads only its job: by default, it gets the job's copy.
    for staging in ["auto", "always"] {
        let (status, document) = answered_path(staging);
        assert_eq!(status, Some(0), "{staging}: {document}");
        let answered = document["answer"]["value"]["path"]
            .as_str()
            .unwrap_or_default();
        assert!(
            answered.ends_with("/sample/notes.txt") && answered != sample.display().to_string(),
            "{staging}: {document}"
        );
    }
    // Never: the path as written, which the kit refuses (outside its directories).
    let (status, document) = answered_path("never");
    assert_eq!(status, Some(1), "{document}");
    let message = document["answer"]["value"]["error"]["message"]
        .as_str()
        .map_or_else(|| document.to_string(), str::to_owned);
    assert!(message.contains(&sample.display().to_string()), "{message}");
}

#[test]
fn a_staged_sample_goes_to_a_local_server_as_a_path_not_an_upload() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sample = dir.path().join("notes.txt");
    std::fs::write(&sample, "the needle is here").expect("write");
    let job = dir.path().join("job");
    let sample_arg = format!("path={}", sample.display());
    let output = maljan(&[
        "call",
        "sidecar",
        "file_info",
        &sample_arg,
        "--stage",
        sample.to_str().expect("utf-8"),
        "--job",
        job.to_str().expect("utf-8"),
        "--format",
        "json",
    ]);
    assert!(output.status.success(), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let staged = job
        .join("sample/notes.txt")
        .canonicalize()
        .expect("the sample copy");
    assert_eq!(
        report["answer"]["value"]["path"],
        staged.display().to_string()
    );
    assert_eq!(
        report["disclosures"],
        serde_json::json!([]),
        "a local server is never uploaded to"
    );

    let output = maljan(&[
        "call",
        "sidecar",
        "file_info",
        "path=/x",
        "--stage",
        "/etc/hostname",
        "--job",
        job.to_str().expect("utf-8"),
    ]);
    assert_eq!(
        output.status.code(),
        Some(2),
        "the staged file must be an argument"
    );
    assert!(stderr(&output).contains("path=FILE"), "{}", stderr(&output));
    let output = maljan(&[
        "call",
        "sidecar",
        "file_info",
        "path=/x",
        "--stage",
        "/no/such/sample",
        "--job",
        job.to_str().expect("utf-8"),
    ]);
    assert!(
        stderr(&output).contains("cannot be used"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_call_to_a_platform_primitive_is_refused_by_name() {
    for tool in ["get_file", "put_sample", "capabilities"] {
        let output = maljan(&["call", "sidecar", tool, "path=x"]);
        assert_eq!(output.status.code(), Some(2), "{tool}");
        let text = stderr(&output);
        assert!(
            text.contains(&format!("{tool} is a platform primitive")) && text.contains("--take"),
            "{text}"
        );
    }
}

#[test]
fn credentials_in_a_bare_url_stay_out_of_messages_and_the_ledger() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = dir.path().join("calls.jsonl");
    // Nothing listens on port 9 of loopback: the call fails, naming the server.
    let url = "http://ann:hunter2-secret@127.0.0.1:9/mcp";
    let output = maljan_with_ledger(&["call", url, "file_info", "path=x"], &ledger);
    assert_eq!(output.status.code(), Some(6));
    let text = stderr(&output);
    assert!(text.contains("http://***@127.0.0.1:9/mcp"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    let recorded = std::fs::read_to_string(&ledger).unwrap_or_default();
    assert!(!recorded.contains("hunter2"), "{recorded}");
}

/// A pack over the bundled sidecar: file_info and strings of the sample, and a step that
/// needs a file the first never takes (so it is skipped).
const SIDECAR_PACK: &str = r#"
[pack]
name = "text triage"

[[step]]
id = "info"
server = "sidecar"
tool = "file_info"
arguments = { path = "$sample" }
outputs = ["*.carved"]

[[step]]
id = "strings"
server = "sidecar"
tool = "strings"
arguments = { path = "$sample", search = "needle" }

[[step]]
id = "carved"
server = "sidecar"
tool = "strings"
arguments = { path = "$info/*.carved" }
"#;

fn run_files(pack: &str) -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let pack_path = dir.path().join("pack.toml");
    std::fs::write(&pack_path, pack).expect("pack");
    let sample = dir.path().join("sample.txt");
    std::fs::write(&sample, "a needle in a haystack").expect("sample");
    (dir, pack_path, sample)
}

#[test]
fn run_carries_out_a_pack_and_exits_degraded_when_a_step_is_skipped() {
    let (dir, pack, sample) = run_files(SIDECAR_PACK);
    let job = dir.path().join("job");
    let ledger = dir.path().join("ledger.jsonl");
    let output = maljan_with_ledger(
        &[
            "run",
            &pack.display().to_string(),
            &sample.display().to_string(),
            "--job",
            &job.display().to_string(),
            "--format",
            "json",
        ],
        &ledger,
    );
    assert_eq!(output.status.code(), Some(3), "{}", stderr(&output));
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["schema_version"], 1);
    assert_eq!(report["verdict"], "degraded");
    let steps = report["steps"].as_array().expect("steps");
    let status_of = |id: &str| {
        steps.iter().find(|s| s["step"] == id).map(|s| {
            s["status"]["status"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
    };
    assert_eq!(status_of("info").as_deref(), Some("completed"));
    assert_eq!(status_of("strings").as_deref(), Some("completed"));
    assert_eq!(status_of("carved").as_deref(), Some("skipped"));
    assert!(
        job.join("sample/sample.txt").is_file(),
        "the sample is in the job"
    );

    // The ledger, filtered by the job, holds this run's calls, each naming its step.
    let listed = maljan_with_ledger(
        &[
            "ledger",
            &ledger.display().to_string(),
            "--job",
            &job.display().to_string(),
            "--json",
        ],
        &ledger,
    );
    assert!(listed.status.success(), "{}", stderr(&listed));
    let text = stdout(&listed);
    assert!(text.contains("\"step\": \"info\""), "{text}");
    assert!(text.contains("\"step\": \"strings\""), "{text}");
    let other_job = maljan_with_ledger(
        &[
            "ledger",
            &ledger.display().to_string(),
            "--job",
            "/elsewhere",
            "--json",
        ],
        &ledger,
    );
    assert!(
        !stdout(&other_job).contains("\"step\""),
        "another job's calls are left out"
    );
}

#[test]
fn run_refuses_bad_input_before_anything_runs() {
    let (dir, pack, sample) = run_files(SIDECAR_PACK);
    let pack = pack.display().to_string();
    let ledger = dir.path().join("ledger.jsonl");

    let missing = maljan_with_ledger(&["run", &pack, "/no/such/sample"], &ledger);
    assert_eq!(missing.status.code(), Some(2));
    assert!(stderr(&missing).contains("the sample is not a readable file"));

    let used = dir.path().join("used-job");
    std::fs::create_dir_all(&used).expect("dir");
    std::fs::write(used.join("earlier.txt"), "x").expect("file");
    let sample = sample.display().to_string();
    let used = used.display().to_string();
    let existing = maljan_with_ledger(&["run", &pack, &sample, "--job", &used], &ledger);
    assert_eq!(existing.status.code(), Some(2));
    assert!(
        stderr(&existing).contains("--reuse-job"),
        "{}",
        stderr(&existing)
    );

    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[step]]\nid = \"a\"\nserver = \"elsewhere\"\ntool = \"t\"\n",
    )
    .expect("pack");
    let refused = maljan_with_ledger(&["run", &bad.display().to_string(), &sample], &ledger);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("bad.toml:1: step a calls server elsewhere"),
        "{}",
        stderr(&refused)
    );
    assert!(!ledger.exists(), "nothing was called");

    let checked = maljan_with_ledger(&["run", "--check", &pack], &ledger);
    assert!(checked.status.success(), "{}", stderr(&checked));
    assert!(stdout(&checked).contains("3 steps"));
}

#[test]
fn a_run_stopped_by_sigterm_writes_its_report_as_interrupted() {
    let dir = tempfile::tempdir().expect("temp dir");
    let fifo = dir.path().join("started");
    let made = Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success());
    // A server that says it started, then never answers: the run waits for its setup.
    let config = dir.path().join("maljan.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.hang]\ncommand = \"sh\"\nargs = [\"-c\", \"echo started > \\\"$FIFO\\\"; exec sleep 60\"]\nenv = {{ FIFO = {:?} }}\n",
            fifo.display().to_string()
        ),
    )
    .expect("config");
    let (_files, pack, sample) = run_files(
        "[[step]]\nid = \"stuck\"\nserver = \"hang\"\ntool = \"scan\"\narguments = { path = \"$sample\" }\n",
    );
    let job = dir.path().join("job");
    let child = Command::new(MALJAN)
        .args([
            "run",
            &pack.display().to_string(),
            &sample.display().to_string(),
            "--job",
            &job.display().to_string(),
            "--config",
            &config.display().to_string(),
        ])
        .env("MALJAN_LEDGER", dir.path().join("ledger.jsonl"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("maljan runs");
    // Blocks until the server opens the FIFO: the run is under way.
    let said = std::fs::read_to_string(&fifo).expect("the server started");
    assert_eq!(said.trim(), "started");
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(term.success());
    let output = child.wait_with_output().expect("maljan ends");
    assert_eq!(output.status.code(), Some(130), "{}", stderr(&output));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(job.join("report.json")).expect("report.json"))
            .expect("JSON");
    assert_eq!(report["verdict"], "interrupted");
    assert!(
        stdout(&output).contains("verdict: interrupted"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn the_readme_main_job_the_demo_runs_across_two_servers_and_writes_its_report() {
    let dir = tempfile::tempdir().expect("temp dir");
    // Among the jobs beside the ledger, where `maljan artefact` looks.
    let job = dir.path().join("jobs/job-demo");
    let output = maljan_with_ledger(
        &["demo", "--job", &job.display().to_string()],
        &dir.path().join("ledger.jsonl"),
    );
    assert!(
        output.status.success(),
        "{}\n{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(stderr(&output).contains("report: "), "{}", stderr(&output));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(job.join("report.json")).expect("report.json"))
            .expect("JSON");
    assert_eq!(report["verdict"], "completed");
    let steps = report["steps"].as_array().expect("steps");
    assert_eq!(
        steps.len(),
        8,
        "unpack, three members, script, notes, inner, its text"
    );
    // The remote server was sent the members it looked at, each once, under its name.
    let mut uploaded: Vec<&str> = report["disclosures"]
        .as_array()
        .expect("disclosures")
        .iter()
        .filter(|d| d["server"] == "remote")
        .filter_map(|d| d["name"].as_str())
        .collect();
    uploaded.sort_unstable();
    assert_eq!(uploaded, ["inner.zip", "notes-utf16.txt", "payload.js"]);
    // The nested archive's text came back from the remote server (get_file) and reached the
    // local one.
    let inner = steps.iter().find(|s| s["step"] == "inner").expect("inner");
    assert_eq!(inner["taken"][0]["status"], "taken", "{inner}");
    let text = steps
        .iter()
        .find(|s| s["step"] == "inner-text")
        .expect("inner-text");
    assert!(
        text["answer"]
            .to_string()
            .contains("http://update.example.test"),
        "{text}"
    );
    let servers: Vec<&str> = report["servers"]
        .as_array()
        .expect("servers")
        .iter()
        .filter_map(|s| s["card"]["transport"].as_str())
        .collect();
    assert_eq!(servers.len(), 2, "both servers' cards");
    assert!(
        servers.contains(&"stdio") && servers.contains(&"http"),
        "{servers:?}"
    );
    // What a step took is read back by its digest, checked.
    let sha256 = inner["taken"][0]["sha256"].as_str().expect("a digest");
    let copy = dir.path().join("inner.txt");
    let fetched = maljan_with_ledger(
        &["artefact", sha256, "--out", copy.to_str().expect("utf-8")],
        &dir.path().join("ledger.jsonl"),
    );
    assert!(fetched.status.success(), "{}", stderr(&fetched));
    let bytes = std::fs::read(&copy).expect("the artefact");
    assert_eq!(
        bytes,
        std::fs::read(job.join("artefacts").join(sha256)).expect("the job's copy")
    );
    let again = maljan_with_ledger(
        &["artefact", sha256, "--out", copy.to_str().expect("utf-8")],
        &dir.path().join("ledger.jsonl"),
    );
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    let missing = maljan_with_ledger(
        &[
            "artefact",
            &"0".repeat(64),
            "--out",
            dir.path().join("none").to_str().expect("utf-8"),
        ],
        &dir.path().join("ledger.jsonl"),
    );
    assert!(
        stderr(&missing).contains("hold no file of that sha256"),
        "{}",
        stderr(&missing)
    );
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = dir.path().join("ledger.jsonl");
    // A ledger whose table outgrows the pipe's buffer once its reader is gone.
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let output = maljan_with_ledger(
        &["call", "sidecar", "file_info", &format!("path={manifest}")],
        &ledger,
    );
    assert!(output.status.success(), "{}", stderr(&output));
    let entry = std::fs::read_to_string(&ledger).expect("ledger");
    let line = entry.lines().next().expect("an entry").to_owned();
    std::fs::write(&ledger, format!("{line}\n").repeat(5000)).expect("a long ledger");
    let mut child = Command::new(MALJAN)
        .args(["ledger", ledger.to_str().expect("utf-8")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("maljan runs");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("it ends");
    let text = stderr(&output);
    assert!(!text.contains("panicked"), "{text}");
    assert_eq!(output.status.code(), Some(141), "{text}");
}

#[test]
fn a_report_that_is_not_a_regular_file_is_refused_without_waiting() {
    let job = tempfile::tempdir().expect("temp dir");
    let fifo = job.path().join("report.md");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    let output = maljan(&["report", job.path().to_str().expect("utf-8")]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("not a regular file"),
        "{}",
        stderr(&output)
    );
}

/// Whether `text` holds a character a terminal acts on (besides line feeds and tabs).
fn holds_active_control(text: &str) -> bool {
    text.chars()
        .any(|c| (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{202a}'..='\u{202e}'))
}

#[test]
fn a_hostile_servers_escapes_and_links_are_shown_inert_everywhere() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("maljan.toml");
    let server = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/hostile_server.py"
    );
    std::fs::write(
        &config,
        format!("[servers.hostile]\ncommand = \"python3\"\nargs = [\"{server}\"]\n"),
    )
    .expect("config");
    let pack = dir.path().join("pack.toml");
    std::fs::write(
        &pack,
        "[pack]\nname = \"[pack](javascript:alert(1))\"\n\n[[step]]\nid = \"h\"\nserver = \"hostile\"\ntool = \"hostile\"\n",
    )
    .expect("pack");
    let sample = dir.path().join("sample.txt");
    std::fs::write(&sample, "text").expect("sample");
    let job = dir.path().join("job");
    let ledger = dir.path().join("ledger.jsonl");
    let config = config.to_str().expect("utf-8");
    let job_arg = job.to_str().expect("utf-8");
    let runs: [&[&str]; 7] = [
        &["--config", config, "probe", "hostile"],
        &["--config", config, "tools", "hostile"],
        &["--config", config, "call", "hostile", "hostile"],
        &[
            "--config", config, "call", "hostile", "hostile", "--format", "json",
        ],
        &[
            "--config",
            config,
            "run",
            pack.to_str().expect("utf-8"),
            sample.to_str().expect("utf-8"),
            "--job",
            job_arg,
        ],
        &["--config", config, "ledger", "--job", job_arg],
        &["report", job_arg],
    ];
    for args in runs {
        // With every log line on: the server's stderr and log notifications among them.
        let output = Command::new(MALJAN)
            .args(args)
            .env_remove("MALJAN_CONFIG")
            .env("MALJAN_LEDGER", &ledger)
            .env("RUST_LOG", "debug")
            .output()
            .expect("maljan runs");
        let (out, err) = (stdout(&output), stderr(&output));
        assert!(!holds_active_control(&out), "{args:?} stdout: {out:?}");
        assert!(!holds_active_control(&err), "{args:?} stderr: {err:?}");
        assert!(
            [&out, &err]
                .iter()
                .any(|t| t.contains("\\u{1b}") || t.contains("\\u001b")),
            "{args:?} shows the escape as text: {out:?} {err:?}"
        );
    }
    let markdown = std::fs::read_to_string(job.join("report.md")).expect("report.md");
    assert!(!holds_active_control(&markdown), "{markdown}");
    // An indented code block (a tool's answer) is literal to every Markdown reader: what
    // could be markup is looked for in the rest.
    let read_as_markup: Vec<&str> = markdown
        .lines()
        .filter(|line| !line.starts_with("    "))
        .collect();
    for live in ["](javascript", "![](", "](http", "[pack]("] {
        for line in &read_as_markup {
            assert!(!line.contains(live), "{live} in {line}");
        }
    }
    assert!(
        markdown.contains("\\[click\\]\\(javascript\\:"),
        "{markdown}"
    );
}

#[test]
fn a_server_that_ignores_signals_dies_with_a_client_killed_outright() {
    let dir = tempfile::tempdir().expect("temp dir");
    let started = dir.path().join("started");
    let held = dir.path().join("held");
    for fifo in [&started, &held] {
        let made = Command::new("mkfifo").arg(fifo).status().expect("mkfifo");
        assert!(made.success());
    }
    // A server that ignores every polite signal, says its pid, then holds `held` open for
    // as long as it lives, never answering.
    let config = dir.path().join("maljan.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.stubborn]\ncommand = \"sh\"\nargs = [\"-c\", \"trap '' TERM INT HUP; echo $$ > \\\"$STARTED\\\"; exec sleep 1000 3>\\\"$HELD\\\"\"]\nenv = {{ STARTED = {:?}, HELD = {:?} }}\n",
            started.display().to_string(),
            held.display().to_string()
        ),
    )
    .expect("config");
    let mut client = Command::new(MALJAN)
        .args([
            "--config",
            config.to_str().expect("utf-8"),
            "probe",
            "stubborn",
        ])
        .env("MALJAN_LEDGER", dir.path().join("ledger.jsonl"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("maljan runs");
    let server_pid = std::fs::read_to_string(&started).expect("the server started");
    let server_pid = server_pid.trim().to_owned();
    let mut held = std::fs::File::open(&held).expect("the server holds its end");
    let killed = Command::new("kill")
        .args(["-KILL", &client.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success());
    let _ = client.wait();
    // The server's end closes when it dies: read to the end, on a thread, for a while.
    let (done, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = done.send(held.read_to_end(&mut rest).is_ok());
    });
    let gone = ended.recv_timeout(std::time::Duration::from_secs(30));
    if gone.is_err() {
        let _ = Command::new("kill").args(["-KILL", &server_pid]).status();
    }
    assert_eq!(
        gone,
        Ok(true),
        "the server outlived the client killed outright"
    );
}

#[test]
fn a_run_stopped_while_its_sample_is_copied_writes_its_report_and_keeps_no_partial_copy() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().expect("temp dir");
    // A terabyte of holes: its copy is still under way when the stop comes.
    let sample = dir.path().join("huge.bin");
    std::fs::File::create(&sample)
        .and_then(|f| f.set_len(1 << 40))
        .expect("a sparse sample");
    let pack = dir.path().join("pack.toml");
    std::fs::write(
        &pack,
        "[[step]]\nid = \"info\"\nserver = \"sidecar\"\ntool = \"file_info\"\narguments = { path = \"$sample\" }\n",
    )
    .expect("pack");
    let job = dir.path().join("job");
    let mut child = Command::new(MALJAN)
        .args([
            "run",
            pack.to_str().expect("utf-8"),
            sample.to_str().expect("utf-8"),
            "--job",
            job.to_str().expect("utf-8"),
        ])
        .env_remove("MALJAN_CONFIG")
        .env("MALJAN_LEDGER", dir.path().join("ledger.jsonl"))
        .env("RUST_LOG", "maljan=info")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("maljan runs");
    // Blocks until maljan says the copy has begun.
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    while !line.contains("copying the sample") {
        line.clear();
        let read = stderr.read_line(&mut line).expect("stderr");
        assert!(read > 0, "maljan ended before copying its sample");
    }
    let term = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(term.success());
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    // Waited for on a thread, for a while: a copy that did not stop would run for minutes.
    let pid = child.id().to_string();
    let (done, ended) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(child.wait_with_output());
    });
    let Ok(output) = ended.recv_timeout(std::time::Duration::from_secs(60)) else {
        let _ = Command::new("kill").args(["-KILL", &pid]).status();
        panic!("maljan did not stop within a minute of SIGTERM");
    };
    let output = output.expect("maljan ends");
    assert_eq!(output.status.code(), Some(130));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(job.join("report.json")).expect("report.json"))
            .expect("JSON");
    assert_eq!(report["verdict"], "interrupted");
    let left: Vec<_> = std::fs::read_dir(job.join("sample"))
        .map(|entries| entries.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "a partial copy was left: {left:?}");
}

#[test]
fn every_command_ends_quietly_when_its_reader_goes_away() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = dir.path().join("ledger.jsonl");
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let path = format!("path={manifest}");
    let output = maljan_with_ledger(&["call", "sidecar", "file_info", &path], &ledger);
    assert!(output.status.success(), "{}", stderr(&output));
    let ledger_arg = ledger.display().to_string();
    let commands: [&[&str]; 10] = [
        &["jobs"],
        &["probe"],
        &["tools"],
        &["tools", "--format", "json"],
        &["call", "sidecar", "file_info", &path],
        &["ledger", &ledger_arg],
        &["ledger", &ledger_arg, "--format", "json"],
        &["completions", "bash"],
        &["man"],
        &["--help"],
    ];
    for args in commands {
        // `maljan ARGS | head -1` where head has already gone: the reader is closed before
        // maljan writes (or, for the quickest commands, just after).
        let mut child = Command::new(MALJAN)
            .args(args)
            .env("MALJAN_LEDGER", &ledger)
            .env_remove("MALJAN_CONFIG")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("maljan runs");
        drop(child.stdout.take());
        let output = child.wait_with_output().expect("it ends");
        let text = stderr(&output);
        assert!(
            matches!(output.status.code(), Some(0 | 141)),
            "{args:?}: {:?} {text}",
            output.status
        );
        assert!(
            !text.contains("panicked") && !text.contains("error"),
            "{args:?}: {text}"
        );
    }
}

#[test]
fn nothing_on_a_pipe_carries_escape_bytes() {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let path = format!("path={manifest}");
    // A server that writes a stray line on stdout before it speaks: maljan logs it.
    let noisy = format!("echo a stray line; exec {MALJAN} sidecar");
    for no_color in [false, true] {
        let mut command = Command::new(MALJAN);
        command
            .args([
                "call",
                "file_info",
                &path,
                "--card",
                "--",
                "sh",
                "-c",
                &noisy,
            ])
            .env_remove("MALJAN_CONFIG")
            .env("RUST_LOG", "debug");
        if no_color {
            command.env("NO_COLOR", "1");
        }
        let output = command.output().expect("maljan runs");
        assert!(output.status.success(), "{}", stderr(&output));
        assert!(
            stderr(&output).contains("a stray line"),
            "{}",
            stderr(&output)
        );
        assert!(!output.stderr.contains(&0x1b), "{}", stderr(&output));
        assert!(!output.stdout.contains(&0x1b), "{}", stdout(&output));
    }
}

#[test]
fn completions_for_bash_zsh_and_fish_and_a_manual_page() {
    let bash = maljan(&["completions", "bash"]);
    assert!(bash.status.success(), "{}", stderr(&bash));
    let script = stdout(&bash);
    assert!(
        script.contains("_maljan()") && script.contains("completions"),
        "{script}"
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("maljan.bash");
    std::fs::write(&file, &script).expect("write");
    let checked = Command::new("bash")
        .arg("-n")
        .arg(&file)
        .output()
        .expect("bash runs");
    assert!(checked.status.success(), "{}", stderr(&checked));

    let zsh = stdout(&maljan(&["completions", "zsh"]));
    assert!(zsh.starts_with("#compdef maljan"), "{zsh}");
    let fish = stdout(&maljan(&["completions", "fish"]));
    assert!(fish.contains("complete -c maljan"), "{fish}");
    for subcommand in ["probe", "tools", "call", "run", "ledger"] {
        assert!(
            zsh.contains(subcommand) && fish.contains(subcommand),
            "{subcommand}"
        );
    }

    let man = maljan(&["man"]);
    assert!(man.status.success(), "{}", stderr(&man));
    let page = stdout(&man);
    assert!(page.contains(".TH maljan 1"), "{page}");
    assert!(page.contains("Exit status: 0 done"), "{page}");
}

#[test]
fn each_command_prints_one_json_document_with_its_schema_version() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = dir.path().join("ledger.jsonl");
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let path = format!("path={manifest}");
    let ledger_arg = ledger.display().to_string();
    let call = [
        "call",
        "sidecar",
        "file_info",
        &path,
        "--card",
        "--format",
        "json",
    ];
    let cases: [(&[&str], &[&str]); 4] = [
        (
            &call,
            &[
                "answer",
                "card",
                "job",
                "disclosures",
                "degradations",
                "taken",
            ],
        ),
        (
            &["probe", "--format", "json"],
            &["server", "tools", "protocol_version"],
        ),
        (&["tools", "--format", "json"], &["server", "tools"]),
        (
            &["ledger", &ledger_arg, "--format", "json"],
            &["failures", "entries"],
        ),
    ];
    for (args, keys) in cases {
        let output = maljan_with_ledger(args, &ledger);
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        // One document: parsing the whole of stdout as one value succeeds.
        let document: serde_json::Value =
            serde_json::from_slice(&output.stdout).expect("one JSON document");
        assert_eq!(document["schema_version"], 1, "{args:?}: {document}");
        for key in keys {
            assert!(
                document.get(key).is_some(),
                "{args:?} has no {key}: {document}"
            );
        }
    }
}

#[test]
fn jobs_go_beside_the_ledger_are_listed_and_pruned_and_the_demo_leaves_no_temporary_files() {
    let dir = tempfile::tempdir().expect("temp dir");
    let temporary = dir.path().join("tmp");
    std::fs::create_dir(&temporary).expect("tmp");
    let ledger = dir.path().join("state/ledger.jsonl");
    let ledger_arg = ledger.display().to_string();
    let output = Command::new(MALJAN)
        .args(["demo", "--ledger", &ledger_arg])
        .env_remove("MALJAN_CONFIG")
        .env("TMPDIR", &temporary)
        .output()
        .expect("maljan runs");
    assert!(output.status.success(), "{}", stderr(&output));
    let left: Vec<_> = std::fs::read_dir(&temporary)
        .expect("tmp")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        left.is_empty(),
        "the demo left {left:?} in the temporary directory"
    );

    let jobs = dir.path().join("state/jobs");
    assert_eq!(
        std::fs::read_dir(&jobs)
            .expect("jobs beside the ledger")
            .count(),
        1
    );
    let output = maljan_with_ledger(&["jobs", "--format", "json"], &ledger);
    assert!(output.status.success(), "{}", stderr(&output));
    let listed: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(listed["jobs"][0]["verdict"], "completed", "{listed}");
    assert!(listed["jobs"][0]["bytes"].as_u64() > Some(1000), "{listed}");
    let text = stdout(&maljan_with_ledger(&["jobs"], &ledger));
    assert!(
        text.contains("completed") && text.contains("job-"),
        "{text}"
    );

    let output = maljan_with_ledger(&["jobs", "prune", "--older-than", "1h"], &ledger);
    assert!(
        stdout(&output).contains("removed 0 of 1 jobs"),
        "{}",
        stdout(&output)
    );
    let output = maljan_with_ledger(&["jobs", "prune", "--older-than", "0s"], &ledger);
    assert!(
        stdout(&output).contains("removed 1 of 1 jobs"),
        "{}",
        stdout(&output)
    );
    assert_eq!(std::fs::read_dir(&jobs).expect("jobs").count(), 0);
    let output = maljan_with_ledger(&["jobs", "prune", "--older-than", "soon"], &ledger);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
}

/// A server that sets up and lists one tool, then never answers a call.
const SILENT_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    message = json.loads(line)
    method, ident = message.get("method"), message.get("id")
    if ident is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "silent", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "wait", "inputSchema": {"type": "object"}}]}
    elif method == "tools/call":
        continue
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": ident,
                          "error": {"code": -32601, "message": "no such method"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}), flush=True)
"#;

#[test]
fn a_call_that_gets_no_answer_exits_seven() {
    let dir = tempfile::tempdir().expect("temp dir");
    let script = dir.path().join("silent.py");
    std::fs::write(&script, SILENT_SERVER).expect("script");
    let script = script.display().to_string();
    let output = maljan(&["call", "wait", "--timeout", "0.5", "--", "python3", &script]);
    assert_eq!(
        output.status.code(),
        Some(7),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    let shown = format!("{}{}", stdout(&output), stderr(&output));
    assert!(shown.contains("unanswered"), "{shown}");
}

/// `maljan run PACK SAMPLE --job DIR EXTRA…` in a directory of its own.
fn run_pack(pack: &str, extra: &[&str]) -> Output {
    let (dir, pack, sample) = run_files(pack);
    let job = dir.path().join("job");
    let (pack, sample, job) = (
        pack.display().to_string(),
        sample.display().to_string(),
        job.display().to_string(),
    );
    let mut args = vec!["run", &pack, &sample, "--job", &job];
    args.extend_from_slice(extra);
    maljan_with_ledger(&args, &dir.path().join("ledger.jsonl"))
}

#[test]
fn a_run_whose_every_step_failed_exits_four() {
    let pack = "[pack]\nname = \"nothing works\"\n\n[[step]]\nid = \"missing\"\n\
                server = \"sidecar\"\ntool = \"file_info\"\narguments = { path = \"not-there\" }\n";
    let output = run_pack(pack, &[]);
    assert_eq!(
        output.status.code(),
        Some(4),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(
        stdout(&output).contains("verdict: failed"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn a_run_over_a_server_named_after_double_dash_gives_it_the_packs_server_name() {
    let pack = "[pack]\nname = \"one server\"\n\n[[step]]\nid = \"info\"\n\
                server = \"analysis\"\ntool = \"file_info\"\narguments = { path = \"$sample\" }\n";
    let output = run_pack(pack, &["--", MALJAN, "sidecar"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}{}",
        stdout(&output),
        stderr(&output)
    );
    assert!(
        stdout(&output).contains("[analysis/file_info]"),
        "{}",
        stdout(&output)
    );
}

#[test]
fn the_fleets_commands_need_a_store_and_a_password_never_shows() {
    let dir = tempfile::tempdir().expect("temp dir");
    let pack = dir.path().join("pack.toml");
    std::fs::write(
        &pack,
        "[[step]]\nid = \"i\"\nserver = \"sidecar\"\ntool = \"file_info\"\narguments = { path = \"$sample\" }\n",
    )
    .expect("pack");
    let pack = pack.display().to_string();
    let output = maljan(&["submit", &pack, &pack]);
    assert_eq!(output.status.code(), Some(5), "{}", stderr(&output));
    assert!(stderr(&output).contains("[store]"), "{}", stderr(&output));
    let config = dir.path().join("maljan.toml");
    std::fs::write(
        &config,
        "[store]\npostgres = \"postgres://maljan:hunter2@127.0.0.1:1/maljan\"\nobjects = \"file:///tmp/x\"\n",
    )
    .expect("config");
    let config = config.display().to_string();
    for args in [&["runs"][..], &["worker", "--until-empty"][..]] {
        let mut all = vec!["--config", config.as_str()];
        all.extend_from_slice(args);
        let output = maljan(&all);
        let said = format!("{}{}", stdout(&output), stderr(&output));
        assert_eq!(output.status.code(), Some(5), "{said}");
        assert!(said.contains("postgres_password_env"), "{said}");
        assert!(!said.contains("hunter2"), "{said}");
    }
}

#[test]
fn runs_carried_out_here_are_listed_and_their_reports_shown_by_their_id() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = dir.path().join("state/ledger.jsonl");
    let pack = dir.path().join("pack.toml");
    std::fs::write(
        &pack,
        "[pack]\nname = \"one look\"\n\n[[step]]\nid = \"info\"\nserver = \"sidecar\"\n\
         tool = \"file_info\"\narguments = { path = \"$sample\" }\n",
    )
    .expect("pack");
    let sample = dir.path().join("sample.txt");
    std::fs::write(&sample, "text").expect("sample");
    let ran = maljan_with_ledger(
        &[
            "run",
            pack.to_str().expect("utf-8"),
            sample.to_str().expect("utf-8"),
            "--format",
            "json",
        ],
        &ledger,
    );
    assert!(ran.status.success(), "{}", stderr(&ran));
    let ran: serde_json::Value = serde_json::from_slice(&ran.stdout).expect("JSON");
    let run = ran["run"].as_str().expect("the run's id").to_owned();
    let listed = maljan_with_ledger(&["runs", "--format", "json"], &ledger);
    assert!(listed.status.success(), "{}", stderr(&listed));
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).expect("JSON");
    assert_eq!(listed["runs"][0]["run"], run.as_str());
    assert_eq!(listed["runs"][0]["verdict"], "completed");
    assert_eq!(listed["runs"][0]["sample"], "sample.txt");
    assert_eq!(listed["counts"]["finished"], 1);
    let shown = maljan_with_ledger(&["report", &run], &ledger);
    assert!(shown.status.success(), "{}", stderr(&shown));
    assert!(
        stdout(&shown).contains(&format!("# Run {run}")),
        "{}",
        stdout(&shown)
    );
    let unknown = maljan_with_ledger(&["report", "no-such-run"], &ledger);
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));
    assert!(
        stderr(&unknown).contains("name a run `maljan runs` lists"),
        "{}",
        stderr(&unknown)
    );
}
