//! Path arguments opened beneath the server's roots: the job's directory, and the
//! directories the operator named at start. Nothing is looked up by name twice.

use std::fs::File;
use std::path::{Path, PathBuf};

use maljan_confine::{Refusal, Root};
use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};

/// The environment variable naming directories, besides the job's, whose files the server
/// may read (separated by `:`, as `PATH` is).
pub const ROOTS_ENV: &str = "MALJAN_ROOTS";

/// A file a client named, opened beneath the server's roots.
///
/// The handler reads this [`File`]: it is the one the name resolved to when it was checked,
/// whatever has been done to the name since.
#[derive(Debug)]
pub struct ConfinedFile {
    /// The opened file.
    pub file: File,
    /// Where it was found (for answers and messages).
    pub path: PathBuf,
    /// Its size when it was opened.
    pub size: u64,
}

/// Opens `named` beneath the first of `roots` it can belong to: an absolute path beneath
/// the root it starts with (the deepest, when roots nest), a relative one beneath the first
/// root (the job's directory).
pub(crate) fn open_beneath(roots: &[&Root], named: &str) -> Result<ConfinedFile, ToolFailure> {
    let path = Path::new(named);
    let root = if path.is_absolute() {
        roots
            .iter()
            .filter(|r| r.beneath(path).is_some())
            .max_by_key(|r| r.path().as_os_str().len())
    } else {
        roots.first()
    };
    let Some(root) = root else {
        return Err(refused(
            named,
            "it is outside the directories this server reads",
        ));
    };
    let file = root.open_file(path).map_err(|refusal| match refusal {
        Refusal::NotFound { .. } => ToolFailure::new(
            ErrorCode::NoSuchFile,
            format!("{named} does not exist"),
            Some(
                "check the path; it is read on the server's host, beneath the job's directory"
                    .to_owned(),
            ),
        ),
        other => refused(named, &other.to_string()),
    })?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    Ok(ConfinedFile {
        file,
        path: root.display_path(path),
        size,
    })
}

pub(crate) fn refused(named: &str, why: &str) -> ToolFailure {
    ToolFailure::new(
        ErrorCode::BadArgument,
        format!("{named} is refused: {why}"),
        Some(
            "pass a file inside the job's directory (stage it into the job first), or start \
             the server with its directory among its roots (MALJAN_ROOTS)"
                .to_owned(),
        ),
    )
}

/// The directories `MALJAN_ROOTS` names, opened.
pub(crate) fn roots_from_env() -> std::io::Result<Vec<Root>> {
    let Some(value) = std::env::var_os(ROOTS_ENV) else {
        return Ok(Vec::new());
    };
    std::env::split_paths(&value)
        .filter(|p| !p.as_os_str().is_empty())
        .map(|p| {
            Root::open(&p).map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "{ROOTS_ENV} names {}, which cannot be opened: {e}",
                        p.display()
                    ),
                )
            })
        })
        .collect()
}
