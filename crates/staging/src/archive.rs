//! Where a job's artefacts are kept for readers beyond the job: another worker, a report
//! read on another host. The embedded default is the job's own artefact store; a fleet keeps
//! them in its object store.

use std::future::Future;
use std::io;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;

use crate::{ArtefactStore, StoredArtefact, copy_hashed_until};

/// What an [`ArtefactArchive`] answers, later.
pub type ArchiveFuture<'a, T> = Pin<Box<dyn Future<Output = io::Result<T>> + Send + 'a>>;

/// Where taken artefacts are kept, by their sha256, for anyone who reads the run later.
///
/// A job hands every file it takes to its archive as soon as the file is in its artefact
/// store; an archive that cannot keep it answers why, and the run goes on with the file in
/// its job alone. The embedded default, [`ArtefactStore`] itself, keeps nothing beyond the
/// job's directory.
///
/// ```
/// use maljan_staging::{ArtefactArchive, ArtefactStore, Origin};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let store = ArtefactStore::open(dir.path().join("artefacts"))?;
/// let origin = Origin { step: None, server: "s".into(), tool: "t".into() };
/// let stored = store.add_reader(&b"abc"[..], "abc.txt", origin)?;
/// store.keep(&stored).await?;
/// let copy = dir.path().join("copy");
/// assert_eq!(store.fetch(&stored.sha256, &copy).await?, Some(3));
/// assert_eq!(store.fetch(&"0".repeat(64), &copy).await?, None);
/// # Ok(()) }
/// ```
pub trait ArtefactArchive: Send + Sync + std::fmt::Debug {
    /// Keeps `artefact` (its bytes are at `artefact.path`): sent once per digest, however
    /// many runs take the same bytes.
    fn keep<'a>(&'a self, artefact: &'a StoredArtefact) -> ArchiveFuture<'a, ()>;

    /// Writes the artefact of sha256 `sha256` to `destination`, checked against that
    /// digest (bytes of another leave no file), and answers its size; `None` when the
    /// archive holds no artefact of that digest.
    fn fetch<'a>(
        &'a self,
        sha256: &'a str,
        destination: &'a Path,
    ) -> ArchiveFuture<'a, Option<u64>>;
}

impl ArtefactArchive for ArtefactStore {
    /// The job's artefact store holds what it took already: there is nothing more to keep.
    fn keep<'a>(&'a self, artefact: &'a StoredArtefact) -> ArchiveFuture<'a, ()> {
        Box::pin(async move {
            if artefact.path.parent() == Some(self.root()) && artefact.path.is_file() {
                Ok(())
            } else {
                Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "{} is not in the job's artefact store {}",
                        artefact.path.display(),
                        self.root().display()
                    ),
                ))
            }
        })
    }

    fn fetch<'a>(
        &'a self,
        sha256: &'a str,
        destination: &'a Path,
    ) -> ArchiveFuture<'a, Option<u64>> {
        Box::pin(async move {
            let stored = self.root().join(sha256);
            if self.named_digest(&stored) != Some(sha256) || !stored.is_file() {
                return Ok(None);
            }
            let (size, found) = copy_hashed_until(&stored, destination, &AtomicBool::new(false))?;
            if found != sha256 {
                let _ = std::fs::remove_file(destination);
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("the job's copy of {sha256} now holds bytes of sha256 {found}"),
                ));
            }
            Ok(Some(size))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Origin;

    #[tokio::test]
    async fn a_stored_file_changed_since_is_not_fetched_as_what_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let store = ArtefactStore::open(dir.path().join("artefacts")).unwrap();
        let origin = Origin {
            step: None,
            server: "s".into(),
            tool: "t".into(),
        };
        let stored = store.add_reader(&b"abc"[..], "abc.txt", origin).unwrap();
        std::fs::write(&stored.path, b"abd").unwrap();
        let copy = dir.path().join("copy");
        let refused = store.fetch(&stored.sha256, &copy).await.unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::InvalidData);
        assert!(!copy.exists());
    }

    #[tokio::test]
    async fn a_name_that_is_no_digest_is_not_looked_for() {
        let dir = tempfile::tempdir().unwrap();
        let store = ArtefactStore::open(dir.path().join("artefacts")).unwrap();
        std::fs::write(dir.path().join("secret"), b"x").unwrap();
        let copy = dir.path().join("copy");
        for name in ["../secret", "index.jsonl", "", "/etc/passwd"] {
            assert_eq!(store.fetch(name, &copy).await.unwrap(), None, "{name}");
        }
    }
}
