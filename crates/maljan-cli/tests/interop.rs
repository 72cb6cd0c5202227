//! The `maljan` command against an official MCP server no one here wrote: the TypeScript
//! SDK's `server-everything`, installed (pinned) by `cargo xtask interop`, which runs these.

use std::process::{Command, Output};

const MALJAN: &str = env!("CARGO_BIN_EXE_maljan");

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} is set by cargo xtask interop"))
}

/// `maljan ARGS -- node server-everything`.
fn against_everything(args: &[&str]) -> Output {
    let ledger = tempfile::NamedTempFile::new().expect("ledger");
    Command::new(MALJAN)
        .args(args)
        .arg("--")
        .arg(env("MALJAN_INTEROP_NODE"))
        .arg(env("MALJAN_INTEROP_EVERYTHING"))
        .env_remove("MALJAN_CONFIG")
        .env("MALJAN_LEDGER", ledger.path())
        .output()
        .expect("maljan runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
#[ignore = "run by cargo xtask interop"]
fn server_everything_named_on_the_command_line_lists_typed_parameters() {
    let output = against_everything(&["tools"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let shown = text(&output.stdout);
    assert!(
        shown.contains("get-sum  Returns the sum of two numbers"),
        "{shown}"
    );
    assert!(
        shown
            .lines()
            .any(|l| l.trim_start().starts_with("a  number, required")),
        "{shown}"
    );
}

#[test]
#[ignore = "run by cargo xtask interop"]
fn server_everything_gets_numbers_where_its_schema_says_number() {
    let output = against_everything(&["call", "get-sum", "a=2", "b=3"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(text(&output.stdout), "ok\nThe sum of 2 and 3 is 5.\n");

    let output = against_everything(&["call", "get-sum", "a=two", "b=3"]);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    let error = text(&output.stderr);
    assert!(
        error.contains("a is number") && error.contains("a:=JSON"),
        "{error}"
    );
}

#[test]
#[ignore = "run by cargo xtask interop"]
fn server_everything_images_and_links_are_named_not_dumped() {
    let output = against_everything(&["call", "get-tiny-image"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let shown = text(&output.stdout);
    assert!(shown.contains("[image image/png, "), "{shown}");
    assert!(
        !shown.contains("iVBOR"),
        "no base64 on the terminal: {shown}"
    );

    let output = against_everything(&["call", "get-resource-links", "count=2"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let shown = text(&output.stdout);
    assert_eq!(shown.matches("[resource link ").count(), 2, "{shown}");
}

#[test]
#[ignore = "run by cargo xtask interop"]
fn server_everything_resources_are_taken_by_link_and_embedded() {
    let job = tempfile::tempdir().expect("job");
    let job_arg = job.path().join("job").display().to_string();
    let output = against_everything(&[
        "call",
        "get-resource-links",
        "count=2",
        "--take",
        "--job",
        &job_arg,
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let shown = text(&output.stdout);
    assert_eq!(shown.matches("\ntaken: ").count(), 2, "{shown}");
    assert!(shown.contains("taken: Text Resource 2 ("), "{shown}");

    let job_arg = job.path().join("job-2").display().to_string();
    let output = against_everything(&[
        "call",
        "get-resource-reference",
        "resourceType=Text",
        "resourceId=2",
        "--take",
        "--job",
        &job_arg,
        "--format",
        "json",
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let document: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let taken = &document["taken"][0];
    assert_eq!(
        taken["status"], "taken",
        "the embedded resource: {document}"
    );
}

#[test]
#[ignore = "run by cargo xtask interop"]
fn server_everything_from_an_mcp_servers_file() {
    let dir = tempfile::tempdir().expect("dir");
    let config = dir.path().join("mcp.json");
    let servers = serde_json::json!({"mcpServers": {"everything": {
        "command": env("MALJAN_INTEROP_NODE"),
        "args": [env("MALJAN_INTEROP_EVERYTHING")],
        "env": {"MALJAN_INTEROP_MARK": "from-the-file"},
        "autoApprove": []
    }}});
    std::fs::write(&config, servers.to_string()).expect("write");
    let ledger = dir.path().join("ledger.jsonl");
    let output = Command::new(MALJAN)
        .arg("--config")
        .arg(&config)
        .args(["call", "everything", "get-env"])
        .env_remove("MALJAN_CONFIG")
        .env("MALJAN_LEDGER", &ledger)
        .output()
        .expect("maljan runs");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("from-the-file"),
        "{}",
        text(&output.stdout)
    );
}

/// `maljan ARGS -- node server-filesystem ALLOWED`, recording in `ledger`.
fn against_filesystem(args: &[&str], allowed: &std::path::Path) -> Output {
    let ledger = tempfile::NamedTempFile::new().expect("ledger");
    Command::new(MALJAN)
        .args(args)
        .arg("--")
        .arg(env("MALJAN_INTEROP_NODE"))
        .arg(env("MALJAN_INTEROP_FILESYSTEM"))
        .arg(allowed)
        .env_remove("MALJAN_CONFIG")
        .env("MALJAN_LEDGER", ledger.path())
        .output()
        .expect("maljan runs")
}

#[test]
#[ignore = "run by cargo xtask interop"]
fn server_filesystem_reads_and_edits_the_real_file_where_it_is() {
    let allowed = tempfile::tempdir().expect("dir");
    // The server compares paths after resolving links: give it the resolved directory.
    let allowed = allowed.path().canonicalize().expect("canonical");
    let file = allowed.join("notes.txt");
    std::fs::write(&file, "first line\nsecond line\n").expect("write");
    let path = format!("path={}", file.display());

    let output = against_filesystem(&["call", "read_text_file", &path], &allowed);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("second line"),
        "{}",
        text(&output.stdout)
    );

    let edits = r#"edits:=[{"oldText": "second line", "newText": "edited line"}]"#;
    let output = against_filesystem(&["call", "edit_file", &path, edits], &allowed);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "first line\nedited line\n",
        "the edit landed on the real file, not on a copy"
    );

    let output = against_filesystem(
        &["call", "write_file", &path, "content=rewritten"],
        &allowed,
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "rewritten");
}

/// A pack over five official servers no one here wrote: git and time (PyPI), filesystem,
/// memory and everything (npm).
const OFFICIAL_PACK: &str = r#"
[pack]
name = "official servers"

[[step]]
id = "now"
server = "time"
tool = "get_current_time"
arguments = { timezone = "Etc/UTC" }

[[step]]
id = "status"
server = "git"
tool = "git_status"
arguments = { repo_path = "REPO" }

[[step]]
id = "read"
server = "fs"
tool = "read_text_file"
arguments = { path = "ALLOWED/notes.txt" }

[[step]]
id = "edit"
server = "fs"
tool = "edit_file"
arguments = { path = "ALLOWED/notes.txt", edits = [{ oldText = "second line", newText = "edited by a pack" }] }

[[step]]
id = "remember"
server = "memory"
tool = "create_entities"
arguments = { entities = [{ name = "sample", entityType = "file", observations = ["triaged"] }] }

[[step]]
id = "sum"
server = "everything"
tool = "get-sum"
arguments = { a = 2, b = 3 }

[[step]]
id = "links"
server = "everything"
tool = "get-resource-links"
arguments = { count = 2 }
outputs = ["*"]

[[step]]
id = "look"
server = "sidecar"
tool = "file_info"
arguments = { path = "$links/*" }
"#;

#[test]
#[ignore = "run by cargo xtask interop"]
fn server_everything_and_the_python_sdk_official_servers_carry_out_a_pack() {
    let dir = tempfile::tempdir().expect("dir");
    let root = dir.path().canonicalize().expect("canonical");
    let allowed = root.join("allowed");
    let repo = root.join("repo");
    std::fs::create_dir_all(&allowed).expect("allowed");
    std::fs::create_dir_all(&repo).expect("repo");
    std::fs::write(allowed.join("notes.txt"), "first line\nsecond line\n").expect("notes");
    let git = |args: &[&str]| {
        let status = Command::new("git")
            .args(args)
            .current_dir(&repo)
            .env("GIT_AUTHOR_NAME", "maljan")
            .env("GIT_AUTHOR_EMAIL", "maljan@example.invalid")
            .env("GIT_COMMITTER_NAME", "maljan")
            .env("GIT_COMMITTER_EMAIL", "maljan@example.invalid")
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.join("tracked.txt"), "one\n").expect("tracked");
    git(&["add", "tracked.txt"]);
    git(&["commit", "-q", "-m", "one"]);
    std::fs::write(repo.join("untracked.txt"), "two\n").expect("untracked");

    let python = env("MALJAN_INTEROP_OFFICIAL_PYTHON");
    let node = env("MALJAN_INTEROP_NODE");
    let config = format!(
        "[servers.git]\ncommand = {python:?}\nargs = [\"-m\", \"mcp_server_git\"]\n\
         [servers.time]\ncommand = {python:?}\nargs = [\"-m\", \"mcp_server_time\"]\n\
         [servers.fs]\ncommand = {node:?}\nargs = [{:?}, {:?}]\n\
         [servers.memory]\ncommand = {node:?}\nargs = [{:?}]\n\
         env = {{ MEMORY_FILE_PATH = {:?} }}\n\
         [servers.everything]\ncommand = {node:?}\nargs = [{:?}]\n",
        env("MALJAN_INTEROP_FILESYSTEM"),
        allowed.display().to_string(),
        env("MALJAN_INTEROP_MEMORY"),
        root.join("memory.jsonl").display().to_string(),
        env("MALJAN_INTEROP_EVERYTHING"),
    );
    std::fs::write(root.join("maljan.toml"), config).expect("config");
    let pack = OFFICIAL_PACK
        .replace("REPO", &repo.display().to_string())
        .replace("ALLOWED", &allowed.display().to_string());
    std::fs::write(root.join("pack.toml"), pack).expect("pack");
    std::fs::write(root.join("sample.bin"), "a sample").expect("sample");
    let job = root.join("job");
    let output = Command::new(MALJAN)
        .arg("--config")
        .arg(root.join("maljan.toml"))
        .arg("run")
        .arg(root.join("pack.toml"))
        .arg(root.join("sample.bin"))
        .arg("--job")
        .arg(&job)
        .arg("--ledger")
        .arg(root.join("ledger.jsonl"))
        .env_remove("MALJAN_CONFIG")
        .output()
        .expect("maljan runs");
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}\n{}",
        text(&output.stdout),
        text(&output.stderr)
    );

    assert_eq!(
        std::fs::read_to_string(allowed.join("notes.txt")).expect("notes"),
        "first line\nedited by a pack\n",
        "the pack's edit landed on the real file"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(job.join("report.json")).expect("report.json"))
            .expect("JSON");
    assert_eq!(report["verdict"], "completed", "{report}");
    let answer = |id: &str| {
        report["steps"]
            .as_array()
            .expect("steps")
            .iter()
            .find(|s| s["step"] == id)
            .map(|s| s["answer"].to_string())
            .unwrap_or_default()
    };
    assert!(
        answer("status").contains("untracked.txt"),
        "{}",
        answer("status")
    );
    assert!(answer("read").contains("first line"), "{}", answer("read"));
    assert!(
        answer("sum").contains("The sum of 2 and 3 is 5"),
        "{}",
        answer("sum")
    );
    assert!(answer("now").contains("Etc/UTC"), "{}", answer("now"));
    assert!(
        answer("remember").contains("sample"),
        "{}",
        answer("remember")
    );
    // The linked resources were read, taken under their names and handed to a later step.
    let looked: Vec<&serde_json::Value> = report["steps"]
        .as_array()
        .expect("steps")
        .iter()
        .filter(|s| s["step"] == "look")
        .collect();
    assert_eq!(looked.len(), 2, "one look per linked resource: {report}");
    for step in looked {
        assert_eq!(step["status"]["status"], "completed", "{step}");
    }
    let page = std::fs::read_to_string(job.join("report.html")).expect("report.html");
    assert!(
        page.contains("The sum of 2 and 3 is 5"),
        "the answers are on the page"
    );
    assert!(
        page.contains("untracked.txt"),
        "the git status is on the page"
    );
}
