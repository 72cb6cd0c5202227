//! What a run's steps came to and what ended its servers' connections: the vocabulary of
//! its events, below the run that produces them and the recorders that hear them.

use std::collections::HashMap;
use std::fmt;
use std::path::PathBuf;

use maljan_ledger::message_shape;
use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
use serde::Serialize;
use serde_json::Value;

use crate::job::TakenFile;
use crate::pack::Step;

/// How one step (or one of its runs, for a step run once per file) ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
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
    /// The arguments with references read (local paths).
    pub resolved: Option<Value>,
    /// What the server was sent, when staging rewrote the arguments (uploaded or mapped
    /// paths).
    pub sent_arguments: Option<Value>,
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
    /// How long its call waited under the server's concurrency cap, in milliseconds.
    pub queued_ms: u64,
}

impl StepOutcome {
    /// `step`, skipped for `reason` without a call.
    pub(crate) fn skipped(step: &Step, reason: String) -> StepOutcome {
        StepOutcome {
            step: step.id().to_owned(),
            instance: None,
            server: step.server().to_owned(),
            tool: step.tool().to_owned(),
            arguments: step.arguments().clone(),
            resolved: None,
            status: StepStatus::Skipped { reason },
            answer: None,
            taken: Vec::new(),
            handed: Vec::new(),
            duration_ms: 0,
            sent_arguments: None,
            queued_ms: 0,
        }
    }

    /// `step`, failed with `failure` before any call was made.
    pub(crate) fn failed_before_running(step: &Step, failure: ToolFailure) -> StepOutcome {
        StepOutcome {
            status: StepStatus::Failed { failure },
            ..StepOutcome::skipped(step, String::new())
        }
    }

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

/// Each distinct failure of `outcomes` once (same server, code, message and remediation;
/// messages that differ only in a changing number, such as a resting server's seconds left,
/// are one: see [`maljan_ledger::message_shape`]), in the order first seen, with how many
/// step runs it hit and the first one's words.
///
/// ```
/// use maljan_client::distinct_failures;
/// assert!(distinct_failures(&[]).is_empty());
/// ```
pub fn distinct_failures(outcomes: &[StepOutcome]) -> Vec<DistinctFailure> {
    let mut distinct: Vec<DistinctFailure> = Vec::new();
    let mut index: HashMap<(&str, &ErrorCode, String, Option<String>), usize> = HashMap::new();
    for outcome in outcomes {
        let Some(failure) = outcome.failure() else {
            continue;
        };
        let key = (
            outcome.server.as_str(),
            &failure.code,
            message_shape(&failure.message),
            failure.remediation.as_deref().map(message_shape),
        );
        match index.get(&key).map(|&at| &mut distinct[at]) {
            Some(known) => {
                known.count += 1;
                if !known.steps.contains(&outcome.step) {
                    known.steps.push(outcome.step.clone());
                }
            }
            None => {
                index.insert(key, distinct.len());
                distinct.push(DistinctFailure {
                    server: outcome.server.clone(),
                    failure: failure.clone(),
                    count: 1,
                    steps: vec![outcome.step.clone()],
                });
            }
        }
    }
    distinct
}

/// A connection a run lost: what ended it, and for a process, how the process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerLoss {
    /// How the server's process ended (`exit status: 3`, `signal: 9 (SIGKILL)`), when it had
    /// one and it ended.
    pub exit: Option<String>,
    /// The failure of the call that found the connection lost.
    pub failure: String,
    /// The last lines the server wrote on stderr.
    pub stderr_tail: String,
}

impl fmt::Display for ServerLoss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.exit {
            Some(exit) => write!(f, "it ended with {exit} ({})", self.failure)?,
            None => f.write_str(&self.failure)?,
        }
        match self.stderr_tail.lines().last() {
            Some(line) => write!(f, "; its last stderr line: {line}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(step: &str, server: &str, message: &str) -> StepOutcome {
        StepOutcome {
            step: step.to_owned(),
            instance: None,
            server: server.to_owned(),
            tool: "scan".to_owned(),
            arguments: Value::Null,
            resolved: None,
            status: StepStatus::Failed {
                failure: ToolFailure::new(ErrorCode::ServerResting, message, None),
            },
            answer: None,
            taken: Vec::new(),
            handed: Vec::new(),
            duration_ms: 0,
            sent_arguments: None,
            queued_ms: 0,
        }
    }

    #[test]
    fn one_failure_whatever_its_changing_number_and_the_steps_it_hit_once_each() {
        let outcomes = [
            failed("a", "slow", "resting for 60 s more"),
            failed("b", "slow", "resting for 58 s more"),
            failed("b", "slow", "resting for 57 s more"),
            failed("c", "other", "resting for 60 s more"),
        ];
        let failures = distinct_failures(&outcomes);
        assert_eq!(failures.len(), 2, "{failures:?}");
        assert_eq!(failures[0].count, 3);
        assert_eq!(failures[0].steps, ["a", "b"]);
        assert_eq!(failures[0].failure.message, "resting for 60 s more");
        assert_eq!(failures[1].server, "other");
    }
}
