//! Uploading a file to a server through `put_sample_begin` / `_chunk` / `_finish`, or the
//! single `put_sample`.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures::StreamExt;
use futures::stream::FuturesOrdered;
use maljan_mcp_proto::maljan::ToolFailure;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use crate::ToolCaller;
use crate::caller::started;
use crate::hashing::hash_file;

/// The most chunks sent ahead of the server's answers, when the server allows more than
/// one (`chunks_in_flight` in its `put_sample_begin` answer: it stores them in offset order
/// whatever order their calls run in). A server that does not say gets one at a time.
const MAX_CHUNKS_IN_FLIGHT: u64 = 3;
/// How many read buffers go round between the file's reader and the sender.
const READ_BUFFERS: usize = 1;

/// How a file went to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UploadMode {
    /// `put_sample_begin`, `put_sample_chunk`…, `put_sample_finish`.
    Chunked,
    /// One `put_sample` call with the whole file.
    Single,
}

impl UploadMode {
    /// The mode a server's tools allow: chunked when it offers all three chunked tools,
    /// single when it offers `put_sample`, none otherwise.
    ///
    /// ```
    /// use maljan_staging::UploadMode;
    /// let tools = ["put_sample", "put_sample_begin", "put_sample_chunk", "put_sample_finish"];
    /// assert_eq!(UploadMode::offered(tools), Some(UploadMode::Chunked));
    /// assert_eq!(UploadMode::offered(["put_sample"]), Some(UploadMode::Single));
    /// assert_eq!(UploadMode::offered(["file_info"]), None);
    /// ```
    pub fn offered<'a>(tools: impl IntoIterator<Item = &'a str>) -> Option<UploadMode> {
        let tools: Vec<&str> = tools.into_iter().collect();
        let has = |name| tools.contains(&name);
        if has("put_sample_begin") && has("put_sample_chunk") && has("put_sample_finish") {
            Some(UploadMode::Chunked)
        } else if has("put_sample") {
            Some(UploadMode::Single)
        } else {
            None
        }
    }
}

/// A file the server received and confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadReceipt {
    /// Where the server stored it: the path to hand its tools.
    pub remote_path: String,
    /// Its size.
    pub size: u64,
    /// Its sha256.
    pub sha256: String,
    /// How it went.
    pub mode: UploadMode,
    /// How long it took.
    pub duration: Duration,
}

/// Why an upload did not complete.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum UploadError {
    /// Reading the local file failed.
    #[error("reading {path} failed: {source}")]
    Read {
        /// The local file.
        path: String,
        /// The system's error.
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
    /// The bytes read while sending are not the bytes announced (hashed first, or named by
    /// the artefact store): the file changed.
    #[error(
        "{path} changed while it was sent (sha256 {expected} announced, {read} read while \
         sending); the upload was not finished"
    )]
    ChangedDuringUpload {
        /// The local file.
        path: String,
        /// The digest announced.
        expected: String,
        /// The digest of the bytes sent.
        read: String,
    },
    /// A call of the upload failed.
    #[error("{tool} failed: {}", failure.message)]
    Call {
        /// The tool.
        tool: &'static str,
        /// Its failure.
        failure: ToolFailure,
    },
    /// The server's answer is malformed or disagrees with what was sent.
    #[error("{tool} answered {answer}: {detail}")]
    Answer {
        /// The tool.
        tool: &'static str,
        /// The answer.
        answer: String,
        /// What is wrong with it.
        detail: String,
    },
}

async fn call<C: ToolCaller>(
    caller: &C,
    tool: &'static str,
    arguments: Value,
) -> Result<Value, UploadError> {
    caller
        .call_tool(tool, arguments)
        .await
        .map_err(|failure| UploadError::Call { tool, failure })
}

fn read_error(path: &Path) -> impl Fn(std::io::Error) -> UploadError + '_ {
    move |e| UploadError::Read {
        path: path.display().to_string(),
        source: std::sync::Arc::new(e),
    }
}

/// Reads up to `buf.len()` bytes (fewer only at the end of the file).
fn fill(file: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// Reads the first `size` bytes of a file into the buffers handed to it on `empty`, hashing
/// as it reads, and hands each filled buffer on with its length; returns the size and sha256
/// of the bytes read (the size is one more than `size` when the file has grown since).
/// Stops early, without error, when the receiving side is gone.
///
/// The buffers go round between the reader and the sender: allocated once, rather than one
/// per chunk.
fn read_chunks(
    path: &Path,
    size: u64,
    empty: &std::sync::mpsc::Receiver<Vec<u8>>,
    filled: &mpsc::Sender<(Vec<u8>, usize)>,
) -> std::io::Result<(u64, String)> {
    let mut file = File::open(path)?.take(size);
    let mut hasher = Sha256::new();
    let mut read = 0u64;
    while let Ok(mut buf) = empty.recv() {
        let n = fill(&mut file, &mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        read += n as u64;
        if filled.blocking_send((buf, n)).is_err() {
            break;
        }
    }
    if read == size && fill(&mut file.into_inner(), &mut [0u8; 1])? > 0 {
        read += 1;
    }
    Ok((read, format!("{:x}", hasher.finalize())))
}

/// `bytes` in base64, appended to a string of the right size: `Engine::encode` zeroes a
/// buffer of the whole length first and checks it is UTF-8 after, two more passes over a
/// chunk's 5.6 MB in memory (this way the check is of each 1 KiB piece, still in cache).
fn encode(bytes: &[u8]) -> String {
    let mut base64 = String::with_capacity(bytes.len().div_ceil(3) * 4);
    STANDARD.encode_string(bytes, &mut base64);
    base64
}

fn check_receipt(
    tool: &'static str,
    answer: &Value,
    size: u64,
    sha256: &str,
) -> Result<String, UploadError> {
    let wrong = |detail: &str| UploadError::Answer {
        tool,
        answer: answer.to_string(),
        detail: detail.to_owned(),
    };
    let path = answer
        .get("path")
        .and_then(Value::as_str)
        .ok_or_else(|| wrong("no path"))?;
    if answer.get("size").and_then(Value::as_u64) != Some(size) {
        return Err(wrong(&format!("the size is not {size}")));
    }
    if answer
        .get("sha256")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
        .as_deref()
        != Some(sha256)
    {
        return Err(wrong(&format!("the sha256 is not {sha256}")));
    }
    Ok(path.to_owned())
}

/// Uploads `local` to a server as `name`.
///
/// The file is hashed first (its digest is announced); then, chunked, it is streamed from
/// disk `chunk_len` bytes at a time, hashed again as read, and `put_sample_finish` is called
/// only when the bytes sent match the digest announced. When the server's
/// `put_sample_begin` answer allows it (`chunks_in_flight`, as the kit's does), up to three
/// chunks are kept in flight, so the server stores one while the next are read, encoded and
/// sent; otherwise one at a time. Single, the whole file goes in one
/// `put_sample` call, whatever its size. The server's receipt must state the same size and
/// digest. `progress` is told the bytes sent and the total.
pub async fn upload<C: ToolCaller>(
    caller: &C,
    local: &Path,
    name: &str,
    mode: UploadMode,
    chunk_len: usize,
    progress: impl FnMut(u64, u64),
) -> Result<UploadReceipt, UploadError> {
    let start = Instant::now();
    let (size, sha256) = hash_file(local).await.map_err(read_error(local))?;
    upload_announced(
        caller,
        local,
        name,
        (size, sha256),
        mode,
        chunk_len,
        progress,
    )
    .await
    .map(|receipt| UploadReceipt {
        duration: start.elapsed(),
        ..receipt
    })
}

/// [`upload`], announcing a size and digest already known instead of hashing the file
/// first: a file of the artefact store is named by its sha256.
///
/// The bytes are still hashed as they are read, and the upload is completed only when
/// they match what was announced: a file whose bytes are not those of its digest fails
/// with [`UploadError::ChangedDuringUpload`], whatever changed it and when.
///
/// ```no_run
/// # async fn stage(server: &impl maljan_staging::ToolCaller, store: &maljan_staging::ArtefactStore, sha256: &str) {
/// use maljan_staging::{CHUNK_BYTES, UploadMode, upload_announced};
/// let stored = store.root().join(sha256);
/// let size = std::fs::metadata(&stored).unwrap().len();
/// let receipt = upload_announced(server, &stored, "dropped.exe", (size, sha256.to_owned()),
///     UploadMode::Chunked, CHUNK_BYTES as usize, |_, _| {}).await.unwrap();
/// # }
/// ```
pub async fn upload_announced<C: ToolCaller>(
    caller: &C,
    local: &Path,
    name: &str,
    (size, sha256): (u64, String),
    mode: UploadMode,
    chunk_len: usize,
    mut progress: impl FnMut(u64, u64),
) -> Result<UploadReceipt, UploadError> {
    let start = Instant::now();
    let remote_path = match mode {
        UploadMode::Single => {
            let bytes = tokio::fs::read(local).await.map_err(read_error(local))?;
            let read = format!("{:x}", Sha256::digest(&bytes));
            if read != sha256 {
                return Err(UploadError::ChangedDuringUpload {
                    path: local.display().to_string(),
                    expected: sha256,
                    read,
                });
            }
            let mut arguments = json!({"name": name, "sha256": sha256});
            // Moved in: `json!` would copy the whole file's base64.
            arguments["content_base64"] = Value::String(encode(&bytes));
            drop(bytes);
            let answer = call(caller, "put_sample", arguments).await?;
            progress(size, size);
            check_receipt("put_sample", &answer, size, &sha256)?
        }
        UploadMode::Chunked => {
            let begun = call(
                caller,
                "put_sample_begin",
                json!({"name": name, "size": size, "sha256": sha256}),
            )
            .await?;
            let upload_id = begun
                .get("upload_id")
                .cloned()
                .filter(|v| !v.is_null())
                .ok_or_else(|| UploadError::Answer {
                    tool: "put_sample_begin",
                    answer: begun.to_string(),
                    detail: "no upload_id".to_owned(),
                })?;
            let chunks_in_flight = begun
                .get("chunks_in_flight")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .clamp(1, MAX_CHUNKS_IN_FLIGHT) as usize;
            let (filled_tx, mut filled) = mpsc::channel(READ_BUFFERS);
            let (empty_tx, empty) = std::sync::mpsc::channel();
            for _ in 0..READ_BUFFERS {
                // Cannot fail: the receiver is alive until the reader starts.
                let _ = empty_tx.send(vec![0u8; chunk_len.max(1)]);
            }
            let source = local.to_owned();
            let reader =
                tokio::task::spawn_blocking(move || read_chunks(&source, size, &empty, &filled_tx));
            let mut in_flight = FuturesOrdered::new();
            let mut offset = 0u64;
            let mut all_read = false;
            loop {
                tokio::select! {
                    chunk = filled.recv(), if !all_read && in_flight.len() < chunks_in_flight => {
                        let Some((buf, len)) = chunk else {
                            all_read = true;
                            continue;
                        };
                        let content = encode(&buf[..len]);
                        // The reader may be gone (it stops at the end of the file).
                        let _ = empty_tx.send(buf);
                        let mut arguments = json!({"upload_id": upload_id, "offset": offset});
                        // Moved in: `json!` would copy the chunk's base64.
                        arguments["content_base64"] = Value::String(content);
                        offset += len as u64;
                        let end = offset;
                        in_flight.push_back(
                            started(async move {
                                (end, call(caller, "put_sample_chunk", arguments).await)
                            })
                            .await,
                        );
                    }
                    Some((end, answer)) = in_flight.next(), if !in_flight.is_empty() => {
                        let answer = answer?;
                        if answer
                            .get("received")
                            .and_then(Value::as_u64)
                            .is_some_and(|r| r != end)
                        {
                            return Err(UploadError::Answer {
                                tool: "put_sample_chunk",
                                answer: answer.to_string(),
                                detail: format!("received is not {end}"),
                            });
                        }
                        progress(end, size);
                    }
                    else => break,
                }
            }
            let (read_size, read) = reader
                .await
                .map_err(std::io::Error::other)
                .and_then(|r| r)
                .map_err(read_error(local))?;
            if read != sha256 || read_size != size || offset != size {
                return Err(UploadError::ChangedDuringUpload {
                    path: local.display().to_string(),
                    expected: sha256,
                    read,
                });
            }
            let answer = call(caller, "put_sample_finish", json!({"upload_id": upload_id})).await?;
            check_receipt("put_sample_finish", &answer, size, &sha256)?
        }
    };
    Ok(UploadReceipt {
        remote_path,
        size,
        sha256,
        mode,
        duration: start.elapsed(),
    })
}
