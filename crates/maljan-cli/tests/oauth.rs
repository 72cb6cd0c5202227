//! `maljan` against a server behind OAuth 2.1 (a real HTTP server and authorization server
//! in a child process): the token is obtained with the client's credentials, or by a
//! person's `maljan login` and kept; the calls go through, and neither a token nor the
//! secret is written anywhere `maljan` writes but the token store.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

const MALJAN: &str = env!("CARGO_BIN_EXE_maljan");
const CLIENT_SECRET: &str = "cs-do-not-leak-5f1e2d";
const ACCESS_TOKEN: &str = "at-do-not-leak-9c8b7a";

/// The fixture server, stopped when dropped.
struct Protected {
    child: Child,
    base: String,
}

impl Drop for Protected {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn protected() -> Protected {
    protected_expiring_in(3600)
}

/// The fixture, its login tokens expiring `seconds` after they are issued.
fn protected_expiring_in(seconds: u32) -> Protected {
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/oauth_server.py"
    );
    let mut child = Command::new("python3")
        .arg(script)
        .env("CLIENT_ID", "triage-worker")
        .env("CLIENT_SECRET", CLIENT_SECRET)
        .env("ACCESS_TOKEN", ACCESS_TOKEN)
        .env("EXPIRES_IN", seconds.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs the fixture");
    let mut base = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut base)
        .expect("the fixture's URL");
    Protected {
        child,
        base: base.trim().to_owned(),
    }
}

/// Every file under `dir`, read as text.
fn everything_under(dir: &Path) -> String {
    let mut all = String::new();
    for entry in std::fs::read_dir(dir).expect("dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            all.push_str(&everything_under(&path));
        } else {
            all.push_str(&String::from_utf8_lossy(
                &std::fs::read(&path).unwrap_or_default(),
            ));
        }
    }
    all
}

fn write_config(dir: &Path, base: &str, secret: &str) -> std::path::PathBuf {
    let secret_file = dir.join("client-secret");
    std::fs::write(&secret_file, format!("{secret}\n")).expect("secret");
    let config = dir.join("maljan.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.protected]\nurl = \"{base}/mcp\"\n\n[servers.protected.oauth]\n\
             client_id = \"triage-worker\"\nclient_secret_file = \"{}\"\n",
            secret_file.display()
        ),
    )
    .expect("config");
    config
}

fn maljan(config: &Path, ledger: &Path, args: &[&str]) -> std::process::Output {
    Command::new(MALJAN)
        .arg("--config")
        .arg(config)
        .args(args)
        .env("MALJAN_LEDGER", ledger)
        .env("RUST_LOG", "trace")
        .output()
        .expect("maljan runs")
}

#[test]
fn a_call_behind_oauth_goes_through_and_no_token_or_secret_is_written_anywhere() {
    let server = protected();
    let dir = tempfile::tempdir().expect("dir");
    let config = write_config(dir.path(), &server.base, CLIENT_SECRET);
    let ledger = dir.path().join("state/ledger.jsonl");
    let pack = dir.path().join("pack.toml");
    std::fs::write(
        &pack,
        "[pack]\nname = \"behind oauth\"\n\n[[step]]\nid = \"echo\"\nserver = \"protected\"\ntool = \"echo\"\n",
    )
    .expect("pack");
    let sample = dir.path().join("sample.txt");
    std::fs::write(&sample, "text").expect("sample");
    let mut shown = String::new();
    let outputs = [
        maljan(&config, &ledger, &["call", "protected", "echo"]),
        maljan(
            &config,
            &ledger,
            &[
                "run",
                pack.to_str().expect("utf-8"),
                sample.to_str().expect("utf-8"),
            ],
        ),
    ];
    for output in &outputs {
        let (out, err) = (
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
        );
        assert!(output.status.success(), "{out}{err}");
        shown.push_str(&out);
        shown.push_str(&err);
    }
    assert!(shown.contains("hello from behind OAuth"), "{shown}");
    // A wrong secret: refused, the error says by whom, and shows no secret either.
    let wrong = write_config(dir.path(), &server.base, "cs-wrong-secret-3a3a");
    let refused = maljan(&wrong, &ledger, &["call", "protected", "echo"]);
    assert!(!refused.status.success());
    let words = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(words.contains("invalid_client"), "{words}");
    assert!(!words.contains("cs-wrong-secret-3a3a"), "{words}");
    shown.push_str(&words);
    // The client secret file is the one place the secret is meant to be.
    std::fs::remove_file(dir.path().join("client-secret")).expect("secret file");
    let written = everything_under(dir.path());
    assert!(
        written.contains("hello from behind OAuth"),
        "the ledger and report were read"
    );
    for secret in [CLIENT_SECRET, ACCESS_TOKEN] {
        assert!(!shown.contains(secret), "{secret} shown: {shown}");
        assert!(
            !written.contains(secret),
            "{secret} written under the job and ledger"
        );
    }
}

/// What the fixture's authorization server was asked, by `python3` on loopback.
fn stats(server: &Protected) -> serde_json::Value {
    let output = Command::new("python3")
        .arg("-c")
        .arg("import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())")
        .arg(format!("{}/stats", server.base))
        .output()
        .expect("python3 runs");
    serde_json::from_slice(&output.stdout).expect("the fixture's stats")
}

/// `maljan` with its state (ledger, jobs, kept tokens) under `state` and tokens kept in a
/// file (never a keyring of the machine running the test).
fn maljan_at(config: &Path, state: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(MALJAN);
    command
        .arg("--config")
        .arg(config)
        .args(args)
        .env("XDG_STATE_HOME", state)
        .env_remove("MALJAN_LEDGER")
        .env("MALJAN_TOKEN_STORE", "file")
        .env("RUST_LOG", "trace");
    command
}

#[test]
fn a_login_is_kept_refreshed_before_it_expires_and_forgotten_on_logout() {
    use std::os::unix::fs::PermissionsExt;
    // Tokens that expire within the minute are refreshed by the next command.
    let server = protected_expiring_in(30);
    let dir = tempfile::tempdir().expect("dir");
    let state = dir.path().join("state");
    let config = dir.path().join("maljan.toml");
    std::fs::write(
        &config,
        format!("[servers.protected]\nurl = \"{}/mcp\"\n", server.base),
    )
    .expect("config");
    let mut shown = String::new();

    let before = maljan_at(&config, &state, &["call", "protected", "echo"])
        .output()
        .expect("maljan runs");
    show(&mut shown, &before);
    let said = String::from_utf8_lossy(&before.stderr).into_owned();
    assert!(!before.status.success());
    assert!(said.contains("run `maljan login protected`"), "{said}");

    // The login: the person's browser is python3, following the authorization server's
    // redirect back to maljan's listener.
    let mut login = maljan_at(&config, &state, &["login", "protected", "--no-browser"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("maljan login runs");
    let mut login_err = BufReader::new(login.stderr.take().expect("stderr"));
    let mut url = String::new();
    let mut line = String::new();
    while url.is_empty() {
        line.clear();
        assert!(
            login_err.read_line(&mut line).expect("stderr") > 0,
            "no URL printed"
        );
        shown.push_str(&line);
        if let Some(printed) = line.trim().strip_prefix("http") {
            url = format!("http{printed}");
        }
    }
    let browser = Command::new("python3")
        .arg("-c")
        .arg("import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1]).read().decode())")
        .arg(&url)
        .output()
        .expect("python3 runs");
    let page = String::from_utf8_lossy(&browser.stdout);
    assert!(page.contains("You may close this window"), "{page}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut login_err, &mut rest).expect("stderr");
    shown.push_str(&rest);
    let login = login.wait_with_output().expect("maljan login ends");
    show(&mut shown, &login);
    assert!(login.status.success(), "{rest}");
    assert!(
        String::from_utf8_lossy(&login.stdout).contains("logged in to server protected"),
        "{shown}"
    );

    let tokens_dir = state.join("maljan/tokens");
    let kept: Vec<_> = std::fs::read_dir(&tokens_dir)
        .expect("the tokens directory")
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let mode = |p: &Path| std::fs::metadata(p).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(mode(&kept[0]), 0o600);
    assert_eq!(mode(&tokens_dir), 0o700);
    let first = std::fs::read_to_string(&kept[0]).expect("kept tokens");
    assert!(
        first.contains("at-do-not-leak-"),
        "the login's tokens are kept"
    );
    let refreshed_at_login = stats(&server)["refresh"].as_u64().expect("a count");

    // The next command uses the kept token, refreshing it first: no second approval.
    let call = maljan_at(&config, &state, &["call", "protected", "echo"])
        .output()
        .expect("maljan runs");
    show(&mut shown, &call);
    assert!(call.status.success(), "{shown}");
    assert!(String::from_utf8_lossy(&call.stdout).contains("hello from behind OAuth"));
    let asked = stats(&server);
    assert_eq!(asked["approved"], 1, "{asked}");
    assert_eq!(
        asked["registered"], 1,
        "the registered client is kept: {asked}"
    );
    assert!(
        asked["refresh"].as_u64() > Some(refreshed_at_login),
        "refreshed before it expired: {asked}"
    );
    let refreshed = std::fs::read_to_string(&kept[0]).expect("kept tokens");
    assert_ne!(refreshed, first, "the refreshed token is kept");

    // Nothing maljan writes but the token store holds a token.
    let written = everything_under(&state.join("maljan"))
        .replace(&first, "")
        .replace(&refreshed, "");
    assert!(
        written.contains("hello from behind OAuth"),
        "the ledger was read"
    );

    let logout = maljan_at(&config, &state, &["logout", "protected"])
        .output()
        .expect("maljan runs");
    show(&mut shown, &logout);
    assert!(logout.status.success());
    assert!(String::from_utf8_lossy(&logout.stdout).contains("forgotten"));
    assert!(!kept[0].exists());
    let after = maljan_at(&config, &state, &["call", "protected", "echo"])
        .output()
        .expect("maljan runs");
    show(&mut shown, &after);
    assert!(!after.status.success());
    assert!(String::from_utf8_lossy(&after.stderr).contains("maljan login protected"));

    for secret in ["at-do-not-leak", "rt-do-not-leak"] {
        assert!(!shown.contains(secret), "{secret} shown: {shown}");
        assert!(
            !written.contains(secret),
            "{secret} written outside the token store"
        );
    }
}

/// Adds what `output` printed to `shown`.
fn show(shown: &mut String, output: &std::process::Output) {
    shown.push_str(&String::from_utf8_lossy(&output.stdout));
    shown.push_str(&String::from_utf8_lossy(&output.stderr));
}
