//! `strings`: the printable strings of a file, or the lines matching a search, bounded.

use std::io::Read;

use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
use maljan_sidecar_kit::{Arguments, ToolContext, ToolResult, ToolSpec, unquote};
use serde_json::{Value, json};

use super::{READ_CHUNK, io_failure};

/// Characters kept of one string in the answer.
const MAX_STRING_CHARS: usize = 1024;
/// Offsets listed per search term.
const MAX_OFFSETS: usize = 100;
/// The most strings one answer lists (`limit`), so that the answer stays within
/// [`MAX_ANSWER_BYTES`](maljan_sidecar_kit::MAX_ANSWER_BYTES) whatever the file.
pub(crate) const MAX_LIMIT: u64 = 10_000;
/// The most search terms, and the longest, one call takes.
const MAX_SEARCHES: usize = 64;
const MAX_SEARCH_BYTES: usize = 4096;

pub(crate) fn strings_spec() -> ToolSpec {
    ToolSpec::new(
        "strings",
        "Printable ASCII runs in a file, and where search terms occur (quoted terms are read unquoted)",
    )
    .required_string("path", "the file to read")
    .optional(
        "search",
        json!({"description": "a term or a list of terms to find", "anyOf": [
            {"type": "string"}, {"type": "array", "items": {"type": "string"}}]}),
    )
    .optional("min_length", json!({"type": "integer", "minimum": 1, "default": 4}))
    .optional(
        "limit",
        json!({"type": "integer", "minimum": 0, "maximum": MAX_LIMIT, "default": 200}),
    )
    .timeout_s(120.0)
}

fn printable(b: u8) -> bool {
    b == b'\t' || (0x20..0x7f).contains(&b)
}

struct Run {
    start: u64,
    len: u64,
    text: String,
}

struct Search {
    written: String,
    needle: Vec<u8>,
    count: u64,
    offsets: Vec<u64>,
}

/// Streams the file once: collects printable runs and finds each term, across chunk edges.
pub(crate) fn strings(args: &Arguments, ctx: &ToolContext) -> ToolResult {
    let path = args.string("path")?;
    let min_length = args.optional_u64("min_length")?.unwrap_or(4).max(1);
    let limit = args.optional_u64("limit")?.unwrap_or(200);
    if limit > MAX_LIMIT {
        return Err(ToolFailure::new(
            ErrorCode::BadArgument,
            format!("limit {limit} is over the most strings one answer lists, {MAX_LIMIT}"),
            Some(format!(
                "pass a limit of at most {MAX_LIMIT}; count says how many there are"
            )),
        ));
    }
    let limit = limit as usize;
    let terms = args.string_list("search")?;
    if terms.len() > MAX_SEARCHES || terms.iter().any(|t| t.len() > MAX_SEARCH_BYTES) {
        return Err(ToolFailure::new(
            ErrorCode::BadArgument,
            format!(
                "search takes at most {MAX_SEARCHES} terms of at most {MAX_SEARCH_BYTES} bytes \
                 each"
            ),
            Some("search for fewer, shorter terms, in several calls if need be".to_owned()),
        ));
    }
    let mut searches: Vec<Search> = terms
        .into_iter()
        .map(|written| {
            let needle = unquote(&written).read_as.into_bytes();
            Search {
                written,
                needle,
                count: 0,
                offsets: Vec::new(),
            }
        })
        .collect();
    let overlap = searches
        .iter()
        .map(|s| s.needle.len())
        .max()
        .unwrap_or(1)
        .saturating_sub(1);

    let mut file = ctx.open(path)?.file;
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut window: Vec<u8> = Vec::new();
    let mut run: Option<Run> = None;
    let mut found: Vec<Value> = Vec::new();
    let mut count = 0u64;
    let mut offset = 0u64;
    loop {
        let n = file.read(&mut chunk).map_err(|e| io_failure(path, &e))?;
        if n == 0 {
            break;
        }
        ctx.check_cancelled()?;
        for (i, &b) in chunk[..n].iter().enumerate() {
            if printable(b) {
                let r = run.get_or_insert_with(|| Run {
                    start: offset + i as u64,
                    len: 0,
                    text: String::new(),
                });
                r.len += 1;
                if r.text.len() < MAX_STRING_CHARS {
                    r.text.push(b as char);
                }
            } else if let Some(r) = run.take() {
                finish_run(r, min_length, limit, &mut found, &mut count);
            }
        }
        // Search the new bytes together with the tail of the previous chunk.
        let keep = window.len().min(overlap);
        window.drain(..window.len() - keep);
        let window_start = offset - keep as u64;
        window.extend_from_slice(&chunk[..n]);
        for s in searches.iter_mut().filter(|s| !s.needle.is_empty()) {
            for at in memchr::memmem::find_iter(&window, &s.needle) {
                // A match wholly inside the kept tail was counted with the previous chunk.
                if at + s.needle.len() > keep {
                    s.count += 1;
                    if s.offsets.len() < MAX_OFFSETS {
                        s.offsets.push(window_start + at as u64);
                    }
                }
            }
        }
        offset += n as u64;
    }
    if let Some(r) = run.take() {
        finish_run(r, min_length, limit, &mut found, &mut count);
    }
    Ok(json!({
        "path": path,
        "min_length": min_length,
        "count": count,
        "strings": found,
        "truncated": count as usize > found.len(),
        "searches": searches.iter().map(|s| json!({
            "search": s.written,
            "read_as": String::from_utf8_lossy(&s.needle),
            "found": s.count > 0,
            "count": s.count,
            "offsets": s.offsets,
        })).collect::<Vec<_>>(),
    }))
}

fn finish_run(run: Run, min_length: u64, limit: usize, found: &mut Vec<Value>, count: &mut u64) {
    if run.len >= min_length {
        *count += 1;
        if found.len() < limit {
            found.push(json!({"offset": run.start, "length": run.len, "text": run.text}));
        }
    }
}
