//! The artefact store: files taken from servers, named by their digest, with where each came
//! from.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Where a file in the store came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// The step of the run that produced it, when there is one.
    pub step: Option<String>,
    /// The server.
    pub server: String,
    /// The tool.
    pub tool: String,
}

/// A file in the store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredArtefact {
    /// Its sha256, lowercase hex: also its file name in the store.
    pub sha256: String,
    /// Its size.
    pub size: u64,
    /// Its name, as the tool gave it.
    pub name: String,
    /// Where it came from.
    pub origin: Origin,
    /// Where it is.
    pub path: PathBuf,
}

/// A job's artefact store: a directory of files named by their sha256, each written to a
/// temporary file first and renamed into place only once complete, with an index (JSON
/// Lines) of each file's name and origin.
///
/// ```
/// use maljan_staging::{ArtefactStore, Origin};
/// let dir = tempfile::tempdir().unwrap();
/// let store = ArtefactStore::open(dir.path().join("artefacts")).unwrap();
/// let source = dir.path().join("a.txt");
/// std::fs::write(&source, "hello world").unwrap();
/// let origin = Origin { step: None, server: "sidecar".into(), tool: "unpack".into() };
/// let stored = store.add_file(&source, "a.txt", origin).unwrap();
/// assert_eq!(stored.sha256, "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9");
/// assert_eq!(std::fs::read(&stored.path).unwrap(), b"hello world");
/// assert_eq!(store.index().unwrap().len(), 1);
/// ```
#[derive(Debug)]
pub struct ArtefactStore {
    root: PathBuf,
    index: Mutex<()>,
    next_temp: AtomicU64,
    /// The most bytes downloads may bring into the store (none by default).
    byte_cap: AtomicU64,
    /// The bytes downloads brought in so far.
    downloaded: AtomicU64,
}

/// Free space a download leaves on the store's filesystem: a file that would eat into it is
/// refused at its first answer.
pub const FREE_SPACE_RESERVE: u64 = 256 * 1024 * 1024;

/// A file being written into the store; removed unless committed.
#[derive(Debug)]
pub struct IncomingFile {
    path: PathBuf,
    committed: bool,
}

impl IncomingFile {
    /// Where it is being written.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for IncomingFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.path);
        }
    }
}

const INDEX: &str = "index.jsonl";

impl ArtefactStore {
    /// Opens (creating) the store in `root`.
    pub fn open(root: impl Into<PathBuf>) -> io::Result<Self> {
        let root = root.into();
        fs::create_dir_all(&root)?;
        Ok(ArtefactStore {
            root,
            index: Mutex::new(()),
            next_temp: AtomicU64::new(0),
            byte_cap: AtomicU64::new(u64::MAX),
            downloaded: AtomicU64::new(0),
        })
    }

    /// Caps the bytes downloads may bring into the store from now on (a run's
    /// `core.run.max_taken_bytes`).
    pub fn set_byte_cap(&self, bytes: u64) {
        self.byte_cap.store(bytes, Ordering::Release);
    }

    /// How many bytes a download may still bring in: the store's filesystem's free space
    /// less [`FREE_SPACE_RESERVE`], and what is left of the cap.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let store = maljan_staging::ArtefactStore::open(dir.path()).unwrap();
    /// store.set_byte_cap(1000);
    /// assert!(store.room() <= 1000);
    /// ```
    pub fn room(&self) -> u64 {
        let free = rustix::fs::statvfs(&self.root)
            .map(|fs| fs.f_bavail.saturating_mul(fs.f_frsize))
            .unwrap_or(u64::MAX);
        let left_of_cap = self
            .byte_cap
            .load(Ordering::Acquire)
            .saturating_sub(self.downloaded.load(Ordering::Acquire));
        free.saturating_sub(FREE_SPACE_RESERVE).min(left_of_cap)
    }

    /// Counts `bytes` a download brought in against the cap.
    pub(crate) fn count_downloaded(&self, bytes: u64) {
        self.downloaded.fetch_add(bytes, Ordering::AcqRel);
    }

    /// The store's directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The sha256 a file of the store is named by, when `path` is one: a file directly in
    /// the store named by 64 lowercase hex digits. It is what the file held when it was
    /// stored, not a check of what it holds now.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use maljan_staging::ArtefactStore;
    /// let store = ArtefactStore::open(dir.path()).unwrap();
    /// let sha = "ab".repeat(32);
    /// assert_eq!(store.named_digest(&store.root().join(&sha)), Some(sha.as_str()));
    /// assert_eq!(store.named_digest(&store.root().join("index.jsonl")), None);
    /// assert_eq!(store.named_digest(&dir.path().join("elsewhere").join(&sha)), None);
    /// ```
    pub fn named_digest<'p>(&self, path: &'p Path) -> Option<&'p str> {
        if path.parent() != Some(self.root.as_path()) {
            return None;
        }
        let name = path.file_name()?.to_str()?;
        let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
        (name.len() == 64 && name.bytes().all(hex)).then_some(name)
    }

    /// A new temporary file in the store, removed when dropped uncommitted.
    pub fn incoming(&self) -> io::Result<(IncomingFile, File)> {
        let n = self.next_temp.fetch_add(1, Ordering::Relaxed);
        let path = self
            .root
            .join(format!(".incoming-{}-{n}", std::process::id()));
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok((
            IncomingFile {
                path,
                committed: false,
            },
            file,
        ))
    }

    /// Renames a complete, verified file into place under its digest and indexes it.
    pub fn commit(
        &self,
        mut incoming: IncomingFile,
        sha256: &str,
        size: u64,
        name: &str,
        origin: Origin,
    ) -> io::Result<StoredArtefact> {
        let path = self.root.join(sha256);
        fs::rename(&incoming.path, &path)?;
        incoming.committed = true;
        let stored = StoredArtefact {
            sha256: sha256.to_owned(),
            size,
            name: name.to_owned(),
            origin,
            path,
        };
        let _one_writer = self.index.lock().unwrap_or_else(|p| p.into_inner());
        let mut line = serde_json::to_vec(&stored).map_err(io::Error::other)?;
        line.push(b'\n');
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join(INDEX))?
            .write_all(&line)?;
        Ok(stored)
    }

    /// Copies a local file into the store while hashing it.
    pub fn add_file(
        &self,
        source: &Path,
        name: &str,
        origin: Origin,
    ) -> io::Result<StoredArtefact> {
        self.add_reader(File::open(source)?, name, origin)
    }

    /// Copies what `input` reads (a file already opened, say) into the store while hashing
    /// it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use maljan_staging::{ArtefactStore, Origin};
    /// let store = ArtefactStore::open(dir.path()).unwrap();
    /// let origin = Origin { step: None, server: "s".into(), tool: "t".into() };
    /// let stored = store.add_reader(&b"abc"[..], "abc.txt", origin).unwrap();
    /// assert_eq!(stored.size, 3);
    /// ```
    pub fn add_reader(
        &self,
        mut input: impl Read,
        name: &str,
        origin: Origin,
    ) -> io::Result<StoredArtefact> {
        let (incoming, mut output) = self.incoming()?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut size = 0u64;
        loop {
            let n = input.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            output.write_all(&buf[..n])?;
            size += n as u64;
        }
        output.sync_all()?;
        self.commit(
            incoming,
            &format!("{:x}", hasher.finalize()),
            size,
            name,
            origin,
        )
    }

    /// Every file indexed so far.
    pub fn index(&self) -> io::Result<Vec<StoredArtefact>> {
        let text = match fs::read_to_string(self.root.join(INDEX)) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect())
    }
}
