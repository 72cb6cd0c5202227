//! Where `maljan call` records, and `maljan ledger` reads.

use std::path::PathBuf;

/// `$XDG_STATE_HOME/maljan/ledger.jsonl`, else `~/.local/state/maljan/ledger.jsonl`, else
/// `maljan-ledger.jsonl` in the working directory.
pub(crate) fn default_path() -> PathBuf {
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")));
    match state {
        Some(dir) => dir.join("maljan").join("ledger.jsonl"),
        None => PathBuf::from("maljan-ledger.jsonl"),
    }
}
