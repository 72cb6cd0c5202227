//! The object store as a job's artefact archive: every file a run takes is kept under its
//! sha256, for any worker and any reader of the run's report.

use std::io;
use std::path::Path;

use maljan_staging::{ArchiveFuture, ArtefactArchive, StoredArtefact};

use crate::{FleetError, Objects};

/// A fleet's error as the archive's: what it says, and whether it is worth trying again
/// (`Interrupted` when the store may answer later).
fn archive_error(e: FleetError) -> io::Error {
    let kind = if e.is_transient() {
        io::ErrorKind::Interrupted
    } else {
        io::ErrorKind::Other
    };
    io::Error::new(kind, e.to_string())
}

/// What a worker gives its jobs (`maljan_client::Job::with_archive`): each file a run takes
/// is put under `artefacts/SHA256` once, and read back checked by any worker.
///
/// ```
/// use maljan_fleet::{Objects, ObjectsSettings};
/// use maljan_staging::{ArtefactArchive, ArtefactStore, Origin};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// let bucket = url::Url::from_directory_path(dir.path().join("bucket")).unwrap();
/// std::fs::create_dir(dir.path().join("bucket"))?;
/// let objects = Objects::open(&ObjectsSettings::new(bucket.as_str())).unwrap();
/// let job = ArtefactStore::open(dir.path().join("job"))?;
/// let origin = Origin { step: None, server: "s".into(), tool: "t".into() };
/// let taken = job.add_reader(&b"abc"[..], "abc.txt", origin)?;
/// objects.keep(&taken).await?;
/// let copy = dir.path().join("copy");
/// assert_eq!(objects.fetch(&taken.sha256, &copy).await?, Some(3));
/// assert_eq!(objects.fetch(&"0".repeat(64), &copy).await?, None);
/// # Ok(()) }
/// ```
impl ArtefactArchive for Objects {
    fn keep<'a>(&'a self, artefact: &'a StoredArtefact) -> ArchiveFuture<'a, ()> {
        Box::pin(async move {
            let stored = self
                .put_artefact(&artefact.path)
                .await
                .map_err(archive_error)?;
            if stored.sha256 == artefact.sha256 {
                Ok(())
            } else {
                Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "the job's copy of {} holds bytes of sha256 {} now; those were kept \
                         under their own digest",
                        artefact.sha256, stored.sha256
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
            match self.fetch_artefact(sha256, destination).await {
                Ok(size) => Ok(Some(size)),
                Err(FleetError::Objects {
                    source: object_store::Error::NotFound { .. },
                    ..
                }) => Ok(None),
                Err(e) => Err(archive_error(e)),
            }
        })
    }
}
