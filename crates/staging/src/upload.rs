//! Uploading a file to a server through `put_sample_begin` / `_chunk` / `_finish`, or the
//! single `put_sample`.

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use maljan_mcp_proto::maljan::ToolFailure;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use crate::ToolCaller;

/// How a file went to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UploadMode {
    /// `put_sample_begin`, `put_sample_chunk`…, `put_sample_finish`.
    Chunked,
    /// One `put_sample` call with the whole file.
    Single,
}

impl UploadMode {
    /// The mode a server's tools allow: chunked when it offers all three chunked tools,
    /// single when it offers `put_sample`, none otherwise.
    ///
    /// ```
    /// use maljan_staging::UploadMode;
    /// let tools = ["put_sample", "put_sample_begin", "put_sample_chunk", "put_sample_finish"];
    /// assert_eq!(UploadMode::offered(tools), Some(UploadMode::Chunked));
    /// assert_eq!(UploadMode::offered(["put_sample"]), Some(UploadMode::Single));
    /// assert_eq!(UploadMode::offered(["file_info"]), None);
    /// ```
    pub fn offered<'a>(tools: impl IntoIterator<Item = &'a str>) -> Option<UploadMode> {
        let tools: Vec<&str> = tools.into_iter().collect();
        let has = |name| tools.contains(&name);
        if has("put_sample_begin") && has("put_sample_chunk") && has("put_sample_finish") {
            Some(UploadMode::Chunked)
        } else if has("put_sample") {
            Some(UploadMode::Single)
        } else {
            None
        }
    }
}

/// A file the server received and confirmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadReceipt {
    /// Where the server stored it: the path to hand its tools.
    pub remote_path: String,
    /// Its size.
    pub size: u64,
    /// Its sha256.
    pub sha256: String,
    /// How it went.
    pub mode: UploadMode,
    /// How long it took.
    pub duration: Duration,
}

/// Why an upload did not complete.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UploadError {
    /// Reading the local file failed.
    #[error("reading {path} failed: {detail}")]
    Read {
        /// The local file.
        path: String,
        /// The system's words.
        detail: String,
    },
    /// The bytes read while sending are not the bytes hashed first: the file changed.
    #[error(
        "{path} changed while it was sent (sha256 {expected} before, {read} while sending); \
         the upload was not finished"
    )]
    ChangedDuringUpload {
        /// The local file.
        path: String,
        /// The digest announced.
        expected: String,
        /// The digest of the bytes sent.
        read: String,
    },
    /// A call of the upload failed.
    #[error("{tool} failed: {}", failure.message)]
    Call {
        /// The tool.
        tool: &'static str,
        /// Its failure.
        failure: ToolFailure,
    },
    /// The server's answer is malformed or disagrees with what was sent.
    #[error("{tool} answered {answer}: {detail}")]
    Answer {
        /// The tool.
        tool: &'static str,
        /// The answer.
        answer: String,
        /// What is wrong with it.
        detail: String,
    },
}

async fn call<C: ToolCaller>(
    caller: &C,
    tool: &'static str,
    arguments: Value,
) -> Result<Value, UploadError> {
    caller
        .call_tool(tool, arguments)
        .await
        .map_err(|failure| UploadError::Call { tool, failure })
}

fn read_error(path: &Path) -> impl Fn(std::io::Error) -> UploadError + '_ {
    move |e| UploadError::Read {
        path: path.display().to_string(),
        detail: e.to_string(),
    }
}

/// Reads up to `buf.len()` bytes (fewer only at the end of the file).
async fn fill(file: &mut tokio::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        let n = file.read(&mut buf[filled..]).await?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(filled)
}

/// Hashes a file, streaming: its size and sha256.
pub async fn hash_file(path: &Path) -> std::io::Result<(u64, String)> {
    let mut file = tokio::fs::File::open(path).await?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((size, format!("{:x}", hasher.finalize())))
}

fn check_receipt(
    tool: &'static str,
    answer: &Value,
    size: u64,
    sha256: &str,
) -> Result<String, UploadError> {
    let wrong = |detail: &str| UploadError::Answer {
        tool,
        answer: answer.to_string(),
        detail: detail.to_owned(),
    };
    let path = answer
        .get("path")
        .and_then(Value::as_str)
        .ok_or_else(|| wrong("no path"))?;
    if answer.get("size").and_then(Value::as_u64) != Some(size) {
        return Err(wrong(&format!("the size is not {size}")));
    }
    if answer
        .get("sha256")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase)
        .as_deref()
        != Some(sha256)
    {
        return Err(wrong(&format!("the sha256 is not {sha256}")));
    }
    Ok(path.to_owned())
}

/// Uploads `local` to a server as `name`.
///
/// The file is hashed first (its digest is announced); then, chunked, it is streamed from
/// disk `chunk_len` bytes at a time, hashed again as read, and `put_sample_finish` is called
/// only when the bytes sent match the digest announced. Single, the whole file goes in one
/// `put_sample` call, whatever its size. The server's receipt must state the same size and
/// digest. `progress` is told the bytes sent and the total.
pub async fn upload<C: ToolCaller>(
    caller: &C,
    local: &Path,
    name: &str,
    mode: UploadMode,
    chunk_len: usize,
    mut progress: impl FnMut(u64, u64),
) -> Result<UploadReceipt, UploadError> {
    let started = Instant::now();
    let (size, sha256) = hash_file(local).await.map_err(read_error(local))?;
    let remote_path = match mode {
        UploadMode::Single => {
            let bytes = tokio::fs::read(local).await.map_err(read_error(local))?;
            let read = format!("{:x}", Sha256::digest(&bytes));
            if read != sha256 {
                return Err(UploadError::ChangedDuringUpload {
                    path: local.display().to_string(),
                    expected: sha256,
                    read,
                });
            }
            let content = STANDARD.encode(&bytes);
            drop(bytes);
            let answer = call(
                caller,
                "put_sample",
                json!({"name": name, "content_base64": content, "sha256": sha256}),
            )
            .await?;
            progress(size, size);
            check_receipt("put_sample", &answer, size, &sha256)?
        }
        UploadMode::Chunked => {
            let begun = call(
                caller,
                "put_sample_begin",
                json!({"name": name, "size": size, "sha256": sha256}),
            )
            .await?;
            let upload_id = begun
                .get("upload_id")
                .cloned()
                .filter(|v| !v.is_null())
                .ok_or_else(|| UploadError::Answer {
                    tool: "put_sample_begin",
                    answer: begun.to_string(),
                    detail: "no upload_id".to_owned(),
                })?;
            let mut file = tokio::fs::File::open(local)
                .await
                .map_err(read_error(local))?;
            let mut hasher = Sha256::new();
            let mut buf = vec![0u8; chunk_len.max(1)];
            let mut offset = 0u64;
            loop {
                let n = fill(&mut file, &mut buf).await.map_err(read_error(local))?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                let content = STANDARD.encode(&buf[..n]);
                let answer = call(
                    caller,
                    "put_sample_chunk",
                    json!({"upload_id": upload_id, "offset": offset, "content_base64": content}),
                )
                .await?;
                offset += n as u64;
                if answer
                    .get("received")
                    .and_then(Value::as_u64)
                    .is_some_and(|r| r != offset)
                {
                    return Err(UploadError::Answer {
                        tool: "put_sample_chunk",
                        answer: answer.to_string(),
                        detail: format!("received is not {offset}"),
                    });
                }
                progress(offset, size);
            }
            let read = format!("{:x}", hasher.finalize());
            if read != sha256 || offset != size {
                return Err(UploadError::ChangedDuringUpload {
                    path: local.display().to_string(),
                    expected: sha256,
                    read,
                });
            }
            let answer = call(caller, "put_sample_finish", json!({"upload_id": upload_id})).await?;
            check_receipt("put_sample_finish", &answer, size, &sha256)?
        }
    };
    Ok(UploadReceipt {
        remote_path,
        size,
        sha256,
        mode,
        duration: started.elapsed(),
    })
}
