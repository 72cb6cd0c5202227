//! `unpack`: an archive's members written into the job, bounded in count, size and depth,
//! names confined to the server's directory.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{BufReader, Read, Seek, Write};
use std::path::Path;

use maljan_confine::{Refusal, Root};
use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
use maljan_sidecar_kit::{Arguments, ToolContext, ToolResult, ToolSpec};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

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

/// How many other names a duplicate member is tried under (`NAME (2)`, `NAME (3)`, …).
const MAX_DUPLICATE_NAMES: usize = 100;

fn failed(e: impl std::fmt::Display) -> ToolFailure {
    ToolFailure::new(
        ErrorCode::ToolFailed,
        format!("unpacking failed: {e}"),
        None,
    )
}

/// A fresh directory for this archive's members, `unpacked/STEM-N` in the job's directory,
/// made beneath it without following any symlink.
fn output_dir(job: &Root, archive: &str) -> Result<Root, ToolFailure> {
    let stem = Path::new(archive)
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| !s.is_empty() && !s.starts_with('.'))
        .unwrap_or("archive");
    let parent = job.create_dirs("unpacked").map_err(failed)?;
    for n in 1.. {
        match parent.create_dir(format!("{stem}-{n}")) {
            Ok(dir) => return Ok(dir),
            Err(Refusal::Exists { .. }) => continue,
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
    ctx: &ToolContext,
) -> Result<Option<(u64, String)>, String> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        if ctx.is_cancelled() {
            return Err("the call was cancelled".to_owned());
        }
        let n = from
            .read(&mut buf)
            .map_err(|e| format!("it cannot be read from the archive: {e}"))?;
        if n == 0 {
            return Ok(Some((total, format!("{:x}", hasher.finalize()))));
        }
        total += n as u64;
        if total > limit {
            return Ok(None);
        }
        hasher.update(&buf[..n]);
        to.write_all(&buf[..n])
            .map_err(|e| format!("it cannot be written: {e}"))?;
    }
}

/// A new file for a member in `dir`: under its own name, or, when an earlier member took
/// that name, under `NAME (2)`, `NAME (3)`, … (the name it was kept under is returned).
fn create_member_file(dir: &Root, name: &OsStr) -> Result<(OsString, File), String> {
    for n in 1..=MAX_DUPLICATE_NAMES {
        let candidate = if n == 1 {
            name.to_owned()
        } else {
            let mut other = name.to_owned();
            other.push(format!(" ({n})"));
            other
        };
        match dir.create_new(&candidate) {
            Ok(file) => return Ok((candidate, file)),
            Err(Refusal::Exists { .. }) => continue,
            Err(e) => return Err(e.to_string()),
        }
    }
    Err(format!(
        "{MAX_DUPLICATE_NAMES} members already have this name"
    ))
}

/// How many members the archive's end record states (ZIP64 aside), read from its last
/// 64 KiB: the ZIP reader keeps one member per name, so more stated than read means
/// members shadowed by a later one of the same name.
fn stated_members(file: &File) -> Option<u64> {
    use std::os::unix::fs::FileExt;
    let len = file.metadata().ok()?.len();
    let tail_len = len.min(65_557);
    let mut tail = vec![0u8; tail_len as usize];
    file.read_exact_at(&mut tail, len - tail_len).ok()?;
    let at = tail
        .windows(4)
        .rposition(|w| w == [0x50, 0x4b, 0x05, 0x06])?;
    let count = tail.get(at + 10..at + 12)?;
    Some(u64::from(u16::from_le_bytes([count[0], count[1]])))
}

/// What became of one member.
enum Unpacked {
    File(Value),
    Directory,
    Refused(String),
    /// Past the byte limit: nothing more is unpacked.
    OverLimit,
}

/// Unpacks a ZIP archive into the job's directory, member by member: a member that cannot
/// be written is refused and reported with its reason (an absolute name, one that escapes,
/// a link, `.`, a name that clashes with an earlier file or directory), a duplicate name is
/// kept under a distinct one and reported, and the rest go on. The member count and the
/// unpacked bytes are bounded.
pub(crate) fn unpack(args: &Arguments, ctx: &ToolContext) -> ToolResult {
    let path = args.string("path")?;
    let wanted = args.optional_u64("max_bytes")?.unwrap_or(DEFAULT_MAX_BYTES);
    let file = ctx.open(path)?.file;
    // What is unpacked counts against the job's disk budget: at most what is left of it
    // is held for this archive, and what was not written goes back.
    let room = ctx.reserve_disk(wanted);
    if room.bytes() == 0 && wanted > 0 {
        return Err(ctx.over_budget(wanted, 0));
    }
    let max_bytes = room.bytes();
    let budget_bound = max_bytes < wanted;
    let stated = stated_members(&file);
    // The same open file (no second lookup by name), for the pass over local headers.
    let again = file.try_clone().map_err(failed)?;
    let mut archive = zip::ZipArchive::new(file).map_err(|e| {
        ToolFailure::new(
            ErrorCode::UnsupportedFormat,
            format!("{path} is not a ZIP archive this tool reads: {e}"),
            Some("pass a ZIP archive".to_owned()),
        )
    })?;
    let mut report = Report {
        out: output_dir(ctx.job.root().map_err(failed)?, path)?,
        files: Vec::new(),
        refused: Vec::new(),
        stopped: None,
        remaining: max_bytes,
        max_bytes,
        members: 0,
    };
    for index in 0..archive.len() {
        ctx.check_cancelled()?;
        let member = archive.by_index(index);
        if !report.take(member, index, ctx) {
            break;
        }
    }
    if report.stopped.is_none() && stated.is_some_and(|n| n != 0xffff && n > archive.len() as u64) {
        unpack_shadowed(&mut archive, again, &mut report, ctx)?;
    }
    room.keep(max_bytes - report.remaining);
    if budget_bound && let Some(stopped) = &mut report.stopped {
        stopped.push_str(" (what was left of the job's disk budget)");
    }
    Ok(json!({
        "path": path,
        "directory": report.out.path().display().to_string(),
        "count": report.files.len(),
        "files": report.files,
        "refused": report.refused,
        "stopped": report.stopped,
    }))
}

/// What an unpack wrote, refused and why it stopped, as it goes.
struct Report {
    out: Root,
    files: Vec<Value>,
    refused: Vec<Value>,
    stopped: Option<String>,
    remaining: u64,
    max_bytes: u64,
    members: usize,
}

impl Report {
    /// Unpacks one member (or records why not); `false` once nothing more is to be unpacked.
    fn take<R: Read>(
        &mut self,
        member: zip::result::ZipResult<zip::read::ZipFile<'_, R>>,
        index: usize,
        ctx: &ToolContext,
    ) -> bool {
        if self.members >= MAX_MEMBERS {
            self.stopped = Some(format!("stopped after {MAX_MEMBERS} members"));
            return false;
        }
        self.members += 1;
        let mut member = match member {
            Ok(member) => member,
            Err(e) => {
                self.refused.push(json!({"name": format!("member {index}"),
                    "reason": format!("it cannot be read: {e}")}));
                return true;
            }
        };
        let name = match member.name() {
            Ok(name) => name.into_owned(),
            Err(e) => {
                self.refused.push(json!({"name": format!("member {index}"),
                    "reason": format!("its name is unreadable: {e}")}));
                return true;
            }
        };
        match unpack_member(&mut member, &name, &self.out, &mut self.remaining, ctx) {
            Unpacked::File(entry) => self.files.push(entry),
            Unpacked::Directory => {}
            Unpacked::Refused(reason) => {
                self.refused.push(json!({"name": name, "reason": reason}));
            }
            Unpacked::OverLimit => {
                self.stopped = Some(format!(
                    "stopped at {name}: more than {} bytes unpacked",
                    self.max_bytes
                ));
                return false;
            }
        }
        true
    }
}

/// Unpacks the members the ZIP reader shadows (an earlier member of a name a later one has
/// too: it keeps the last), reading the archive's local headers in order; each is kept under
/// a distinct name, and one that cannot be read so is reported.
fn unpack_shadowed(
    archive: &mut zip::ZipArchive<File>,
    file: File,
    report: &mut Report,
    ctx: &ToolContext,
) -> Result<(), ToolFailure> {
    let kept: HashSet<u64> = (0..archive.len())
        .filter_map(|i| archive.by_index_raw(i).ok().map(|m| m.header_start()))
        .collect();
    let mut stream = BufReader::new(file);
    stream.rewind().map_err(failed)?;
    let mut shadowed_seen = 0usize;
    loop {
        ctx.check_cancelled()?;
        let at = stream.stream_position().map_err(failed)?;
        match zip::read::read_zipfile_from_stream(&mut stream) {
            Ok(Some(member)) if kept.contains(&at) => drop(member),
            Ok(Some(member)) => {
                shadowed_seen += 1;
                if !report.take(Ok(member), shadowed_seen, ctx) {
                    return Ok(());
                }
            }
            Ok(None) => return Ok(()),
            Err(e) => {
                report.refused.push(json!({
                    "name": format!("members after the {shadowed_seen} shadowed ones read"),
                    "reason": format!(
                        "members shadowed by a later one of the same name could not be read \
                         in order: {e}"
                    ),
                }));
                return Ok(());
            }
        }
    }
}

fn unpack_member<R: Read>(
    member: &mut zip::read::ZipFile<'_, R>,
    name: &str,
    out: &Root,
    remaining: &mut u64,
    ctx: &ToolContext,
) -> Unpacked {
    if member.is_symlink() {
        return Unpacked::Refused("a symbolic link; links are not unpacked".to_owned());
    }
    if name.starts_with(['/', '\\'])
        || name.get(1..3) == Some(":\\")
        || name.get(1..3) == Some(":/")
    {
        return Unpacked::Refused(
            "an absolute name; members are unpacked only under the output directory".to_owned(),
        );
    }
    let Some(relative) = member.enclosed_name() else {
        return Unpacked::Refused("the name would escape the output directory".to_owned());
    };
    let Some(file_name) = relative.file_name().map(OsStr::to_owned) else {
        return if member.is_dir() && relative.components().count() == 0 {
            Unpacked::Directory
        } else {
            Unpacked::Refused("the name names no file (\".\")".to_owned())
        };
    };
    if member.is_dir() {
        return match out.create_dirs(&relative) {
            Ok(_) => Unpacked::Directory,
            Err(e) => {
                Unpacked::Refused(format!("its directory clashes with an earlier member: {e}"))
            }
        };
    }
    let subdirectory;
    let parent = match relative.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(parent) => match out.create_dirs(parent) {
            Ok(dir) => {
                subdirectory = dir;
                &subdirectory
            }
            Err(e) => {
                return Unpacked::Refused(format!(
                    "its directory clashes with an earlier member: {e}"
                ));
            }
        },
        None => out,
    };
    let (kept_as, mut target) = match create_member_file(parent, &file_name) {
        Ok(made) => made,
        Err(reason) => return Unpacked::Refused(reason),
    };
    let dest = parent.path().join(&kept_as);
    let discard = || {
        let _ = parent.remove_file(&kept_as);
    };
    match copy_hashed(member, &mut target, *remaining, ctx) {
        Ok(Some((size, sha256))) => {
            *remaining -= size;
            let mut entry = json!({"path": dest.display().to_string(), "name": name,
                "size": size, "sha256": sha256});
            if kept_as != file_name {
                entry["kept_as"] = json!(kept_as.to_string_lossy());
                entry["reason"] =
                    json!("an earlier member has this name; this one was kept under another");
            }
            Unpacked::File(entry)
        }
        Ok(None) => {
            discard();
            Unpacked::OverLimit
        }
        Err(reason) => {
            discard();
            Unpacked::Refused(reason)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::path::Path;

    use maljan_sidecar_kit::{Arguments, JobDir, ToolContext};
    use proptest::prelude::*;
    use serde_json::json;

    /// Member names made of the pieces that lead out of a directory or clash.
    fn name() -> impl Strategy<Value = String> {
        prop::collection::vec(
            prop_oneof![
                Just(".."),
                Just("."),
                Just(""),
                Just("a"),
                Just("b"),
                Just("C:"),
                Just("\\"),
                Just("..\\x"),
            ],
            1..5,
        )
        .prop_map(|pieces| pieces.join("/"))
    }

    /// Every regular file and directory beneath `dir`, without following symlinks.
    fn everything_beneath(dir: &Path, found: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read") {
            let path = entry.expect("entry").path();
            found.push(path.clone());
            if std::fs::symlink_metadata(&path).expect("meta").is_dir() {
                everything_beneath(&path, found);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn whatever_the_members_nothing_lands_outside_the_output_and_each_is_accounted_for(
            members in prop::collection::vec((name(), prop::collection::vec(any::<u8>(), 0..64)), 0..10),
        ) {
            let top = tempfile::tempdir().expect("temp dir");
            let job_dir = top.path().join("job");
            std::fs::create_dir_all(&job_dir).expect("job");
            let mut writer = zip::ZipWriter::new(std::fs::File::create(job_dir.join("a.zip")).expect("zip"));
            let options = zip::write::SimpleFileOptions::default()
                .compression_method(zip::CompressionMethod::Stored);
            let mut written = Vec::new();
            for (name, bytes) in &members {
                if writer.start_file(name.as_str(), options).is_ok() {
                    writer.write_all(bytes).expect("member");
                    written.push(name.clone());
                }
            }
            writer.finish().expect("archive");
            let ctx = ToolContext::for_job("unpack", JobDir::in_dir(&job_dir).expect("job"));
            let args = Arguments::new(json!({"path": "a.zip"}).as_object().expect("object").clone());
            let answer = super::unpack(&args, &ctx).expect("an unpack never fails for a member");
            let out = Path::new(answer["directory"].as_str().expect("a directory")).to_owned();
            let mut found = Vec::new();
            everything_beneath(top.path(), &mut found);
            for path in &found {
                prop_assert!(
                    path.starts_with(&out) || path == &job_dir.join("a.zip")
                        || out.starts_with(path),
                    "{} is outside {}", path.display(), out.display()
                );
            }
            let files = answer["files"].as_array().expect("files").len();
            let refused = answer["refused"].as_array().expect("refused").len();
            let directories = written.iter().filter(|n| n.ends_with(['/', '\\'])).count();
            prop_assert!(files + refused <= written.len());
            prop_assert!(files + refused + directories >= written.len(), "{answer}");
        }
    }
}
