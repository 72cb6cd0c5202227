//! One call as the ledger keeps it: who called what, in which job, run and step, with what
//! arguments, and how it ended.

use std::time::{Duration, SystemTime};

use maljan_mcp_proto::maljan::{Outcome, ToolFailure};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One call, as the ledger keeps it.
///
/// In JSON, times are RFC 3339 (millisecond precision) and durations whole microseconds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The [`Ledger`](crate::Ledger) that numbered the entry: a time-ordered unique id, one
    /// per ledger opened (a process's, say). Empty in entries written before it existed.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub writer: String,
    /// The entry's number among its writer's, from 1: with `writer`, unique in a file that
    /// several writers append to.
    pub seq: u64,
    /// The call.
    #[serde(flatten)]
    pub call: CallRecord,
}

/// What a call belongs to: the job (its directory), the run within it and the pack's step.
/// Each is absent for a call made outside one (a single `maljan call` has a job only when
/// given one).
///
/// ```
/// let scope = maljan_ledger::CallScope::default().job("/jobs/42").run("r1").step("unpack");
/// assert_eq!(scope.step.as_deref(), Some("unpack"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct CallScope {
    /// The job's directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<String>,
    /// The run's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The step's id in the run's pack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// The call's W3C `traceparent`, as sent in its `_meta`: to find it in the server's logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
}

impl CallScope {
    /// Within `job`.
    pub fn job(mut self, job: impl Into<String>) -> Self {
        self.job = Some(job.into());
        self
    }

    /// Within `run`.
    pub fn run(mut self, run: impl Into<String>) -> Self {
        self.run = Some(run.into());
        self
    }

    /// Within `step`.
    pub fn step(mut self, step: impl Into<String>) -> Self {
        self.step = Some(step.into());
        self
    }
}

/// What is known of a call before the ledger numbers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// What the call belongs to.
    #[serde(flatten)]
    pub scope: CallScope,
    /// The server's configured name.
    pub server: String,
    /// The protocol version the call went out in (`2026-07-28` for the modern era), when
    /// the server was set up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// The tool.
    pub tool: String,
    /// The arguments as the model (or the user) wrote them.
    pub arguments: Value,
    /// What was sent instead, when the arguments were rewritten (paths staged, say).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub sent_arguments: Option<Value>,
    /// The answer's value (null when there was none).
    pub answer: Value,
    /// Ok, or failed with code, message and remediation.
    pub outcome: Outcome,
    /// When the call was asked for.
    #[serde(with = "rfc3339")]
    pub started_at: SystemTime,
    /// From asking to the end, queueing included.
    #[serde(rename = "duration_us", with = "micros")]
    pub duration: Duration,
    /// Time spent waiting for a slot under the concurrency cap.
    #[serde(rename = "queued_us", with = "micros")]
    pub queued: Duration,
}

impl LedgerEntry {
    /// The failure, when the call failed.
    pub fn failure(&self) -> Option<&ToolFailure> {
        match &self.call.outcome {
            Outcome::Ok => None,
            Outcome::Failed(f) => Some(f),
        }
    }
}

/// A present member is `Some`, even when it is `null` (rewritten to null is not "not rewritten").
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

mod rfc3339 {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer, de};

    pub(super) fn serialize<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&humantime::format_rfc3339_millis(*t))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<SystemTime, D::Error> {
        let text = String::deserialize(d)?;
        humantime::parse_rfc3339(&text).map_err(de::Error::custom)
    }
}

mod micros {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        u64::deserialize(d).map(Duration::from_micros)
    }
}
