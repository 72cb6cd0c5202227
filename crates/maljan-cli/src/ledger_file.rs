//! Where `maljan call` and `maljan run` record, `maljan ledger` reads, and new jobs go.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// `$XDG_STATE_HOME`, else `~/.local/state`.
fn state_home() -> Option<PathBuf> {
    std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
}

/// maljan's state: `$XDG_STATE_HOME/maljan`, else `~/.local/state/maljan`, else
/// `.maljan` in the working directory.
pub(crate) fn state_dir() -> PathBuf {
    state_home().map_or_else(|| PathBuf::from(".maljan"), |dir| dir.join("maljan"))
}

/// `$XDG_STATE_HOME/maljan/ledger.jsonl`, else `~/.local/state/maljan/ledger.jsonl`, else
/// `maljan-ledger.jsonl` in the working directory.
pub(crate) fn default_path() -> PathBuf {
    match state_home() {
        Some(dir) => dir.join("maljan").join("ledger.jsonl"),
        None => PathBuf::from("maljan-ledger.jsonl"),
    }
}

/// The directory of the jobs beside `ledger`: `jobs` in the ledger's directory.
pub(crate) fn jobs_dir(ledger: &Path) -> PathBuf {
    match ledger.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join("jobs"),
        _ => PathBuf::from("jobs"),
    }
}

/// A new job directory beside `ledger`: `jobs/job-MILLIS-PID`.
pub(crate) fn new_job_dir(ledger: &Path) -> PathBuf {
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    jobs_dir(ledger).join(format!("job-{stamp}-{}", std::process::id()))
}
