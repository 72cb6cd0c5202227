//! Moving files between MCP servers, for servers that may lie about sizes and digests.
//!
//! - **Download** ([`download`], [`DownloadValidator`]): `get_file` asked 4 MiB at a time,
//!   every lie refused with its own [`DownloadError`], bytes hashed and written to a
//!   temporary file in the [`ArtefactStore`] (past the page cache where the filesystem
//!   allows it, with `maljan-direct-write`), renamed into place only when the digest
//!   matches. Memory O(chunk), no size limit of its own.
//! - **Upload** ([`upload`]): `put_sample_begin` / `_chunk` / `_finish` streamed from disk,
//!   hashed as read, finish not called when the bytes changed; or one `put_sample`. A file
//!   whose digest is known (a stored artefact's name, a sample hashed as it was copied
//!   with [`copy_hashed`]) goes with [`upload_with_digest`], without being hashed first.
//! - **The artefact store**: content-addressed by sha256, written atomically, each file's
//!   name and origin indexed.
//! - **Disclosure records** and **degradation reasons**: what was sent where; what was done
//!   with less, and why. Staging never fails a run.
//! - **The staging decision** ([`Staging::for_argument`]): the transport decides; only files inside the
//!   job's directory are ever read.
//!
//! ```
//! use maljan_staging::{DownloadError, DownloadValidator};
//! let mut v = DownloadValidator::new("out/x", 1024);
//! let lie = serde_json::json!({"sha256": "00".repeat(32), "offset": 0, "content_base64": ""});
//! assert!(matches!(v.handle_answer(&lie), Err(DownloadError::MissingSize { .. })));
//! ```

#![forbid(unsafe_code)]

mod caller;
mod disclosure;
mod download;
mod hashing;
mod path_argument;
mod store;
mod upload;

pub use caller::ToolCaller;
pub use disclosure::{Degradation, Disclosed, Disclosure, DisclosureOutcome};
pub use download::{
    CHUNK_BYTES, ChunkRequest, DownloadError, DownloadValidator, MalformedChunk, VerifiedDownload,
    download,
};
pub use hashing::{copy_hashed, copy_hashed_until, hash_file};
pub use path_argument::{Reach, SampleMount, Staging};
pub use store::{ArtefactStore, FREE_SPACE_RESERVE, IncomingFile, Origin, StoredArtefact};
pub use upload::{
    ChunkCall, UploadError, UploadMode, UploadReceipt, UploadValidator, WrongAnswer, upload,
    upload_with_digest,
};
