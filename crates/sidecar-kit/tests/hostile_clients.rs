//! The kit against a client that misbehaves: a request line over the cap, uploads named like
//! the kit's own temporary files, uploads that fail or are left idle, calls it cancels or
//! walks away from, and sessions it opens and forgets.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use maljan_sidecar_kit::{HttpOptions, JobDir, Server, ToolSpec, TransferLimits};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines, ReadHalf, WriteHalf};

struct Client {
    lines: Lines<BufReader<ReadHalf<tokio::io::DuplexStream>>>,
    write: WriteHalf<tokio::io::DuplexStream>,
}

impl Client {
    async fn send_raw(&mut self, line: &[u8]) {
        self.write.write_all(line).await.expect("write");
    }

    async fn send(&mut self, message: Value) {
        self.send_raw(format!("{message}\n").as_bytes()).await;
    }

    async fn receive(&mut self) -> Value {
        let line = self.lines.next_line().await.expect("read").expect("a line");
        serde_json::from_str(&line).expect("JSON")
    }

    async fn call(&mut self, id: u64, name: &str, arguments: Value) -> Value {
        self.send(call(id, name, arguments)).await;
        self.receive().await["result"]["structuredContent"].take()
    }
}

fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
}

fn start_in(server: Server, job: Arc<JobDir>) -> Client {
    let (client, server_end) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        let (read, write) = tokio::io::split(server_end);
        Arc::new(server).serve_job(job, read, write).await
    });
    let (read, write) = tokio::io::split(client);
    Client {
        lines: BufReader::new(read).lines(),
        write,
    }
}

fn sha(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

#[tokio::test]
async fn a_request_line_over_the_cap_is_answered_with_an_error_for_its_id() {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = JobDir::in_dir(dir.path()).expect("job");
    let mut client = start_in(Server::builder("t", "1").file_transfer().build(), job);
    let mut line = br#"{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"put_sample","arguments":{"content_base64":""#.to_vec();
    line.resize(line.len() + 33 * 1024 * 1024, b'A');
    line.extend_from_slice(b"\"}}}\n");
    client.send_raw(&line).await;
    let reply = client.receive().await;
    assert_eq!(reply["id"], 77);
    let message = reply["error"]["message"].as_str().expect("an error");
    assert!(message.contains("over this server's cap"), "{message}");
    // The next request is read as usual.
    let answer = client.call(78, "capabilities", json!({})).await;
    assert_eq!(answer["server"], "t");
}

async fn upload(client: &mut Client, id: u64, name: &str, bytes: &[u8]) -> u64 {
    let begun = client
        .call(
            id,
            "put_sample_begin",
            json!({"name": name, "size": bytes.len(), "sha256": sha(bytes)}),
        )
        .await;
    begun["upload_id"].as_u64().expect("an upload id")
}

#[tokio::test]
async fn names_a_client_chooses_never_stand_for_an_upload_in_progress() {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = JobDir::in_dir(dir.path()).expect("job");
    let mut client = start_in(Server::builder("t", "1").file_transfer().build(), job);
    let first = b"the first upload's bytes";
    let upload_a = upload(&mut client, 1, "a.bin", first).await;
    let chunk = STANDARD.encode(first);
    let stored = client
        .call(
            2,
            "put_sample_chunk",
            json!({"upload_id": upload_a, "offset": 0, "content_base64": chunk}),
        )
        .await;
    assert_eq!(stored["received"], first.len());
    // Uploads named as the kit's temporary files would have been, or as its directory.
    for (n, name) in [".incoming", ".incoming-1", "1", "2"].iter().enumerate() {
        let other = format!("another upload, named {name}");
        let receipt = client
            .call(
                10 + n as u64,
                "put_sample",
                json!({"name": name, "content_base64": STANDARD.encode(&other), "sha256": sha(other.as_bytes())}),
            )
            .await;
        let path = receipt["path"].as_str().expect("a receipt");
        assert_eq!(std::fs::read(path).expect("stored"), other.as_bytes());
    }
    let receipt = client
        .call(20, "put_sample_finish", json!({"upload_id": upload_a}))
        .await;
    let path = receipt["path"].as_str().expect("a receipt");
    assert_eq!(receipt["sha256"], sha(first));
    assert_eq!(std::fs::read(path).expect("stored"), first);
}

#[tokio::test]
async fn a_failed_or_abandoned_upload_leaves_no_file_behind() {
    let dir = tempfile::tempdir().expect("temp dir");
    let job = JobDir::in_dir(dir.path()).expect("job");
    let limits = TransferLimits::default().upload_idle(Duration::ZERO);
    let mut client = start_in(
        Server::builder("t", "1").file_transfer_with(limits).build(),
        job,
    );
    let incoming = dir.path().join(".incoming");
    let left = || std::fs::read_dir(&incoming).map_or(0, |d| d.count());

    let wrong = upload(&mut client, 1, "w.bin", b"announced bytes").await;
    client
        .call(2, "put_sample_chunk", json!({"upload_id": wrong, "offset": 0, "content_base64": STANDARD.encode(b"other bytes!!!!")}))
        .await;
    let refused = client
        .call(3, "put_sample_finish", json!({"upload_id": wrong}))
        .await;
    assert_eq!(refused["error"]["code"], "bad_argument", "{refused}");
    assert_eq!(left(), 0, "a refused finish removes its file");

    let abandoned = upload(&mut client, 4, "a.bin", b"never sent").await;
    assert_eq!(left(), 1);
    // Idle longer than the limit (none): the next upload drops it and its file.
    upload(&mut client, 5, "b.bin", b"next").await;
    assert_eq!(left(), 1, "the abandoned upload's file is gone");
    let gone = client
        .call(
            6,
            "put_sample_chunk",
            json!({"upload_id": abandoned, "offset": 0, "content_base64": ""}),
        )
        .await;
    assert!(
        gone["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("no upload")),
        "{gone}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_waiting_for_their_turn_are_bounded_over_all_uploads_and_others_are_answered() {
    use maljan_sidecar_kit::{
        MAX_CHUNKS_WAITING, MAX_CHUNKS_WAITING_IN_ALL, MAX_UPLOADS_IN_PROGRESS,
    };
    let dir = tempfile::tempdir().expect("temp dir");
    let job = JobDir::in_dir(dir.path()).expect("job");
    let mut client = start_in(Server::builder("t", "1").file_transfer().build(), job);
    let mut uploads = Vec::new();
    for n in 0..MAX_UPLOADS_IN_PROGRESS as u64 {
        uploads.push(upload(&mut client, n + 1, &format!("u{n}"), &[7; 8]).await);
    }
    // Every upload gets as many early chunks as it may have waiting: more than the server
    // lets wait in all.
    let early = STANDARD.encode([7u8; 4]);
    let mut id = 100;
    for upload in &uploads {
        for _ in 0..MAX_CHUNKS_WAITING {
            client
                .send(call(
                    id,
                    "put_sample_chunk",
                    json!({"upload_id": upload, "offset": 4, "content_base64": early}),
                ))
                .await;
            id += 1;
        }
    }
    let sent = MAX_UPLOADS_IN_PROGRESS * MAX_CHUNKS_WAITING;
    assert!(sent > MAX_CHUNKS_WAITING_IN_ALL);
    // Those past the bound are refused at once, and are the only replies while the others
    // wait; a call made then is answered.
    for _ in 0..sent - MAX_CHUNKS_WAITING_IN_ALL {
        let reply = client.receive().await;
        let message = reply["result"]["structuredContent"]["error"]["message"].to_string();
        assert!(
            message.contains("already wait for their turn on this server"),
            "{reply}"
        );
    }
    let answer = client.call(1000, "capabilities", json!({})).await;
    assert_eq!(answer["server"], "t");
    // Finishing the uploads releases the chunks that wait.
    for (n, upload) in uploads.iter().enumerate() {
        client
            .send(call(
                2000 + n as u64,
                "put_sample_finish",
                json!({"upload_id": upload}),
            ))
            .await;
    }
    for _ in 0..MAX_CHUNKS_WAITING_IN_ALL + uploads.len() {
        client.receive().await;
    }
}

/// A server whose one tool says it started, loops until its call is cancelled, then says
/// it stopped.
fn looping_server(events: mpsc::Sender<&'static str>) -> Server {
    let events = std::sync::Mutex::new(events);
    Server::builder("t", "1")
        .tool(
            ToolSpec::new("spin", "works until cancelled"),
            move |_, ctx| {
                let _ = events.lock().expect("lock").send("started");
                while !ctx.is_cancelled() {
                    std::thread::yield_now();
                }
                let _ = events.lock().expect("lock").send("stopped");
                ctx.check_cancelled().map(|()| json!({}))
            },
        )
        .build()
}

/// Waits (on a blocking thread) for the handler's next event; fails after a minute.
async fn handler_says(events: &Arc<std::sync::Mutex<mpsc::Receiver<&'static str>>>, what: &str) {
    let events = events.clone();
    let said = tokio::task::spawn_blocking(move || {
        events
            .lock()
            .expect("lock")
            .recv_timeout(Duration::from_secs(60))
    })
    .await
    .expect("join");
    assert_eq!(said.ok(), Some(what), "the handler did not say it {what}");
}

#[tokio::test]
async fn a_cancelled_call_stops_its_handler() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (tx, rx) = mpsc::channel();
    let events = Arc::new(std::sync::Mutex::new(rx));
    let mut client = start_in(looping_server(tx), JobDir::in_dir(dir.path()).expect("job"));
    client.send(call(1, "spin", json!({}))).await;
    handler_says(&events, "started").await;
    client
        .send(
            json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 1, "reason": "enough"}}),
        )
        .await;
    handler_says(&events, "stopped").await;
}

/// One HTTP/1.1 request; the response's head and body, as text.
fn http(addr: &str, session: Option<&str>, body: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream
        .write_all(request(addr, session, body).as_bytes())
        .expect("send");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("receive");
    response
}

fn request(addr: &str, session: Option<&str>, body: &str) -> String {
    let session = session.map_or(String::new(), |s| format!("Mcp-Session-Id: {s}\r\n"));
    format!(
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{session}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

fn session_id(response: &str) -> String {
    response
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .expect("a session id")
}

async fn serve(server: Server, options: HttpOptions) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    tokio::spawn(server.serve_http_with(listener, options, std::future::pending()));
    addr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_client_that_goes_away_cancels_its_call() {
    let (tx, rx) = mpsc::channel();
    let events = Arc::new(std::sync::Mutex::new(rx));
    let addr = serve(looping_server(tx), HttpOptions::default()).await;
    let session = {
        let addr = addr.clone();
        tokio::task::spawn_blocking(move || session_id(&http(&addr, None, INITIALIZE)))
            .await
            .expect("join")
    };
    let stream = tokio::task::spawn_blocking(move || {
        let mut stream = TcpStream::connect(&addr).expect("connect");
        let body = call(2, "spin", json!({})).to_string();
        stream
            .write_all(request(&addr, Some(&session), &body).as_bytes())
            .expect("send");
        stream
    })
    .await
    .expect("join");
    handler_says(&events, "started").await;
    stream.shutdown(std::net::Shutdown::Both).expect("go away");
    drop(stream);
    handler_says(&events, "stopped").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_bounded_and_an_idle_one_ends_with_its_job_directory() {
    let options = HttpOptions::default().max_sessions(2);
    let addr = serve(Server::builder("t", "1").build(), options).await;
    let responses = tokio::task::spawn_blocking({
        let addr = addr.clone();
        move || {
            (0..3)
                .map(|_| http(&addr, None, INITIALIZE))
                .collect::<Vec<_>>()
        }
    })
    .await
    .expect("join");
    assert!(responses[0].starts_with("HTTP/1.1 200"));
    assert!(responses[1].starts_with("HTTP/1.1 200"));
    assert!(responses[2].starts_with("HTTP/1.1 503"), "{}", responses[2]);
    assert!(responses[2].contains("jobs are open"), "{}", responses[2]);

    let idle = HttpOptions::default().session_idle(Duration::ZERO);
    let addr = serve(Server::builder("t", "1").file_transfer().build(), idle).await;
    let (first, second) = tokio::task::spawn_blocking(move || {
        let first = session_id(&http(&addr, None, INITIALIZE));
        let receipt = http(
            &addr,
            Some(&first),
            &call(
                2,
                "put_sample",
                json!({"name": "a", "content_base64": "", "sha256": sha(b"")}),
            )
            .to_string(),
        );
        let job_dir = receipt
            .split("\"path\":\"")
            .nth(1)
            .and_then(|rest| rest.split("/samples/").next())
            .expect("a receipt naming the job's directory")
            .to_owned();
        // The next session finds the first idle (for longer than no time at all).
        http(&addr, None, INITIALIZE);
        let after = http(
            &addr,
            Some(&first),
            &call(3, "capabilities", json!({})).to_string(),
        );
        (job_dir, after)
    })
    .await
    .expect("join");
    assert!(second.starts_with("HTTP/1.1 404"), "{second}");
    assert!(!std::path::Path::new(&first).exists(), "{first} is removed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_bodies_held_at_once_are_bounded_and_a_request_past_them_is_told_to_wait() {
    // A tool that holds its call (and so its request's body) until told to let go.
    let (release, held) = mpsc::channel::<()>();
    let (started, start) = mpsc::channel::<()>();
    let (held, started) = (std::sync::Mutex::new(held), std::sync::Mutex::new(started));
    let server = Server::builder("t", "1")
        .tool(
            ToolSpec::new("hold", "holds until released"),
            move |_, _| {
                let _ = started.lock().expect("lock").send(());
                let _ = held.lock().expect("lock").recv();
                Ok(json!({"held": true}))
            },
        )
        .build();
    let options = HttpOptions::default()
        .max_body_bytes_held(maljan_sidecar_kit::MAX_REQUEST_BYTES)
        .body_timeout(Duration::from_secs(1));
    let addr = serve(server, options).await;
    let session = {
        let addr = addr.clone();
        tokio::task::spawn_blocking(move || session_id(&http(&addr, None, INITIALIZE)))
            .await
            .expect("join")
    };
    // A call whose body is as large as a body may be: it takes all the room there is.
    let padding = "x".repeat(maljan_sidecar_kit::MAX_REQUEST_BYTES - 200);
    let big = call(2, "hold", json!({"padding": padding})).to_string();
    let first = tokio::task::spawn_blocking({
        let (addr, session) = (addr.clone(), session.clone());
        move || http(&addr, Some(&session), &big)
    });
    let start = Arc::new(std::sync::Mutex::new(start));
    let waiting = start.clone();
    tokio::task::spawn_blocking(move || waiting.lock().expect("lock").recv())
        .await
        .expect("join")
        .expect("the big call started");
    let second = tokio::task::spawn_blocking({
        let (addr, session) = (addr.clone(), session.clone());
        move || {
            http(
                &addr,
                Some(&session),
                &call(3, "capabilities", json!({})).to_string(),
            )
        }
    })
    .await
    .expect("join");
    assert!(second.starts_with("HTTP/1.1 503"), "{second}");
    assert!(second.contains("request bodies"), "{second}");
    release.send(()).expect("release");
    let first = first.await.expect("join");
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    let third = tokio::task::spawn_blocking(move || {
        http(
            &addr,
            Some(&session),
            &call(4, "capabilities", json!({})).to_string(),
        )
    })
    .await
    .expect("join");
    assert!(third.starts_with("HTTP/1.1 200"), "room again: {third}");
}
