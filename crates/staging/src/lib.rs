#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod archive;
mod caller;
mod disclosure;
mod download;
mod hashing;
mod path_argument;
mod store;
mod upload;

pub use archive::{ArchiveFuture, ArtefactArchive};
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
