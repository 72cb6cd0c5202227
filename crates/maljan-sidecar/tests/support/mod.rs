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
    let mut child = Command::new(SIDECAR)
        .args(["--http", "127.0.0.1:0"])
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
