//! Serving the job's files, a chunk at a time: `get_file`.

use std::io::{Read, Seek, SeekFrom};

use serde_json::{Value, json};

use super::{MAX_GET_FILE_CHUNK, failed};
use crate::{Arguments, ToolContext, ToolResult};
use maljan_mcp_proto::large_buffers::LARGE_BUFFERS;

/// Serves a file of the job, opened beneath the job's directory (and read from that one
/// descriptor only). A file it will not serve is answered `{"error": "..."}`.
pub(super) fn get_file(args: &Arguments, ctx: &ToolContext) -> ToolResult {
    let named = args.string("path")?;
    let offset = args.optional_u64("offset")?.unwrap_or(0);
    let length = args
        .optional_u64("length")?
        .unwrap_or(MAX_GET_FILE_CHUNK)
        .min(MAX_GET_FILE_CHUNK);
    let job = ctx
        .job
        .root()
        .map_err(|e| failed(format!("the job's directory cannot be made: {e}")))?;
    let opened = match crate::confined::open_beneath(&[job], named) {
        Ok(opened) => opened,
        Err(failure) => return Ok(json!({"error": failure.message})),
    };
    let file = &opened.file;
    let (size, sha256) = ctx
        .job
        .digest_of(file)
        .map_err(|e| failed(format!("reading {named}: {e}")))?;
    let take = length.min(size.saturating_sub(offset));
    let mut bytes = LARGE_BUFFERS.take(take as usize);
    // The descriptor is this call's own (opened above): seeking it moves no one else.
    let mut reader = file;
    reader
        .seek(SeekFrom::Start(offset))
        .and_then(|_| reader.take(take).read_to_end(&mut bytes))
        .map_err(|e| failed(format!("reading {named}: {e}")))?;
    if bytes.len() as u64 != take {
        return Err(failed(format!(
            "{named} shrank while it was read: {} bytes at offset {offset}, not {take}",
            bytes.len()
        )));
    }
    let mut content = LARGE_BUFFERS.take_string(bytes.len().div_ceil(3) * 4);
    // Vectorised where the CPU allows it: the `base64` crate's encoder took as long as
    // hashing the chunk.
    base64_simd::STANDARD.encode_append(&bytes, &mut content);
    LARGE_BUFFERS.give(bytes);
    let mut answer = json!({"size": size, "sha256": sha256, "offset": offset});
    // Moved in: `json!` would copy the chunk's base64 (and leave the kept buffer unused).
    answer["content_base64"] = Value::String(content);
    Ok(answer)
}
