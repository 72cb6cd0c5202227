//! The platform primitives for moving files: `put_sample` (single and chunked) and
//! `get_file`. They store only into, and serve only from, the job's directory.

mod chunked_upload;
mod get_file;
mod put_sample;
pub(crate) mod upload_writer;

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
use serde_json::json;

use crate::{ServerBuilder, ToolSpec};

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

pub(super) fn bad(message: impl Into<String>, remediation: &str) -> ToolFailure {
    ToolFailure::new(
        ErrorCode::BadArgument,
        message,
        Some(remediation.to_owned()),
    )
}

pub(super) fn failed(message: impl Into<String>) -> ToolFailure {
    ToolFailure::new(ErrorCode::ToolFailed, message, None)
}
impl ServerBuilder {
    /// Offers the file primitives: `put_sample`, `put_sample_begin`, `put_sample_chunk`,
    /// `put_sample_finish` and `get_file`. Uploads are stored in the job's `samples/`
    /// directory, checked against their size and digest; `get_file` serves only files inside
    /// the job's directory. A chunked upload's digest is given to `put_sample_begin`, or,
    /// when the client does not know it yet, to `put_sample_finish`: a client then reads
    /// the file once, hashing as it sends, rather than once more beforehand.
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
            move |args, ctx| put_sample::put_sample(args, ctx, &single),
        )
        .tool(
            ToolSpec::new(
                "put_sample_begin",
                "Starts a chunked upload into this job's directory",
            )
            .required_string("name", "the file's name")
            .optional(
                "sha256",
                string("the file's sha256 (or to put_sample_finish, when not known yet)"),
            )
            .optional("size", integer("the file's size")),
            move |args, ctx| chunked_upload::put_sample_begin(args, ctx, &begin),
        )
        .chunk_tool(
            ToolSpec::new("put_sample_chunk", "Sends the next chunk of an upload")
                .optional("upload_id", integer("from put_sample_begin"))
                .optional("offset", integer("where the chunk goes"))
                .required_string("content_base64", "the chunk, base64"),
            move |args, ctx| chunked_upload::put_sample_chunk(args, ctx, &chunk),
            move |piece, ctx| chunked_upload::put_chunk(piece, ctx, &chunk_read),
        )
        .tool(
            ToolSpec::new("put_sample_finish", "Checks and stores a chunked upload")
                .optional("upload_id", integer("from put_sample_begin"))
                .optional(
                    "sha256",
                    string("the file's sha256, when put_sample_begin was not given it"),
                ),
            chunked_upload::put_sample_finish,
        )
        .tool(
            ToolSpec::new(
                "get_file",
                "Serves a chunk of a file this server wrote for its job",
            )
            .optional("path", string("the file, as a tool named it"))
            .optional("offset", integer("where to start"))
            .optional("length", integer("how many bytes")),
            get_file::get_file,
        )
    }
}
