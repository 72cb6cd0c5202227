//! The reference sidecar against a client that attacks it: paths that lead out of its
//! roots, a file swapped for a symlink while it is served, uploads left open, answers asked
//! to be huge, HTTP without the token or from another host, and sessions left behind.

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

const SIDECAR: &str = env!("CARGO_BIN_EXE_maljan-sidecar");

/// The sidecar over stdio, spoken to line by line.
struct StdioSidecar {
    child: Child,
    stdin: ChildStdin,
    lines: Lines<BufReader<ChildStdout>>,
    next_id: u64,
}

impl StdioSidecar {
    fn start(mut command: Command) -> StdioSidecar {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the sidecar starts");
        let stdin = child.stdin.take().expect("stdin");
        let lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        StdioSidecar {
            child,
            stdin,
            lines,
            next_id: 1,
        }
    }

    fn in_job(job: &Path) -> StdioSidecar {
        let mut command = Command::new(SIDECAR);
        command
            .env("MALJAN_JOB_DIR", job)
            .env_remove("MALJAN_ROOTS");
        Self::start(command)
    }

    async fn send(&mut self, tool: &str, arguments: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": arguments}});
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .expect("write");
        id
    }

    async fn receive(&mut self) -> Value {
        let line = self.lines.next_line().await.expect("read").expect("a line");
        serde_json::from_str(&line).expect("JSON")
    }

    /// A call's structured answer (the tool's value or its error envelope).
    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.send(tool, arguments).await;
        self.receive().await["result"]["structuredContent"].take()
    }
}

fn code(answer: &Value) -> &str {
    answer["error"]["code"].as_str().unwrap_or("ok")
}

/// Swaps `place` between a regular file and a symlink to `target`, as fast as it can,
/// until `stop` is set: each state is put in place by a rename, so the name always exists.
fn keep_swapping(
    place: &Path,
    target: &Path,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    let (place, target) = (place.to_owned(), target.to_owned());
    std::thread::spawn(move || {
        let dir = place.parent().expect("a parent").to_owned();
        let mut swaps = 0;
        while !stop.load(Ordering::Relaxed) {
            let link = dir.join(".swap-link");
            let _ = std::fs::remove_file(&link);
            std::os::unix::fs::symlink(&target, &link).expect("symlink");
            std::fs::rename(&link, &place).expect("swap in the link");
            let file = dir.join(".swap-file");
            std::fs::write(&file, "harmless bytes").expect("write");
            std::fs::rename(&file, &place).expect("swap in the file");
            swaps += 1;
        }
        swaps
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_swapped_for_a_symlink_is_never_served_from_outside_the_job() {
    let top = tempfile::tempdir().expect("temp dir");
    let job = top.path().join("job");
    std::fs::create_dir_all(&job).expect("job dir");
    let secret_text = "SECRET-the-host-file-that-must-not-leave";
    let secret = top.path().join("secret.txt");
    std::fs::write(&secret, secret_text).expect("secret");
    let place = job.join("served.txt");
    std::fs::write(&place, "harmless bytes").expect("file");
    let mut sidecar = StdioSidecar::in_job(&job);

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = keep_swapping(&place, &secret, stop.clone());
    let secret_base64 = "U0VDUkVU"; // "SECRET", at the start of the file's base64
    let (mut served, mut refused) = (0, 0);
    // At least 3,000 attempts, and more until both sides of the race were seen (a loaded
    // machine may start the swapper late).
    let mut attempt = 0;
    while attempt < 3000 || ((served == 0 || refused == 0) && attempt < 100_000) {
        attempt += 1;
        let answer = if attempt % 2 == 0 {
            sidecar
                .call("get_file", json!({"path": "served.txt"}))
                .await
        } else {
            sidecar.call("strings", json!({"path": "served.txt"})).await
        };
        let text = answer.to_string();
        assert!(
            !text.contains("SECRET") && !text.contains(secret_base64),
            "attempt {attempt} served the file outside the job: {text}"
        );
        if answer.get("error").is_some() {
            refused += 1;
        } else {
            served += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swapper.join().expect("the swapper");
    assert!(swaps > 100, "the file was swapped {swaps} times only");
    assert!(
        served > 0 && refused > 0,
        "the race was not exercised: {served} served, {refused} refused"
    );
}

#[tokio::test]
async fn paths_leading_out_of_the_job_are_refused_by_every_tool() {
    let top = tempfile::tempdir().expect("temp dir");
    let job = top.path().join("job");
    std::fs::create_dir_all(job.join("sub")).expect("job dir");
    std::os::unix::fs::symlink("/etc/passwd", job.join("planted")).expect("symlink");
    std::os::unix::fs::symlink("/proc/self/root/etc/passwd", job.join("magic")).expect("link");
    std::os::unix::fs::symlink("../../..", job.join("sub/up")).expect("symlink");
    let mut sidecar = StdioSidecar::in_job(&job);
    for tool in ["file_info", "strings", "archive_list", "unpack"] {
        for path in [
            "/etc/passwd",
            "../../../../etc/passwd",
            "planted",
            "magic",
            "sub/up/etc/passwd",
            "/proc/self/fd/0",
            "sub",
        ] {
            let answer = sidecar.call(tool, json!({"path": path})).await;
            assert_eq!(code(&answer), "bad_argument", "{tool} {path}: {answer}");
        }
    }
    let answer = sidecar
        .call("get_file", json!({"path": "/etc/passwd"}))
        .await;
    assert!(
        answer["error"]
            .as_str()
            .is_some_and(|e| e.contains("refused")),
        "{answer}"
    );
}

#[tokio::test]
async fn abandoned_uploads_are_capped_so_descriptors_last_under_a_low_limit() {
    let top = tempfile::tempdir().expect("temp dir");
    let job = top.path().join("job");
    std::fs::create_dir_all(&job).expect("job dir");
    std::fs::write(job.join("sample.txt"), "some printable text").expect("sample");
    let mut command = Command::new("sh");
    command
        .args(["-c", "ulimit -n 48 && exec \"$0\""])
        .arg(SIDECAR)
        .env("MALJAN_JOB_DIR", &job);
    let mut sidecar = StdioSidecar::start(command);
    let sha = "0".repeat(64);
    let (mut begun, mut refused) = (0, 0);
    for n in 0..300 {
        let answer = sidecar
            .call(
                "put_sample_begin",
                json!({"name": format!("s{n}"), "size": 10, "sha256": sha}),
            )
            .await;
        match code(&answer) {
            "ok" => begun += 1,
            "bad_argument" => {
                assert!(
                    answer["error"]["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("in progress")),
                    "{answer}"
                );
                refused += 1;
            }
            other => panic!("put_sample_begin {n} failed with {other}: {answer}"),
        }
    }
    assert_eq!((begun, refused), (16, 284));
    let answer = sidecar.call("strings", json!({"path": "sample.txt"})).await;
    assert_eq!(code(&answer), "ok", "other calls still work: {answer}");
    let huge = sidecar
        .call(
            "put_sample_begin",
            json!({"name": "huge", "size": u64::MAX, "sha256": sha}),
        )
        .await;
    assert!(
        huge["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("over this server's limit")),
        "{huge}"
    );
    sidecar.child.kill().await.expect("kill");
}

/// The server's peak resident memory, in KiB.
fn peak_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM")
}

#[tokio::test]
async fn a_huge_strings_limit_is_refused_before_the_work_and_memory_stays_bounded() {
    let top = tempfile::tempdir().expect("temp dir");
    let job = top.path().join("job");
    std::fs::create_dir_all(&job).expect("job dir");
    let mut file = std::fs::File::create(job.join("many.txt")).expect("create");
    for n in 0..2_000_000u32 {
        write!(file, "s{n:07}\0").expect("write");
    }
    drop(file);
    let mut sidecar = StdioSidecar::in_job(&job);
    let pid = sidecar.child.id().expect("a pid");
    let refused = sidecar
        .call(
            "strings",
            json!({"path": "many.txt", "limit": 1_000_000_000_000u64}),
        )
        .await;
    assert_eq!(code(&refused), "bad_argument", "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("10000")),
        "the limit is named: {refused}"
    );
    let most = sidecar
        .call("strings", json!({"path": "many.txt", "limit": 10_000}))
        .await;
    assert_eq!(most["count"], 2_000_000);
    assert_eq!(most["strings"].as_array().map(Vec::len), Some(10_000));
    let peak = peak_kib(pid);
    assert!(peak < 256 * 1024, "the server peaked at {peak} KiB");
}

/// One HTTP/1.1 request to the sidecar; the status code and the body.
fn http(addr: &str, method: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).expect("connect");
    let mut request = format!(
        "{method} /mcp HTTP/1.1\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {addr}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    stream.write_all(request.as_bytes()).expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("receive");
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, response)
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// Starts `maljan-sidecar ARGS` and reads the endpoint it announces (`host:port`).
fn start_http(args: &[&str], envs: &[(&str, &Path)]) -> (std::process::Child, String) {
    let mut child = std::process::Command::new(SIDECAR)
        .args(args)
        .envs(envs.iter().map(|(k, v)| (k, v)))
        .stderr(Stdio::piped())
        .spawn()
        .expect("the sidecar starts");
    let mut stderr = std::io::BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    std::io::BufRead::read_line(&mut stderr, &mut line).expect("the announcement");
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .unwrap_or_else(|| panic!("an endpoint, not {line:?}"))
        .to_owned();
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, addr)
}

#[test]
fn serving_beyond_loopback_without_a_token_is_refused_at_start() {
    let output = std::process::Command::new(SIDECAR)
        .args(["--http", "0.0.0.0:0"])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    let text = String::from_utf8_lossy(&output.stderr);
    assert!(
        text.contains("bearer token") && text.contains("127.0.0.1"),
        "{text}"
    );
}

#[test]
fn http_calls_need_the_token_and_a_host_of_this_server() {
    let dir = tempfile::tempdir().expect("temp dir");
    let token_file = dir.path().join("token");
    std::fs::write(&token_file, "0123456789abcdef0123456789abcdef\n").expect("token");
    let token_path = token_file.to_str().expect("utf-8");
    let (mut child, addr) = start_http(&["--http", "127.0.0.1:0", "--token-file", token_path], &[]);
    let bearer = "Bearer 0123456789abcdef0123456789abcdef";
    let (status, _) = http(&addr, "POST", &[], INITIALIZE);
    assert_eq!(status, 401, "no token");
    let (status, _) = http(
        &addr,
        "POST",
        &[("Authorization", "Bearer wrong")],
        INITIALIZE,
    );
    assert_eq!(status, 401, "a wrong token");
    let (status, body) = http(&addr, "POST", &[("Authorization", bearer)], INITIALIZE);
    assert_eq!(status, 200, "{body}");
    let (status, _) = http(
        &addr,
        "POST",
        &[("Authorization", bearer), ("Host", "rebound.example:80")],
        INITIALIZE,
    );
    assert_eq!(status, 403, "a host name that rebinds to loopback");
    let (status, _) = http(
        &addr,
        "POST",
        &[("Authorization", bearer), ("Origin", "http://evil.example")],
        INITIALIZE,
    );
    assert_eq!(status, 403, "a foreign origin");
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn every_sessions_job_directory_goes_on_sigterm() {
    let tmp = tempfile::tempdir().expect("temp dir");
    let (child, addr) = start_http(&["--http", "127.0.0.1:0"], &[("TMPDIR", tmp.path())]);
    let jobs = || {
        std::fs::read_dir(tmp.path())
            .expect("read")
            .filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().starts_with("maljan-job-"))
            })
            .count()
    };
    for _ in 0..3 {
        let (status, body) = http(&addr, "POST", &[], INITIALIZE);
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(jobs(), 3);
    let pid = child.id().to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let mut child = child;
    let status = child.wait().expect("the sidecar ends");
    assert!(status.success(), "{status}");
    assert_eq!(jobs(), 0, "every session's job directory is removed");
}

/// The CRC-32 (IEEE) a ZIP member states.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// A ZIP archive of stored members, written by hand: unlike a ZIP library's writer, it
/// writes what a hostile archive holds (`.`, the same name twice, a file then a member
/// beneath it).
fn stored_zip(members: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, bytes) in members {
        let offset = out.len() as u32;
        let (crc, size, len) = (crc32(bytes), bytes.len() as u32, name.len() as u16);
        let header = |signature: u32, central_entry: bool| {
            let mut h = Vec::new();
            h.extend_from_slice(&signature.to_le_bytes());
            if central_entry {
                h.extend_from_slice(&20u16.to_le_bytes());
            }
            for v in [20u16, 0, 0, 0, 0] {
                h.extend_from_slice(&v.to_le_bytes());
            }
            for v in [crc, size, size] {
                h.extend_from_slice(&v.to_le_bytes());
            }
            h.extend_from_slice(&len.to_le_bytes());
            h.extend_from_slice(&0u16.to_le_bytes());
            if central_entry {
                for v in [0u16, 0, 0] {
                    h.extend_from_slice(&v.to_le_bytes());
                }
                h.extend_from_slice(&0u32.to_le_bytes());
                h.extend_from_slice(&offset.to_le_bytes());
            }
            h.extend_from_slice(name.as_bytes());
            h
        };
        out.extend(header(0x0403_4b50, false));
        out.extend_from_slice(bytes);
        central.extend(header(0x0201_4b50, true));
    }
    let (start, count) = (out.len() as u32, members.len() as u16);
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    for v in [0u16, 0, count, count] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&start.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

#[tokio::test]
async fn unpack_writes_every_member_it_can_and_reports_each_refusal() {
    let top = tempfile::tempdir().expect("temp dir");
    let job = top.path().join("job");
    std::fs::create_dir_all(&job).expect("job dir");
    let archive = stored_zip(&[
        ("ok.txt", b"fine"),
        (".", b"a dot"),
        ("x", b"a file named x"),
        ("x/y", b"beneath the file x"),
        ("dup.txt", b"the first"),
        ("dup.txt", b"the second"),
        ("d/", b""),
        ("d", b"a file named as the directory"),
        ("last.txt", b"still written"),
    ]);
    std::fs::write(job.join("hostile.zip"), archive).expect("archive");
    let mut sidecar = StdioSidecar::in_job(&job);
    let answer = sidecar.call("unpack", json!({"path": "hostile.zip"})).await;
    assert_eq!(code(&answer), "ok", "{answer}");
    let refused: Vec<(&str, &str)> = answer["refused"]
        .as_array()
        .expect("refused")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or(""),
                r["reason"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(refused.len(), 2, "{refused:?}");
    assert_eq!(refused[0].0, ".");
    assert!(refused[0].1.contains("names no file"), "{refused:?}");
    assert_eq!(refused[1].0, "x/y");
    assert!(
        refused[1].1.contains("clashes with an earlier member"),
        "{refused:?}"
    );
    let files = answer["files"].as_array().expect("files");
    let written: Vec<(String, Vec<u8>)> = files
        .iter()
        .map(|f| {
            let path = f["path"].as_str().expect("a path");
            let name = Path::new(path)
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(path).expect("written"))
        })
        .collect();
    let expected: Vec<(String, Vec<u8>)> = [
        ("ok.txt", &b"fine"[..]),
        ("x", b"a file named x"),
        ("dup.txt", b"the second"),
        ("d (2)", b"a file named as the directory"),
        ("last.txt", b"still written"),
        // The member the ZIP reader shadows under the later one's name, read after.
        ("dup.txt (2)", b"the first"),
    ]
    .iter()
    .map(|(n, b)| ((*n).to_owned(), b.to_vec()))
    .collect();
    assert_eq!(written, expected);
    let kept: Vec<&Value> = files
        .iter()
        .filter(|f| f.get("kept_as").is_some())
        .collect();
    assert_eq!(
        kept.len(),
        2,
        "a member kept under another name says so: {files:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_never_takes_a_file_swapped_for_a_symlink_out_of_the_servers_directory() {
    use maljan_client::{
        ClientSettings, ConnectionContext, Job, ServerCommand, ServerConfig, ServerConnection,
        TakenFile,
    };
    use maljan_mcp_proto::maljan::{Outcome, ToolAnswer};

    let top = tempfile::tempdir().expect("temp dir");
    let secret = top.path().join("secret.txt");
    std::fs::write(&secret, "SECRET host bytes").expect("secret");
    let job = Arc::new(Job::create(top.path().join("job")).expect("job"));
    let server = ServerConnection::connect(
        &ServerConfig::stdio("sidecar", ServerCommand::new(SIDECAR)),
        ClientSettings::default(),
        ConnectionContext::default().with_job(job.clone()),
    )
    .await
    .expect("sets up");
    let place = job.server_dir("sidecar").join("written.bin");
    std::fs::write(&place, "harmless bytes").expect("file");
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = keep_swapping(&place, &secret, stop.clone());
    let answer = ToolAnswer {
        value: json!({"files": [{"path": "written.bin"}]}),
        outcome: Outcome::Ok,
    };
    let secret_sha = format!(
        "{:x}",
        <sha2::Sha256 as sha2::Digest>::digest(b"SECRET host bytes")
    );
    let (mut taken, mut refused) = (0, 0);
    // At least 2,000 attempts, and more until both sides of the race were seen (a loaded
    // machine may start the swapper late).
    let mut attempt = 0;
    while attempt < 2000 || ((taken == 0 || refused == 0) && attempt < 200_000) {
        attempt += 1;
        for file in server.take_files("some_tool", &answer, None).await {
            match file {
                TakenFile::Taken { sha256, .. } => {
                    assert_ne!(sha256, secret_sha, "attempt {attempt} took the host's file");
                    taken += 1;
                }
                TakenFile::NotTaken { .. } => refused += 1,
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().expect("the swapper");
    assert!(
        taken > 0 && refused > 0,
        "the race was not exercised: {taken} taken, {refused} refused"
    );
    assert!(
        job.store()
            .index()
            .expect("index")
            .iter()
            .all(|e| e.sha256 != secret_sha),
        "nothing of the host's is in the store"
    );
    server.close().await;
}

#[tokio::test]
async fn writes_never_follow_a_symlink_planted_in_the_job() {
    let top = tempfile::tempdir().expect("temp dir");
    let job = top.path().join("job");
    let outside = top.path().join("outside");
    std::fs::create_dir_all(&job).expect("job dir");
    std::fs::create_dir_all(&outside).expect("outside");
    for planted in ["samples", "unpacked", ".incoming"] {
        std::os::unix::fs::symlink(&outside, job.join(planted)).expect("symlink");
    }
    let archive = stored_zip(&[("member.txt", b"bytes")]);
    std::fs::write(job.join("a.zip"), archive).expect("archive");
    let mut sidecar = StdioSidecar::in_job(&job);
    let content = b"an upload";
    let sha = format!("{:x}", <sha2::Sha256 as sha2::Digest>::digest(content));
    let put = sidecar
        .call(
            "put_sample",
            json!({"name": "s.bin", "content_base64": "YW4gdXBsb2Fk", "sha256": sha}),
        )
        .await;
    assert_eq!(code(&put), "tool_failed", "{put}");
    let begin = sidecar
        .call(
            "put_sample_begin",
            json!({"name": "s.bin", "size": 9, "sha256": sha}),
        )
        .await;
    assert_eq!(code(&begin), "tool_failed", "{begin}");
    let unpack = sidecar.call("unpack", json!({"path": "a.zip"})).await;
    assert_eq!(code(&unpack), "tool_failed", "{unpack}");
    assert_eq!(
        std::fs::read_dir(&outside).expect("read").count(),
        0,
        "nothing was written through the planted links"
    );
}

/// The bytes of every regular file beneath `dir`.
fn bytes_beneath(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).expect("read").flatten() {
        let meta = entry.metadata().expect("metadata");
        if meta.is_dir() {
            total += bytes_beneath(&entry.path());
        } else if meta.is_file() {
            total += meta.len();
        }
    }
    total
}

#[tokio::test]
async fn an_unpack_bomb_stops_at_the_jobs_disk_budget() {
    let top = tempfile::tempdir().expect("temp dir");
    let job = top.path().join("job");
    std::fs::create_dir_all(&job).expect("job dir");
    // 64 MiB of zeros deflate to about 64 KiB.
    let zeros = vec![0u8; 64 * 1024 * 1024];
    let bomb = support::zip_with(&[("zeros.bin", &zeros)]);
    assert!(bomb.len() < 1024 * 1024, "{} bytes", bomb.len());
    std::fs::write(job.join("bomb.zip"), &bomb).expect("sample");
    let budget = 100 * 1024 * 1024u64;
    let mut command = Command::new(SIDECAR);
    command
        .args(["--job-bytes", &budget.to_string()])
        .env("MALJAN_JOB_DIR", &job)
        .env_remove("MALJAN_ROOTS");
    let mut sidecar = StdioSidecar::start(command);
    let mut answers = Vec::new();
    for _ in 0..5 {
        let answer = sidecar
            .call(
                "unpack",
                json!({"path": "bomb.zip", "max_bytes": 1_000_000_000_000_000u64}),
            )
            .await;
        answers.push(answer);
    }
    assert_eq!(answers[0]["count"], 1, "{}", answers[0]);
    for later in &answers[1..] {
        assert_eq!(later["count"], 0, "{later}");
        assert!(
            later["stopped"]
                .as_str()
                .is_some_and(|s| s.contains("disk budget")),
            "{later}"
        );
    }
    let written = bytes_beneath(&job.join("unpacked"));
    assert!(
        written <= budget,
        "{written} bytes unpacked under a budget of {budget}"
    );
    assert!(
        written >= 64 * 1024 * 1024,
        "the first unpack was whole: {written}"
    );
    // An upload past what is left is refused at its start.
    let answer = sidecar
        .call(
            "put_sample_begin",
            json!({"name": "big.bin", "size": budget, "sha256": "0".repeat(64)}),
        )
        .await;
    assert_eq!(code(&answer), "over_limit", "{answer}");
    assert!(
        answer["error"]["remediation"]
            .as_str()
            .is_some_and(|r| r.contains("--job-bytes")),
        "{answer}"
    );
}

#[tokio::test]
async fn a_client_that_goes_away_stops_the_work_it_asked_for() {
    let top = tempfile::tempdir().expect("temp dir");
    let job = top.path().join("job");
    std::fs::create_dir_all(&job).expect("job dir");
    // A terabyte of holes: hashing it all would take minutes.
    std::fs::File::create(job.join("huge.bin"))
        .and_then(|f| f.set_len(1 << 40))
        .expect("a sparse file");
    let mut sidecar = StdioSidecar::in_job(&job);
    sidecar.send("file_info", json!({"path": "huge.bin"})).await;
    let StdioSidecar {
        mut child,
        stdin,
        lines,
        ..
    } = sidecar;
    // The client vanishes: both of its pipes close.
    drop(stdin);
    drop(lines);
    let ended = tokio::time::timeout(std::time::Duration::from_secs(60), child.wait()).await;
    assert!(
        ended.is_ok_and(|status| status.is_ok()),
        "the sidecar kept working for a client that is gone"
    );
}

#[test]
fn as_an_oauth_protected_resource_it_names_its_metadata_and_refuses_callers_without_a_token_of_its_issuer()
 {
    let dir = tempfile::tempdir().expect("temp dir");
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, r#"{"keys": []}"#).expect("jwks");
    let (mut child, addr) = start_http(
        &[
            "--http",
            "127.0.0.1:0",
            "--oauth-resource",
            "https://analysis.example.com/mcp",
            "--oauth-issuer",
            "https://auth.example.com",
            "--oauth-jwks-file",
            jwks.to_str().expect("utf-8"),
            "--oauth-scope",
            "tools",
        ],
        &[],
    );
    let (status, response) = http(&addr, "POST", &[], INITIALIZE);
    assert_eq!(status, 401, "{response}");
    assert!(
        response.contains("resource_metadata=\"https://analysis.example.com/.well-known/oauth-protected-resource/mcp\""),
        "{response}"
    );
    let (status, response) = http(
        &addr,
        "POST",
        &[("Authorization", "Bearer forged.token.value")],
        INITIALIZE,
    );
    assert_eq!(status, 401, "{response}");
    assert!(response.contains("invalid_token"), "{response}");
    child.kill().expect("stopped");
    let _ = child.wait();
    // A sidecar that cannot have its keys stops at start: what it said on stderr.
    let refused_at_start = |oauth: &[&str]| {
        let output = std::process::Command::new(SIDECAR)
            .args(["--http", "127.0.0.1:0", "--oauth-resource", "https://a/mcp"])
            .args(oauth)
            .output()
            .expect("runs");
        assert!(!output.status.success());
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    // Keys that cannot be read, saying which file.
    let said = refused_at_start(&[
        "--oauth-issuer",
        "https://b",
        "--oauth-jwks-file",
        "/nonexistent",
    ]);
    assert!(said.contains("cannot be read"), "{said}");
    // Without a key file the keys come from the issuer: one that cannot be reached, saying
    // where it looked.
    let said = refused_at_start(&["--oauth-issuer", "http://127.0.0.1:1"]);
    assert!(
        said.contains("http://127.0.0.1:1/.well-known/oauth-authorization-server")
            && said.contains("could not be fetched"),
        "{said}"
    );
}
