use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
use maljan_sidecar_kit::{Arguments, ToolContext, ToolResult, ToolSpec};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{io_failure, open_sample};

/// The most members unpacked from one archive.
const MAX_MEMBERS: usize = 10_000;
/// The most bytes unpacked from one archive, by default: an archive is hostile input.
const DEFAULT_MAX_BYTES: u64 = 1024 * 1024 * 1024;

pub(crate) fn unpack_spec() -> ToolSpec {
    ToolSpec::new(
        "unpack",
        "Writes the members of a ZIP archive into the job's directory and names them in files",
    )
    .required_string("path", "the archive")
    .optional(
        "max_bytes",
        json!({"type": "integer", "minimum": 0, "description": "the most bytes to unpack (1 GiB)"}),
    )
    .timeout_s(300.0)
}

fn failed(e: impl std::fmt::Display) -> ToolFailure {
    ToolFailure::new(
        ErrorCode::ToolFailed,
        format!("unpacking failed: {e}"),
        None,
    )
}

/// A fresh directory for this archive's members inside the job's directory.
fn output_dir(job_dir: &Path, archive: &str) -> Result<PathBuf, ToolFailure> {
    let stem = Path::new(archive)
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| !s.is_empty() && !s.starts_with('.'))
        .unwrap_or("archive");
    let parent = job_dir.join("unpacked");
    std::fs::create_dir_all(&parent).map_err(failed)?;
    for n in 1.. {
        let dir = parent.join(format!("{stem}-{n}"));
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(failed(e)),
        }
    }
    unreachable!("the directory numbers are unbounded")
}

/// Copies at most `limit` bytes, hashing them; `None` when the member is longer.
fn copy_hashed(
    mut from: impl Read,
    to: &mut File,
    limit: u64,
) -> io::Result<Option<(u64, String)>> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        let n = from.read(&mut buf)?;
        if n == 0 {
            return Ok(Some((total, format!("{:x}", hasher.finalize()))));
        }
        total += n as u64;
        if total > limit {
            return Ok(None);
        }
        hasher.update(&buf[..n]);
        to.write_all(&buf[..n])?;
    }
}

/// Unpacks a ZIP archive into the job's directory. Members whose names would escape the
/// output directory (absolute, `..`) and symbolic links are refused and reported; the
/// member count and the unpacked bytes are bounded.
pub(crate) fn unpack(args: &Arguments, ctx: &ToolContext) -> ToolResult {
    let path = args.string("path")?;
    let max_bytes = args.optional_u64("max_bytes")?.unwrap_or(DEFAULT_MAX_BYTES);
    let file = open_sample(path)?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| {
        ToolFailure::new(
            ErrorCode::UnsupportedFormat,
            format!("{path} is not a ZIP archive this tool reads: {e}"),
            Some("pass a ZIP archive".to_owned()),
        )
    })?;
    let out = output_dir(ctx.job.dir(), path)?;
    let mut files: Vec<Value> = Vec::new();
    let mut refused: Vec<Value> = Vec::new();
    let mut remaining = max_bytes;
    let mut stopped = None;
    for index in 0..archive.len() {
        if index >= MAX_MEMBERS {
            stopped = Some(format!("stopped after {MAX_MEMBERS} members"));
            break;
        }
        let mut member = archive.by_index(index).map_err(failed)?;
        let name = match member.name() {
            Ok(name) => name.into_owned(),
            Err(e) => {
                refused.push(json!({"name": format!("member {index}"), "reason": format!("its name is unreadable: {e}")}));
                continue;
            }
        };
        if member.is_symlink() {
            refused
                .push(json!({"name": name, "reason": "a symbolic link; links are not unpacked"}));
            continue;
        }
        if name.starts_with(['/', '\\'])
            || name.get(1..3) == Some(":\\")
            || name.get(1..3) == Some(":/")
        {
            refused.push(json!({"name": name, "reason": "an absolute name; members are unpacked only under the output directory"}));
            continue;
        }
        let Some(relative) = member.enclosed_name() else {
            refused.push(
                json!({"name": name, "reason": "the name would escape the output directory"}),
            );
            continue;
        };
        let dest = out.join(relative);
        if member.is_dir() {
            std::fs::create_dir_all(&dest).map_err(failed)?;
            continue;
        }
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(failed)?;
        }
        let mut target =
            File::create(&dest).map_err(|e| io_failure(&dest.display().to_string(), &e))?;
        match copy_hashed(&mut member, &mut target, remaining).map_err(failed)? {
            Some((size, sha256)) => {
                remaining -= size;
                files.push(json!({"path": dest.display().to_string(), "name": name,
                    "size": size, "sha256": sha256}));
            }
            None => {
                drop(target);
                let _ = std::fs::remove_file(&dest);
                stopped = Some(format!(
                    "stopped at {name}: more than {max_bytes} bytes unpacked"
                ));
                break;
            }
        }
    }
    Ok(json!({
        "path": path,
        "directory": out.display().to_string(),
        "count": files.len(),
        "files": files,
        "refused": refused,
        "stopped": stopped,
    }))
}
