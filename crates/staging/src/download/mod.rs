//! Downloading a file a server wrote, through its `get_file` tool.

mod driver;
mod error;
mod validator;

pub use driver::{CHUNK_BYTES, download};
pub use error::{DownloadError, MalformedChunk};
pub use validator::{ChunkRequest, DownloadValidator, VerifiedDownload};
