//! The job's uploads: each file of the job sent to each server at most once, by whichever
//! call asks first while the others wait for it; and why a file was not staged.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use maljan_staging::UploadError;
use tokio::sync::OnceCell;

/// Why a file of the job was not staged for a server: the call then goes out with the
/// local path, and the run says so among its degradations.
#[derive(Debug, Clone, thiserror::Error)]
pub(crate) enum NotStaged {
    /// The server offers no upload primitive.
    #[error(
        "server {server} offers neither put_sample nor put_sample_begin/_chunk/_finish, so {} \
         could not be staged",
        path.display()
    )]
    NoUploadTool {
        /// The server.
        server: String,
        /// The file.
        path: PathBuf,
    },
    /// The upload failed.
    #[error("uploading {} to {server} failed: {cause}", path.display())]
    Upload {
        /// The server.
        server: String,
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        cause: UploadError,
    },
}

/// One file's upload to one server: the path the server stored it at, or why it was not.
pub(crate) type StagedUpload = OnceCell<Result<String, NotStaged>>;

/// (server, canonical local path) → the upload of that file to that server.
#[derive(Debug, Default)]
pub(crate) struct Uploads {
    made: Mutex<HashMap<(String, PathBuf), Arc<StagedUpload>>>,
}

impl Uploads {
    /// The upload of `local` to `server`: made by the first to ask, awaited by the rest.
    pub(crate) fn of(&self, server: &str, local: &Path) -> Arc<StagedUpload> {
        let mut made = self.made.lock().unwrap_or_else(PoisonError::into_inner);
        made.entry((server.to_owned(), local.to_owned()))
            .or_default()
            .clone()
    }

    /// Forgets what was sent to `server`: a server connected again has none of it.
    #[cfg(feature = "runs")]
    pub(crate) fn forget(&self, server: &str) {
        let mut made = self.made.lock().unwrap_or_else(PoisonError::into_inner);
        made.retain(|(to, _), _| to != server);
    }
}
