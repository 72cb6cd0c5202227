//! A file's size and sha256, taken as it is read: on its own, or while it is copied.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use sha2::{Digest, Sha256};

/// How much is read at a time: `io::copy` alone reads 8 KiB per system call.
const READ_BYTES: usize = 1 << 20;

/// Hashes a file, streaming: its size and sha256.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("a.txt");
/// std::fs::write(&path, "hello world").unwrap();
/// let (size, sha256) = maljan_staging::hash_file(&path).await.unwrap();
/// assert_eq!(size, 11);
/// assert_eq!(sha256, "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9");
/// # }
/// ```
pub async fn hash_file(path: &Path) -> std::io::Result<(u64, String)> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut file = BufReader::with_capacity(READ_BYTES, File::open(path)?);
        let mut hasher = Sha256::new();
        let size = std::io::copy(&mut file, &mut hasher)?;
        Ok((size, format!("{:x}", hasher.finalize())))
    })
    .await
    .map_err(std::io::Error::other)?
}

/// Copies `from` to `to` (created, or truncated), hashing the bytes as they are written:
/// the copy's size and sha256, from one read of the file.
///
/// A file copied into a job this way (its sample) can later be uploaded with
/// [`upload_with_digest`](crate::upload_with_digest), without being read a first time to hash it.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let (from, to) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
/// std::fs::write(&from, "hello world").unwrap();
/// let (size, sha256) = maljan_staging::copy_hashed(&from, &to).unwrap();
/// assert_eq!((size, sha256.as_str()),
///     (11, "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"));
/// assert_eq!(std::fs::read(&to).unwrap(), b"hello world");
/// ```
pub fn copy_hashed(from: &Path, to: &Path) -> std::io::Result<(u64, String)> {
    copy_hashed_until(from, to, &AtomicBool::new(false))
}

/// [`copy_hashed`], stopped as soon as `stop` is set (the error then says "the copy was
/// stopped"); whatever failed, the partial copy is removed.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use std::sync::atomic::AtomicBool;
/// let (from, to) = (dir.path().join("a"), dir.path().join("b"));
/// std::fs::write(&from, "hello world").unwrap();
/// let stopped = maljan_staging::copy_hashed_until(&from, &to, &AtomicBool::new(true));
/// assert_eq!(stopped.unwrap_err().to_string(), "the copy was stopped");
/// assert!(!to.exists());
/// ```
pub fn copy_hashed_until(
    from: &Path,
    to: &Path,
    stop: &AtomicBool,
) -> std::io::Result<(u64, String)> {
    let mut source = BufReader::with_capacity(READ_BYTES, File::open(from)?);
    let mut copy = HashingWriter {
        file: File::create(to)?,
        hasher: Sha256::new(),
        stop,
    };
    match std::io::copy(&mut source, &mut copy) {
        Ok(size) => Ok((size, format!("{:x}", copy.hasher.finalize()))),
        Err(e) => {
            drop(copy);
            let _ = std::fs::remove_file(to);
            Err(e)
        }
    }
}

/// Writes to a file, hashing what was written, until told to stop.
struct HashingWriter<'a> {
    file: File,
    hasher: Sha256,
    stop: &'a AtomicBool,
}

impl Write for HashingWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        // Not `ErrorKind::Interrupted`: `write_all` would take that as "try again".
        if self.stop.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("the copy was stopped"));
        }
        let written = self.file.write(bytes)?;
        self.hasher.update(&bytes[..written]);
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// Whatever the file, its copy holds the same bytes, and the digest is theirs.
        #[test]
        fn a_copy_is_byte_for_byte_and_its_digest_is_the_bytes_own(
            bytes in proptest::collection::vec(any::<u8>(), 0..3 * READ_BYTES),
        ) {
            let dir = tempfile::tempdir().expect("temp dir");
            let (from, to) = (dir.path().join("from"), dir.path().join("to"));
            std::fs::write(&from, &bytes).expect("written");
            let (size, sha256) = copy_hashed(&from, &to).expect("copied");
            prop_assert_eq!(std::fs::read(&to).expect("the copy"), bytes.clone());
            prop_assert_eq!(size, bytes.len() as u64);
            prop_assert_eq!(sha256, format!("{:x}", Sha256::digest(&bytes)));
        }
    }
}
