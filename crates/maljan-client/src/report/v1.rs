//! `report.json`, schema version 1: the report's own types, kept apart from the runtime
//! types they are made from on purpose. A runtime type (a step's outcome, a taken file, a
//! disclosure, a server card) may be renamed or reshaped as the code needs; these change only
//! with the schema's version, and a golden file in the tests pins them.
//!
//! Each type is made from its runtime counterpart with `From`, in this module alone.

use std::path::PathBuf;

use maljan_mcp_proto::maljan::ToolFailure;
use maljan_mcp_proto::mcp::Era;
use maljan_mcp_transport::TransportCounts;
use maljan_staging::{Disclosed, DisclosureOutcome, UploadMode};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::card::{CardTool, ServerCard};
use crate::job::TakenFile;
use crate::run::{ServerLoss, StepOutcome};

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

impl From<&ToolFailure> for Failure {
    fn from(failure: &ToolFailure) -> Self {
        Failure {
            code: failure.code.as_str().to_owned(),
            message: failure.message.clone(),
            remediation: failure.remediation.clone(),
        }
    }
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

impl From<&crate::run::DistinctFailure> for DistinctFailure {
    fn from(failure: &crate::run::DistinctFailure) -> Self {
        DistinctFailure {
            server: failure.server.clone(),
            failure: Failure::from(&failure.failure),
            count: failure.count,
            steps: failure.steps.clone(),
        }
    }
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

impl From<TransportCounts> for Counts {
    fn from(c: TransportCounts) -> Self {
        Counts {
            messages: c.messages,
            stray: c.stray,
            invalid: c.invalid,
            oversized: c.oversized,
            salvaged: c.salvaged,
            blank: c.blank,
            unmatched: c.unmatched,
        }
    }
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

impl From<&CardTool> for Tool {
    fn from(tool: &CardTool) -> Self {
        Tool {
            name: tool.name.clone(),
            title: tool.title.clone(),
            description: tool.description.clone(),
            available: tool.available,
        }
    }
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

impl From<&crate::card::UnavailableTool> for UnavailableTool {
    fn from(tool: &crate::card::UnavailableTool) -> Self {
        UnavailableTool {
            name: tool.name.clone(),
            reason: tool.reason.clone(),
            remediation: tool.remediation.clone(),
            without: tool.without.clone(),
        }
    }
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

impl From<&ServerCard> for Card {
    fn from(card: &ServerCard) -> Self {
        Card {
            server: card.server.clone(),
            server_info: ServerInfo {
                name: card.server_info.name.clone(),
                version: card.server_info.version.clone(),
                title: card.server_info.title.clone(),
            },
            protocol_version: card.protocol_version.clone(),
            // The words of schema version 1, from before the eras were named by what they are.
            era: match card.era {
                Era::Stateless => "modern",
                _ => "legacy",
            }
            .to_owned(),
            tools: card.tools.iter().map(Tool::from).collect(),
            unavailable: card.unavailable.iter().map(UnavailableTool::from).collect(),
            primitives: card.primitives.clone(),
            manifest: card
                .manifest
                .as_ref()
                .and_then(|m| serde_json::to_value(m).ok()),
            manifest_error: card.manifest_error.clone(),
            transport: card.transport.to_owned(),
            stdout: card.stdout.into(),
        }
    }
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

impl From<&ServerLoss> for Loss {
    fn from(loss: &ServerLoss) -> Self {
        Loss {
            exit: loss.exit.clone(),
            failure: loss.failure.clone(),
            stderr_tail: loss.stderr_tail.clone(),
        }
    }
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

impl From<&crate::run::ServerRecord> for Server {
    fn from(record: &crate::run::ServerRecord) -> Self {
        Server {
            server: record.server.clone(),
            card: record.card.as_ref().map(Card::from),
            restarts: record.restarts,
            losses: record.losses.iter().map(Loss::from).collect(),
            last_failure: record.last_failure.clone(),
            connections: record.connections.iter().map(|c| c.counts.into()).collect(),
        }
    }
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

impl From<&crate::run::StepStatus> for StepStatus {
    fn from(status: &crate::run::StepStatus) -> Self {
        match status {
            crate::run::StepStatus::Completed => StepStatus::Completed,
            crate::run::StepStatus::Failed { failure } => StepStatus::Failed {
                failure: failure.into(),
            },
            crate::run::StepStatus::Skipped { reason } => StepStatus::Skipped {
                reason: reason.clone(),
            },
        }
    }
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

impl From<&TakenFile> for Taken {
    fn from(file: &TakenFile) -> Self {
        match file {
            TakenFile::Taken {
                server,
                path,
                sha256,
                size,
            } => Taken::Taken {
                server: server.clone(),
                path: path.clone(),
                sha256: sha256.clone(),
                size: *size,
            },
            TakenFile::NotTaken {
                server,
                path,
                reason,
            } => Taken::NotTaken {
                server: server.clone(),
                path: path.clone(),
                words: reason.clone(),
            },
        }
    }
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

impl From<&StepOutcome> for Step {
    fn from(outcome: &StepOutcome) -> Self {
        Step {
            step: outcome.step.clone(),
            instance: outcome.instance.clone(),
            server: outcome.server.clone(),
            tool: outcome.tool.clone(),
            arguments: outcome.arguments.clone(),
            resolved: outcome.resolved.clone(),
            sent_arguments: outcome.sent_arguments.clone(),
            status: (&outcome.status).into(),
            answer: outcome.answer.clone(),
            taken: outcome.taken.iter().map(Taken::from).collect(),
            handed: outcome
                .handed
                .iter()
                .map(|h| Handed {
                    name: h.name.clone(),
                    path: h.path.clone(),
                    sha256: h.sha256.clone(),
                })
                .collect(),
            duration_ms: outcome.duration_ms,
            queued_ms: outcome.queued_ms,
        }
    }
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

impl From<&maljan_staging::Disclosure> for Disclosure {
    fn from(d: &maljan_staging::Disclosure) -> Self {
        Disclosure {
            server: d.server.clone(),
            what: match &d.what {
                Disclosed::Sample => Sent::Sample,
                Disclosed::ToolOutput { step, tool } => Sent::ToolOutput {
                    step: step.clone(),
                    tool: tool.clone(),
                },
                Disclosed::JobFile => Sent::JobFile,
            },
            needed_by: d.needed_by.clone(),
            name: d.name.clone(),
            size: d.size,
            sha256: d.sha256.clone(),
            mode: match d.mode {
                UploadMode::Chunked => Mode::Chunked,
                UploadMode::Single => Mode::Single,
            },
            // An upload still under way when the report is made was cut short.
            outcome: match &d.outcome {
                DisclosureOutcome::Sent { remote_path } => Upload::Sent {
                    remote_path: remote_path.clone(),
                },
                DisclosureOutcome::Failed { reason } => Upload::Failed {
                    reason: reason.clone(),
                },
                _ => Upload::Interrupted,
            },
            duration_ms: d.duration_ms,
        }
    }
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

impl From<&maljan_staging::Degradation> for Degradation {
    fn from(d: &maljan_staging::Degradation) -> Self {
        Degradation {
            server: d.server.clone(),
            subject: d.subject.clone(),
            reason: d.reason.clone(),
        }
    }
}
