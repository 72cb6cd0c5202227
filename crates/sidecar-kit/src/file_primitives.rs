//! The platform primitives for moving files: `put_sample` (single and chunked) and
//! `get_file`. They store only into, and serve only from, the job's directory.

use std::io::{Read, Seek, SeekFrom};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use maljan_direct_write::DirectWriter;
use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::buffers::BUFFERS;
use maljan_confine::Root;

use crate::call_params::Chunk;
use crate::job::{INCOMING_DIR, Upload, lock};
use crate::{Arguments, JobDir, ServerBuilder, ToolContext, ToolResult, ToolSpec};

/// The most bytes one `get_file` answer carries, whatever was asked.
pub const MAX_GET_FILE_CHUNK: u64 = 16 * 1024 * 1024;
/// How far past the bytes received a chunk may arrive and wait for its turn.
pub const MAX_CHUNK_AHEAD: u64 = 64 * 1024 * 1024;
/// How many chunks `put_sample_begin` tells a client it may send before an answer: chunks
/// of 4 MiB stay well within [`MAX_CHUNK_AHEAD`].
pub const CHUNKS_IN_FLIGHT: u64 = 4;
/// How many chunks of one upload may wait for their turn at once; more are refused at once,
/// so a client cannot tie up the server's threads and memory with chunks that wait.
pub const MAX_CHUNKS_WAITING: usize = 8;
/// How long a chunk that arrived ahead of its turn waits for the bytes before it, unless
/// the server says otherwise ([`TransferLimits::turn_wait`]).
pub const TURN_WAIT: Duration = Duration::from_secs(30);
/// Where uploads are stored, inside the job's directory.
pub const SAMPLES_DIR: &str = "samples";
/// How many uploads of one job (one stdio process, one HTTP session) may be in progress at
/// once, unless the server says otherwise ([`TransferLimits::max_uploads`]).
pub const MAX_UPLOADS_IN_PROGRESS: usize = 16;
/// How long an upload may go without a call before it is dropped (its file removed), unless
/// the server says otherwise ([`TransferLimits::upload_idle`]).
pub const UPLOAD_IDLE: Duration = Duration::from_secs(600);
/// The largest upload `put_sample_begin` accepts, unless the server says otherwise
/// ([`TransferLimits::max_upload_bytes`]).
pub const MAX_UPLOAD_BYTES: u64 = 16 * 1024 * 1024 * 1024;
/// How many chunks, of all uploads on the server, may wait for their turn at once: each
/// holds a thread, and the threads are shared with every other call.
pub const MAX_CHUNKS_WAITING_IN_ALL: usize = 64;

/// The bounds of a server's file transfers (see [`ServerBuilder::file_transfer_with`]).
///
/// ```
/// use std::time::Duration;
/// use maljan_sidecar_kit::TransferLimits;
/// let limits = TransferLimits::default()
///     .turn_wait(Duration::from_secs(5))
///     .max_upload_bytes(1 << 30)
///     .max_uploads(4)
///     .upload_idle(Duration::from_secs(60));
/// let server = maljan_sidecar_kit::Server::builder("files", "1")
///     .file_transfer_with(limits)
///     .build();
/// assert!(server.manifest().tools.iter().any(|t| t.name == "put_sample_chunk"));
/// ```
#[derive(Debug, Clone)]
pub struct TransferLimits {
    turn_wait: Duration,
    max_upload_bytes: u64,
    max_uploads: usize,
    upload_idle: Duration,
    /// Chunks waiting for their turn, over all of the server's uploads.
    waiting_in_all: Arc<AtomicUsize>,
}

impl Default for TransferLimits {
    fn default() -> Self {
        TransferLimits {
            turn_wait: TURN_WAIT,
            max_upload_bytes: MAX_UPLOAD_BYTES,
            max_uploads: MAX_UPLOADS_IN_PROGRESS,
            upload_idle: UPLOAD_IDLE,
            waiting_in_all: Arc::default(),
        }
    }
}

impl TransferLimits {
    /// How long a chunk that arrived ahead of its turn waits for the bytes before it
    /// ([`TURN_WAIT`]): shorter where clients are near and a lost chunk should be reported
    /// soon, longer over slow links.
    pub fn turn_wait(mut self, wait: Duration) -> Self {
        self.turn_wait = wait;
        self
    }

    /// The largest size `put_sample_begin` accepts ([`MAX_UPLOAD_BYTES`]).
    pub fn max_upload_bytes(mut self, bytes: u64) -> Self {
        self.max_upload_bytes = bytes;
        self
    }

    /// How many uploads of one job may be in progress at once
    /// ([`MAX_UPLOADS_IN_PROGRESS`]).
    pub fn max_uploads(mut self, uploads: usize) -> Self {
        self.max_uploads = uploads;
        self
    }

    /// How long an upload may go without a call before it is dropped ([`UPLOAD_IDLE`]).
    pub fn upload_idle(mut self, idle: Duration) -> Self {
        self.upload_idle = idle;
        self
    }
}

fn bad(message: impl Into<String>, remediation: &str) -> ToolFailure {
    ToolFailure::new(
        ErrorCode::BadArgument,
        message,
        Some(remediation.to_owned()),
    )
}

fn failed(message: impl Into<String>) -> ToolFailure {
    ToolFailure::new(ErrorCode::ToolFailed, message, None)
}

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
        incoming.rename(temp, &samples, name)?;
        job.remember_digest(&file, sha256);
        Ok(samples.path().join(name))
    });
    stored.map_err(|e| {
        job.discard_incoming(temp);
        failed(format!("storing {name}: {e}"))
    })
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
            job.discard_incoming(&upload.temp);
        }
    }
    drop(uploads);
    job.upload_moved.notify_all();
}

fn put_sample(args: &Arguments, ctx: &ToolContext, limits: &TransferLimits) -> ToolResult {
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
    let (temp, file) = incoming_file(&ctx.job)?;
    let mut writer = DirectWriter::new(file);
    if let Err(e) = writer.write_all(&bytes) {
        ctx.job.discard_incoming(&temp);
        return Err(failed(format!("storing {name}: {e}")));
    }
    let path = store_upload(&ctx.job, &temp, writer, &name, &sha256)?;
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

fn put_sample_begin(args: &Arguments, ctx: &ToolContext, limits: &TransferLimits) -> ToolResult {
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
    let (temp, file) = incoming_file(&ctx.job)?;
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
fn put_sample_chunk(args: &Arguments, ctx: &ToolContext, limits: &TransferLimits) -> ToolResult {
    let id = upload_id(args)?;
    let offset = args
        .optional_u64("offset")?
        .ok_or_else(|| bad("the argument offset is missing", "pass the chunk's offset"))?;
    let content = args.string("content_base64")?;
    store_chunk_in_turn(id, offset, content, ctx, limits)
}

/// [`put_sample_chunk`], its arguments read straight from the request.
fn put_chunk(chunk: &Chunk<'_>, ctx: &ToolContext, limits: &TransferLimits) -> ToolResult {
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

fn put_sample_finish(args: &Arguments, ctx: &ToolContext) -> ToolResult {
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
        ctx.job.discard_incoming(&temp);
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
    let path = store_upload(&ctx.job, &temp, file, &name, &sha256)?;
    Ok(receipt(&path, size, &sha256))
}

/// Serves a file of the job, opened beneath the job's directory (and read from that one
/// descriptor only). A file it will not serve is answered `{"error": "..."}`.
fn get_file(args: &Arguments, ctx: &ToolContext) -> ToolResult {
    let named = args.string("path")?;
    let offset = args.optional_u64("offset")?.unwrap_or(0);
    let length = args
        .optional_u64("length")?
        .unwrap_or(MAX_GET_FILE_CHUNK)
        .min(MAX_GET_FILE_CHUNK);
    let opened = match crate::confined::open_beneath(&[ctx.job.root()], named) {
        Ok(opened) => opened,
        Err(failure) => return Ok(json!({"error": failure.message})),
    };
    let file = &opened.file;
    let (size, sha256) = ctx
        .job
        .digest_of(file)
        .map_err(|e| failed(format!("reading {named}: {e}")))?;
    let take = length.min(size.saturating_sub(offset));
    let mut bytes = BUFFERS.take(take as usize);
    // The descriptor is this call's own (opened above): seeking it moves no one else.
    let mut reader = file;
    reader
        .seek(SeekFrom::Start(offset))
        .and_then(|_| reader.take(take).read_to_end(&mut bytes))
        .map_err(|e| failed(format!("reading {named}: {e}")))?;
    if bytes.len() as u64 != take {
        return Err(failed(format!(
            "{named} shrank while it was read: {} bytes at offset {offset}, not {take}",
            bytes.len()
        )));
    }
    let mut content = BUFFERS.take_string(bytes.len().div_ceil(3) * 4);
    STANDARD.encode_string(&bytes, &mut content);
    BUFFERS.give(bytes);
    let mut answer = json!({"size": size, "sha256": sha256, "offset": offset});
    // Moved in: `json!` would copy the chunk's base64 (and leave the kept buffer unused).
    answer["content_base64"] = Value::String(content);
    Ok(answer)
}

impl ServerBuilder {
    /// Offers the file primitives: `put_sample`, `put_sample_begin`, `put_sample_chunk`,
    /// `put_sample_finish` and `get_file`. Uploads are stored in the job's `samples/`
    /// directory, checked against their size and digest; `get_file` serves only files inside
    /// the job's directory.
    ///
    /// A client may keep several chunks of an upload in flight: their calls run side by
    /// side, each chunk is decoded as it comes, and a chunk that arrives before the bytes
    /// before it waits (up to [`TURN_WAIT`], at most [`MAX_CHUNK_AHEAD`] bytes ahead) for
    /// its turn to be written and hashed. `put_sample_begin` says so: its answer's
    /// `chunks_in_flight` is [`CHUNKS_IN_FLIGHT`].
    ///
    /// ```
    /// let server = maljan_sidecar_kit::Server::builder("files", "1").file_transfer().build();
    /// assert!(server.manifest().tools.iter().any(|t| t.name == "get_file"));
    /// ```
    pub fn file_transfer(self) -> Self {
        self.file_transfer_with(TransferLimits::default())
    }

    /// [`ServerBuilder::file_transfer`] within other bounds than the defaults (see
    /// [`TransferLimits`]).
    pub fn file_transfer_with(self, limits: TransferLimits) -> Self {
        let (single, begin, chunk, chunk_read) =
            (limits.clone(), limits.clone(), limits.clone(), limits);
        let string = |d: &str| json!({"type": "string", "description": d});
        let integer = |d: &str| json!({"type": "integer", "minimum": 0, "description": d});
        self.tool(
            ToolSpec::new("put_sample", "Stores a whole file in this job's directory")
                .required_string("name", "the file's name")
                .required_string("content_base64", "the file, base64")
                .required_string("sha256", "the file's sha256"),
            move |args, ctx| put_sample(args, ctx, &single),
        )
        .tool(
            ToolSpec::new(
                "put_sample_begin",
                "Starts a chunked upload into this job's directory",
            )
            .required_string("name", "the file's name")
            .required_string("sha256", "the file's sha256")
            .optional("size", integer("the file's size")),
            move |args, ctx| put_sample_begin(args, ctx, &begin),
        )
        .chunk_tool(
            ToolSpec::new("put_sample_chunk", "Sends the next chunk of an upload")
                .optional("upload_id", integer("from put_sample_begin"))
                .optional("offset", integer("where the chunk goes"))
                .required_string("content_base64", "the chunk, base64"),
            move |args, ctx| put_sample_chunk(args, ctx, &chunk),
            move |piece, ctx| put_chunk(piece, ctx, &chunk_read),
        )
        .tool(
            ToolSpec::new("put_sample_finish", "Checks and stores a chunked upload")
                .optional("upload_id", integer("from put_sample_begin")),
            put_sample_finish,
        )
        .tool(
            ToolSpec::new(
                "get_file",
                "Serves a chunk of a file this server wrote for its job",
            )
            .optional("path", string("the file, as a tool named it"))
            .optional("offset", integer("where to start"))
            .optional("length", integer("how many bytes")),
            get_file,
        )
    }
}
