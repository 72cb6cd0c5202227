//! What several of the sidecar's test files start from: the sidecar serving HTTP, and ZIP
//! samples.

// Each test file uses part of this module; the rest is dead code in that file's binary.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

pub(crate) const SIDECAR: &str = env!("CARGO_BIN_EXE_maljan-sidecar");

/// `maljan-sidecar --http 127.0.0.1:0`, killed when dropped.
pub(crate) struct HttpSidecar {
    child: Child,
    /// The endpoint it announced.
    pub(crate) url: String,
}

impl Drop for HttpSidecar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts the sidecar over HTTP and reads the endpoint it announces on stderr.
pub(crate) fn start_http_sidecar() -> HttpSidecar {
    start_http_sidecar_with(&[], None)
}

/// Starts the sidecar over HTTP on loopback with more `args`, under an open-file limit
/// when one is given, and reads the endpoint it announces on stderr.
pub(crate) fn start_http_sidecar_with(args: &[&str], open_files: Option<u32>) -> HttpSidecar {
    start_http_sidecar_with_envs(args, open_files, &[])
}

/// How many connections one address may hold, by default.
pub(crate) const CONNECTIONS_PER_PEER: usize = maljan_sidecar_kit::MAX_CONNECTIONS_PER_PEER;

/// [`start_http_sidecar_with`], with environment variables set for it.
pub(crate) fn start_http_sidecar_with_envs(
    args: &[&str],
    open_files: Option<u32>,
    envs: &[(&str, &str)],
) -> HttpSidecar {
    serve_http("127.0.0.1:0", args, open_files, envs)
}

/// The sidecar serving HTTP on `listen`.
fn serve_http(
    listen: &str,
    args: &[&str],
    open_files: Option<u32>,
    envs: &[(&str, &str)],
) -> HttpSidecar {
    let mut command = match open_files {
        Some(limit) => {
            let mut shell = Command::new("sh");
            shell
                .arg("-c")
                .arg(format!("ulimit -n {limit} && exec \"$0\" \"$@\""))
                .arg(SIDECAR);
            shell
        }
        None => Command::new(SIDECAR),
    };
    let mut child = command
        .args(["--http", listen])
        .args(args)
        .envs(envs.iter().copied())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the sidecar starts");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("the announcement");
    let url = line
        .trim()
        .strip_prefix("listening on ")
        .expect("an endpoint")
        .to_owned();
    // Keep draining stderr so the server never blocks on it.
    std::thread::spawn(move || for _ in stderr.lines() {});
    HttpSidecar { child, url }
}

impl HttpSidecar {
    /// Ends the process and starts a new one on the same address: a server restarted,
    /// which knows none of the sessions the first one gave.
    pub(crate) fn restart(mut self) -> HttpSidecar {
        let addr = self.addr();
        let _ = self.child.kill();
        let _ = self.child.wait();
        serve_http(&addr.to_string(), &[], None, &[])
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `host:port`.
    pub(crate) fn addr(&self) -> std::net::SocketAddr {
        self.url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .parse()
            .expect("an address")
    }
}

/// A ZIP archive of `members` (name, bytes).
pub(crate) fn zip_with(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, bytes) in members {
        writer
            .start_file(*name, zip::write::SimpleFileOptions::default())
            .expect("member");
        writer.write_all(bytes).expect("write");
    }
    writer.finish().expect("finish").into_inner()
}
