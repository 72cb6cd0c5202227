//! Path arguments: which reach a server as written, rewritten through its mount, or uploaded.

use std::path::{Component, Path, PathBuf};

/// A server's view of the job's files: `local` is seen by the server at `remote`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
pub struct SampleMount {
    /// The directory on this host.
    pub local: PathBuf,
    /// The same directory as the server sees it.
    pub remote: String,
}

/// How a server is reached, as far as staging is concerned: the transport decides, not
/// the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach<'a> {
    /// A child process on this host: it opens paths itself and is never uploaded to.
    Local,
    /// A server elsewhere, with its view of the job's files when it shares them.
    Remote {
        /// Where the server sees the job's files, if it does.
        sample_mount: Option<&'a SampleMount>,
    },
}

/// What to do with a path argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Staging {
    /// Pass it as written; it is not read.
    AsWritten,
    /// Pass this path instead (the server's view through its sample mount).
    Rewrite(String),
    /// Upload this file (inside the job's directory, canonical) and pass the server's path.
    Upload(PathBuf),
}

/// Removes `.` and resolves `..` without touching the file system.
fn lexical(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::RootDir => out.push("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

impl Staging {
    /// How a path argument reaches a server.
    ///
    /// Only files inside the job's directory are ever staged: anything else, relative paths
    /// included, is passed as written and never read (the check is lexical first, then on the
    /// canonical path, so a symlink out of the job's directory is not followed out). A local
    /// server is never uploaded to; a server with a sample mount gets the path rewritten.
    ///
    /// ```
    /// use std::path::Path;
    /// use maljan_staging::{Reach, Staging};
    /// let job = Path::new("/jobs/42");
    /// assert_eq!(Staging::for_argument(Reach::Remote { sample_mount: None }, job, "/etc/passwd"), Staging::AsWritten);
    /// assert_eq!(Staging::for_argument(Reach::Local, job, "/jobs/42/sample.bin"), Staging::AsWritten);
    /// assert_eq!(Staging::for_argument(Reach::Remote { sample_mount: None }, job, "/jobs/42/../../etc/passwd"), Staging::AsWritten);
    /// ```
    pub fn for_argument(reach: Reach<'_>, job_dir: &Path, argument: &str) -> Staging {
        let candidate = Path::new(argument);
        if !candidate.is_absolute() {
            return Staging::AsWritten;
        }
        let Some(normal) = lexical(candidate) else {
            return Staging::AsWritten;
        };
        if !normal.starts_with(job_dir) {
            return Staging::AsWritten;
        }
        match reach {
            Reach::Local => Staging::AsWritten,
            Reach::Remote {
                sample_mount: Some(mount),
            } => match normal.strip_prefix(&mount.local) {
                Ok(rest) => Staging::Rewrite(format!(
                    "{}/{}",
                    mount.remote.trim_end_matches('/'),
                    rest.display()
                )),
                Err(_) => Staging::AsWritten,
            },
            Reach::Remote { sample_mount: None } => match normal.canonicalize() {
                Ok(real) if real.starts_with(job_dir) && real.is_file() => Staging::Upload(real),
                _ => Staging::AsWritten,
            },
        }
    }
}
