//! `maljan` against a server behind OAuth 2.1 (a real HTTP server and token endpoint in a
//! child process): the token is obtained with the client's credentials, the call goes
//! through, and neither the token nor the secret is written anywhere `maljan` writes.

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
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/oauth_server.py"
    );
    let mut child = Command::new("python3")
        .arg(script)
        .env("CLIENT_ID", "triage-worker")
        .env("CLIENT_SECRET", CLIENT_SECRET)
        .env("ACCESS_TOKEN", ACCESS_TOKEN)
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
