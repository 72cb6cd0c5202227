use std::io::Write;

use super::{DownloadError, DownloadValidator};
use crate::{ArtefactStore, Origin, StoredArtefact, ToolCaller};

/// The chunk asked for at a time: 4 MiB.
pub const CHUNK_BYTES: u64 = 4 * 1024 * 1024;

/// Downloads a file a server wrote through its `get_file` tool into the artefact store.
///
/// Asks `chunk_len` bytes at a time until the stated size is read, writing to a temporary
/// file in the store while hashing, and renames it into place only when the digest matches:
/// a refused or failed download leaves nothing behind. Memory is O(chunk) whatever the size.
/// `progress` is told the bytes received and the size once known.
pub async fn download<C: ToolCaller>(
    caller: &C,
    path: &str,
    store: &ArtefactStore,
    origin: Origin,
    chunk_len: u64,
    mut progress: impl FnMut(u64, Option<u64>),
) -> Result<StoredArtefact, DownloadError> {
    let local = |e: std::io::Error| DownloadError::Local {
        path: path.to_owned(),
        detail: e.to_string(),
    };
    let (incoming, mut file) = store.incoming().map_err(local)?;
    let mut validator = DownloadValidator::new(path, chunk_len);
    while let Some(request) = validator.next_request() {
        let answer = caller
            .call_tool("get_file", request.arguments())
            .await
            .map_err(|failure| DownloadError::NotServed {
                path: path.to_owned(),
                words: failure.message,
            })?;
        let bytes = validator.handle_answer(&answer)?;
        drop(answer);
        // The chunk and the file move to a blocking thread and back: no copy.
        let (returned, written) = tokio::task::spawn_blocking(move || {
            let written = file.write_all(&bytes);
            (file, written)
        })
        .await
        .map_err(|e| local(std::io::Error::other(e)))?;
        file = returned;
        written.map_err(local)?;
        let (received, size) = validator.progress();
        progress(received, size);
    }
    let file = tokio::task::spawn_blocking(move || file.sync_all())
        .await
        .map_err(|e| local(std::io::Error::other(e)))?;
    file.map_err(local)?;
    let verified = validator.finish()?;
    let name = path.rsplit('/').next().unwrap_or(path);
    store
        .commit(incoming, &verified.sha256, verified.size, name, origin)
        .map_err(local)
}
