//! `report.json`, schema version 1: the report's own types, kept apart from the runtime
//! types they are made from on purpose. A runtime type (a step's outcome, a taken file, a
//! disclosure, a server card) may be renamed or reshaped as the code needs; these change only
//! with the schema's version, and a golden file in the tests pins them.
//!
//! Each type is made from its runtime counterpart with `From`, in one private module alone.

mod made_from;

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The version of the schema these types write.
pub const VERSION: u32 = 1;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunVerdict {
    /// Every step completed and nothing was done with less.
    Completed,
    /// At least one step completed, and some failed or were skipped, or a file was not
    /// staged.
    Degraded,
    /// No step completed.
    Failed,
    /// It was stopped (Ctrl-C, SIGTERM) before every step finished.
    Interrupted,
}

impl RunVerdict {
    /// Its name, as in the report.
    ///
    /// ```
    /// assert_eq!(maljan_client::RunVerdict::Degraded.as_str(), "degraded");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            RunVerdict::Completed => "completed",
            RunVerdict::Degraded => "degraded",
            RunVerdict::Failed => "failed",
            RunVerdict::Interrupted => "interrupted",
        }
    }
}

/// The pack a run carried out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackInfo {
    /// Its file.
    pub origin: String,
    /// Its name, when it has one.
    pub name: Option<String>,
}

/// The sample, as the report names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleInfo {
    /// Its file name.
    pub name: String,
    /// Its size.
    pub size: u64,
    /// Its sha256.
    pub sha256: String,
}

/// Why a call failed: a code, a message, and what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// The code (`connection_lost`, `server_resting`, …).
    pub code: String,
    /// What went wrong.
    pub message: String,
    /// What to do about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remediation: Option<String>,
}

/// A failure once, with the steps it hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DistinctFailure {
    /// The server.
    pub server: String,
    /// The failure.
    pub failure: Failure,
    /// How many step runs failed so.
    pub count: usize,
    /// Which steps, each once.
    pub steps: Vec<String>,
}

/// What the connection received: valid messages and what was not one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    /// Valid protocol messages.
    pub messages: u64,
    /// Lines that were not protocol messages.
    pub stray: u64,
    /// Protocol claims that failed validation.
    pub invalid: u64,
    /// Lines or events over the size bound.
    pub oversized: u64,
    /// Messages read out of a line during setup.
    pub salvaged: u64,
    /// Lines holding only whitespace.
    pub blank: u64,
    /// Answers to no request waiting.
    pub unmatched: u64,
}

/// What the server says it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerInfo {
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// A name for display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// A tool on the card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tool {
    /// The tool's name.
    pub name: String,
    /// The name to show.
    pub title: String,
    /// What it does.
    pub description: Option<String>,
    /// Whether the manifest says it can run.
    pub available: bool,
}

/// A tool that cannot run on the server's host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnavailableTool {
    /// The tool.
    pub name: String,
    /// Why not.
    pub reason: String,
    /// What to do about it.
    pub remediation: Option<String>,
    /// What is lost without it.
    pub without: Option<String>,
}

/// A server's card: who it is, its tools, the ones that cannot run, its protocol.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Card {
    /// The server's configured name.
    pub server: String,
    /// What the server says it is.
    pub server_info: ServerInfo,
    /// The protocol version in use.
    pub protocol_version: String,
    /// Its era: `modern` or `legacy`.
    pub era: String,
    /// The model-facing tools.
    pub tools: Vec<Tool>,
    /// The tools that cannot run on the server's host.
    pub unavailable: Vec<UnavailableTool>,
    /// The platform primitives the server offers.
    pub primitives: Vec<String>,
    /// The server's capability manifest as it stated it, when it offers one.
    pub manifest: Option<Value>,
    /// Why the manifest could not be read, when it could not.
    pub manifest_error: Option<String>,
    /// How the server is reached: `stdio`, `http` or `memory`.
    pub transport: String,
    /// What its stdout (or, over HTTP, its replies) held at setup.
    pub stdout: Counts,
}

/// A connection the run lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loss {
    /// How the server's process ended (`exit status: 3`, `signal: 9 (SIGKILL)`), when it had
    /// one and it ended.
    pub exit: Option<String>,
    /// The failure of the call that found the connection lost.
    pub failure: String,
    /// The last lines the server wrote on stderr.
    pub stderr_tail: String,
}

/// One server of the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Server {
    /// Its name.
    pub server: String,
    /// Its card, when it was set up.
    pub card: Option<Card>,
    /// How many times it was connected again after its connection was lost.
    pub restarts: u32,
    /// Each connection lost, in order, with why.
    pub losses: Vec<Loss>,
    /// Why it last stopped or failed to start.
    pub last_failure: Option<String>,
    /// What each connection's stdout (or stream) held.
    pub connections: Vec<Counts>,
}

/// How one step (or one of its runs) ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepStatus {
    /// The tool answered.
    Completed,
    /// The call failed, or the server could not be used.
    Failed {
        /// Why.
        failure: Failure,
    },
    /// The step did not run: what it needed never came.
    Skipped {
        /// Why.
        reason: String,
    },
}

/// A file a tool named, and whether the client took it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Taken {
    /// It is in the artefact store.
    Taken {
        /// The server that wrote it.
        server: String,
        /// The path the tool named.
        path: String,
        /// Its sha256.
        sha256: String,
        /// Its size.
        size: u64,
    },
    /// It was not taken.
    NotTaken {
        /// The server that named it.
        server: String,
        /// The path the tool named.
        path: String,
        /// Why not.
        words: String,
    },
}

/// A file a step took and handed to later steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Handed {
    /// The name the tool gave it.
    pub name: String,
    /// Where later steps are handed it, inside the job's directory.
    pub path: PathBuf,
    /// Its sha256.
    pub sha256: String,
}

/// One step's outcome (one per file for a step run once per matching file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The step's id.
    pub step: String,
    /// The file this run of the step was for.
    pub instance: Option<String>,
    /// The server.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// The arguments as the pack wrote them.
    pub arguments: Value,
    /// The arguments with references read.
    pub resolved: Option<Value>,
    /// What the server was sent, when staging rewrote the arguments.
    pub sent_arguments: Option<Value>,
    /// How it ended.
    pub status: StepStatus,
    /// The tool's answer, when there was one.
    pub answer: Option<Value>,
    /// The files the answer named that the step declares, taken or not.
    pub taken: Vec<Taken>,
    /// The files handed to later steps.
    pub handed: Vec<Handed>,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
    /// How long its call waited under the server's cap, in milliseconds.
    pub queued_ms: u64,
}

/// What a file sent to a server was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Sent {
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

/// How a file went to a server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// In chunks.
    Chunked,
    /// In one call.
    Single,
}

/// How an upload ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Upload {
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

/// One file sent (or attempted) to a server.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disclosure {
    /// The server it went to.
    pub server: String,
    /// What it was.
    pub what: Sent,
    /// The step whose call named it, when the call was a run's step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needed_by: Option<String>,
    /// Its name.
    pub name: String,
    /// Its size.
    pub size: u64,
    /// Its sha256.
    pub sha256: String,
    /// Chunked or single.
    pub mode: Mode,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Upload,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
}

/// Something the run did with less than it wanted, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Degradation {
    /// The server concerned.
    pub server: String,
    /// The file or call concerned.
    pub subject: String,
    /// What happened instead, and why.
    pub reason: String,
}
