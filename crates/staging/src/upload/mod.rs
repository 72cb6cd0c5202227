//! Uploading a file to a server through `put_sample_begin` / `_chunk` / `_finish`, or the
//! single `put_sample`: the checks in a sans-IO [`UploadValidator`], the file's reading and
//! the calls in [`upload`] / [`upload_with_digest`].

mod driver;
mod validator;

use std::time::Duration;

use maljan_mcp_proto::maljan::ToolFailure;
use serde::{Deserialize, Serialize};

pub use driver::{upload, upload_with_digest};
pub use validator::{ChunkCall, UploadValidator};

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
    /// The file changed while it was read to be sent, its digest to be given at the finish:
    /// its size, or its modification or change time, is not what it was when the reading
    /// began.
    #[error(
        "{path} changed while it was sent ({what}); the upload was not finished: send it \
         again once nothing writes to it"
    )]
    ModifiedDuringUpload {
        /// The local file.
        path: String,
        /// What changed.
        what: String,
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
    #[error("{tool} answered {answer}: {problem}")]
    Answer {
        /// The tool.
        tool: &'static str,
        /// The answer.
        answer: String,
        /// What is wrong with it.
        #[source]
        problem: WrongAnswer,
    },
}

/// What is wrong with an upload primitive's answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WrongAnswer {
    /// `put_sample_begin` named no upload.
    #[error("no upload_id")]
    NoUploadId,
    /// An answer to a chunk when none was waiting for one.
    #[error("no chunk was waiting for an answer")]
    NoChunkWaiting,
    /// `received` is not the end of the chunk sent.
    #[error("received is not {0}")]
    ReceivedNot(u64),
    /// The answer names no path.
    #[error("no path")]
    NoPath,
    /// The size stated is not the size sent.
    #[error("the size is not {0}")]
    SizeNot(u64),
    /// This many chunks were never answered.
    #[error("{0} chunks were not answered")]
    ChunksUnanswered(usize),
    /// The sha256 stated is not the digest sent.
    #[error("the sha256 is not {0}")]
    DigestNot(String),
}
