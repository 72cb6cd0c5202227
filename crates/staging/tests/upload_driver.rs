//! The upload driver, which keeps chunks in flight, against an in-memory server that
//! checks every chunk arrives at the offset after the last.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
use maljan_staging::{
    ToolCaller, UploadError, UploadMode, UploadReceipt, upload, upload_with_digest,
};
use proptest::prelude::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Receives one chunked upload in memory, storing chunks in offset order whatever order
/// their calls run in; `allows` is the `chunks_in_flight` its `put_sample_begin` answers,
/// `grow` a file to append to when the upload begins (after the client hashed it, before
/// it reads it to send), `flip` a file and the offset of a byte to change then;
/// `digest_first` refuses to begin without the file's digest, as a server taking it only
/// at the beginning does. `finished_with` is the digest `put_sample_finish` was given. A chunk's call is held until `hold_until` calls are in flight or
/// the last chunk has come, so the most seen in flight is what the client sends ahead,
/// not how fast its reading thread happened to be; once a hold runs out, no more are held.
#[derive(Default)]
struct MemoryServer {
    received: Mutex<Vec<u8>>,
    calls: Mutex<Vec<String>>,
    allows: Option<u64>,
    grow: Option<PathBuf>,
    flip: Option<(PathBuf, usize)>,
    digest_first: bool,
    finished_with: Mutex<Option<Value>>,
    hold_until: usize,
    size: AtomicU64,
    last_came: AtomicBool,
    hold_ran_out: AtomicBool,
    in_call: AtomicUsize,
    most_in_flight: AtomicUsize,
}

/// How long a held call waits, in yields, for the others before going on regardless: long
/// enough for a client sending one more than it should to be seen, and a client sending
/// fewer fails the test rather than hangs it.
const MAX_HOLD_YIELDS: u32 = 1_000_000;

impl ToolCaller for MemoryServer {
    async fn call_tool(&self, tool: &str, arguments: Value) -> Result<Value, ToolFailure> {
        self.calls.lock().expect("lock").push(tool.to_owned());
        let received = self.received.lock().expect("lock");
        match tool {
            "put_sample_begin" => {
                if self.digest_first && arguments.get("sha256").is_none() {
                    return Err(ToolFailure::new(
                        ErrorCode::BadArgument,
                        "the argument sha256 is missing",
                        None,
                    ));
                }
                if let Some(path) = &self.grow {
                    let mut bytes = std::fs::read(path).expect("read");
                    bytes.push(b'!');
                    std::fs::write(path, bytes).expect("grow");
                }
                if let Some((path, at)) = &self.flip {
                    let mut bytes = std::fs::read(path).expect("read");
                    bytes[*at] ^= 0x80;
                    std::fs::write(path, bytes).expect("flip");
                }
                let size = arguments["size"].as_u64().expect("size");
                self.size.store(size, Ordering::SeqCst);
                Ok(json!({"upload_id": 1, "chunks_in_flight": self.allows}))
            }
            "put_sample_chunk" => {
                drop(received);
                let now = self.in_call.fetch_add(1, Ordering::SeqCst) + 1;
                self.most_in_flight.fetch_max(now, Ordering::SeqCst);
                let offset = arguments["offset"].as_u64().expect("offset");
                let content = arguments["content_base64"].as_str().expect("content");
                let bytes = STANDARD.decode(content).expect("base64");
                if offset + bytes.len() as u64 >= self.size.load(Ordering::SeqCst) {
                    self.last_came.store(true, Ordering::SeqCst);
                }
                let mut yields = 0;
                while self.in_call.load(Ordering::SeqCst) < self.hold_until
                    && !self.last_came.load(Ordering::SeqCst)
                    && !self.hold_ran_out.load(Ordering::SeqCst)
                {
                    tokio::task::yield_now().await;
                    yields += 1;
                    if yields == MAX_HOLD_YIELDS {
                        self.hold_ran_out.store(true, Ordering::SeqCst);
                    }
                }
                // Wait for this chunk's turn, letting the others run.
                loop {
                    tokio::task::yield_now().await;
                    let received = self.received.lock().expect("lock");
                    if offset <= received.len() as u64 {
                        break;
                    }
                }
                let mut received = self.received.lock().expect("lock");
                self.in_call.fetch_sub(1, Ordering::SeqCst);
                if offset != received.len() as u64 {
                    return Err(ToolFailure::new(
                        ErrorCode::BadArgument,
                        format!("offset {offset}, {} received", received.len()),
                        None,
                    ));
                }
                received.extend(bytes);
                Ok(json!({"received": received.len()}))
            }
            "put_sample_finish" => {
                *self.finished_with.lock().expect("lock") = arguments.get("sha256").cloned();
                Ok(json!({
                "path": "/job/samples/f", "size": received.len(),
                "sha256": format!("{:x}", Sha256::digest(&*received)),
                }))
            }
            other => panic!("unexpected tool {other}"),
        }
    }
}

fn send(server: &MemoryServer, file: &[u8], chunk: usize) -> Result<u64, UploadError> {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("f");
    std::fs::write(&path, file).expect("write");
    upload_in_chunks(server, &path, chunk).map(|receipt| receipt.size)
}

/// Uploads the file at `path` with [`upload`], `chunk` bytes at a time.
fn upload_in_chunks(
    server: &MemoryServer,
    path: &std::path::Path,
    chunk: usize,
) -> Result<UploadReceipt, UploadError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    runtime.block_on(upload(
        server,
        path,
        "f",
        UploadMode::Chunked,
        chunk,
        |_, _| {},
    ))
}

proptest! {
    #[test]
    fn chunks_in_flight_arrive_in_order_and_make_the_file(
        file in prop::collection::vec(any::<u8>(), 0..5000),
        chunk in 1usize..700,
    ) {
        let server = MemoryServer::default();
        let sent = send(&server, &file, chunk);
        prop_assert_eq!(sent.expect("uploaded"), file.len() as u64);
        prop_assert_eq!(&*server.received.lock().expect("lock"), &file);
        let calls = server.calls.lock().expect("lock").clone();
        prop_assert_eq!(calls.len(), file.len().div_ceil(chunk) + 2);
        prop_assert_eq!(calls.last().map(String::as_str), Some("put_sample_finish"));
    }
}

proptest! {
    /// A digest announced without hashing (a stored artefact's name) is checked against
    /// the bytes as they are read: the upload is finished only when they are its bytes.
    #[test]
    fn an_announced_digest_is_finished_only_when_the_bytes_are_its_own(
        file in prop::collection::vec(any::<u8>(), 1..3000),
        chunk in 1usize..700,
        flip in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("f");
        std::fs::write(&path, &file).expect("write");
        // The digest of the file, or of the file with one byte changed.
        let mut announced_bytes = file.clone();
        if let Some(at) = flip {
            announced_bytes[at.index(file.len())] ^= 1;
        }
        let announced = format!("{:x}", Sha256::digest(&announced_bytes));
        let server = MemoryServer::default();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let result = runtime.block_on(upload_with_digest(
            &server,
            &path,
            "f",
            (file.len() as u64, announced),
            UploadMode::Chunked,
            chunk,
            |_, _| {},
        ));
        let finished = server.calls.lock().expect("lock").iter().any(|c| c == "put_sample_finish");
        if flip.is_some() {
            prop_assert!(matches!(result, Err(UploadError::ChangedDuringUpload { .. })), "{:?}", result);
            prop_assert!(!finished);
        } else {
            prop_assert_eq!(result.expect("uploaded").size, file.len() as u64);
            prop_assert!(finished);
        }
    }
}

/// A server that takes the digest at the finish is sent the file in one read, and given
/// the digest of the bytes sent; one that wants it at the beginning gets it there, the file
/// hashed first.
#[test]
fn the_digest_goes_to_the_finish_when_the_server_takes_it_there() {
    let file: Vec<u8> = (0..5000u32).map(|i| (i * 13 % 256) as u8).collect();
    let digest = format!("{:x}", Sha256::digest(&file));
    for digest_first in [false, true] {
        let server = MemoryServer {
            digest_first,
            ..MemoryServer::default()
        };
        assert_eq!(send(&server, &file, 1024).expect("uploaded"), 5000);
        assert_eq!(*server.received.lock().expect("lock"), file);
        let calls = server.calls.lock().expect("lock").clone();
        let begins = calls.iter().filter(|c| *c == "put_sample_begin").count();
        let finished_with = server.finished_with.lock().expect("lock").clone();
        if digest_first {
            // Refused without it, then begun with it; the finish needs it no more.
            assert_eq!(begins, 2, "{calls:?}");
            assert_eq!(finished_with, None);
        } else {
            assert_eq!(begins, 1, "{calls:?}");
            assert_eq!(finished_with, Some(json!(digest)));
        }
    }
}

/// A file whose size changes after the upload began, its digest to go at the finish, is
/// not finished.
#[test]
fn a_file_that_grows_while_it_is_sent_digest_last_is_not_finished() {
    let dir = tempfile::tempdir().expect("temp dir");
    let grown = dir.path().join("f");
    std::fs::write(&grown, vec![5u8; 3000]).expect("write");
    let server = MemoryServer {
        grow: Some(grown.clone()),
        ..MemoryServer::default()
    };
    let result = upload_in_chunks(&server, &grown, 1024);
    match result {
        Err(UploadError::ModifiedDuringUpload { what, .. }) => {
            assert_eq!(what, "3000 bytes when it began, 3001 read");
        }
        other => panic!("{other:?}"),
    }
    let calls = server.calls.lock().expect("lock").clone();
    assert!(!calls.iter().any(|c| c == "put_sample_finish"), "{calls:?}");
}

/// A file hashed first and changed before it is sent: whichever chunk changed, the upload
/// is not finished and the error states the sha256 of the bytes sent.
#[test]
fn a_file_changed_after_it_was_hashed_is_told_with_the_digest_of_the_bytes_sent() {
    let original: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
    for at in [0, 1023, 1024, 2500, 4999] {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("f");
        std::fs::write(&path, &original).expect("write");
        let server = MemoryServer {
            flip: Some((path.clone(), at)),
            digest_first: true,
            ..MemoryServer::default()
        };
        let result = upload_in_chunks(&server, &path, 1024);
        let sent = server.received.lock().expect("lock").clone();
        assert_eq!(sent, std::fs::read(&path).expect("read"), "changed at {at}");
        match result {
            Err(UploadError::ChangedDuringUpload { expected, read, .. }) => {
                assert_eq!(expected, format!("{:x}", Sha256::digest(&original)));
                assert_eq!(
                    read,
                    format!("{:x}", Sha256::digest(&sent)),
                    "changed at {at}"
                );
            }
            other => panic!("changed at {at}: {other:?}"),
        }
        let calls = server.calls.lock().expect("lock").clone();
        assert!(!calls.iter().any(|c| c == "put_sample_finish"), "{calls:?}");
    }
}

#[test]
fn a_file_that_grows_after_it_was_hashed_is_not_finished() {
    let dir = tempfile::tempdir().expect("temp dir");
    let grown = dir.path().join("f");
    let server = MemoryServer {
        grow: Some(grown.clone()),
        digest_first: true,
        ..MemoryServer::default()
    };
    std::fs::write(&grown, vec![5u8; 3000]).expect("write");
    let result = upload_in_chunks(&server, &grown, 1024);
    assert!(
        matches!(result, Err(UploadError::ChangedDuringUpload { .. })),
        "{result:?}"
    );
    let calls = server.calls.lock().expect("lock").clone();
    assert!(!calls.iter().any(|c| c == "put_sample_finish"), "{calls:?}");
    assert_eq!(
        server.received.lock().expect("lock").len(),
        3000,
        "only the bytes hashed were sent"
    );
}

#[test]
fn chunks_go_several_at_a_time_only_as_far_as_the_server_allows() {
    let file = vec![9u8; 10 * 512];
    for (allows, expected) in [(None, 1), (Some(1), 1), (Some(2), 2), (Some(4), 3)] {
        let server = MemoryServer {
            allows,
            // One more than expected: a client sending more ahead than it should is seen.
            hold_until: expected + 1,
            ..MemoryServer::default()
        };
        let sent = send(&server, &file, 512);
        assert_eq!(sent.expect("uploaded"), file.len() as u64);
        assert_eq!(*server.received.lock().expect("lock"), file);
        assert_eq!(
            server.most_in_flight.load(Ordering::SeqCst),
            expected,
            "a server allowing {allows:?}"
        );
    }
}
