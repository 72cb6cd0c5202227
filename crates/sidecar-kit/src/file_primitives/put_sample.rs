//! Receiving an upload in one call, `put_sample`, and what every upload shares: the name it
//! is stored under (never replacing a file), its digest checked, its room in the job's disk
//! budget, idle uploads dropped.

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use maljan_confine::Root;
use maljan_direct_write::DirectWriter;
use maljan_mcp_proto::maljan::ToolFailure;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::{SAMPLES_DIR, TransferLimits, bad, failed};
use crate::job::{INCOMING_DIR, lock};
use crate::{Arguments, JobDir, ToolContext, ToolResult};

/// The file name part of a client's name: no directories, no `..`, not empty.
pub(super) fn safe_name(name: &str) -> Result<String, ToolFailure> {
    let base = name.rsplit(['/', '\\']).next().unwrap_or_default();
    if base.is_empty() || base == "." || base == ".." {
        return Err(bad(
            format!("the name {name:?} has no usable file name"),
            "pass a plain file name such as sample.bin",
        ));
    }
    Ok(base.to_owned())
}

pub(super) fn sha_argument(args: &Arguments) -> Result<String, ToolFailure> {
    checked_sha(args.string("sha256")?)
}

/// The argument `sha256`, when given: 64 hex digits, lowercased.
pub(super) fn optional_sha_argument(args: &Arguments) -> Result<Option<String>, ToolFailure> {
    match args.get("sha256") {
        None => Ok(None),
        Some(_) => sha_argument(args).map(Some),
    }
}

fn checked_sha(sha: &str) -> Result<String, ToolFailure> {
    if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(bad(
            format!("sha256 {sha:?} is not 64 hex digits"),
            "pass the file's sha256",
        ));
    }
    Ok(sha.to_ascii_lowercase())
}

/// A directory of the job, made where missing; a symlink planted in its place is refused.
pub(super) fn job_dir(job: &JobDir, name: &str) -> Result<Root, ToolFailure> {
    job.root()
        .map_err(|e| failed(format!("the job's directory cannot be made: {e}")))?
        .create_dirs(name)
        .map_err(|e| failed(format!("the job's {name} directory cannot be used: {e}")))
}

pub(super) fn receipt(path: &std::path::Path, size: u64, sha256: &str) -> Value {
    json!({"path": path.display().to_string(), "size": size, "sha256": sha256})
}

/// A new temporary file for an upload, in the job's `.incoming` directory.
pub(super) fn incoming_file(job: &JobDir) -> Result<(String, std::fs::File), ToolFailure> {
    let dir = job_dir(job, INCOMING_DIR)?;
    let temp = job.next_upload_id().to_string();
    let file = dir
        .create_new(&temp)
        .map_err(|e| failed(format!("creating an upload's file: {e}")))?;
    Ok((temp, file))
}

/// Moves a finished upload from `.incoming` to `samples/NAME`, and remembers its digest;
/// on any failure the temporary file is removed.
pub(super) fn store_upload(
    job: &JobDir,
    temp: &str,
    file: DirectWriter,
    name: &str,
    sha256: &str,
) -> Result<std::path::PathBuf, ToolFailure> {
    let stored = file.finish_into_file().and_then(|(_, file)| {
        let incoming = job
            .root()?
            .create_dirs(INCOMING_DIR)
            .map_err(std::io::Error::other)?;
        let samples = job
            .root()?
            .create_dirs(SAMPLES_DIR)
            .map_err(std::io::Error::other)?;
        let stored_as = store_as_new(&incoming, temp, &samples, name)?;
        job.remember_digest(&file, sha256);
        Ok(samples.path().join(stored_as))
    });
    stored.map_err(|e| {
        job.discard_incoming(temp);
        failed(format!("storing {name}: {e}"))
    })
}

/// How many names an upload tries when its own is taken (`NAME`, `NAME-2`, … before the
/// extension): past that it is refused, naming the file.
const MAX_NAME_TRIES: usize = 64;

/// Moves `temp` to `samples/` under `name`, or under the first free of `stem-2.ext`,
/// `stem-3.ext`, …: an upload never replaces a file. The name it got is returned.
pub(super) fn store_as_new(
    incoming: &maljan_confine::Root,
    temp: &str,
    samples: &maljan_confine::Root,
    name: &str,
) -> std::io::Result<String> {
    let (stem, extension) = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (stem, format!(".{ext}")),
        _ => (name, String::new()),
    };
    for attempt in 1..=MAX_NAME_TRIES {
        let candidate = if attempt == 1 {
            name.to_owned()
        } else {
            format!("{stem}-{attempt}{extension}")
        };
        match incoming.rename_new(temp, samples, &candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!(
            "{name} and {} more names like it are taken in this job; upload under another \
             name",
            MAX_NAME_TRIES - 1
        ),
    ))
}

/// Drops the job's uploads left idle longer than `idle`, removing their files.
pub(super) fn drop_idle_uploads(job: &JobDir, idle: Duration) {
    let now = Instant::now();
    let mut uploads = lock(&job.uploads);
    let idle_ids: Vec<u64> = uploads
        .iter()
        .filter(|(_, u)| u.waiting == 0 && now.duration_since(u.touched) > idle)
        .map(|(id, _)| *id)
        .collect();
    for id in idle_ids {
        if let Some(upload) = uploads.remove(&id) {
            tracing::info!(upload = id, name = %upload.name, "an idle upload was dropped");
            discard_upload(job, &upload.temp, upload.size);
        }
    }
    drop(uploads);
    job.upload_moved.notify_all();
}

pub(super) fn put_sample(
    args: &Arguments,
    ctx: &ToolContext,
    limits: &TransferLimits,
) -> ToolResult {
    let name = safe_name(args.string("name")?)?;
    let sha256 = sha_argument(args)?;
    let content = args.string("content_base64")?;
    let size = content.len() as u64 / 4 * 3;
    if size > limits.max_upload_bytes {
        return Err(too_large(size, limits));
    }
    let bytes = STANDARD.decode(content).map_err(|e| {
        bad(
            format!("content_base64 is not base64: {e}"),
            "encode the file in standard base64",
        )
    })?;
    let actual = format!("{:x}", Sha256::digest(&bytes));
    if actual != sha256 {
        return Err(bad(
            format!("the bytes have sha256 {actual}, not the {sha256} stated"),
            "send the file again",
        ));
    }
    let room = ctx.reserve_disk_exactly(bytes.len() as u64)?;
    let (temp, file) = incoming_file(&ctx.job)?;
    let mut writer = DirectWriter::new(file);
    if let Err(e) = writer.write_all(&bytes) {
        ctx.job.discard_incoming(&temp);
        return Err(failed(format!("storing {name}: {e}")));
    }
    let path = store_upload(&ctx.job, &temp, writer, &name, &sha256)?;
    room.keep(bytes.len() as u64);
    Ok(receipt(&path, bytes.len() as u64, &sha256))
}

pub(super) fn too_large(size: u64, limits: &TransferLimits) -> ToolFailure {
    bad(
        format!(
            "an upload of {size} bytes is over this server's limit of {} bytes",
            limits.max_upload_bytes
        ),
        "send a smaller file, or ask the server's operator to raise its upload limit",
    )
}

/// Drops an upload that will not be stored: its file removed, its room in the job's disk
/// budget given back.
pub(super) fn discard_upload(job: &JobDir, temp: &str, reserved: u64) {
    job.discard_incoming(temp);
    job.release_disk(reserved);
}
