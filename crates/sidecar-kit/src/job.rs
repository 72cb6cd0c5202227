use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::SystemTime;

use maljan_direct_write::DirectWriter;
use sha2::Sha256;

/// The environment variable naming the job directory a client assigned to this server.
pub const JOB_DIR_ENV: &str = "MALJAN_JOB_DIR";

/// An upload in progress (`put_sample_begin` … `put_sample_finish`).
#[derive(Debug)]
pub(crate) struct Upload {
    pub(crate) name: String,
    pub(crate) size: u64,
    pub(crate) sha256: String,
    pub(crate) received: u64,
    pub(crate) hasher: Sha256,
    pub(crate) temp: PathBuf,
    pub(crate) file: DirectWriter,
    /// Why a chunk in turn was refused: the upload cannot complete, and chunks waiting
    /// for their turn are refused with it at once.
    pub(crate) failed: Option<String>,
    /// How many chunks wait for their turn.
    pub(crate) waiting: usize,
}

/// The directory of the job this server works for: where uploads are stored and tools write
/// their files, and the only place `get_file` serves from.
///
/// Over stdio there is one job per process: the directory the client names in
/// `MALJAN_JOB_DIR`, or a fresh temporary directory removed when the job ends.
#[derive(Debug)]
pub struct Job {
    dir: PathBuf,
    owned_temp: bool,
    pub(crate) uploads: Mutex<HashMap<u64, Upload>>,
    /// Signalled whenever an upload moves on (a chunk stored or refused, an upload ended):
    /// chunks that arrived ahead of their turn wait on it.
    pub(crate) upload_moved: Condvar,
    next_upload: AtomicU64,
    digests: Mutex<HashMap<PathBuf, (SystemTime, u64, String)>>,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Job {
    /// A job in `dir` (created if missing), kept when the job ends.
    pub fn in_dir(dir: impl AsRef<Path>) -> io::Result<Arc<Job>> {
        Self::create(dir.as_ref(), false)
    }

    fn create(dir: &Path, owned_temp: bool) -> io::Result<Arc<Job>> {
        std::fs::create_dir_all(dir)?;
        Ok(Arc::new(Job {
            dir: dir.canonicalize()?,
            owned_temp,
            uploads: Mutex::default(),
            upload_moved: Condvar::new(),
            next_upload: AtomicU64::new(1),
            digests: Mutex::default(),
        }))
    }

    /// The job `MALJAN_JOB_DIR` names, or a fresh temporary one, removed when the job ends.
    pub fn from_env() -> io::Result<Arc<Job>> {
        match std::env::var_os(JOB_DIR_ENV) {
            Some(dir) if !dir.is_empty() => Self::in_dir(PathBuf::from(dir)),
            _ => Self::temporary(),
        }
    }

    /// A fresh temporary job directory, removed when the job ends.
    pub fn temporary() -> io::Result<Arc<Job>> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            "maljan-job-{}-{nanos}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        Self::create(&std::env::temp_dir().join(name), true)
    }

    /// The job's directory (canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub(crate) fn next_upload_id(&self) -> u64 {
        self.next_upload.fetch_add(1, Ordering::Relaxed)
    }

    /// A path a client named, if it is a regular file inside the job's directory: relative
    /// paths are read from the job's directory; `..`, absolute paths elsewhere and symlinks
    /// leading out are refused with the reason.
    pub fn resolve_inside(&self, path: &str) -> Result<PathBuf, String> {
        let named = Path::new(path);
        if named.components().any(|c| c == Component::ParentDir) {
            return Err(format!("{path} is refused: it contains \"..\""));
        }
        let joined = if named.is_absolute() {
            named.to_owned()
        } else {
            self.dir.join(named)
        };
        if !joined.starts_with(&self.dir) {
            return Err(format!(
                "{path} is refused: it is outside this job's directory"
            ));
        }
        let real = joined
            .canonicalize()
            .map_err(|e| format!("{path} cannot be served: {e}"))?;
        if !real.starts_with(&self.dir) {
            return Err(format!(
                "{path} is refused: it leads out of this job's directory"
            ));
        }
        if !real.is_file() {
            return Err(format!("{path} is not a regular file"));
        }
        Ok(real)
    }

    /// Remembers the digest of a file the server has just written and verified, so that
    /// serving it does not read it all again first.
    pub(crate) fn remember_digest(&self, path: &Path, size: u64, sha256: &str) {
        if let Ok(modified) = std::fs::metadata(path).and_then(|m| m.modified()) {
            lock(&self.digests).insert(path.to_owned(), (modified, size, sha256.to_owned()));
        }
    }

    /// The sha256 of a file of the job, cached while its size and modification time hold.
    pub(crate) fn digest_of(&self, path: &Path) -> io::Result<(u64, String)> {
        use sha2::Digest;
        let meta = std::fs::metadata(path)?;
        let modified = meta.modified()?;
        if let Some((m, size, sha)) = lock(&self.digests).get(path)
            && *m == modified
            && *size == meta.len()
        {
            return Ok((*size, sha.clone()));
        }
        let mut hasher = Sha256::new();
        // Read 1 MiB at a time: io::copy alone reads 8 KiB per system call.
        let mut file = io::BufReader::with_capacity(1 << 20, File::open(path)?);
        let size = io::copy(&mut file, &mut hasher)?;
        let sha = format!("{:x}", hasher.finalize());
        lock(&self.digests).insert(path.to_owned(), (modified, size, sha.clone()));
        Ok((size, sha))
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if self.owned_temp {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}
