//! A download carried out: `get_file` called chunk by chunk, each written as it comes.

use futures_util::StreamExt;
use futures_util::stream::FuturesOrdered;
use maljan_direct_write::DirectWriter;
use maljan_mcp_proto::large_buffers::LARGE_BUFFERS;
use sha2::{Digest, Sha256};

use super::{DownloadError, DownloadValidator};
use crate::caller::send_at_once;
use crate::{ArtefactStore, Origin, StoredArtefact, ToolCaller};

/// The chunk asked for at a time: 4 MiB.
pub const CHUNK_BYTES: u64 = 4 * 1024 * 1024;
/// How many chunks are asked for ahead, once the size is known.
const CHUNKS_IN_FLIGHT: usize = 2;
/// How many chunk buffers go round between decoding and the file's writer: two, so that
/// the next chunk is decoded while the last is hashed and written.
const WRITE_BUFFERS: usize = 2;

/// Downloads a file a server wrote through its `get_file` tool into the artefact store.
///
/// Asks `chunk_len` bytes at a time until the stated size is read, writing to a temporary
/// file in the store while hashing, and renames it into place only when the digest matches:
/// a refused or failed download leaves nothing behind. Memory is O(chunk) whatever the size.
/// `progress` is told the bytes received and the size once known.
pub async fn download<C: ToolCaller>(
    caller: &C,
    path: &str,
    store: &ArtefactStore,
    origin: Origin,
    chunk_len: u64,
    mut progress: impl FnMut(u64, Option<u64>),
) -> Result<StoredArtefact, DownloadError> {
    let local = |e: std::io::Error| DownloadError::Local {
        path: path.to_owned(),
        source: std::sync::Arc::new(e),
    };
    let (incoming, file) = store.incoming().map_err(local)?;
    // The answers' buffers go round while this download (or another) runs, and go after.
    let _buffers = LARGE_BUFFERS.in_use();
    // A writer thread hashes and writes each chunk while the next answer is read, parsed
    // and decoded; the buffers go round between the two, allocated once.
    let (filled_tx, filled) = tokio::sync::mpsc::channel::<DecodedChunk>(WRITE_BUFFERS);
    let (empty_tx, mut empty) = tokio::sync::mpsc::channel::<Vec<u8>>(WRITE_BUFFERS);
    for _ in 0..WRITE_BUFFERS {
        // Cannot fail: the channel has room for every buffer.
        let _ = empty_tx.try_send(Vec::new());
    }
    let file = DirectWriter::new(file);
    let writer = tokio::task::spawn_blocking(move || write_chunks(file, filled, &empty_tx));
    let mut validator = DownloadValidator::new(path, chunk_len).with_most_bytes(store.room());
    // Once the size is known, chunks are asked for ahead, as if each answer were as long
    // as asked. After a shorter answer the ones asked ahead no longer line up: they are
    // dropped and the file is asked for again from where it has reached.
    let mut in_flight = FuturesOrdered::new();
    let mut ask_from = 0u64;
    loop {
        while in_flight.len() < CHUNKS_IN_FLIGHT {
            let size_known = validator.progress().1.is_some();
            if !size_known && !in_flight.is_empty() {
                break;
            }
            let Some(request) = validator.request_at(ask_from) else {
                break;
            };
            ask_from = request.offset + request.length;
            in_flight.push_back(
                send_at_once(async move {
                    let answer = caller.call_tool("get_file", request.arguments()).await;
                    (request, answer)
                })
                .await,
            );
        }
        let Some((asked, answer)) = in_flight.next().await else {
            break;
        };
        let answer = answer.map_err(|failure| DownloadError::NotServed {
            path: path.to_owned(),
            words: failure.message,
        })?;
        if asked.offset != validator.progress().0 {
            continue;
        }
        let Some(mut bytes) = empty.recv().await else {
            break;
        };
        let start = validator.handle_answer_unhashed_aligned(&answer, &mut bytes)?;
        // The base64 is the buffer the answer was read into: kept for the next answer.
        LARGE_BUFFERS.give_strings(answer);
        if ((bytes.len() - start) as u64) < asked.length {
            in_flight = FuturesOrdered::new();
            ask_from = validator.progress().0;
        }
        if filled_tx.send(DecodedChunk { bytes, start }).await.is_err() {
            break;
        }
        let (received, size) = validator.progress();
        progress(received, size);
    }
    drop(filled_tx);
    let computed = writer
        .await
        .map_err(|e| local(std::io::Error::other(e)))?
        .map_err(local)?;
    let verified = validator.finish_with_digest(computed)?;
    store.count_downloaded(verified.size);
    let name = path.rsplit('/').next().unwrap_or(path);
    store
        .commit(incoming, &verified.sha256, verified.size, name, origin)
        .map_err(local)
}

/// A chunk decoded into a buffer that goes round, from `start` on: an address aligned for
/// a direct write, so that the whole chunk goes to the device in one write from where it
/// is (copied into the writer's block instead, it would go a block at a time).
struct DecodedChunk {
    bytes: Vec<u8>,
    start: usize,
}

/// Hashes and writes the chunks handed over, in order, handing each buffer back, past the
/// page cache where the store's filesystem allows it, and makes the file durable at the
/// end; returns the sha256 of the bytes written. Stops at the first error (the sender then
/// sees the writer gone).
fn write_chunks(
    mut file: DirectWriter,
    mut filled: tokio::sync::mpsc::Receiver<DecodedChunk>,
    empty: &tokio::sync::mpsc::Sender<Vec<u8>>,
) -> std::io::Result<String> {
    let mut hasher = Sha256::new();
    while let Some(DecodedChunk { bytes, start }) = filled.blocking_recv() {
        let chunk = &bytes[start..];
        // Hashed beside the write, which mostly waits on the device.
        file.write_all_beside(chunk, || hasher.update(chunk))?;
        // Handed back to be decoded into. The decoding side may be gone (a refused
        // answer); the buffer is then dropped.
        let _ = empty.try_send(bytes);
    }
    file.finish()?;
    Ok(format!("{:x}", hasher.finalize()))
}
