//! The platform primitives for moving files: `put_sample` (single and chunked) and
//! `get_file`. They store only into, and serve only from, the job's directory.

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use maljan_direct_write::DirectWriter;
use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::buffers::BUFFERS;
use crate::call_params::Chunk;
use crate::job::{Upload, lock};
use crate::{Arguments, Job, ServerBuilder, ToolContext, ToolResult, ToolSpec};

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
/// the server says otherwise ([`ServerBuilder::file_transfer_waiting`]).
pub const TURN_WAIT: Duration = Duration::from_secs(30);
/// Where uploads are stored, inside the job's directory.
pub const SAMPLES_DIR: &str = "samples";

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

fn samples_dir(job: &Job) -> Result<PathBuf, ToolFailure> {
    let dir = job.dir().join(SAMPLES_DIR);
    std::fs::create_dir_all(&dir)
        .map_err(|e| failed(format!("creating {}: {e}", dir.display())))?;
    Ok(dir)
}

fn receipt(path: &std::path::Path, size: u64, sha256: &str) -> Value {
    json!({"path": path.display().to_string(), "size": size, "sha256": sha256})
}

fn put_sample(args: &Arguments, ctx: &ToolContext) -> ToolResult {
    let name = safe_name(args.string("name")?)?;
    let sha256 = sha_argument(args)?;
    let bytes = STANDARD
        .decode(args.string("content_base64")?)
        .map_err(|e| {
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
    let dir = samples_dir(&ctx.job)?;
    let temp = dir.join(format!(".incoming-{}", ctx.job.next_upload_id()));
    let path = dir.join(&name);
    DirectWriter::create(&temp)
        .and_then(|mut file| {
            file.write_all(&bytes)?;
            file.finish()
        })
        .and_then(|_| std::fs::rename(&temp, &path))
        .map_err(|e| failed(format!("storing {name}: {e}")))?;
    ctx.job.remember_digest(&path, bytes.len() as u64, &sha256);
    Ok(receipt(&path, bytes.len() as u64, &sha256))
}

fn put_sample_begin(args: &Arguments, ctx: &ToolContext) -> ToolResult {
    let name = safe_name(args.string("name")?)?;
    let sha256 = sha_argument(args)?;
    let size = args
        .optional_u64("size")?
        .ok_or_else(|| bad("the argument size is missing", "pass the file's size"))?;
    let dir = samples_dir(&ctx.job)?;
    let id = ctx.job.next_upload_id();
    let temp = dir.join(format!(".incoming-{id}"));
    let file = DirectWriter::create(&temp)
        .map_err(|e| failed(format!("creating {}: {e}", temp.display())))?;
    lock(&ctx.job.uploads).insert(
        id,
        Upload {
            name,
            size,
            sha256,
            received: 0,
            hasher: Sha256::new(),
            temp,
            file,
            failed: None,
            waiting: 0,
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
fn put_sample_chunk(args: &Arguments, ctx: &ToolContext, turn_wait: Duration) -> ToolResult {
    let id = upload_id(args)?;
    let offset = args
        .optional_u64("offset")?
        .ok_or_else(|| bad("the argument offset is missing", "pass the chunk's offset"))?;
    let content = args.string("content_base64")?;
    store_chunk_in_turn(id, offset, content, ctx, turn_wait)
}

/// [`put_sample_chunk`], its arguments read straight from the request.
fn put_chunk(chunk: &Chunk<'_>, ctx: &ToolContext, turn_wait: Duration) -> ToolResult {
    store_chunk_in_turn(
        chunk.upload_id,
        chunk.offset,
        &chunk.content_base64,
        ctx,
        turn_wait,
    )
}

/// Decodes the chunk at `offset` of upload `id` and stores it once its turn comes.
fn store_chunk_in_turn(
    id: u64,
    offset: u64,
    content: &str,
    ctx: &ToolContext,
    turn_wait: Duration,
) -> ToolResult {
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
            upload.waiting += 1;
            counted_waiting = true;
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
    if counted_waiting && let Some(upload) = uploads.get_mut(&id) {
        upload.waiting -= 1;
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
        waiting: _,
    } = upload;
    let refuse = |message: String| {
        let _ = std::fs::remove_file(&temp);
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
    let path = temp.with_file_name(&name);
    file.finish()
        .and_then(|_| std::fs::rename(&temp, &path))
        .map_err(|e| failed(format!("storing {name}: {e}")))?;
    ctx.job.remember_digest(&path, size, &sha256);
    Ok(receipt(&path, size, &sha256))
}

/// Serves a file of the job. A file it will not serve is answered `{"error": "..."}`.
fn get_file(args: &Arguments, ctx: &ToolContext) -> ToolResult {
    let named = args.string("path")?;
    let offset = args.optional_u64("offset")?.unwrap_or(0);
    let length = args
        .optional_u64("length")?
        .unwrap_or(MAX_GET_FILE_CHUNK)
        .min(MAX_GET_FILE_CHUNK);
    let path = match ctx.job.resolve_inside(named) {
        Ok(p) => p,
        Err(words) => return Ok(json!({"error": words})),
    };
    let (size, sha256) = ctx
        .job
        .digest_of(&path)
        .map_err(|e| failed(format!("reading {named}: {e}")))?;
    let take = length.min(size.saturating_sub(offset));
    let mut bytes = BUFFERS.take(take as usize);
    let mut file = OpenOptions::new()
        .read(true)
        .open(&path)
        .map_err(|e| failed(format!("opening {named}: {e}")))?;
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.take(take).read_to_end(&mut bytes))
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
        self.file_transfer_waiting(TURN_WAIT)
    }

    /// [`ServerBuilder::file_transfer`], a chunk that arrived ahead of its turn waiting at
    /// most `turn_wait` for the bytes before it (rather than [`TURN_WAIT`]): shorter where
    /// clients are near and a lost chunk should be reported soon, longer over slow links.
    ///
    /// ```
    /// use std::time::Duration;
    /// let server = maljan_sidecar_kit::Server::builder("files", "1")
    ///     .file_transfer_waiting(Duration::from_secs(5))
    ///     .build();
    /// assert!(server.manifest().tools.iter().any(|t| t.name == "put_sample_chunk"));
    /// ```
    pub fn file_transfer_waiting(self, turn_wait: Duration) -> Self {
        let string = |d: &str| json!({"type": "string", "description": d});
        let integer = |d: &str| json!({"type": "integer", "minimum": 0, "description": d});
        self.tool(
            ToolSpec::new("put_sample", "Stores a whole file in this job's directory")
                .required_string("name", "the file's name")
                .required_string("content_base64", "the file, base64")
                .required_string("sha256", "the file's sha256"),
            put_sample,
        )
        .tool(
            ToolSpec::new(
                "put_sample_begin",
                "Starts a chunked upload into this job's directory",
            )
            .required_string("name", "the file's name")
            .required_string("sha256", "the file's sha256")
            .optional("size", integer("the file's size")),
            put_sample_begin,
        )
        .chunk_tool(
            ToolSpec::new("put_sample_chunk", "Sends the next chunk of an upload")
                .optional("upload_id", integer("from put_sample_begin"))
                .optional("offset", integer("where the chunk goes"))
                .required_string("content_base64", "the chunk, base64"),
            move |args, ctx| put_sample_chunk(args, ctx, turn_wait),
            move |chunk, ctx| put_chunk(chunk, ctx, turn_wait),
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
