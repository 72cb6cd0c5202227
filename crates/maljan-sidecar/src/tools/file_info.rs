//! `file_info`: a file's size, digests, entropy and type, from one read.

use std::io::Read;

use maljan_sidecar_kit::{Arguments, ToolContext, ToolResult, ToolSpec};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{READ_CHUNK, io_failure};

pub(crate) fn file_info_spec() -> ToolSpec {
    ToolSpec::new(
        "file_info",
        "Size, sha256, type (by magic bytes) and Shannon entropy of a file",
    )
    .required_string("path", "the file to describe")
    .timeout_s(120.0)
}

/// Reads the file once: hashes it, counts its bytes for the entropy, and sniffs its type
/// from the first chunk.
pub(crate) fn file_info(args: &Arguments, ctx: &ToolContext) -> ToolResult {
    let path = args.string("path")?;
    let mut file = ctx.open(path)?.file;
    let mut hasher = Sha256::new();
    let mut histogram = [0u64; 256];
    let mut size = 0u64;
    let mut head = Vec::new();
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        let n = file.read(&mut chunk).map_err(|e| io_failure(path, &e))?;
        if n == 0 {
            break;
        }
        ctx.check_cancelled()?;
        let bytes = &chunk[..n];
        if head.len() < 8192 {
            head.extend_from_slice(&bytes[..bytes.len().min(8192 - head.len())]);
        }
        hasher.update(bytes);
        for &b in bytes {
            histogram[b as usize] += 1;
        }
        size += n as u64;
    }
    let kind = infer::get(&head);
    Ok(json!({
        "path": path,
        "size": size,
        "sha256": format!("{:x}", hasher.finalize()),
        "type": {
            "mime": kind.map_or_else(|| fallback_mime(&head), |k| k.mime_type()),
            "extension": kind.map(|k| k.extension()),
        },
        "entropy": shannon_entropy(&histogram, size),
    }))
}

fn fallback_mime(head: &[u8]) -> &'static str {
    if head.is_empty() {
        "application/x-empty"
    } else if std::str::from_utf8(head).is_ok() {
        "text/plain"
    } else {
        "application/octet-stream"
    }
}

/// Bits per byte, from 0 (one value repeated) to 8 (uniform), rounded to 4 decimals.
pub(crate) fn shannon_entropy(histogram: &[u64; 256], total: u64) -> f64 {
    if total == 0 {
        return 0.0;
    }
    let total = total as f64;
    let bits: f64 = histogram
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| {
            let p = n as f64 / total;
            -p * p.log2()
        })
        .sum();
    (bits * 10_000.0).round() / 10_000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entropy_is_zero_for_one_value_and_eight_for_uniform_bytes() {
        let mut h = [0u64; 256];
        h[7] = 100;
        assert_eq!(shannon_entropy(&h, 100), 0.0);
        let uniform = [4u64; 256];
        assert_eq!(shannon_entropy(&uniform, 1024), 8.0);
        assert_eq!(shannon_entropy(&[0; 256], 0), 0.0);
    }
}
