//! A job: its directory, its sample, its artefact store, the files its steps took and handed
//! on, and what was sent where.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use maljan_staging::{ArtefactArchive, ArtefactStore, Origin, StoredArtefact};
use serde::Serialize;

use crate::uploads::Uploads;

/// A file a tool named in its answer, and whether the client took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum TakenFile {
    /// It is in the artefact store.
    Taken {
        /// The server that wrote it.
        server: String,
        /// The path the tool named.
        path: String,
        /// Its digest, also its name in the store.
        sha256: String,
        /// Its size.
        size: u64,
    },
    /// It was not taken: the server's words, or the client's reason.
    NotTaken {
        /// The server that named it.
        server: String,
        /// The path the tool named.
        path: String,
        /// Why not: the server's words, or the client's reason.
        reason: String,
    },
}

/// The job's sample: its copy in the job's directory, and what it is.
///
/// Hashed as it was copied in: its uploads announce this digest without reading the file a
/// first time, and one whose bytes no longer match it is not finished (see
/// [`maljan_staging::upload_with_digest`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// The copy in the job's directory.
    pub path: PathBuf,
    /// Its size, in bytes.
    pub size: u64,
    /// Its sha256, lowercase hex.
    pub sha256: String,
}

/// A file the job took that its archive could not keep: it is in the job's artefact store
/// alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnkeptArtefact {
    /// Its sha256.
    pub sha256: String,
    /// Its name, as the tool gave it.
    pub name: String,
    /// The archive's words.
    pub why: String,
}

/// One job: its directory, its artefact store, and the files its calls moved between
/// servers.
///
/// Layout: `DIR/artefacts/` (the store), `DIR/servers/NAME/` (each local server's own
/// staging directory, given to it as `MALJAN_JOB_DIR`), and whatever else the job puts in
/// `DIR` (the sample, say). Only files inside `DIR` are ever staged to a server.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let job = maljan_client::Job::create(dir.path()).unwrap();
/// assert!(job.server_dir("sidecar").starts_with(job.dir()));
/// assert!(job.sample().is_none());
/// ```
#[derive(Debug)]
pub struct Job {
    dir: PathBuf,
    store: ArtefactStore,
    sample: Mutex<Option<Sample>>,
    /// What was sent to which server, each file once per server.
    uploads: Uploads,
    /// The files handed to later steps: path → (size, sha256, who wrote it).
    handed: Mutex<Handed>,
    /// Where taken files are kept beyond the job, when anywhere.
    archive: Option<Arc<dyn ArtefactArchive>>,
    /// What the archive could not keep.
    unkept: Mutex<Vec<UnkeptArtefact>>,
}

/// The files handed to later steps, and for each name a step handed out, the next
/// numbered directory to try, so that handing out one name N times costs N tries, not N².
#[derive(Debug, Default)]
struct Handed {
    files: HashMap<PathBuf, KnownDigest>,
    next_free: HashMap<PathBuf, u32>,
}

/// What the job knows of a file a step took and handed on: its digest (announced when the
/// file is uploaded, not hashed again) and where it came from.
#[derive(Debug, Clone)]
pub(crate) struct KnownDigest {
    pub(crate) size: u64,
    pub(crate) sha256: String,
    pub(crate) origin: Origin,
}

/// A name safe as one directory of the job: ASCII letters, digits, `-` and `_` kept, the
/// rest `_`.
fn directory_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The file name of a path, for display and for the name a file is sent or stored under.
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Job {
    /// A job in `dir` (created if missing).
    pub fn create(dir: impl AsRef<Path>) -> io::Result<Job> {
        std::fs::create_dir_all(dir.as_ref())?;
        let dir = dir.as_ref().canonicalize()?;
        Ok(Job {
            store: ArtefactStore::open(dir.join("artefacts"))?,
            dir,
            sample: Mutex::default(),
            uploads: Uploads::default(),
            handed: Mutex::default(),
            archive: None,
            unkept: Mutex::default(),
        })
    }

    /// The job, with every file it takes from now on also kept in `archive` (a fleet's
    /// object store, say) as soon as it is in the job's artefact store. A file the archive
    /// cannot keep stays in the job and is listed by [`unkept`](Self::unkept); the run goes
    /// on.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use maljan_staging::ArtefactStore;
    /// let dir = tempfile::tempdir().unwrap();
    /// let shared = Arc::new(ArtefactStore::open(dir.path().join("shared")).unwrap());
    /// let job = maljan_client::Job::create(dir.path().join("job")).unwrap().with_archive(shared);
    /// assert!(job.unkept().is_empty());
    /// ```
    #[must_use]
    pub fn with_archive(mut self, archive: Arc<dyn ArtefactArchive>) -> Job {
        self.archive = Some(archive);
        self
    }

    /// The files the job's archive could not keep, in the order they were taken.
    pub fn unkept(&self) -> Vec<UnkeptArtefact> {
        lock(&self.unkept).clone()
    }

    /// Hands a file just taken to the job's archive, when it has one.
    pub(crate) async fn keep(&self, stored: &StoredArtefact) {
        let Some(archive) = &self.archive else {
            return;
        };
        if let Err(e) = archive.keep(stored).await {
            tracing::warn!(
                "{} ({}) is not kept beyond the job: {e}",
                stored.name,
                stored.sha256
            );
            lock(&self.unkept).push(UnkeptArtefact {
                sha256: stored.sha256.clone(),
                name: stored.name.clone(),
                why: e.to_string(),
            });
        }
    }

    /// The job's directory (canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The job's artefact store.
    pub fn store(&self) -> &ArtefactStore {
        &self.store
    }

    /// The staging directory of a local server: its job directory.
    pub fn server_dir(&self, server: &str) -> PathBuf {
        self.dir.join("servers").join(directory_name(server))
    }

    /// Hands a file of the artefact store (by its `sha256`) to later steps under the name
    /// the tool gave it: `DIR/outputs/STEP/NAME` (`DIR/outputs/STEP/N/NAME` when the step
    /// took two files of that name), a hard link to the stored file, or a copy where links
    /// are refused. A server is handed this path, or sent the file under `NAME`: a tool that
    /// goes by the extension sees `payload.js`, not a digest.
    ///
    /// ```
    /// use maljan_staging::Origin;
    /// let dir = tempfile::tempdir().unwrap();
    /// let job = maljan_client::Job::create(dir.path()).unwrap();
    /// let source = dir.path().join("x");
    /// std::fs::write(&source, "console.log(1)").unwrap();
    /// let origin = Origin { step: Some("unpack".into()), server: "s".into(), tool: "unpack".into() };
    /// let stored = job.store().add_file(&source, "payload.js", origin.clone()).unwrap();
    /// let handed = job.hand_out("unpack", "members/payload.js", &stored.sha256, origin).unwrap();
    /// assert!(handed.ends_with("outputs/unpack/payload.js"));
    /// assert_eq!(std::fs::read(&handed).unwrap(), b"console.log(1)");
    /// ```
    pub fn hand_out(
        &self,
        step: &str,
        name: &str,
        sha256: &str,
        origin: Origin,
    ) -> io::Result<PathBuf> {
        let base = file_name(Path::new(name));
        let stored = self.store.root().join(sha256);
        if base.is_empty() || base == "." || base == ".." || base.contains('/') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{name:?} has no file name to hand out"),
            ));
        }
        if self.store.named_digest(&stored) != Some(sha256) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no artefact has sha256 {sha256}"),
            ));
        }
        let size = std::fs::metadata(&stored)?.len();
        let dir = self.dir.join("outputs").join(directory_name(step));
        let mut handed = lock(&self.handed);
        let first = dir.join(&base);
        let mut n = handed.next_free.get(&first).copied().unwrap_or(0);
        let mut path = if n == 0 {
            first.clone()
        } else {
            dir.join(n.to_string()).join(&base)
        };
        while handed.files.contains_key(&path) || path.exists() {
            n += 1;
            path = dir.join(n.to_string()).join(&base);
        }
        handed.next_free.insert(first, n + 1);
        std::fs::create_dir_all(path.parent().unwrap_or(&dir))?;
        if std::fs::hard_link(&stored, &path).is_err() {
            std::fs::copy(&stored, &path)?;
        }
        handed.files.insert(
            path.clone(),
            KnownDigest {
                size,
                sha256: sha256.to_owned(),
                origin,
            },
        );
        Ok(path)
    }

    /// What was sent to which server. A server started again, or given a new session, has
    /// none of the files its predecessor was sent: its uploads are forgotten, to be sent
    /// again.
    pub(crate) fn uploads(&self) -> &Uploads {
        &self.uploads
    }

    /// What a handed-out path is, when it is one.
    pub(crate) fn handed(&self, path: &Path) -> Option<KnownDigest> {
        lock(&self.handed).files.get(path).cloned()
    }

    /// Copies a file into the job's directory as its sample, hashing it on the way, and
    /// returns the copy.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let source = dir.path().join("a.txt");
    /// std::fs::write(&source, "hello world").unwrap();
    /// let job = maljan_client::Job::create(dir.path().join("job")).unwrap();
    /// let sample = job.add_sample(&source).unwrap();
    /// assert!(sample.path.starts_with(job.dir()));
    /// assert_eq!(sample.size, 11);
    /// assert_eq!(sample.sha256, "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9");
    /// assert_eq!(job.sample(), Some(sample));
    /// ```
    pub fn add_sample(&self, source: &Path) -> io::Result<Sample> {
        self.add_sample_until(source, &std::sync::atomic::AtomicBool::new(false))
    }

    /// [`add_sample`](Self::add_sample), stopped as soon as `stop` is set (a run stopped
    /// during the copy): it then fails, and no partial copy is left.
    pub fn add_sample_until(
        &self,
        source: &Path,
        stop: &std::sync::atomic::AtomicBool,
    ) -> io::Result<Sample> {
        let name = source.file_name().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "the sample has no file name")
        })?;
        let dir = self.dir.join("sample");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(name);
        let (size, sha256) = maljan_staging::copy_hashed_until(source, &path, stop)?;
        let sample = Sample { path, size, sha256 };
        *lock(&self.sample) = Some(sample.clone());
        Ok(sample)
    }

    /// Moves `source`, a file on the job directory's filesystem whose size and sha256 the
    /// caller checked as it was written (a fleet's worker fetching it from its object
    /// store), into the job as its sample, under its file name: no second copy, no second
    /// hashing.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let fetched = dir.path().join("a.txt");
    /// std::fs::write(&fetched, "hello world").unwrap();
    /// let job = maljan_client::Job::create(dir.path().join("job")).unwrap();
    /// let sha256 = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9";
    /// let sample = job.adopt_sample(&fetched, 11, sha256).unwrap();
    /// assert!(sample.path.starts_with(job.dir()) && !fetched.exists());
    /// ```
    pub fn adopt_sample(&self, source: &Path, size: u64, sha256: &str) -> io::Result<Sample> {
        let name = source.file_name().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "the sample has no file name")
        })?;
        let dir = self.dir.join("sample");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(name);
        std::fs::rename(source, &path)?;
        let sample = Sample {
            path,
            size,
            sha256: sha256.to_owned(),
        };
        *lock(&self.sample) = Some(sample.clone());
        Ok(sample)
    }

    /// The sample, once added.
    pub fn sample(&self) -> Option<Sample> {
        lock(&self.sample).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_name_handed_out_again_and_again_gets_the_next_numbered_directory() {
        let dir = tempfile::tempdir().unwrap();
        let job = Job::create(dir.path().join("job")).unwrap();
        let source = dir.path().join("x");
        std::fs::write(&source, "same").unwrap();
        let origin = Origin {
            step: Some("unpack".into()),
            server: "s".into(),
            tool: "unpack".into(),
        };
        let stored = job
            .store()
            .add_file(&source, "a.js", origin.clone())
            .unwrap();
        let count = 50;
        let paths: Vec<PathBuf> = (0..count)
            .map(|_| {
                job.hand_out("unpack", "a.js", &stored.sha256, origin.clone())
                    .unwrap()
            })
            .collect();
        let outputs = job.dir().join("outputs/unpack");
        assert_eq!(paths[0], outputs.join("a.js"));
        assert_eq!(paths[1], outputs.join("1/a.js"));
        assert_eq!(
            paths[count - 1],
            outputs.join(format!("{}/a.js", count - 1))
        );
        let distinct: std::collections::HashSet<_> = paths.iter().collect();
        assert_eq!(distinct.len(), count);
    }
}
