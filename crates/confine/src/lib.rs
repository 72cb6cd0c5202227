#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

/// How many times an open is tried again when the kernel says a rename elsewhere on the
/// system raced its resolution (`EAGAIN`): such races are brief.
const RACE_RETRIES: usize = 64;

/// Why a path was not opened beneath a root.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// An absolute path that does not name a place beneath the root.
    #[error("{path} is outside {root}")]
    Outside {
        /// The path as named.
        path: String,
        /// The root.
        root: PathBuf,
    },
    /// A `..`, or a symlink, that would lead out of the root.
    #[error("{path} leads out of {root} (through \"..\" or a symlink)")]
    Escapes {
        /// The path as named.
        path: String,
        /// The root.
        root: PathBuf,
    },
    /// A symlink where none is followed (on a write's way, or a `/proc`-style link), or a
    /// loop of them.
    #[error("{path} goes through a symlink, which is not followed here")]
    Symlink {
        /// The path as named.
        path: String,
    },
    /// Nothing by that name.
    #[error("{path} does not exist")]
    NotFound {
        /// The path as named.
        path: String,
    },
    /// Something other than a regular file (a directory, a FIFO, a device, a socket).
    #[error("{path} is not a regular file")]
    NotRegular {
        /// The path as named.
        path: String,
    },
    /// A part of the path that should be a directory is something else (a file).
    #[error("{path} goes through something that is not a directory")]
    NotDirectory {
        /// The path as named.
        path: String,
    },
    /// A file by that name exists already, where a new one was to be made.
    #[error("{path} exists already")]
    Exists {
        /// The path as named.
        path: String,
    },
    /// A path with nothing to open (empty, or only `.`).
    #[error("{path:?} names no file")]
    Empty {
        /// The path as named.
        path: String,
    },
    /// The kernel has no `openat2` (Linux before 5.6, or another system).
    #[error("opening {path} beneath a root needs Linux 5.6 or later (openat2)")]
    Unsupported {
        /// The path as named.
        path: String,
    },
    /// Any other failure of the system call.
    #[error("{path} cannot be opened")]
    Io {
        /// The path as named.
        path: String,
        /// What the system said.
        #[source]
        source: io::Error,
    },
}

impl Refusal {
    /// Whether nothing exists by the name (as opposed to a refusal of the name itself).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Refusal::NotFound { .. })
    }

    /// Whether the name was refused as leading out of the root: outside it, through `..`
    /// or a symlink, or through a link that is not followed.
    pub fn is_escape(&self) -> bool {
        matches!(
            self,
            Refusal::Outside { .. } | Refusal::Escapes { .. } | Refusal::Symlink { .. }
        )
    }
}

/// A directory held open, beneath which paths are resolved.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// let root = maljan_confine::Root::create(dir.path().join("job"))?;
/// let samples = root.create_dirs("samples")?;
/// let mut file = samples.create_new("a.bin")?;
/// std::io::Write::write_all(&mut file, b"bytes")?;
/// assert_eq!(std::fs::read(dir.path().join("job/samples/a.bin"))?, b"bytes");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct Root {
    /// The directory's canonical path, for absolute names and messages.
    path: PathBuf,
    dir: OwnedFd,
}

fn read_flags() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS
}

fn write_flags() -> ResolveFlags {
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS
}

impl Root {
    /// Opens an existing directory as a root.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Root> {
        let path = path.as_ref().canonicalize()?;
        let dir = rustix::fs::open(
            &path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(Root { path, dir })
    }

    /// Creates the directory (and its parents) if missing, and opens it as a root.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Root> {
        std::fs::create_dir_all(path.as_ref())?;
        Self::open(path)
    }

    /// The root's canonical path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The place beneath the root a path names: a relative path as it is, an absolute one
    /// with the root's path taken off its front; `None` for an absolute path elsewhere.
    ///
    /// ```
    /// let dir = tempfile::tempdir()?;
    /// let root = maljan_confine::Root::open(dir.path())?;
    /// let inside = root.path().join("a/b");
    /// assert_eq!(root.beneath(&inside), Some(std::path::Path::new("a/b")));
    /// assert_eq!(root.beneath("a/b".as_ref()), Some(std::path::Path::new("a/b")));
    /// assert_eq!(root.beneath("/elsewhere".as_ref()), None);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn beneath<'p>(&self, named: &'p Path) -> Option<&'p Path> {
        if named.is_absolute() {
            named.strip_prefix(&self.path).ok()
        } else {
            Some(named)
        }
    }

    fn relative<'p>(&self, named: &'p Path) -> Result<&'p Path, Refusal> {
        let relative = self.beneath(named).ok_or_else(|| Refusal::Outside {
            path: named.display().to_string(),
            root: self.path.clone(),
        })?;
        if relative
            .components()
            .all(|c| matches!(c, Component::CurDir))
        {
            return Err(Refusal::Empty {
                path: named.display().to_string(),
            });
        }
        Ok(relative)
    }

    fn refusal(&self, named: &Path, errno: Errno) -> Refusal {
        let path = named.display().to_string();
        match errno {
            Errno::XDEV => Refusal::Escapes {
                path,
                root: self.path.clone(),
            },
            Errno::LOOP => Refusal::Symlink { path },
            Errno::NOENT => Refusal::NotFound { path },
            Errno::EXIST => Refusal::Exists { path },
            Errno::NOSYS => Refusal::Unsupported { path },
            Errno::NOTDIR => Refusal::NotDirectory { path },
            Errno::ISDIR | Errno::NXIO => Refusal::NotRegular { path },
            other => Refusal::Io {
                path,
                source: other.into(),
            },
        }
    }

    /// `openat2` beneath the root, tried again while a rename elsewhere races it.
    fn openat2(
        &self,
        named: &Path,
        flags: OFlags,
        mode: Mode,
        resolve: ResolveFlags,
    ) -> Result<OwnedFd, Refusal> {
        let relative = self.relative(named)?;
        // openat2 refuses flags O_PATH does not take (O_NOCTTY among them).
        let flags = if flags.contains(OFlags::PATH) {
            flags | OFlags::CLOEXEC
        } else {
            flags | OFlags::CLOEXEC | OFlags::NOCTTY
        };
        let mut tries = 0;
        loop {
            match rustix::fs::openat2(self.dir.as_fd(), relative, flags, mode, resolve) {
                Ok(fd) => return Ok(fd),
                Err(Errno::AGAIN | Errno::INTR) if tries < RACE_RETRIES => tries += 1,
                Err(errno) => return Err(self.refusal(named, errno)),
            }
        }
    }

    /// Opens a regular file beneath the root for reading. A symlink is followed while it
    /// stays beneath the root; a FIFO or device is refused without blocking on it.
    pub fn open_file(&self, named: impl AsRef<Path>) -> Result<File, Refusal> {
        let named = named.as_ref();
        let fd = self.openat2(
            named,
            OFlags::RDONLY | OFlags::NONBLOCK,
            Mode::empty(),
            read_flags(),
        )?;
        let file = File::from(fd);
        let regular = file.metadata().map_err(|source| Refusal::Io {
            path: named.display().to_string(),
            source,
        })?;
        if !regular.is_file() {
            return Err(Refusal::NotRegular {
                path: named.display().to_string(),
            });
        }
        Ok(file)
    }

    /// Makes each directory of a relative path beneath the root (those missing), following
    /// no symlink on the way, and opens the last as a root.
    pub fn create_dirs(&self, named: impl AsRef<Path>) -> Result<Root, Refusal> {
        let named = named.as_ref();
        let mut path = self.path.clone();
        let mut dir = self.dir.try_clone().map_err(|source| Refusal::Io {
            path: named.display().to_string(),
            source,
        })?;
        for component in self.relative(named)?.components() {
            let name = match component {
                Component::Normal(name) => name,
                Component::CurDir => continue,
                _ => {
                    return Err(Refusal::Escapes {
                        path: named.display().to_string(),
                        root: self.path.clone(),
                    });
                }
            };
            match rustix::fs::mkdirat(&dir, name, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(errno) => return Err(self.refusal(named, errno)),
            }
            let step = Root {
                path: path.clone(),
                dir,
            };
            dir = step.openat2(
                Path::new(name),
                OFlags::PATH | OFlags::DIRECTORY,
                Mode::empty(),
                write_flags(),
            )?;
            path.push(name);
        }
        Ok(Root { path, dir })
    }

    /// Creates a new file beneath the root for writing: refused when the name exists
    /// (a symlink included) or goes through a symlink.
    pub fn create_new(&self, named: impl AsRef<Path>) -> Result<File, Refusal> {
        let fd = self.openat2(
            named.as_ref(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            Mode::from_raw_mode(0o644),
            write_flags(),
        )?;
        Ok(File::from(fd))
    }

    /// Renames a file of this directory to a name in `to_dir` (this one, or another on the
    /// same filesystem), never replacing anything: both are names directly in their
    /// directories;
    /// when the name is taken the error's kind is [`io::ErrorKind::AlreadyExists`] and
    /// nothing moved.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let root = maljan_confine::Root::create(dir.path()).unwrap();
    /// drop(root.create_new("a").unwrap());
    /// drop(root.create_new("b").unwrap());
    /// let taken = root.rename_new("a", &root, "b").unwrap_err();
    /// assert_eq!(taken.kind(), std::io::ErrorKind::AlreadyExists);
    /// root.rename_new("a", &root, "c").unwrap();
    /// ```
    pub fn rename_new(
        &self,
        from: impl AsRef<Path>,
        to_dir: &Root,
        to: impl AsRef<Path>,
    ) -> io::Result<()> {
        let (from, to) = (single_name(from.as_ref())?, single_name(to.as_ref())?);
        rustix::fs::renameat_with(
            &self.dir,
            from,
            &to_dir.dir,
            to,
            rustix::fs::RenameFlags::NOREPLACE,
        )?;
        Ok(())
    }

    /// Makes a new directory directly in this one and opens it as a root: refused when the
    /// name exists (a symlink included).
    pub fn create_dir(&self, name: impl AsRef<Path>) -> Result<Root, Refusal> {
        let named = name.as_ref();
        let name = single_name(named).map_err(|_| Refusal::Escapes {
            path: named.display().to_string(),
            root: self.path.clone(),
        })?;
        rustix::fs::mkdirat(&self.dir, name, Mode::from_raw_mode(0o755))
            .map_err(|errno| self.refusal(named, errno))?;
        let dir = self.openat2(
            name,
            OFlags::PATH | OFlags::DIRECTORY,
            Mode::empty(),
            write_flags(),
        )?;
        Ok(Root {
            path: self.path.join(name),
            dir,
        })
    }

    /// Removes a file directly in this directory (a symlink is removed, not followed).
    pub fn remove_file(&self, name: impl AsRef<Path>) -> io::Result<()> {
        let name = single_name(name.as_ref())?;
        rustix::fs::unlinkat(&self.dir, name, rustix::fs::AtFlags::empty())?;
        Ok(())
    }

    /// The path of a name beneath the root, for messages and answers.
    pub fn display_path(&self, named: &Path) -> PathBuf {
        match self.beneath(named) {
            Some(relative) => self.path.join(relative),
            None => named.to_owned(),
        }
    }
}

/// A name directly in a directory: one normal component.
fn single_name(name: &Path) -> io::Result<&Path> {
    let mut components = name.components();
    match (components.next(), components.next()) {
        (Some(Component::Normal(_)), None) => Ok(name),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} is not a single file name", name.display()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_is_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            dir.path().join("fifo"),
            Mode::from_raw_mode(0o600),
        )
        .unwrap();
        let root = Root::open(dir.path()).unwrap();
        assert!(matches!(
            root.open_file("fifo"),
            Err(Refusal::NotRegular { .. })
        ));
        assert!(matches!(root.open_file("."), Err(Refusal::Empty { .. })));
    }

    #[test]
    fn writes_follow_no_symlink_and_never_replace_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("samples")).unwrap();
        std::fs::write(dir.path().join("taken"), "mine").unwrap();
        let root = Root::open(dir.path()).unwrap();
        let refusal = root.create_dirs("samples/x").unwrap_err();
        assert!(refusal.is_escape(), "{refusal:?}");
        assert!(root.create_new("samples/a").unwrap_err().is_escape());
        assert!(matches!(
            root.create_new("taken"),
            Err(Refusal::Exists { .. })
        ));
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        let made = root.create_dirs("a/./b").unwrap();
        assert_eq!(made.path(), root.path().join("a/b"));
        made.create_new("c").unwrap();
        made.rename_new("c", &made, "d").unwrap();
        assert!(made.rename_new("d", &made, "../e").is_err());
        assert!(matches!(made.create_dir("d"), Err(Refusal::Exists { .. })));
        assert_eq!(
            made.create_dir("e").unwrap().path(),
            root.path().join("a/b/e")
        );
        made.remove_file("d").unwrap();
        assert!(made.open_file("d").unwrap_err().is_not_found());
    }
}
