//! Samples, artefacts and reports in the fleet's object store, content-addressed.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use object_store::buffered::BufWriter;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{FleetError, ObjectsSettings};

/// How much of a file is read (and hashed, and sent) at a time.
const CHUNK_BYTES: usize = 1 << 20;

/// A file put into the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFile {
    /// The sha256 of its bytes, in lowercase hex: its name in the store.
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
    /// Whether this put sent it (false: the store held it already).
    pub uploaded: bool,
}

/// The fleet's object store: a sample or an artefact is kept once under its sha256 (a
/// second put of the same bytes sends nothing), a run's report under the run's id. What is
/// read back is checked against the name it was read under.
///
/// ```
/// # async fn demo() -> Result<(), maljan_fleet::FleetError> {
/// use maljan_fleet::{Objects, ObjectsSettings};
/// let objects = Objects::open(&ObjectsSettings::new("file:///tmp/maljan-objects"))?;
/// let stored = objects.put_sample(std::path::Path::new("sample.zip")).await?;
/// objects.fetch_sample(&stored.sha256, std::path::Path::new("/tmp/copy.zip")).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Objects {
    store: Arc<dyn ObjectStore>,
}

fn sample_key(sha256: &str) -> Key {
    Key::from(format!("samples/{sha256}"))
}

fn artefact_key(sha256: &str) -> Key {
    Key::from(format!("artefacts/{sha256}"))
}

fn report_key(run: &str, name: &str) -> Result<Key, FleetError> {
    let plain = |text: &str| {
        !text.is_empty()
            && text.len() <= 128
            && !text.starts_with('.')
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    if !plain(run) || !plain(name) {
        return Err(FleetError::Settings {
            detail: format!("{run:?} / {name:?} is not a run's report"),
            remedy: "name a run by the id `maljan submit` printed".to_owned(),
        });
    }
    Ok(Key::from(format!("reports/{run}/{name}")))
}

/// Whether `text` is a sha256 in lowercase hex: what a key built from it may hold.
fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl Objects {
    /// The store `settings` name.
    pub fn open(settings: &ObjectsSettings) -> Result<Objects, FleetError> {
        Ok(Objects {
            store: settings.open()?,
        })
    }

    /// Any store of the `object_store` crate (an in-memory one in a test, say).
    pub fn from_store(store: Arc<dyn ObjectStore>) -> Objects {
        Objects { store }
    }

    /// Puts the sample at `path` under its sha256, unless the store holds it already.
    pub async fn put_sample(&self, path: &Path) -> Result<StoredFile, FleetError> {
        self.put_file(path, sample_key).await
    }

    /// Puts the artefact at `path` under its sha256, unless the store holds it already.
    pub async fn put_artefact(&self, path: &Path) -> Result<StoredFile, FleetError> {
        self.put_file(path, artefact_key).await
    }

    /// Writes the sample of sha256 `sha256` to `destination`, checked: bytes of another
    /// digest leave no file behind.
    pub async fn fetch_sample(&self, sha256: &str, destination: &Path) -> Result<u64, FleetError> {
        self.fetch_file(sha256, sample_key, destination).await
    }

    /// Writes the artefact of sha256 `sha256` to `destination`, checked as a sample is.
    pub async fn fetch_artefact(
        &self,
        sha256: &str,
        destination: &Path,
    ) -> Result<u64, FleetError> {
        self.fetch_file(sha256, artefact_key, destination).await
    }

    /// Puts one of a run's report files (a worker puts `report.json`; the rest are made
    /// from it).
    pub async fn put_report(&self, run: &str, name: &str, bytes: Bytes) -> Result<(), FleetError> {
        let key = report_key(run, name)?;
        self.store
            .put(&key, PutPayload::from_bytes(bytes))
            .await
            .map(drop)
            .map_err(|source| FleetError::Objects {
                action: "putting",
                key: key.to_string(),
                source,
            })
    }

    /// One of a run's report files, or `None` when the store has none of that name.
    pub async fn report(&self, run: &str, name: &str) -> Result<Option<Bytes>, FleetError> {
        let key = report_key(run, name)?;
        match self.store.get(&key).await {
            Ok(found) => found.bytes().await.map(Some),
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => Err(e),
        }
        .map_err(|source| FleetError::Objects {
            action: "getting",
            key: key.to_string(),
            source,
        })
    }

    /// Whether the store holds the sample of sha256 `sha256`.
    pub async fn has_sample(&self, sha256: &str) -> Result<bool, FleetError> {
        self.exists(&sample_key(sha256)).await
    }

    async fn exists(&self, key: &Key) -> Result<bool, FleetError> {
        match self.store.head(key).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(source) => Err(FleetError::Objects {
                action: "looking up",
                key: key.to_string(),
                source,
            }),
        }
    }

    async fn put_file(
        &self,
        path: &Path,
        key_of: fn(&str) -> Key,
    ) -> Result<StoredFile, FleetError> {
        let read_failed = |source| FleetError::File {
            action: "reading",
            path: path.to_owned(),
            source,
        };
        // Hashed first, so that bytes the store holds already are not sent again.
        let mut file = tokio::fs::File::open(path).await.map_err(read_failed)?;
        let mut hasher = Sha256::new();
        let mut buffer = vec![0u8; CHUNK_BYTES];
        let mut size = 0u64;
        loop {
            let read = file.read(&mut buffer).await.map_err(read_failed)?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
            size += read as u64;
        }
        let sha256 = hex(&hasher.finalize());
        let key = key_of(&sha256);
        if self.exists(&key).await? {
            return Ok(StoredFile {
                sha256,
                size,
                uploaded: false,
            });
        }
        let put_failed = |source| FleetError::Objects {
            action: "putting",
            key: key.to_string(),
            source,
        };
        let mut file = tokio::fs::File::open(path).await.map_err(read_failed)?;
        let mut writer = BufWriter::new(self.store.clone(), key.clone());
        let mut sent = 0u64;
        loop {
            let read = file.read(&mut buffer).await.map_err(read_failed)?;
            if read == 0 {
                break;
            }
            sent += read as u64;
            if let Err(e) = writer.write_all(&buffer[..read]).await {
                let _ = writer.abort().await;
                return Err(put_failed(object_store::Error::Generic {
                    store: "object store",
                    source: Box::new(e),
                }));
            }
        }
        if sent != size {
            let _ = writer.abort().await;
            return Err(read_failed(std::io::Error::other(
                "the file changed while it was being stored",
            )));
        }
        writer.shutdown().await.map_err(|e| {
            put_failed(object_store::Error::Generic {
                store: "object store",
                source: Box::new(e),
            })
        })?;
        Ok(StoredFile {
            sha256,
            size,
            uploaded: true,
        })
    }

    async fn fetch_file(
        &self,
        sha256: &str,
        key_of: fn(&str) -> Key,
        destination: &Path,
    ) -> Result<u64, FleetError> {
        if !is_sha256(sha256) {
            return Err(FleetError::Settings {
                detail: format!("{sha256:?} is not a sha256"),
                remedy: "name a file by the 64 lowercase hex digits of its sha256".to_owned(),
            });
        }
        let key = key_of(sha256);
        let get_failed = |source| FleetError::Objects {
            action: "getting",
            key: key.to_string(),
            source,
        };
        let write_failed = |source| FleetError::File {
            action: "writing",
            path: destination.to_owned(),
            source,
        };
        let found = self.store.get(&key).await.map_err(get_failed)?;
        let mut stream = found.into_stream();
        let mut file = tokio::fs::File::create(destination)
            .await
            .map_err(write_failed)?;
        let mut hasher = Sha256::new();
        let mut size = 0u64;
        let outcome = async {
            while let Some(chunk) = stream.next().await {
                let chunk = chunk.map_err(get_failed)?;
                hasher.update(&chunk);
                size += chunk.len() as u64;
                file.write_all(&chunk).await.map_err(write_failed)?;
            }
            // Flushed, not synced: the store keeps the file durably; a copy lost in a crash
            // is fetched again.
            file.flush().await.map_err(write_failed)
        }
        .await;
        let found = hex(&hasher.finalize());
        let outcome = outcome.and_then(|()| {
            if found == sha256 {
                Ok(size)
            } else {
                Err(FleetError::DigestMismatch {
                    key: key.to_string(),
                    found,
                })
            }
        });
        if outcome.is_err() {
            let _ = tokio::fs::remove_file(destination).await;
        }
        outcome
    }
}

/// Lowercase hex.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut text, b| {
            let _ = write!(text, "{b:02x}");
            text
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use object_store::memory::InMemory;

    #[tokio::test]
    async fn the_same_sample_put_twice_is_sent_once_and_read_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let sample = dir.path().join("sample.bin");
        let bytes: Vec<u8> = (0..3 * CHUNK_BYTES + 17).map(|i| (i % 251) as u8).collect();
        std::fs::write(&sample, &bytes).unwrap();
        let objects = Objects::from_store(Arc::new(InMemory::new()));
        let first = objects.put_sample(&sample).await.unwrap();
        let second = objects.put_sample(&sample).await.unwrap();
        assert!(first.uploaded);
        assert!(!second.uploaded);
        assert_eq!(first.sha256, second.sha256);
        let copy = dir.path().join("copy.bin");
        let size = objects.fetch_sample(&first.sha256, &copy).await.unwrap();
        assert_eq!(size, bytes.len() as u64);
        assert_eq!(std::fs::read(&copy).unwrap(), bytes);
    }

    #[tokio::test]
    async fn bytes_that_are_not_what_their_name_says_leave_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(InMemory::new());
        let forged = "0".repeat(64);
        store
            .put(&sample_key(&forged), PutPayload::from_static(b"not zeros"))
            .await
            .unwrap();
        let objects = Objects::from_store(store);
        let copy = dir.path().join("copy.bin");
        let refused = objects.fetch_sample(&forged, &copy).await.unwrap_err();
        assert!(
            matches!(refused, FleetError::DigestMismatch { .. }),
            "{refused}"
        );
        assert!(!copy.exists());
    }

    proptest::proptest! {
        /// Whatever a caller names a run or a report file, the key stays one level under
        /// the run's reports: no segment climbs out, none is empty.
        #[test]
        fn a_report_key_never_leaves_its_run(run in "\\PC{0,40}", name in "\\PC{0,20}") {
            if let Ok(key) = report_key(&run, &name) {
                let parts: Vec<_> = key.parts().map(|p| p.as_ref().to_owned()).collect();
                proptest::prop_assert_eq!(parts.len(), 3);
                proptest::prop_assert_eq!(parts[0].as_str(), "reports");
                proptest::prop_assert!(parts.iter().all(|p| !p.is_empty() && p != ".." && p != "."));
                proptest::prop_assert!(!parts[1].contains('/') && !parts[2].contains('/'));
            }
        }
    }

    #[tokio::test]
    async fn a_name_that_is_not_a_digest_reaches_no_key() {
        let dir = tempfile::tempdir().unwrap();
        let objects = Objects::from_store(Arc::new(InMemory::new()));
        let refused = objects
            .fetch_sample("../reports/x", &dir.path().join("copy"))
            .await
            .unwrap_err();
        assert!(matches!(refused, FleetError::Settings { .. }), "{refused}");
    }
}
