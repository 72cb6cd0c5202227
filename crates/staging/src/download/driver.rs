use std::io::Write;

use futures::StreamExt;
use futures::stream::FuturesOrdered;

use super::{DownloadError, DownloadValidator};
use crate::{ArtefactStore, Origin, StoredArtefact, ToolCaller};

/// The chunk asked for at a time: 4 MiB.
pub const CHUNK_BYTES: u64 = 4 * 1024 * 1024;
/// How many chunks are asked for ahead, once the size is known.
const CHUNKS_IN_FLIGHT: usize = 3;

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
    // Once the size is known, chunks are asked for ahead, as if each answer were as long
    // as asked. After a shorter answer the ones asked ahead no longer line up: they are
    // dropped and the file is asked for again from where it has reached.
    let mut in_flight = FuturesOrdered::new();
    let mut ask_from = 0u64;
    loop {
        while in_flight.len() < CHUNKS_IN_FLIGHT {
            let size_known = validator.progress().1.is_some();
            if !size_known && !in_flight.is_empty() {
                break;
            }
            let Some(request) = validator.request_at(ask_from) else {
                break;
            };
            ask_from = request.offset + request.length;
            in_flight.push_back(async move {
                let answer = caller.call_tool("get_file", request.arguments()).await;
                (request, answer)
            });
        }
        let Some((asked, answer)) = in_flight.next().await else {
            break;
        };
        let answer = answer.map_err(|failure| DownloadError::NotServed {
            path: path.to_owned(),
            words: failure.message,
        })?;
        if asked.offset != validator.progress().0 {
            continue;
        }
        let bytes = validator.handle_answer(&answer)?;
        drop(answer);
        if (bytes.len() as u64) < asked.length {
            in_flight = FuturesOrdered::new();
            ask_from = validator.progress().0;
        }
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
