//! Receiving uploads: `put_sample`, and `put_sample_begin` / `_chunk` / `_finish` with
//! chunks that may arrive ahead of their turn.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use maljan_confine::Root;
use maljan_direct_write::DirectWriter;
use maljan_mcp_proto::maljan::ToolFailure;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{
    CHUNKS_IN_FLIGHT, MAX_CHUNK_AHEAD, MAX_CHUNKS_WAITING, MAX_CHUNKS_WAITING_IN_ALL, SAMPLES_DIR,
    TransferLimits, bad, failed,
};
use crate::buffers::BUFFERS;
use crate::call_params::Chunk;
use crate::job::{INCOMING_DIR, Upload, lock};
use crate::{Arguments, JobDir, ToolContext, ToolResult};

/// The file name part of a client's name: no directories, no `..`, not empty.
fn safe_name(name: &str) -> Result<String, ToolFailure> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
    if base.is_empty() || base == "." || base == ".." {
        return Err(bad(
            format!("the name {name:?} has no usable file name"),
            "pass a plain file name such as sample.bin",
        ));
    }
    Ok(base.to_owned())
}

fn sha_argument(args: &Arguments) -> Result<String, ToolFailure> {
    let sha = args.string("sha256")?;
    if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad(
            format!("sha256 {sha:?} is not 64 hex digits"),
            "pass the file's sha256",
        ));
    }
    Ok(sha.to_ascii_lowercase())
}

/// A directory of the job, made where missing; a symlink planted in its place is refused.
fn job_dir(job: &JobDir, name: &str) -> Result<Root, ToolFailure> {
    job.root()
        .create_dirs(name)
        .map_err(|e| failed(format!("the job's {name} directory cannot be used: {e}")))
}

fn receipt(path: &std::path::Path, size: u64, sha256: &str) -> Value {
    json!({"path": path.display().to_string(), "size": size, "sha256": sha256})
}

/// A new temporary file for an upload, in the job's `.incoming` directory.
fn incoming_file(job: &JobDir) -> Result<(String, std::fs::File), ToolFailure> {
    let dir = job_dir(job, INCOMING_DIR)?;
    let temp = job.next_upload_id().to_string();
    let file = dir
        .create_new(&temp)
        .map_err(|e| failed(format!("creating an upload's file: {e}")))?;
    Ok((temp, file))
}

/// Moves a finished upload from `.incoming` to `samples/NAME`, and remembers its digest;
/// on any failure the temporary file is removed.
fn store_upload(
    job: &JobDir,
    temp: &str,
    file: DirectWriter,
    name: &str,
    sha256: &str,
) -> Result<std::path::PathBuf, ToolFailure> {
    let stored = file.finish_into_file().and_then(|(_, file)| {
        let incoming = job
            .root()
            .create_dirs(INCOMING_DIR)
            .map_err(std::io::Error::other)?;
        let samples = job
            .root()
            .create_dirs(SAMPLES_DIR)
            .map_err(std::io::Error::other)?;
        let stored_as = store_as_new(&incoming, temp, &samples, name)?;
        job.remember_digest(&file, sha256);
        Ok(samples.path().join(stored_as))
    });
    stored.map_err(|e| {
        job.discard_incoming(temp);
        failed(format!("storing {name}: {e}"))
    })
}

/// How many names an upload tries when its own is taken (`NAME`, `NAME-2`, … before the
/// extension): past that it is refused, naming the file.
const MAX_NAME_TRIES: usize = 64;

/// Moves `temp` to `samples/` under `name`, or under the first free of `stem-2.ext`,
/// `stem-3.ext`, …: an upload never replaces a file. The name it got is returned.
fn store_as_new(
    incoming: &maljan_confine::Root,
    temp: &str,
    samples: &maljan_confine::Root,
    name: &str,
) -> std::io::Result<String> {
    let (stem, extension) = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (stem, format!(".{ext}")),
        _ => (name, String::new()),
    };
    for attempt in 1..=MAX_NAME_TRIES {
        let candidate = if attempt == 1 {
            name.to_owned()
        } else {
            format!("{stem}-{attempt}{extension}")
        };
        match incoming.rename_new(temp, samples, &candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!(
            "{name} and {} more names like it are taken in this job; upload under another \
             name",
            MAX_NAME_TRIES - 1
        ),
    ))
}

/// Drops the job's uploads left idle longer than `idle`, removing their files.
fn drop_idle_uploads(job: &JobDir, idle: Duration) {
    let now = Instant::now();
    let mut uploads = lock(&job.uploads);
    let idle_ids: Vec<u64> = uploads
        .iter()
        .filter(|(_, u)| u.waiting == 0 && now.duration_since(u.touched) > idle)
        .map(|(id, _)| *id)
        .collect();
    for id in idle_ids {
        if let Some(upload) = uploads.remove(&id) {
            tracing::info!(upload = id, name = %upload.name, "an idle upload was dropped");
            discard_upload(job, &upload.temp, upload.size);
        }
    }
    drop(uploads);
    job.upload_moved.notify_all();
}

pub(super) fn put_sample(
    args: &Arguments,
    ctx: &ToolContext,
    limits: &TransferLimits,
) -> ToolResult {
    let name = safe_name(args.string("name")?)?;
    let sha256 = sha_argument(args)?;
    let content = args.string("content_base64")?;
    let size = content.len() as u64 / 4 * 3;
    if size > limits.max_upload_bytes {
        return Err(too_large(size, limits));
    }
    let bytes = STANDARD.decode(content).map_err(|e| {
        bad(
            format!("content_base64 is not base64: {e}"),
            "encode the file in standard base64",
        )
    })?;
    let actual = format!("{:x}", Sha256::digest(&bytes));
    if actual != sha256 {
        return Err(bad(
            format!("the bytes have sha256 {actual}, not the {sha256} stated"),
            "send the file again",
        ));
    }
    let room = ctx.reserve_disk_exactly(bytes.len() as u64)?;
    let (temp, file) = incoming_file(&ctx.job)?;
    let mut writer = DirectWriter::new(file);
    if let Err(e) = writer.write_all(&bytes) {
        ctx.job.discard_incoming(&temp);
        return Err(failed(format!("storing {name}: {e}")));
    }
    let path = store_upload(&ctx.job, &temp, writer, &name, &sha256)?;
    room.keep(bytes.len() as u64);
    Ok(receipt(&path, bytes.len() as u64, &sha256))
}

fn too_large(size: u64, limits: &TransferLimits) -> ToolFailure {
    bad(
        format!(
            "an upload of {size} bytes is over this server's limit of {} bytes",
            limits.max_upload_bytes
        ),
        "send a smaller file, or ask the server's operator to raise its upload limit",
    )
}

pub(super) fn put_sample_begin(
    args: &Arguments,
    ctx: &ToolContext,
    limits: &TransferLimits,
) -> ToolResult {
    let name = safe_name(args.string("name")?)?;
    let sha256 = sha_argument(args)?;
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
    lock(&ctx.job.uploads).insert(
        id,
        Upload {
            name,
            size,
            sha256,
            received: 0,
            hasher: Sha256::new(),
            temp,
            file: DirectWriter::new(file),
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
    store_chunk_in_turn(id, offset, content, ctx, limits)
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
        &chunk.content_base64,
        ctx,
        limits,
    )
}

/// Decodes the chunk at `offset` of upload `id` and stores it once its turn comes.
fn store_chunk_in_turn(
    id: u64,
    offset: u64,
    content: &str,
    ctx: &ToolContext,
    limits: &TransferLimits,
) -> ToolResult {
    let turn_wait = limits.turn_wait;
    let mut decoded = BUFFERS.take(content.len() / 4 * 3 + 3);
    let decoded = match STANDARD.decode_vec(content, &mut decoded) {
        Ok(()) => Ok(decoded),
        Err(e) => Err(format!("content_base64 is not base64: {e}")),
    };
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

/// Stores the chunk in turn: the bytes received so far after it, or why it was refused.
fn store_chunk(
    upload: &mut Upload,
    id: u64,
    decoded: Result<Vec<u8>, String>,
) -> Result<u64, String> {
    let bytes = decoded?;
    if upload.received + bytes.len() as u64 > upload.size {
        return Err(format!(
            "a chunk of {} bytes at offset {} would pass the size {} announced",
            bytes.len(),
            upload.received,
            upload.size
        ));
    }
    upload
        .file
        .write_all(&bytes)
        .map_err(|e| format!("writing upload {id}: {e}"))?;
    upload.hasher.update(&bytes);
    upload.received += bytes.len() as u64;
    BUFFERS.give(bytes);
    Ok(upload.received)
}

pub(super) fn put_sample_finish(args: &Arguments, ctx: &ToolContext) -> ToolResult {
    let id = upload_id(args)?;
    let removed = lock(&ctx.job.uploads).remove(&id);
    ctx.job.upload_moved.notify_all();
    let upload = removed.ok_or_else(|| unknown_upload(id))?;
    let Upload {
        name,
        size,
        sha256,
        received,
        hasher,
        temp,
        file,
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
    if received != size {
        return refuse(format!("{received} bytes received of the {size} announced"));
    }
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

/// Drops an upload that will not be stored: its file removed, its room in the job's disk
/// budget given back.
fn discard_upload(job: &JobDir, temp: &str, reserved: u64) {
    job.discard_incoming(temp);
    job.release_disk(reserved);
}
