//! Receiving an upload in chunks: `put_sample_begin`, `put_sample_chunk` (chunks may arrive
//! ahead of their turn and wait, bounded), `put_sample_finish`.

use std::sync::atomic::Ordering;
use std::time::Instant;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use maljan_direct_write::{ALIGN, DirectWriter, pad_to_aligned};
use maljan_mcp_proto::maljan::ToolFailure;
use serde_json::json;
use sha2::Digest;

use super::upload_writer::{UploadWriter, Written};
use super::{
    CHUNKS_IN_FLIGHT, MAX_CHUNK_AHEAD, MAX_CHUNKS_WAITING, MAX_CHUNKS_WAITING_IN_ALL,
    TransferLimits, bad, failed,
};
use crate::call_params::Chunk;
use crate::job::{Upload, lock};
use crate::{Arguments, ToolContext, ToolResult};
use maljan_mcp_proto::large_buffers::LARGE_BUFFERS;

use super::put_sample::{
    discard_upload, drop_idle_uploads, incoming_file, optional_sha_argument, receipt, safe_name,
    store_upload, too_large,
};

pub(super) fn put_sample_begin(
    args: &Arguments,
    ctx: &ToolContext,
    limits: &TransferLimits,
) -> ToolResult {
    let name = safe_name(args.string("name")?)?;
    let sha256 = optional_sha_argument(args)?;
    let size = args
        .optional_u64("size")?
        .ok_or_else(|| bad("the argument size is missing", "pass the file's size"))?;
    if size > limits.max_upload_bytes {
        return Err(too_large(size, limits));
    }
    drop_idle_uploads(&ctx.job, limits.upload_idle);
    let in_progress = lock(&ctx.job.uploads).len();
    if in_progress >= limits.max_uploads {
        return Err(bad(
            format!("{in_progress} uploads are in progress already, the most this server takes"),
            "finish the uploads in progress first",
        ));
    }
    // The upload's size is held in the job's disk budget until it is stored (then kept) or
    // dropped (then given back).
    ctx.reserve_disk_exactly(size)?.keep(size);
    let (temp, file) = match incoming_file(&ctx.job) {
        Ok(made) => made,
        Err(failure) => {
            ctx.job.release_disk(size);
            return Err(failure);
        }
    };
    let id = ctx.job.next_upload_id();
    let writer = match UploadWriter::start(id, DirectWriter::new(file)) {
        Ok(writer) => writer,
        Err(e) => {
            discard_upload(&ctx.job, &temp, size);
            return Err(failed(format!("starting upload {id}'s writer: {e}")));
        }
    };
    lock(&ctx.job.uploads).insert(
        id,
        Upload {
            name,
            size,
            sha256,
            received: 0,
            temp,
            writer,
            failed: None,
            waiting: 0,
            touched: Instant::now(),
        },
    );
    Ok(json!({"upload_id": id, "chunks_in_flight": CHUNKS_IN_FLIGHT}))
}

fn upload_id(args: &Arguments) -> Result<u64, ToolFailure> {
    args.optional_u64("upload_id")?.ok_or_else(|| {
        bad(
            "the argument upload_id is missing",
            "pass the upload_id put_sample_begin answered",
        )
    })
}

fn unknown_upload(id: u64) -> ToolFailure {
    bad(
        format!("no upload {id} is in progress"),
        "start again with put_sample_begin",
    )
}

/// Decodes a chunk's bytes, then waits for its turn: chunks of one upload are stored in
/// offset order, whatever order their calls run in, so a client may keep several in flight.
/// A chunk may arrive up to [`MAX_CHUNK_AHEAD`] bytes ahead and waits up to `turn_wait`
/// for the bytes before it, with at most [`MAX_CHUNKS_WAITING`] others; once a chunk in
/// turn is refused, those waiting are refused too.
pub(super) fn put_sample_chunk(
    args: &Arguments,
    ctx: &ToolContext,
    limits: &TransferLimits,
) -> ToolResult {
    let id = upload_id(args)?;
    let offset = args
        .optional_u64("offset")?
        .ok_or_else(|| bad("the argument offset is missing", "pass the chunk's offset"))?;
    let content = args.string("content_base64")?;
    store_chunk_in_turn(id, offset, content.as_bytes(), ctx, limits)
}

/// [`put_sample_chunk`], its arguments read straight from the request.
pub(super) fn put_chunk(
    chunk: &Chunk<'_>,
    ctx: &ToolContext,
    limits: &TransferLimits,
) -> ToolResult {
    store_chunk_in_turn(
        chunk.upload_id,
        chunk.offset,
        chunk.content_base64,
        ctx,
        limits,
    )
}

/// Decodes the chunk at `offset` of upload `id` and stores it once its turn comes.
fn store_chunk_in_turn(
    id: u64,
    offset: u64,
    content: &[u8],
    ctx: &ToolContext,
    limits: &TransferLimits,
) -> ToolResult {
    let turn_wait = limits.turn_wait;
    let decoded = DecodedChunk::decode(content);
    let job = &ctx.job;
    let deadline = Instant::now() + turn_wait;
    let mut uploads = lock(&job.uploads);
    let mut counted_waiting = false;
    let outcome = loop {
        let Some(upload) = uploads.get_mut(&id) else {
            break Err(unknown_upload(id));
        };
        upload.touched = Instant::now();
        if let Some(reason) = &upload.failed {
            break Err(bad(
                format!("upload {id} cannot complete: {reason}"),
                "start again with put_sample_begin",
            ));
        }
        let received = upload.received;
        if offset == received {
            let stored = store_chunk(upload, id, decoded);
            if let Err(reason) = &stored {
                upload.failed = Some(reason.clone());
            }
            job.upload_moved.notify_all();
            break stored
                .map(|received| json!({"received": received}))
                .map_err(|reason| bad(reason, "start again with put_sample_begin"));
        }
        if offset < received {
            break Err(bad(
                format!("a chunk at offset {offset}, but {received} bytes were already received"),
                "send each chunk once, at the offset after the last",
            ));
        }
        if offset - received > MAX_CHUNK_AHEAD {
            break Err(bad(
                format!(
                    "a chunk at offset {offset} is more than {MAX_CHUNK_AHEAD} bytes past the \
                     {received} received"
                ),
                "send chunks in order, at most 64 MiB ahead of the last one answered",
            ));
        }
        if !counted_waiting {
            if upload.waiting >= MAX_CHUNKS_WAITING {
                break Err(bad(
                    format!(
                        "{MAX_CHUNKS_WAITING} chunks of upload {id} already wait for the bytes \
                         from offset {received}"
                    ),
                    "send chunks in order, a few at a time",
                ));
            }
            if limits.waiting_in_all.fetch_add(1, Ordering::Relaxed) >= MAX_CHUNKS_WAITING_IN_ALL {
                limits.waiting_in_all.fetch_sub(1, Ordering::Relaxed);
                break Err(bad(
                    format!(
                        "{MAX_CHUNKS_WAITING_IN_ALL} chunks already wait for their turn on this \
                         server; a chunk at offset {offset} is {} bytes ahead of upload {id}'s",
                        offset - received
                    ),
                    "send chunks in order, a few at a time",
                ));
            }
            upload.waiting += 1;
            counted_waiting = true;
        }
        if ctx.is_cancelled() {
            break Err(failed(format!(
                "the chunk at offset {offset} was cancelled"
            )));
        }
        let now = Instant::now();
        if now >= deadline {
            break Err(bad(
                format!(
                    "a chunk at offset {offset} waited {:.1}s for the bytes from offset \
                     {received}, which never came",
                    turn_wait.as_secs_f64()
                ),
                "send every chunk, each at the offset after the last",
            ));
        }
        uploads = job
            .upload_moved
            .wait_timeout(uploads, deadline - now)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    };
    if counted_waiting {
        limits.waiting_in_all.fetch_sub(1, Ordering::Relaxed);
        if let Some(upload) = uploads.get_mut(&id) {
            upload.waiting -= 1;
        }
    }
    outcome
}

/// A chunk's bytes, decoded into a kept buffer at an address aligned for a direct write:
/// the upload's file then takes them as they are, without copying them into its block.
#[derive(Debug)]
pub(crate) struct DecodedChunk {
    buffer: Vec<u8>,
    start: usize,
    len: usize,
}

impl DecodedChunk {
    pub(super) fn decode(content: &[u8]) -> Result<Self, String> {
        let room = base64::decoded_len_estimate(content.len());
        let mut buffer = LARGE_BUFFERS.take(room + ALIGN);
        // Decoded into the room after `start` as it is, not zeroed first; the room is the
        // scalar decoder's estimate, never under the exact length, so the buffer is not
        // moved (and the start stays aligned).
        let start = pad_to_aligned(&mut buffer, room);
        match base64_simd::STANDARD.decode_append(content, &mut buffer) {
            Ok(()) => {
                let len = buffer.len() - start;
                Ok(DecodedChunk { buffer, start, len })
            }
            Err(_) => Err(why_not_base64(content)),
        }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &self.buffer[self.start..self.start + self.len]
    }

    /// The buffer the chunk was decoded into, to be kept for another.
    pub(super) fn into_buffer(self) -> Vec<u8> {
        self.buffer
    }
}

/// Why `content` is not base64, in the scalar decoder's words (which byte, where): the
/// vectorised one, which decodes the chunks, says only that it is not. Both refuse the same
/// texts (property-tested).
fn why_not_base64(content: &[u8]) -> String {
    match STANDARD.decode(content) {
        Err(e) => format!("content_base64 is not base64: {e}"),
        Ok(_) => "content_base64 is not base64".to_owned(),
    }
}

/// Stores the chunk in turn: the bytes received so far after it, or why it was refused.
fn store_chunk(
    upload: &mut Upload,
    id: u64,
    decoded: Result<DecodedChunk, String>,
) -> Result<u64, String> {
    let chunk = decoded?;
    let len = chunk.bytes().len() as u64;
    if upload.received + len > upload.size {
        return Err(format!(
            "a chunk of {len} bytes at offset {} of upload {id} would pass the size {} \
             announced",
            upload.received, upload.size
        ));
    }
    upload.writer.queue(chunk)?;
    upload.received += len;
    Ok(upload.received)
}

/// Checks the bytes received against the digest announced (to `put_sample_begin`, or
/// here: a client that did not know it when it began hashes as it sends and gives it now)
/// and stores the file.
pub(super) fn put_sample_finish(args: &Arguments, ctx: &ToolContext) -> ToolResult {
    let id = upload_id(args)?;
    let given = optional_sha_argument(args)?;
    let removed = lock(&ctx.job.uploads).remove(&id);
    ctx.job.upload_moved.notify_all();
    let upload = removed.ok_or_else(|| unknown_upload(id))?;
    let Upload {
        name,
        size,
        sha256,
        received,
        temp,
        writer,
        failed: refused_chunk,
        ..
    } = upload;
    let refuse = |message: String| {
        discard_upload(&ctx.job, &temp, size);
        Err(bad(message, "send the file again"))
    };
    if let Some(reason) = refused_chunk {
        return refuse(format!("a chunk was refused: {reason}"));
    }
    let Written { file, hasher } = match writer.finish() {
        Ok(written) => written,
        Err(reason) => return refuse(format!("a chunk was not written: {reason}")),
    };
    if received != size {
        return refuse(format!("{received} bytes received of the {size} announced"));
    }
    let sha256 = match (sha256, given) {
        (Some(begun), Some(given)) if begun != given => {
            return refuse(format!(
                "sha256 {given} given to put_sample_finish, {begun} to put_sample_begin"
            ));
        }
        (Some(sha256), _) | (None, Some(sha256)) => sha256,
        (None, None) => {
            discard_upload(&ctx.job, &temp, size);
            return Err(bad(
                "no sha256 was given to put_sample_begin nor to put_sample_finish",
                "pass the file's sha256 to put_sample_finish",
            ));
        }
    };
    let actual = format!("{:x}", hasher.finalize());
    if actual != sha256 {
        return refuse(format!(
            "the bytes have sha256 {actual}, not the {sha256} announced"
        ));
    }
    let path = store_upload(&ctx.job, &temp, file, &name, &sha256).inspect_err(|_| {
        ctx.job.release_disk(size);
    })?;
    Ok(receipt(&path, size, &sha256))
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use proptest::prelude::*;

    use maljan_direct_write::ALIGN;
    use maljan_mcp_proto::large_buffers::LARGE_BUFFERS;

    use super::DecodedChunk;

    /// Base64 text as a peer might send it: valid, then perhaps with a symbol changed (the
    /// last one's spare bits, padding), cut, or lengthened.
    fn text() -> impl Strategy<Value = Vec<u8>> {
        const SYMBOLS: &[u8] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=-_ \n!";
        let symbol = prop::sample::select(SYMBOLS);
        (
            prop::collection::vec(any::<u8>(), 0..200),
            prop::collection::vec((any::<prop::sample::Index>(), symbol), 0..3),
            0usize..3,
        )
            .prop_map(|(bytes, changes, cut)| {
                let mut text = STANDARD.encode(bytes).into_bytes();
                for (at, symbol) in changes {
                    if !text.is_empty() {
                        let i = at.index(text.len());
                        text[i] = symbol;
                    }
                }
                text.truncate(text.len().saturating_sub(cut));
                text
            })
    }

    #[test]
    fn a_chunk_decoded_into_a_kept_buffer_holds_its_own_bytes_only() {
        // Large enough for the decoded bytes' buffer to be kept, and taken again, dirty.
        let first = vec![0xA5; 3 << 20];
        let second: Vec<u8> = (0..(3 << 20) - 7).map(|i| (i % 251) as u8).collect();
        let chunk = DecodedChunk::decode(STANDARD.encode(&first).as_bytes()).expect("base64");
        assert_eq!(chunk.bytes(), &first[..]);
        LARGE_BUFFERS.give(chunk.into_buffer());
        let chunk = DecodedChunk::decode(STANDARD.encode(&second).as_bytes()).expect("base64");
        assert_eq!(chunk.bytes(), &second[..]);
        assert_eq!(chunk.bytes().as_ptr().align_offset(ALIGN), 0);
    }

    proptest! {
        #[test]
        fn a_chunk_decodes_as_the_scalar_decoder_reads_it(text in text()) {
            let decoded = DecodedChunk::decode(&text);
            match STANDARD.decode(&text) {
                Ok(bytes) => {
                    let chunk = decoded.expect("accepted by both");
                    prop_assert_eq!(chunk.bytes(), &bytes[..]);
                    prop_assert_eq!(chunk.bytes().as_ptr().align_offset(ALIGN), 0);
                }
                Err(e) => prop_assert_eq!(
                    decoded.expect_err("refused by both"),
                    format!("content_base64 is not base64: {e}")
                ),
            }
        }
    }
}
