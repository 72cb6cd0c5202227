//! An upload carried out: the file read, hashed and sent in chunks (or in one call), the
//! server's answers checked.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::time::Instant;

use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use maljan_mcp_proto::large_buffers::LARGE_BUFFERS;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;

use super::{UploadError, UploadMode, UploadReceipt, UploadValidator};
use crate::ToolCaller;
use crate::caller::send_at_once;
use crate::hashing::hash_file;

/// How many read buffers go round between the file's reader and the sender.
const READ_BUFFERS: usize = 1;

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
/// as it reads, and hands each filled buffer on with its length; returns the size
/// and sha256 of the bytes read (the size is one more than `size` when the file has grown
/// since).
/// Stops early, without error, when the receiving side is gone. Says too whether the file's
/// size or times changed while it was read (a write to it changes them).
///
/// The buffers go round between the reader and the sender: allocated once, rather than one
/// per chunk.
fn read_chunks(
    path: &Path,
    size: u64,
    empty: &std::sync::mpsc::Receiver<Vec<u8>>,
    filled: &mpsc::Sender<(Vec<u8>, usize)>,
) -> std::io::Result<(u64, String, bool)> {
    let mut file = File::open(path)?.take(size);
    let before = FileVersion::of(file.get_ref())?;
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
    let mut file = file.into_inner();
    if read == size && fill(&mut file, &mut [0u8; 1])? > 0 {
        read += 1;
    }
    let modified = FileVersion::of(&file)? != before;
    Ok((read, format!("{:x}", hasher.finalize()), modified))
}

/// What changes when a file is written to: its size, its modification and change times
/// (the change time cannot be set back by its owner). The times move by the clock's tick:
/// a write in the tick of the first look can go unseen, where the kernel does not stamp a
/// change after a look finely (Linux without multigrain timestamps).
#[derive(PartialEq, Eq)]
struct FileVersion {
    len: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl FileVersion {
    fn of(file: &File) -> std::io::Result<FileVersion> {
        use std::os::unix::fs::MetadataExt;
        let meta = file.metadata()?;
        Ok(FileVersion {
            len: meta.len(),
            modified: (meta.mtime(), meta.mtime_nsec()),
            changed: (meta.ctime(), meta.ctime_nsec()),
        })
    }
}

/// `bytes` in base64, in a string of the right size: a kept one (the transports give a
/// chunk's base64 back once written into its line), so that no chunk faults in a fresh
/// 5.6 MB. Vectorised where the CPU allows it: the `base64` crate's encoder took as long
/// as hashing the chunk.
fn encode(bytes: &[u8]) -> String {
    let mut base64 = LARGE_BUFFERS.take_string(bytes.len().div_ceil(3) * 4);
    base64_simd::STANDARD.encode_append(bytes, &mut base64);
    base64
}

/// Uploads `local` to a server as `name`, its digest not known beforehand.
///
/// Chunked, the file is streamed from disk `chunk_len` bytes at a time and hashed as it is
/// read. When the server's `put_sample_begin` answer allows it (`chunks_in_flight`, as the
/// kit's does), up to three chunks are kept in flight, so the server stores one while the
/// next are read, encoded and sent; otherwise one at a time. Its digest goes where the
/// server takes it:
///
/// - to `put_sample_finish`, when the server begins an upload without it (the kit's do): the
///   file is read once, and the server checks the bytes against the digest at the finish.
///   The upload is not finished when the file's size or times changed while it was read
///   ([`UploadError::ModifiedDuringUpload`]): the bytes sent could be part one version of
///   it, part another;
/// - to `put_sample_begin`, when the server refuses to begin without it (any refusal of
///   that beginning: one for another cause, a full disk say, comes again after the hash):
///   the file is then hashed first, and hashed again as it is read to send it;
///   `put_sample_finish` is called only when the bytes sent match the digest announced.
///
/// Single, the file is hashed first and goes in one `put_sample` call, whatever its size.
/// The server's receipt must state the size and digest of the bytes sent. `progress` is
/// told the bytes sent and the total.
pub async fn upload<C: ToolCaller>(
    caller: &C,
    local: &Path,
    name: &str,
    mode: UploadMode,
    chunk_len: usize,
    mut progress: impl FnMut(u64, u64),
) -> Result<UploadReceipt, UploadError> {
    let start = Instant::now();
    let local_name = local.display().to_string();
    if mode == UploadMode::Chunked {
        let size = tokio::fs::metadata(local)
            .await
            .map_err(read_error(local))?
            .len();
        let validator = UploadValidator::digest_at_finish(local_name.clone(), name, size);
        match upload_checked(caller, local, validator, chunk_len, &mut progress).await {
            Err(UploadError::Call {
                tool: "put_sample_begin",
                ..
            }) => {}
            sent_once => return sent_once.map(|receipt| timed(receipt, start)),
        }
    }
    let (size, sha256) = hash_file(local).await.map_err(read_error(local))?;
    let validator = UploadValidator::new(local_name, name, size, sha256, mode);
    upload_checked(caller, local, validator, chunk_len, progress)
        .await
        .map(|receipt| timed(receipt, start))
}

/// A receipt timed from `start` rather than from the upload's last attempt.
fn timed(receipt: UploadReceipt, start: Instant) -> UploadReceipt {
    UploadReceipt {
        duration: start.elapsed(),
        ..receipt
    }
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
/// use maljan_staging::{CHUNK_BYTES, UploadMode, upload_with_digest};
/// let stored = store.root().join(sha256);
/// let size = std::fs::metadata(&stored).unwrap().len();
/// let receipt = upload_with_digest(server, &stored, "dropped.exe", (size, sha256.to_owned()),
///     UploadMode::Chunked, CHUNK_BYTES as usize, |_, _| {}).await.unwrap();
/// # }
/// ```
pub async fn upload_with_digest<C: ToolCaller>(
    caller: &C,
    local: &Path,
    name: &str,
    (size, sha256): (u64, String),
    mode: UploadMode,
    chunk_len: usize,
    progress: impl FnMut(u64, u64),
) -> Result<UploadReceipt, UploadError> {
    let validator = UploadValidator::new(local.display().to_string(), name, size, sha256, mode);
    upload_checked(caller, local, validator, chunk_len, progress).await
}

/// Uploads `local` as `validator` says, its bytes hashed as they are read.
async fn upload_checked<C: ToolCaller>(
    caller: &C,
    local: &Path,
    mut validator: UploadValidator,
    chunk_len: usize,
    mut progress: impl FnMut(u64, u64),
) -> Result<UploadReceipt, UploadError> {
    let start = Instant::now();
    // The chunks' buffers go round while this upload (or another) runs, and go after.
    let _buffers = LARGE_BUFFERS.in_use();
    let (size, mode) = (validator.size(), validator.mode());
    let (remote_path, sha256) = match mode {
        UploadMode::Single => {
            let bytes = tokio::fs::read(local).await.map_err(read_error(local))?;
            let mut arguments =
                validator.handle_single_read(&format!("{:x}", Sha256::digest(&bytes)))?;
            // Moved in: `json!` would copy the whole file's base64.
            arguments["content_base64"] = Value::String(encode(&bytes));
            drop(bytes);
            let answer = call(caller, "put_sample", arguments).await?;
            progress(size, size);
            let sha256 = validator.sha256().to_owned();
            (validator.finish(&answer)?, sha256)
        }
        UploadMode::Chunked => {
            let begun = call(caller, "put_sample_begin", validator.begin_arguments()).await?;
            validator.handle_begin_answer(&begun)?;
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
            let mut all_read = false;
            loop {
                tokio::select! {
                    chunk = filled.recv(), if !all_read && validator.has_room() => {
                        let Some((buf, len)) = chunk else {
                            all_read = true;
                            continue;
                        };
                        let content = encode(&buf[..len]);
                        // The reader may be gone (it stops at the end of the file).
                        let _ = empty_tx.send(buf);
                        let mut chunk = validator.handle_chunk_read(len);
                        // Moved in: `json!` would copy the chunk's base64.
                        chunk.arguments["content_base64"] = Value::String(content);
                        in_flight.push_back(
                            send_at_once(call(caller, "put_sample_chunk", chunk.arguments)).await,
                        );
                    }
                    Some(answer) = in_flight.next(), if !in_flight.is_empty() => {
                        let received = validator.handle_chunk_answer(&answer?)?;
                        progress(received, size);
                    }
                    else => break,
                }
            }
            let (read_size, read, modified) = reader
                .await
                .map_err(std::io::Error::other)
                .and_then(|r| r)
                .map_err(read_error(local))?;
            if modified {
                validator.handle_modified()?;
            }
            let arguments = validator.handle_eof(read_size, &read)?;
            let answer = call(caller, "put_sample_finish", arguments).await?;
            let sha256 = validator.sha256().to_owned();
            (validator.finish(&answer)?, sha256)
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
