//! Each pick's example run as a user would run it, against the reference sidecar (or, for
//! the kit, against the example server it builds): what each prints is checked.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

/// The crates whose examples are run.
const WITH_EXAMPLES: &[&str] = &[
    "maljan-mcp-stdio",
    "maljan-mcp-http",
    "maljan-breaker",
    "maljan-ledger",
    "maljan-sidecar-kit",
];

fn debug(name: &str) -> PathBuf {
    crate::root().join("target/debug").join(name)
}

fn example(name: &str) -> PathBuf {
    debug("examples").join(name)
}

/// Runs `program` with `args` (and `stdin`), and checks that it succeeds and prints
/// `expected`.
fn expect_output(
    what: &str,
    command: &mut Command,
    stdin: Option<&[u8]>,
    expected: &str,
) -> Result<(), String> {
    let output = output_of(command, stdin).map_err(|e| format!("{what}: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() || !stdout.contains(expected) {
        return Err(format!(
            "{what} ({}) did not print {expected:?}:\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    println!("xtask: example {what}: ok");
    Ok(())
}

fn output_of(command: &mut Command, stdin: Option<&[u8]>) -> std::io::Result<Output> {
    let mut child = command
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let (Some(bytes), Some(mut input)) = (stdin, child.stdin.take()) {
        input.write_all(bytes)?;
    }
    child.wait_with_output()
}

/// The sidecar over Streamable HTTP on a free port, and its URL (from the line it logs on
/// stderr once it listens; the rest of stderr is drained on a thread of its own).
fn http_sidecar() -> Result<(Child, String), String> {
    let mut child = Command::new(debug("maljan-sidecar"))
        .args(["--http", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("the sidecar did not start: {e}"))?;
    let stderr = child.stderr.take().ok_or("the sidecar's stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let url = lines
        .by_ref()
        .take(50)
        .map_while(Result::ok)
        .find_map(|line| Some(line.trim().strip_prefix("listening on ")?.to_owned()));
    std::thread::spawn(move || lines.for_each(drop));
    match url {
        Some(url) => Ok((child, url)),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            Err("the sidecar never said where it listens".to_owned())
        }
    }
}

/// Builds and runs every example.
pub(crate) fn run() -> Result<(), String> {
    let mut args = vec!["build", "--examples"];
    for package in WITH_EXAMPLES {
        args.extend(["-p", package]);
    }
    crate::cargo(&args, &[])?;
    crate::cargo(&["build", "-p", "maljan-sidecar", "-p", "maljan-cli"], &[])?;
    let sidecar = debug("maljan-sidecar");
    expect_output(
        "stdio_session against the sidecar",
        Command::new(example("stdio_session"))
            .args(["capabilities", "{}"])
            .arg(&sidecar),
        None,
        "file_info",
    )?;
    expect_output(
        "stdio_session against the kit's echo_server",
        Command::new(example("stdio_session"))
            .args(["echo", r#"{"say":"hi"}"#])
            .arg(example("echo_server")),
        None,
        r#""said": "hi""#,
    )?;
    let (mut server, url) = http_sidecar()?;
    let http = expect_output(
        "http_session against the sidecar",
        Command::new(example("http_session")).args([url.as_str(), "capabilities", "{}"]),
        None,
        "file_info",
    );
    let _ = server.kill();
    let _ = server.wait();
    http?;
    let ping = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
    let answered = output_of(&mut Command::new(&sidecar), Some(ping))
        .map_err(|e| format!("the sidecar did not run: {e}"))?;
    expect_output(
        "classify on the sidecar's stdout",
        &mut Command::new(example("classify")),
        Some(&answered.stdout),
        "1 messages, 0 stray lines, 0 invalid",
    )?;
    expect_output(
        "breaker",
        &mut Command::new(example("breaker")),
        None,
        "Probe, then closed",
    )?;
    ledger_example(&crate::root().join("target/tmp/examples-ledger.jsonl"))
}

/// Two failing calls ledgered by `maljan call`, summed up by the ledger's example.
fn ledger_example(ledger: &Path) -> Result<(), String> {
    if let Some(dir) = ledger.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let _ = std::fs::remove_file(ledger);
    for _ in 0..2 {
        output_of(
            Command::new(debug("maljan"))
                .args(["call", "sidecar", "file_info", "path=no/such/file"])
                .env_remove("MALJAN_CONFIG")
                .env("MALJAN_LEDGER", ledger),
            None,
        )
        .map_err(|e| format!("maljan did not run: {e}"))?;
    }
    expect_output(
        "failure_summary of a ledger",
        Command::new(example("failure_summary")).arg(ledger),
        None,
        "2×",
    )
}
