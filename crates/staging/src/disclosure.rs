//! The disclosure block: every file sent to a server, and what was done with less.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::UploadMode;

/// What a file sent to a server was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Disclosed {
    /// The job's sample.
    Sample,
    /// A file a tool wrote.
    ToolOutput {
        /// The step that wrote it, when known.
        step: Option<String>,
        /// The tool that wrote it.
        tool: String,
    },
    /// Another file of the job's directory.
    JobFile,
}

/// How an upload ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum DisclosureOutcome {
    /// Under way: recorded before its first byte is sent, so that an upload is disclosed
    /// however the run ends.
    InProgress,
    /// The run stopped while it was under way: some of its bytes may have been sent.
    Interrupted,
    /// The server received it and confirmed its digest.
    Sent {
        /// Where the server stored it.
        remote_path: String,
    },
    /// The upload failed; the call went out with the local path.
    Failed {
        /// Why.
        reason: String,
    },
}

/// One file sent (or attempted) to a server: an entry of the run's disclosure block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disclosure {
    /// The server it went to.
    pub server: String,
    /// What it was.
    pub what: Disclosed,
    /// Why it was sent: the step whose call named it, when the call was a run's step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needed_by: Option<String>,
    /// Its name.
    pub name: String,
    /// Its size.
    pub size: u64,
    /// Its sha256.
    pub sha256: String,
    /// Chunked or single.
    pub mode: UploadMode,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: DisclosureOutcome,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
}

impl Disclosure {
    /// The duration as a `Duration`.
    pub fn duration(&self) -> Duration {
        Duration::from_millis(self.duration_ms)
    }
}

/// Something the run did with less than it wanted, and why: staging never fails a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Degradation {
    /// The server concerned.
    pub server: String,
    /// The file or call concerned.
    pub subject: String,
    /// What happened instead, and why.
    pub reason: String,
}
