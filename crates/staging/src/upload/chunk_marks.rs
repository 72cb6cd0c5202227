//! A file hashed first, read once to announce its sha256, leaves marks for the read that
//! sends it: each chunk's BLAKE3 and the sha256 state before the chunk. The sending read
//! checks its chunks against the marks with BLAKE3, several times faster than sha256 and
//! as hard to collide, and hashes with sha256 again only from the first chunk that
//! differs, resuming from the state before it: the digest of the bytes sent is known
//! either way, without hashing every byte with sha256 twice.

use std::fs::File;
use std::path::Path;
use std::sync::mpsc;

use sha2::{Digest, Sha256};

use super::driver::fill;

/// How much of a chunk the first read reads at a time.
const PIECE_BYTES: usize = 1 << 20;

/// One chunk of the first read.
#[derive(Clone)]
struct Mark {
    blake3: blake3::Hash,
    sha256_before: Sha256,
}

/// What the first read of a file saw, chunk by chunk.
pub(crate) struct ChunkMarks {
    marks: Vec<Mark>,
    /// The sha256 state after the last chunk.
    sha256_end: Sha256,
}

impl ChunkMarks {
    /// The sha256 state before chunk `index` (after the last, for the count of chunks).
    fn sha256_before(&self, index: usize) -> Sha256 {
        self.marks
            .get(index)
            .map_or_else(|| self.sha256_end.clone(), |m| m.sha256_before.clone())
    }
}

/// Reads the file at `path` in chunks of `chunk_len` bytes (the last may be shorter), as
/// the sending read will, and gives its size, its sha256 and the marks of its chunks.
///
/// Two threads share the work: this one reads each chunk, a piece at a time, and takes
/// its BLAKE3, another hashes the pieces with sha256, so the read costs no time beside
/// the sha256. Pieces rather than whole chunks go round, so the first read adds little to
/// the memory the sending read uses after it.
pub(crate) fn hash_marked(
    path: &Path,
    chunk_len: usize,
) -> std::io::Result<(u64, String, ChunkMarks)> {
    hash_marked_in_pieces(path, chunk_len, PIECE_BYTES)
}

/// [`hash_marked`], reading at most `piece_len` bytes at a time.
fn hash_marked_in_pieces(
    path: &Path,
    chunk_len: usize,
    piece_len: usize,
) -> std::io::Result<(u64, String, ChunkMarks)> {
    let mut file = File::open(path)?;
    let chunk_len = chunk_len.max(1);
    let piece_len = piece_len.clamp(1, chunk_len);
    // Two pieces go round: one hashed while the next is read. Each says whether it starts
    // a chunk.
    let (filled_tx, filled) = mpsc::sync_channel::<(Vec<u8>, usize, bool)>(1);
    let (empty_tx, empty) = mpsc::channel::<Vec<u8>>();
    for _ in 0..2 {
        // Cannot fail: the receiver is here.
        let _ = empty_tx.send(vec![0u8; piece_len]);
    }
    std::thread::scope(|scope| {
        let hasher = scope.spawn(move || {
            let mut sha256 = Sha256::new();
            let mut before = Vec::new();
            while let Ok((piece, len, starts_chunk)) = filled.recv() {
                if starts_chunk {
                    before.push(sha256.clone());
                }
                sha256.update(&piece[..len]);
                // The reader may be gone: it stops at the end of the file.
                let _ = empty_tx.send(piece);
            }
            (before, sha256)
        });
        let mut blake3s = Vec::new();
        let mut chunk = blake3::Hasher::new();
        let mut in_chunk = 0;
        let mut size = 0u64;
        let read = loop {
            let Ok(mut piece) = empty.recv() else {
                break Ok(());
            };
            let wanted = piece_len.min(chunk_len - in_chunk);
            let len = match fill(&mut file, &mut piece[..wanted]) {
                Ok(len) => len,
                Err(e) => break Err(e),
            };
            if len == 0 {
                break Ok(());
            }
            chunk.update(&piece[..len]);
            let starts_chunk = in_chunk == 0;
            in_chunk += len;
            size += len as u64;
            if in_chunk == chunk_len {
                blake3s.push(chunk.finalize());
                chunk.reset();
                in_chunk = 0;
            }
            if filled_tx.send((piece, len, starts_chunk)).is_err() || len < wanted {
                break Ok(());
            }
        };
        if in_chunk > 0 {
            blake3s.push(chunk.finalize());
        }
        drop(filled_tx);
        let (before, sha256_end) = hasher
            .join()
            .map_err(|_| std::io::Error::other("the sha256 thread panicked"))?;
        read?;
        let digest = format!("{:x}", sha256_end.clone().finalize());
        let marks = blake3s
            .into_iter()
            .zip(before)
            .map(|(blake3, sha256_before)| Mark {
                blake3,
                sha256_before,
            })
            .collect();
        Ok((size, digest, ChunkMarks { marks, sha256_end }))
    })
}

/// The sha256 of the bytes read for sending, taken as they are read.
pub(crate) enum SentDigest {
    /// Every byte hashed with sha256.
    Hashing(Sha256),
    /// Each chunk checked against the first read's marks; `next` is the chunk to come.
    Checking {
        /// The first read's marks.
        marks: ChunkMarks,
        /// The index of the next chunk.
        next: usize,
    },
}

impl SentDigest {
    /// Takes the next chunk read (every chunk but the last `chunk_len` bytes long).
    pub(crate) fn update(&mut self, chunk: &[u8]) {
        match self {
            SentDigest::Hashing(sha256) => sha256.update(chunk),
            SentDigest::Checking { marks, next } => {
                let same = marks
                    .marks
                    .get(*next)
                    .is_some_and(|mark| mark.blake3 == blake3::hash(chunk));
                if same {
                    *next += 1;
                } else {
                    let mut sha256 = marks.sha256_before(*next);
                    sha256.update(chunk);
                    *self = SentDigest::Hashing(sha256);
                }
            }
        }
    }

    /// The sha256 of every chunk taken, in hex.
    pub(crate) fn finish(self) -> String {
        let sha256 = match self {
            SentDigest::Hashing(sha256) => sha256,
            SentDigest::Checking { marks, next } => marks.sha256_before(next),
        };
        format!("{:x}", sha256.finalize())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn hex(bytes: &[u8]) -> String {
        format!("{:x}", Sha256::digest(bytes))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Whatever the second read finds (the same bytes, some changed, fewer, more), the
        /// digest it gives is the sha256 of what it read.
        #[test]
        fn the_sent_digest_is_the_sha256_of_the_bytes_read(
            first in prop::collection::vec(any::<u8>(), 0..3000),
            chunk_len in 1usize..700,
            piece_len in 1usize..300,
            change in prop::option::of((any::<prop::sample::Index>(), any::<u8>())),
            cut in prop::option::of(any::<prop::sample::Index>()),
            grow in prop::collection::vec(any::<u8>(), 0..3),
        ) {
            let dir = tempfile::tempdir().expect("temp dir");
            let path = dir.path().join("f");
            std::fs::write(&path, &first).expect("write");
            let (size, sha256, marks) =
                hash_marked_in_pieces(&path, chunk_len, piece_len).expect("hashed");
            prop_assert_eq!(size, first.len() as u64);
            prop_assert_eq!(&sha256, &hex(&first));
            prop_assert_eq!(marks.marks.len(), first.len().div_ceil(chunk_len));

            let mut second = first.clone();
            if let (Some((at, value)), false) = (change, second.is_empty()) {
                let at = at.index(second.len());
                second[at] = value;
            }
            if let Some(cut) = cut {
                second.truncate(cut.index(second.len() + 1));
            }
            second.extend(&grow);
            let mut sent = SentDigest::Checking { marks, next: 0 };
            for chunk in second.chunks(chunk_len) {
                sent.update(chunk);
            }
            prop_assert_eq!(sent.finish(), hex(&second));
        }
    }

    #[test]
    fn an_empty_file_has_no_chunks_and_the_empty_digest() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("empty");
        std::fs::write(&path, b"").expect("write");
        let (size, sha256, marks) = hash_marked(&path, 4).expect("hashed");
        assert_eq!((size, sha256.as_str()), (0, hex(b"").as_str()));
        assert!(marks.marks.is_empty());
        assert_eq!(SentDigest::Checking { marks, next: 0 }.finish(), hex(b""));
    }

    #[test]
    fn a_missing_file_is_an_error_not_an_empty_digest() {
        let dir = tempfile::tempdir().expect("temp dir");
        let error = hash_marked(&dir.path().join("absent"), 4)
            .err()
            .expect("no file");
        assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    }
}
