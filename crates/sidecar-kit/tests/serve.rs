//! The kit's server over in-memory pipes, spoken to line by line.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use maljan_sidecar_kit::{MAX_CHUNK_AHEAD, MAX_CHUNKS_WAITING, Probe, Server, ToolSpec};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines, ReadHalf, WriteHalf};

struct Client {
    lines: Lines<BufReader<ReadHalf<tokio::io::DuplexStream>>>,
    write: WriteHalf<tokio::io::DuplexStream>,
}

impl Client {
    async fn send(&mut self, message: Value) {
        self.write
            .write_all(format!("{message}\n").as_bytes())
            .await
            .expect("write");
    }

    async fn receive(&mut self) -> Value {
        let line = self.lines.next_line().await.expect("read").expect("a line");
        serde_json::from_str(&line).expect("JSON")
    }
}

fn start(server: Server) -> Client {
    let (client, server_end) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        let (read, write) = tokio::io::split(server_end);
        server.serve(read, write).await
    });
    let (read, write) = tokio::io::split(client);
    Client {
        lines: BufReader::new(read).lines(),
        write,
    }
}

fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": name, "arguments": arguments}})
}

#[tokio::test]
async fn a_missing_dependency_answers_its_envelope_without_running_the_handler() {
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    let server = Server::builder("t", "1")
        .tool(
            ToolSpec::new("needs", "needs a program").depends_on(
                Probe::Program("no-such-program-anywhere".into()),
                "install it",
                Some("everything"),
            ),
            move |_, _| {
                flag.store(true, Ordering::SeqCst);
                Ok(json!({}))
            },
        )
        .build();
    let entry = &server.manifest().tools[0];
    assert!(!entry.available);
    assert_eq!(
        entry.optional_dependency.as_deref(),
        Some("no-such-program-anywhere")
    );
    let mut client = start(server);
    client.send(call(1, "needs", json!({}))).await;
    let reply = client.receive().await;
    let envelope = &reply["result"]["structuredContent"];
    assert_eq!(envelope["error"]["code"], "missing_dependency");
    assert_eq!(envelope["error"]["remediation"], "install it");
    assert_eq!(envelope["tool"], "needs");
    assert_eq!(reply["result"]["isError"], true);
    assert!(!ran.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_cancelled_call_is_not_answered_and_others_are() {
    let server = Server::builder("t", "1")
        .tool(ToolSpec::new("slow", "sleeps"), |_, _| {
            std::thread::sleep(Duration::from_millis(300));
            Ok(json!({"slept": true}))
        })
        .build();
    let mut client = start(server);
    client.send(call(1, "slow", json!({}))).await;
    client
        .send(json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}))
        .await;
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .await;
    client.send(call(3, "slow", json!({}))).await;
    let first = client.receive().await;
    assert_eq!(first["id"], 2);
    assert_eq!(first["result"], json!({}));
    let second = client.receive().await;
    assert_eq!(second["id"], 3, "call 1 was cancelled and never answered");
}

#[tokio::test]
async fn unknown_tools_methods_and_invalid_requests_get_json_rpc_errors() {
    let mut client = start(Server::builder("t", "1").build());
    client.send(call(1, "nope", json!({}))).await;
    let reply = client.receive().await;
    assert_eq!(reply["error"]["code"], -32602);
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "resources/list"}))
        .await;
    assert_eq!(client.receive().await["error"]["code"], -32601);
    client
        .send(json!({"jsonrpc": "2.0", "id": 3, "method": 5}))
        .await;
    let reply = client.receive().await;
    assert_eq!(reply["error"]["code"], -32600);
    assert_eq!(
        reply["error"]["message"],
        "method is an integer, not a string"
    );
}

#[tokio::test]
async fn initialize_echoes_a_supported_version_and_lists_capabilities_first() {
    let mut client = start(Server::builder("t", "1").build());
    client
        .send(
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"}}}),
        )
        .await;
    assert_eq!(
        client.receive().await["result"]["protocolVersion"],
        "2025-03-26"
    );
    client
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
        .await;
    assert_eq!(
        client.receive().await["result"]["tools"][0]["name"],
        "capabilities"
    );
}

/// Reads replies until one has each id, whatever order they come in.
async fn replies_by_id(client: &mut Client, ids: &[u64]) -> Vec<Value> {
    let mut replies: Vec<Option<Value>> = vec![None; ids.len()];
    while replies.iter().any(Option::is_none) {
        let reply = client.receive().await;
        let at = ids
            .iter()
            .position(|id| reply["id"] == *id)
            .expect("a reply to a request sent");
        replies[at] = Some(reply);
    }
    replies.into_iter().flatten().collect()
}

fn structured(reply: &Value) -> &Value {
    &reply["result"]["structuredContent"]
}

async fn begin_upload(client: &mut Client, content: &[u8]) -> u64 {
    let sha = format!("{:x}", Sha256::digest(content));
    client
        .send(call(
            1,
            "put_sample_begin",
            json!({"name": "s.bin", "size": content.len(), "sha256": sha}),
        ))
        .await;
    let begun = client.receive().await;
    structured(&begun)["upload_id"]
        .as_u64()
        .expect("an upload id")
}

fn finish(id: u64, upload: u64) -> Value {
    call(id, "put_sample_finish", json!({"upload_id": upload}))
}

fn chunk(id: u64, upload: u64, offset: u64, content_base64: &str) -> Value {
    call(
        id,
        "put_sample_chunk",
        json!({"upload_id": upload, "offset": offset, "content_base64": content_base64}),
    )
}

#[tokio::test]
async fn a_chunk_that_arrives_before_the_bytes_before_it_waits_for_its_turn() {
    let mut client = start(Server::builder("t", "1").file_transfer().build());
    let upload = begin_upload(&mut client, b"abcdef").await;
    // The second half is sent first: the server stores it only after the first half.
    client
        .send(chunk(2, upload, 3, &STANDARD.encode("def")))
        .await;
    client
        .send(chunk(3, upload, 0, &STANDARD.encode("abc")))
        .await;
    let replies = replies_by_id(&mut client, &[2, 3]).await;
    assert_eq!(structured(&replies[0])["received"], 6, "{}", replies[0]);
    assert_eq!(structured(&replies[1])["received"], 3, "{}", replies[1]);

    client.send(finish(4, upload)).await;
    let finished = client.receive().await;
    let receipt = structured(&finished);
    assert_eq!(receipt["size"], 6, "{finished}");
    let stored = std::fs::read(receipt["path"].as_str().expect("a path")).expect("stored");
    assert_eq!(stored, b"abcdef");
}

/// A client that did not know the file's digest when it began gives it to
/// `put_sample_finish`: the bytes are checked against it there, as against one announced.
#[tokio::test]
async fn a_digest_given_only_at_the_finish_is_checked_there() {
    let sha = |bytes: &[u8]| format!("{:x}", Sha256::digest(bytes));
    let cases = [
        (None, Some(sha(b"abcdef")), Ok(())),
        (None, Some(sha(b"abcdeF")), Err("not the")),
        (None, None, Err("no sha256 was given")),
        (
            None,
            Some("not a digest".to_owned()),
            Err("is not 64 hex digits"),
        ),
        (Some(sha(b"abcdef")), Some(sha(b"abcdef")), Ok(())),
        (
            Some(sha(b"abcdef")),
            Some(sha(b"other")),
            Err("given to put_sample_finish"),
        ),
    ];
    for (at_begin, at_finish, outcome) in cases {
        let mut client = start(Server::builder("t", "1").file_transfer().build());
        let mut begin = json!({"name": "s.bin", "size": 6});
        if let Some(sha) = &at_begin {
            begin["sha256"] = json!(sha);
        }
        client.send(call(1, "put_sample_begin", begin)).await;
        let begun = client.receive().await;
        let upload = structured(&begun)["upload_id"]
            .as_u64()
            .expect("an upload id");
        client
            .send(chunk(2, upload, 0, &STANDARD.encode("abcdef")))
            .await;
        assert_eq!(structured(&client.receive().await)["received"], 6);
        let mut arguments = json!({"upload_id": upload});
        if let Some(sha) = &at_finish {
            arguments["sha256"] = json!(sha);
        }
        client.send(call(3, "put_sample_finish", arguments)).await;
        let finished = client.receive().await;
        let case = format!("{at_begin:?} then {at_finish:?}: {finished}");
        match outcome {
            Ok(()) => {
                let receipt = structured(&finished);
                assert_eq!(receipt["sha256"], sha(b"abcdef"), "{case}");
                let path = receipt["path"].as_str().expect(&case);
                assert_eq!(std::fs::read(path).expect("stored"), b"abcdef", "{case}");
            }
            Err(words) => {
                assert_eq!(finished["result"]["isError"], true, "{case}");
                let message = structured(&finished)["error"]["message"].to_string();
                assert!(message.contains(words), "{case}");
            }
        }
    }
}

#[tokio::test]
async fn once_a_chunk_in_turn_is_refused_the_chunks_waiting_behind_it_are_refused_at_once() {
    let mut client = start(Server::builder("t", "1").file_transfer().build());
    let upload = begin_upload(&mut client, b"abcdef").await;
    client
        .send(chunk(2, upload, 3, &STANDARD.encode("def")))
        .await;
    client.send(chunk(3, upload, 0, "not base64!")).await;
    let replies = replies_by_id(&mut client, &[2, 3]).await;
    let waiting = structured(&replies[0])["error"]["message"].to_string();
    let refused = structured(&replies[1])["error"]["message"].to_string();
    assert!(refused.contains("not base64"), "{refused}");
    assert!(
        waiting.contains("cannot complete") && waiting.contains("not base64"),
        "{waiting}"
    );

    client.send(finish(4, upload)).await;
    let finished = client.receive().await;
    assert_eq!(finished["result"]["isError"], true, "{finished}");
    let message = structured(&finished)["error"]["message"].to_string();
    assert!(message.contains("a chunk was refused"), "{message}");
}

#[tokio::test]
async fn chunks_sent_twice_or_too_far_ahead_are_refused_without_waiting() {
    let mut client = start(Server::builder("t", "1").file_transfer().build());
    let upload = begin_upload(&mut client, b"abcdef").await;
    client
        .send(chunk(2, upload, 0, &STANDARD.encode("abc")))
        .await;
    assert_eq!(structured(&client.receive().await)["received"], 3);

    client
        .send(chunk(3, upload, 0, &STANDARD.encode("abc")))
        .await;
    let again = client.receive().await;
    let message = structured(&again)["error"]["message"].to_string();
    assert!(message.contains("already received"), "{message}");

    let far = 3 + MAX_CHUNK_AHEAD + 1;
    client
        .send(chunk(4, upload, far, &STANDARD.encode("x")))
        .await;
    let ahead = client.receive().await;
    let message = structured(&ahead)["error"]["message"].to_string();
    assert!(message.contains("bytes past the 3 received"), "{message}");

    // Neither refusal spoils the upload: it goes on from where it was.
    client
        .send(chunk(5, upload, 3, &STANDARD.encode("def")))
        .await;
    assert_eq!(structured(&client.receive().await)["received"], 6);
    client.send(finish(6, upload)).await;
    assert_eq!(structured(&client.receive().await)["size"], 6);
}

#[tokio::test]
async fn a_chunk_waiting_for_its_turn_is_refused_when_its_upload_is_finished_without_it() {
    let mut client = start(Server::builder("t", "1").file_transfer().build());
    let upload = begin_upload(&mut client, b"abcdef").await;
    client
        .send(chunk(2, upload, 3, &STANDARD.encode("def")))
        .await;
    client.send(finish(3, upload)).await;
    let replies = replies_by_id(&mut client, &[2, 3]).await;
    let finish = structured(&replies[1])["error"]["message"].to_string();
    assert!(finish.contains("0 bytes received of the 6"), "{finish}");
    let waiting = structured(&replies[0])["error"]["message"].to_string();
    assert!(waiting.contains("no upload"), "{waiting}");
}

#[tokio::test]
async fn no_more_than_a_few_chunks_may_wait_for_their_turn() {
    let mut client = start(Server::builder("t", "1").file_transfer().build());
    let upload = begin_upload(&mut client, b"abcd").await;
    // Chunks at offset 3 wait for the first three bytes: one too many is refused at once,
    // and is the only reply before those bytes come.
    let ids: Vec<u64> = (0..=MAX_CHUNKS_WAITING as u64).map(|n| 10 + n).collect();
    for id in &ids {
        client
            .send(chunk(*id, upload, 3, &STANDARD.encode("d")))
            .await;
    }
    let refused = client.receive().await;
    let message = structured(&refused)["error"]["message"].to_string();
    assert!(message.contains("already wait"), "{refused}");

    // The first bytes let one waiting chunk through; the others came twice.
    client
        .send(chunk(2, upload, 0, &STANDARD.encode("abc")))
        .await;
    let rest: Vec<u64> = ids
        .iter()
        .copied()
        .filter(|id| refused["id"] != *id)
        .chain([2])
        .collect();
    let replies = replies_by_id(&mut client, &rest).await;
    let received: Vec<u64> = replies
        .iter()
        .filter_map(|r| structured(r)["received"].as_u64())
        .collect();
    assert_eq!(
        received.iter().filter(|&&r| r == 4).count(),
        1,
        "{replies:?}"
    );
    assert_eq!(
        received.iter().filter(|&&r| r == 3).count(),
        1,
        "{replies:?}"
    );
    let twice = replies
        .iter()
        .filter(|r| {
            structured(r)["error"]["message"]
                .to_string()
                .contains("already received")
        })
        .count();
    assert_eq!(twice, MAX_CHUNKS_WAITING - 1);
}

#[tokio::test]
async fn a_chunk_whose_bytes_before_never_come_is_refused_once_its_wait_is_over() {
    let wait = Duration::from_millis(200);
    let server = Server::builder("t", "1")
        .file_transfer_with(maljan_sidecar_kit::TransferLimits::default().turn_wait(wait))
        .build();
    let mut client = start(server);
    let upload = begin_upload(&mut client, b"abcdef").await;
    let sent = std::time::Instant::now();
    client
        .send(chunk(2, upload, 3, &STANDARD.encode("def")))
        .await;
    let waited = client.receive().await;
    assert!(sent.elapsed() >= wait, "answered before its wait was over");
    assert_eq!(waited["result"]["isError"], true, "{waited}");
    let message = structured(&waited)["error"]["message"].to_string();
    assert!(
        message.contains("waited 0.2s for the bytes from offset 0, which never came"),
        "{message}"
    );
    // The upload goes on: the bytes before, then the refused chunk again.
    client
        .send(chunk(3, upload, 0, &STANDARD.encode("abc")))
        .await;
    assert_eq!(structured(&client.receive().await)["received"], 3);
    client
        .send(chunk(4, upload, 3, &STANDARD.encode("def")))
        .await;
    assert_eq!(structured(&client.receive().await)["received"], 6);
    client.send(finish(5, upload)).await;
    assert_eq!(structured(&client.receive().await)["size"], 6);
}

#[tokio::test]
async fn get_file_states_the_digest_of_the_latest_upload_under_a_name() {
    let mut client = start(Server::builder("t", "1").file_transfer().build());
    // Two uploads of the same size under the same name: the second replaces the first, and
    // the digest served is the second's, not one remembered from the first.
    for (round, content) in [&b"abcdef"[..], b"ghijkl"].into_iter().enumerate() {
        let id = 10 * (round as u64 + 1);
        let upload = begin_upload(&mut client, content).await;
        client
            .send(chunk(id, upload, 0, &STANDARD.encode(content)))
            .await;
        client.receive().await;
        client.send(finish(id + 1, upload)).await;
        let finished = client.receive().await;
        let path = structured(&finished)["path"].as_str().expect("a path");
        client
            .send(call(id + 2, "get_file", json!({"path": path})))
            .await;
        let served = client.receive().await;
        let served = structured(&served);
        assert_eq!(
            served["sha256"],
            format!("{:x}", Sha256::digest(content)),
            "{served}"
        );
        let bytes = STANDARD
            .decode(served["content_base64"].as_str().expect("base64"))
            .expect("base64");
        assert_eq!(bytes, content);
    }
}

/// A quick tool answers on the task serving the call (here, the test's own thread), unless
/// its params are too large to read there; any other tool answers on a blocking thread. A
/// quick tool's panic is answered as any tool's, and serving goes on.
#[tokio::test]
async fn quick_tools_answer_on_the_serving_task_and_others_on_blocking_threads() {
    let threads = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (quick_seen, other_seen) = (threads.clone(), threads.clone());
    let server = Server::builder("t", "1")
        .quick_tool(
            ToolSpec::new("quick", "says where it ran")
                .optional("padding", json!({"type": "string"})),
            move |_, _| {
                quick_seen.lock().unwrap().push(std::thread::current().id());
                Ok(json!({}))
            },
        )
        .tool(ToolSpec::new("other", "says where it ran"), move |_, _| {
            other_seen.lock().unwrap().push(std::thread::current().id());
            Ok(json!({}))
        })
        .quick_tool(ToolSpec::new("fails", "panics"), |_, _| {
            panic!("quick and broken")
        })
        .build();
    let mut client = start(server);
    let large = "x".repeat(maljan_sidecar_kit::QUICK_PARAMS_BYTES);
    client.send(call(1, "quick", json!({}))).await;
    client
        .send(call(2, "quick", json!({"padding": large})))
        .await;
    client.send(call(3, "other", json!({}))).await;
    client.send(call(4, "fails", json!({}))).await;
    let replies = replies_by_id(&mut client, &[1, 2, 3, 4]).await;
    assert!(
        replies[..3].iter().all(|r| structured(r) == &json!({})),
        "{replies:?}"
    );
    let failure = &replies[3]["result"]["structuredContent"]["error"];
    assert_eq!(failure["code"], "tool_failed");
    assert!(
        failure["message"]
            .as_str()
            .unwrap()
            .contains("quick and broken")
    );
    client
        .send(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}))
        .await;
    assert_eq!(client.receive().await["id"], 5);

    let seen = threads.lock().unwrap().clone();
    let here = std::thread::current().id();
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0], here, "a small quick call runs on the serving task");
    assert!(seen[1..].iter().all(|t| *t != here), "{seen:?}");
}
