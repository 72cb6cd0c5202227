//! An upload's file written and hashed on a thread of its own, behind the calls that bring
//! its chunks.
//!
//! A chunk in turn is handed to the thread and answered at once: the next chunk's call does
//! not wait for the disk (nor for the flush the file's writer makes every few MiB, which on
//! a virtual disk can take longer than decoding the chunks it covers), and the job's upload
//! lock is not held for it. At most [`CHUNKS_QUEUED`] chunks wait for the thread, so memory
//! stays bounded; a call finds the queue full only when the disk is slower than the chunks
//! come, and then waits for it. A write that fails is told to the next chunk's call and to
//! `put_sample_finish`, which always waits for every chunk to be written before it checks
//! the digest.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use maljan_direct_write::DirectWriter;
use maljan_mcp_proto::large_buffers::LARGE_BUFFERS;
use sha2::{Digest, Sha256};

use super::chunked_upload::DecodedChunk;

/// How many decoded chunks may wait for the writing thread.
const CHUNKS_QUEUED: usize = 2;

/// The writing side of an upload in progress.
#[derive(Debug)]
pub(crate) struct UploadWriter {
    /// Where chunks go; `None` once the upload is finishing.
    chunks: Option<SyncSender<DecodedChunk>>,
    thread: Option<JoinHandle<Written>>,
    /// Why a write failed, once one has.
    failure: Arc<OnceLock<String>>,
}

/// What the thread hands back once every chunk is written.
#[derive(Debug)]
pub(crate) struct Written {
    pub(crate) file: DirectWriter,
    pub(crate) hasher: Sha256,
}

impl UploadWriter {
    /// Starts the thread that writes upload `id` into `file`.
    pub(crate) fn start(id: u64, file: DirectWriter) -> std::io::Result<Self> {
        let (chunks, queued) = sync_channel(CHUNKS_QUEUED);
        let failure = Arc::new(OnceLock::new());
        let failed = Arc::clone(&failure);
        let thread = std::thread::Builder::new()
            .name(format!("upload {id}"))
            .spawn(move || write_chunks(id, file, &queued, &failed))?;
        Ok(UploadWriter {
            chunks: Some(chunks),
            thread: Some(thread),
            failure,
        })
    }

    /// Queues a chunk in turn, waiting while [`CHUNKS_QUEUED`] are queued already; the
    /// reason when a write has failed (this chunk is then dropped).
    pub(crate) fn queue(&self, chunk: DecodedChunk) -> Result<(), String> {
        if let Some(reason) = self.failure.get() {
            return Err(reason.clone());
        }
        let sent = self.chunks.as_ref().map(|chunks| chunks.send(chunk));
        match sent {
            Some(Ok(())) => Ok(()),
            _ => Err(self.failure_reason()),
        }
    }

    /// Waits for every queued chunk to be written: the file and the digest of its bytes,
    /// or why a write failed.
    pub(crate) fn finish(mut self) -> Result<Written, String> {
        self.chunks = None;
        let written = match self.thread.take().map(JoinHandle::join) {
            Some(Ok(written)) => written,
            Some(Err(panic)) => std::panic::resume_unwind(panic),
            None => return Err(self.failure_reason()),
        };
        match self.failure.get() {
            Some(reason) => Err(reason.clone()),
            None => Ok(written),
        }
    }

    fn failure_reason(&self) -> String {
        self.failure
            .get()
            .cloned()
            .unwrap_or_else(|| "the upload's writer stopped".to_owned())
    }
}

/// Writes and hashes the chunks queued, in order, until the queue is closed or a write fails.
fn write_chunks(
    id: u64,
    mut file: DirectWriter,
    queued: &Receiver<DecodedChunk>,
    failure: &OnceLock<String>,
) -> Written {
    let mut hasher = Sha256::new();
    for chunk in queued {
        let bytes = chunk.bytes();
        // Hashed beside the write, which mostly waits on the device.
        if let Err(e) = file.write_all_beside(bytes, || hasher.update(bytes)) {
            let _ = failure.set(format!("writing upload {id}: {e}"));
            break;
        }
        LARGE_BUFFERS.give(chunk.into_buffer());
    }
    Written { file, hasher }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;

    use super::*;

    fn chunk(bytes: &[u8]) -> DecodedChunk {
        DecodedChunk::decode(STANDARD.encode(bytes).as_bytes()).expect("base64")
    }

    #[test]
    fn queued_chunks_are_written_and_hashed_in_order() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("upload");
        let writer =
            UploadWriter::start(1, DirectWriter::create(&path).expect("file")).expect("started");
        let long = vec![b'x'; (1 << 20) + 5];
        for bytes in [&b"hello "[..], &long, b"world"] {
            writer.queue(chunk(bytes)).expect("queued");
        }
        let Written { file, hasher } = writer.finish().expect("written");
        let whole = [&b"hello "[..], &long, b"world"].concat();
        assert_eq!(file.finish().expect("durable"), whole.len() as u64);
        assert_eq!(std::fs::read(&path).expect("read"), whole);
        assert_eq!(hasher.finalize(), Sha256::digest(&whole));
    }

    #[test]
    fn a_failed_write_refuses_the_next_chunks_and_the_finish() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("read-only");
        std::fs::write(&path, b"").expect("file");
        // A descriptor open for reading only: its first block's write fails.
        let file = std::fs::File::open(&path).expect("opened");
        let writer = UploadWriter::start(2, DirectWriter::new(file)).expect("started");
        let block = vec![b'y'; 2 << 20];
        let mut refused = None;
        for _ in 0..=CHUNKS_QUEUED + 1 {
            if let Err(reason) = writer.queue(chunk(&block)) {
                refused = Some(reason);
                break;
            }
        }
        let reason = refused.expect("a chunk after the failed write is refused");
        assert!(reason.starts_with("writing upload 2: "), "{reason}");
        let finished = writer.finish().map(|_| ()).expect_err("the finish fails");
        assert_eq!(finished, reason);
    }
}
