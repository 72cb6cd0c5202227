//! The download driver, which asks for chunks ahead, against in-memory servers that choose
//! their own chunk sizes.

use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use maljan_mcp_proto::maljan::ToolFailure;
use maljan_staging::{ArtefactStore, DownloadError, Origin, ToolCaller, download};
use proptest::prelude::*;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// Serves `file` through `get_file`, answering at most `choices[n]` bytes to the n-th call.
struct MemoryServer {
    file: Vec<u8>,
    choices: Vec<u64>,
    calls: Mutex<usize>,
    lie_about_digest: bool,
}

impl ToolCaller for MemoryServer {
    async fn call_tool(&self, tool: &str, arguments: Value) -> Result<Value, ToolFailure> {
        assert_eq!(tool, "get_file");
        let n = {
            let mut calls = self.calls.lock().expect("lock");
            *calls += 1;
            *calls - 1
        };
        let offset = arguments["offset"].as_u64().expect("offset");
        let length = arguments["length"].as_u64().expect("length");
        let take = length.min(self.choices[n % self.choices.len()].max(1));
        let start = (offset as usize).min(self.file.len());
        let end = (start + take as usize).min(self.file.len());
        let sha = if self.lie_about_digest {
            "00".repeat(32)
        } else {
            format!("{:x}", Sha256::digest(&self.file))
        };
        Ok(
            json!({"size": self.file.len(), "sha256": sha, "offset": offset,
            "content_base64": STANDARD.encode(&self.file[start..end])}),
        )
    }
}

fn origin() -> Origin {
    Origin {
        step: None,
        server: "memory".into(),
        tool: "get_file".into(),
    }
}

fn fetch(
    file: Vec<u8>,
    chunk: u64,
    choices: Vec<u64>,
    lie: bool,
) -> (Result<Vec<u8>, DownloadError>, usize) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = ArtefactStore::open(dir.path()).expect("store");
    let server = MemoryServer {
        file,
        choices,
        calls: Mutex::new(0),
        lie_about_digest: lie,
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let result = runtime.block_on(download(
        &server,
        "out/f",
        &store,
        origin(),
        chunk,
        |_, _| {},
    ));
    let leftovers = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().starts_with(".incoming"))
        })
        .count();
    (
        result.map(|stored| std::fs::read(stored.path).expect("stored")),
        leftovers,
    )
}

proptest! {
    #[test]
    fn any_chunk_sizes_the_server_chooses_give_the_file(
        file in prop::collection::vec(any::<u8>(), 0..5000),
        chunk in 1u64..700,
        choices in prop::collection::vec(1u64..900, 1..6),
    ) {
        let (result, leftovers) = fetch(file.clone(), chunk, choices, false);
        prop_assert_eq!(result.expect("downloaded"), file);
        prop_assert_eq!(leftovers, 0);
    }
}

#[test]
fn a_wrong_digest_leaves_nothing_behind() {
    let (result, leftovers) = fetch(vec![7u8; 3000], 256, vec![256], true);
    assert!(
        matches!(result, Err(DownloadError::DigestMismatch { .. })),
        "{result:?}"
    );
    assert_eq!(leftovers, 0, "no temporary file is left");
}

/// Once the size is known, the chunk after the one being handled is already asked for: the
/// server works on it while the client decodes, hashes and writes.
#[test]
fn the_next_chunk_is_asked_for_before_one_is_handled() {
    let chunk = 100u64;
    let file: Vec<u8> = (0..1000u32).map(|i| (i * 7) as u8).collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let store = ArtefactStore::open(dir.path()).expect("store");
    let server = MemoryServer {
        file: file.clone(),
        choices: vec![chunk],
        calls: Mutex::new(0),
        lie_about_digest: false,
    };
    let asked_when_handled = Mutex::new(Vec::new());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let stored = runtime
        .block_on(download(
            &server,
            "out/f",
            &store,
            origin(),
            chunk,
            |received, _| {
                let asked = *server.calls.lock().expect("lock");
                asked_when_handled
                    .lock()
                    .expect("lock")
                    .push((received / chunk, asked));
            },
        ))
        .expect("downloaded");
    assert_eq!(std::fs::read(stored.path).expect("stored"), file);
    // The first answer tells the size; from the second on, until the last, the chunk
    // after the one handled has been asked for already.
    let seen = asked_when_handled.into_inner().expect("lock");
    assert_eq!(seen.len(), 10, "{seen:?}");
    for &(handled, asked) in &seen[1..9] {
        assert!(
            asked as u64 > handled,
            "{handled} chunks were handled with only {asked} asked for: {seen:?}"
        );
    }
}

/// Claims a file of `size` bytes and serves zeros for it, counting its calls.
struct Boaster {
    size: u64,
    calls: Mutex<usize>,
}

impl ToolCaller for Boaster {
    async fn call_tool(&self, _tool: &str, arguments: Value) -> Result<Value, ToolFailure> {
        *self.calls.lock().expect("lock") += 1;
        let offset = arguments["offset"].as_u64().expect("offset");
        let length = arguments["length"].as_u64().expect("length");
        let bytes = vec![0u8; length.min(self.size - offset) as usize];
        Ok(
            json!({"size": self.size, "sha256": "0".repeat(64), "offset": offset,
            "content_base64": STANDARD.encode(bytes)}),
        )
    }
}

#[test]
fn a_size_that_cannot_be_kept_is_refused_at_the_first_answer() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    for (size, cap) in [(1u64 << 50, None), (2 << 30, Some(1 << 20))] {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = ArtefactStore::open(dir.path()).expect("store");
        if let Some(cap) = cap {
            store.set_byte_cap(cap);
        }
        let server = Boaster {
            size,
            calls: Mutex::new(0),
        };
        let result = runtime.block_on(download(
            &server,
            "big.bin",
            &store,
            origin(),
            1 << 20,
            |_, _| {},
        ));
        assert!(
            matches!(&result, Err(DownloadError::NoRoom { size: s, .. }) if *s == size),
            "{result:?}"
        );
        let text = result.expect_err("refused").to_string();
        assert!(text.contains("core.run.max_taken_bytes"), "{text}");
        assert_eq!(
            *server.calls.lock().expect("lock"),
            1,
            "one call, not the file"
        );
    }
}
