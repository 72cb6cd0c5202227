//! A server's job directory: where it writes, what it may read, its disk budget and the
//! uploads under way.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Instant, SystemTime};

use maljan_confine::Root;
use sha2::Sha256;

use crate::file_primitives::upload_writer::UploadWriter;

/// The environment variable naming the job directory a client assigned to this server.
pub const JOB_DIR_ENV: &str = "MALJAN_JOB_DIR";

/// Where uploads in progress are written, inside the job's directory: apart from
/// `samples/`, so no name a client chooses can stand for one of them.
pub(crate) const INCOMING_DIR: &str = ".incoming";

/// An upload in progress (`put_sample_begin` … `put_sample_finish`).
#[derive(Debug)]
pub(crate) struct Upload {
    pub(crate) name: String,
    pub(crate) size: u64,
    /// The digest announced when it began; when none was, `put_sample_finish` is given it.
    pub(crate) sha256: Option<String>,
    /// The bytes received in turn (handed to `writer`).
    pub(crate) received: u64,
    /// Its file's name in [`INCOMING_DIR`].
    pub(crate) temp: String,
    /// Writes and hashes its file.
    pub(crate) writer: UploadWriter,
    /// Why a chunk in turn was refused: the upload cannot complete, and chunks waiting
    /// for their turn are refused with it at once.
    pub(crate) failed: Option<String>,
    /// How many chunks wait for their turn.
    pub(crate) waiting: usize,
    /// When a call last moved it on: an upload left idle too long is dropped.
    pub(crate) touched: Instant,
}

/// What identifies a file's content for the digest cache: device, inode, size, mtime.
type FileStamp = (u64, u64, u64, SystemTime);

/// The directory of the job this server works for: where uploads are stored and tools write
/// their files, and the only place `get_file` serves from.
///
/// Over stdio there is one job per process: the directory the client names in
/// `MALJAN_JOB_DIR`, or a fresh temporary directory removed when the job ends. The
/// directory is held open: every path beneath it is resolved against it (see
/// [`maljan_confine::Root`]).
#[derive(Debug)]
pub struct JobDir {
    root: OnceLock<Root>,
    /// Serializes the making of a job directory made on first use.
    making: Mutex<()>,
    /// Whether the directory is this job's own, made for it and removed with it.
    owned_temp: bool,
    pub(crate) uploads: Mutex<HashMap<u64, Upload>>,
    /// Signalled whenever an upload moves on (a chunk stored or refused, an upload ended):
    /// chunks that arrived ahead of their turn wait on it.
    pub(crate) upload_moved: Condvar,
    next_upload: AtomicU64,
    digests: Mutex<HashMap<FileStamp, String>>,
    /// Bytes of the job's disk budget in use: files the kit wrote for it, and room held for
    /// writes under way (uploads in progress, an unpack).
    disk_used: AtomicU64,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn stamp(file: &File) -> io::Result<FileStamp> {
    let meta = file.metadata()?;
    Ok((meta.dev(), meta.ino(), meta.len(), meta.modified()?))
}

impl JobDir {
    /// A job in `dir` (created if missing), kept when the job ends.
    pub fn in_dir(dir: impl AsRef<Path>) -> io::Result<Arc<JobDir>> {
        Ok(Arc::new(Self::with_root(
            Root::create(dir.as_ref())?,
            false,
        )))
    }

    fn unmade(owned_temp: bool) -> JobDir {
        JobDir {
            root: OnceLock::new(),
            making: Mutex::new(()),
            owned_temp,
            uploads: Mutex::default(),
            upload_moved: Condvar::new(),
            next_upload: AtomicU64::new(1),
            digests: Mutex::default(),
            disk_used: AtomicU64::new(0),
        }
    }

    fn with_root(root: Root, owned_temp: bool) -> JobDir {
        let job = Self::unmade(owned_temp);
        let _ = job.root.set(root);
        job
    }

    /// The job `MALJAN_JOB_DIR` names, or a fresh temporary one, removed when the job ends.
    pub fn from_env() -> io::Result<Arc<JobDir>> {
        match std::env::var_os(JOB_DIR_ENV) {
            Some(dir) if !dir.is_empty() => Self::in_dir(PathBuf::from(dir)),
            _ => Self::temporary(),
        }
    }

    /// A fresh temporary job directory (a new name under the system's temporary directory,
    /// only its owner may enter), removed when the job ends.
    pub fn temporary() -> io::Result<Arc<JobDir>> {
        Ok(Arc::new(Self::with_root(make_temporary()?, true)))
    }

    /// A temporary job whose directory is made when it is first used, removed when the job
    /// ends: a call that writes no file and opens none (most calls of a stateless server)
    /// costs no directory.
    #[cfg(feature = "http")]
    pub(crate) fn temporary_on_first_use() -> Arc<JobDir> {
        Arc::new(Self::unmade(true))
    }

    /// The job's directory (canonical), made now if it is made on first use.
    pub fn dir(&self) -> io::Result<&Path> {
        self.root().map(Root::path)
    }

    /// The job's directory, held open: where a tool writes its files
    /// ([`Root::create_dirs`], [`Root::create_new`]); made now if it is made on first use.
    pub fn root(&self) -> io::Result<&Root> {
        if let Some(root) = self.root.get() {
            return Ok(root);
        }
        let _making = lock(&self.making);
        if let Some(root) = self.root.get() {
            return Ok(root);
        }
        let root = make_temporary()?;
        Ok(self.root.get_or_init(|| root))
    }

    /// The directory if it has been made.
    pub(crate) fn made(&self) -> Option<&Root> {
        self.root.get()
    }

    pub(crate) fn next_upload_id(&self) -> u64 {
        self.next_upload.fetch_add(1, Ordering::Relaxed)
    }

    /// Remembers the digest of a file the server has just written and verified, so that
    /// serving it does not read it all again first.
    pub(crate) fn remember_digest(&self, file: &File, sha256: &str) {
        if let Ok(stamp) = stamp(file) {
            lock(&self.digests).insert(stamp, sha256.to_owned());
        }
    }

    /// The size and sha256 of an opened file of the job, cached while its inode, size and
    /// modification time hold.
    pub(crate) fn digest_of(&self, mut file: &File) -> io::Result<(u64, String)> {
        use sha2::Digest;
        let stamp = stamp(file)?;
        if let Some(sha) = lock(&self.digests).get(&stamp) {
            return Ok((stamp.2, sha.clone()));
        }
        let mut hasher = Sha256::new();
        // Read 1 MiB at a time: io::copy alone reads 8 KiB per system call.
        let mut reader = io::BufReader::with_capacity(1 << 20, &mut file);
        let size = io::copy(&mut reader, &mut hasher)?;
        let sha = format!("{:x}", hasher.finalize());
        lock(&self.digests).insert(stamp, sha.clone());
        Ok((size, sha))
    }

    /// Takes `bytes` of a budget of `limit` for a write; `Err` holds how many are left.
    pub(crate) fn take_disk(&self, bytes: u64, limit: u64) -> Result<(), u64> {
        self.disk_used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|total| *total <= limit)
            })
            .map(drop)
            .map_err(|used| limit.saturating_sub(used))
    }

    /// Takes up to `wanted` bytes of a budget of `limit`, fewer when fewer are left; how
    /// many it took.
    pub(crate) fn take_disk_up_to(&self, wanted: u64, limit: u64) -> u64 {
        let mut taken = 0;
        let _ = self
            .disk_used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                taken = wanted.min(limit.saturating_sub(used));
                Some(used + taken)
            });
        taken
    }

    /// Gives back `bytes` taken for a write that did not happen.
    pub(crate) fn release_disk(&self, bytes: u64) {
        let _ = self
            .disk_used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(bytes))
            });
    }

    /// How many bytes of its disk budget the job uses (files written and writes under way).
    pub fn disk_used(&self) -> u64 {
        self.disk_used.load(Ordering::Acquire)
    }

    /// Removes an upload's temporary file.
    pub(crate) fn discard_incoming(&self, temp: &str) {
        if let Some(Ok(dir)) = self.made().map(|root| root.create_dirs(INCOMING_DIR)) {
            let _ = dir.remove_file(temp);
        }
    }

    /// Removes a temporary job directory now, as its session ends: a call task that
    /// answered may hold the job a moment longer, and the session's files must not outlive
    /// it by that moment. (Dropping the job removes it too.)
    #[cfg(feature = "http")]
    pub(crate) fn remove_now(&self) {
        if let (true, Some(root)) = (self.owned_temp, self.made()) {
            let _ = std::fs::remove_dir_all(root.path());
        }
    }
}

impl Drop for JobDir {
    fn drop(&mut self) {
        let uploads = std::mem::take(&mut *lock(&self.uploads));
        for upload in uploads.into_values() {
            self.discard_incoming(&upload.temp);
        }
        if let (true, Some(root)) = (self.owned_temp, self.made()) {
            let _ = std::fs::remove_dir_all(root.path());
        }
    }
}

/// A new directory under the system's temporary directory, made only if the name was free
/// and entered only by its owner, so that nobody else can plant or read a job's files.
fn make_temporary() -> io::Result<Root> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("maljan-job-")
        .permissions(std::fs::Permissions::from_mode(0o700))
        .tempdir()?;
    let root = Root::open(dir.path())?;
    // Removed by the job when it ends, not by `TempDir` when this function returns.
    let _ = dir.keep();
    Ok(root)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_temporary_job_is_a_new_directory_only_its_owner_may_enter_and_ends_with_the_job() {
        let job = JobDir::temporary().unwrap();
        let dir = job.dir().unwrap().to_path_buf();
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
        assert_ne!(dir, JobDir::temporary().unwrap().dir().unwrap());
        drop(job);
        assert!(!dir.exists());
    }

    #[cfg(feature = "http")]
    #[test]
    fn a_job_made_on_first_use_costs_no_directory_until_a_file_is_wanted() {
        let unused = JobDir::temporary_on_first_use();
        assert!(unused.made().is_none());
        drop(unused);

        let used = JobDir::temporary_on_first_use();
        let both = std::thread::scope(|scope| {
            let first = scope.spawn(|| used.dir().unwrap().to_path_buf());
            let second = scope.spawn(|| used.dir().unwrap().to_path_buf());
            (first.join().unwrap(), second.join().unwrap())
        });
        assert_eq!(both.0, both.1, "one directory, whoever asks first");
        assert!(both.0.is_dir());
        drop(used);
        assert!(!both.0.exists());
    }
}
