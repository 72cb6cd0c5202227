//! What a run's steps came to.

use std::path::PathBuf;

use maljan_mcp_proto::maljan::ToolFailure;
use serde::Serialize;
use serde_json::Value;

use crate::TakenFile;

/// How one step (or one of its runs, for a step run once per file) ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum StepStatus {
    /// The tool answered.
    Completed,
    /// The call failed, or the server could not be used.
    Failed {
        /// Why.
        failure: ToolFailure,
    },
    /// The step did not run: what it needed never came.
    Skipped {
        /// Why.
        reason: String,
    },
}

/// A file a step took and handed to later steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct HandedFile {
    /// The name the tool gave it.
    pub name: String,
    /// Where later steps are handed it, inside the job's directory.
    pub path: PathBuf,
    /// Its sha256.
    pub sha256: String,
}

/// One step's outcome (one per file for a step run once per matching file).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[non_exhaustive]
pub struct StepOutcome {
    /// The step's id.
    pub step: String,
    /// The file this run of the step was for, when the step runs once per matching file.
    pub instance: Option<String>,
    /// The server.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// The arguments as the pack wrote them.
    pub arguments: Value,
    /// The arguments with references read (local paths; the ledger has what each server was
    /// sent).
    pub resolved: Option<Value>,
    /// How it ended.
    pub status: StepStatus,
    /// The tool's answer, when there was one.
    pub answer: Option<Value>,
    /// The files the answer named that the step declares, taken or not (with the server's
    /// words).
    pub taken: Vec<TakenFile>,
    /// The files handed to later steps.
    pub handed: Vec<HandedFile>,
    /// How long it took, in milliseconds.
    pub duration_ms: u64,
}

impl StepOutcome {
    /// The failure, when it failed.
    pub fn failure(&self) -> Option<&ToolFailure> {
        match &self.status {
            StepStatus::Failed { failure } => Some(failure),
            _ => None,
        }
    }
}

/// A failure as the run's summary lists it: once, whatever the number of steps it hit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DistinctFailure {
    /// The server.
    pub server: String,
    /// The failure (code, message, remediation).
    pub failure: ToolFailure,
    /// How many step runs failed so.
    pub count: usize,
    /// Which steps, each once.
    pub steps: Vec<String>,
}

/// Each distinct failure of `outcomes` once (same server, code, message and remediation),
/// in the order first seen, with how many step runs it hit.
///
/// ```
/// use maljan_client::distinct_failures;
/// assert!(distinct_failures(&[]).is_empty());
/// ```
pub fn distinct_failures(outcomes: &[StepOutcome]) -> Vec<DistinctFailure> {
    let mut distinct: Vec<DistinctFailure> = Vec::new();
    for outcome in outcomes {
        let Some(failure) = outcome.failure() else {
            continue;
        };
        match distinct
            .iter_mut()
            .find(|d| d.server == outcome.server && &d.failure == failure)
        {
            Some(known) => {
                known.count += 1;
                if !known.steps.contains(&outcome.step) {
                    known.steps.push(outcome.step.clone());
                }
            }
            None => distinct.push(DistinctFailure {
                server: outcome.server.clone(),
                failure: failure.clone(),
                count: 1,
                steps: vec![outcome.step.clone()],
            }),
        }
    }
    distinct
}
