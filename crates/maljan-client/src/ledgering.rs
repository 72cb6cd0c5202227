//! The ledger layer: every call that reaches it is recorded, whatever happened to it
//! (strings over 64 KiB, such as file chunks, recorded by their length only).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use maljan_ledger::{CallRecord, Ledger};
use maljan_mcp_proto::maljan::{ToolAnswer, ToolFailure};
use serde_json::Value;

use crate::call::{CallService, Called, ToolCall};

/// Strings longer than this are recorded in the ledger by their length only: file chunks
/// in base64 would otherwise fill it.
const LEDGER_STRING_BYTES: usize = 64 * 1024;

/// The value with long strings replaced by a note of their length.
fn for_ledger(value: &Value) -> Value {
    match value {
        Value::String(s) if s.len() > LEDGER_STRING_BYTES => {
            Value::String(format!("<{} bytes, not recorded>", s.len()))
        }
        Value::Array(items) => Value::Array(items.iter().map(for_ledger).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), for_ledger(v)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Records the calls to the layer below in a ledger.
#[derive(Debug)]
pub(crate) struct Ledgered<S> {
    inner: S,
    server: String,
    ledger: Arc<Ledger>,
}

/// What the ledger keeps of a call before it goes out: its arguments as written and, when
/// staging rewrote them, as sent.
struct Recording {
    started_at: SystemTime,
    start: Instant,
    tool: String,
    written: Value,
    sent: Option<Value>,
}

impl Recording {
    fn of(call: &ToolCall) -> Self {
        let (written, sent) = match &call.as_written {
            Some(written) => (for_ledger(written), Some(for_ledger(&call.arguments))),
            None => (for_ledger(&call.arguments), None),
        };
        Recording {
            started_at: SystemTime::now(),
            start: Instant::now(),
            tool: call.tool.clone(),
            written,
            sent,
        }
    }
}

impl<S> Ledgered<S> {
    /// Records the calls to `inner`, a server named `server`, in `ledger`.
    pub(crate) fn new(inner: S, server: impl Into<String>, ledger: Arc<Ledger>) -> Self {
        Ledgered {
            inner,
            server: server.into(),
            ledger,
        }
    }

    /// The layer below.
    pub(crate) fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The layer below.
    pub(crate) fn into_inner(self) -> S {
        self.inner
    }

    /// Records a call refused before it was sent, and returns its failed answer.
    pub(crate) fn refuse(&self, call: &ToolCall, failure: ToolFailure) -> ToolAnswer {
        let answer = ToolAnswer::failed(failure);
        self.record(Recording::of(call), &answer, std::time::Duration::ZERO);
        answer
    }

    fn record(&self, recording: Recording, answer: &ToolAnswer, queued: std::time::Duration) {
        let record = CallRecord {
            server: self.server.clone(),
            tool: recording.tool,
            arguments: recording.written,
            sent_arguments: recording.sent,
            answer: for_ledger(&answer.value),
            outcome: answer.outcome.clone(),
            started_at: recording.started_at,
            duration: recording.start.elapsed(),
            queued,
        };
        if let Err(e) = self.ledger.record(record) {
            tracing::error!(
                server = self.server,
                "the call was made but not ledgered: {e}"
            );
        }
    }
}

impl<S: CallService> CallService for Ledgered<S> {
    async fn call(&self, call: ToolCall) -> Called {
        // What the ledger keeps is taken first; the arguments then move into the call.
        let recording = Recording::of(&call);
        let called = self.inner.call(call).await;
        self.record(recording, &called.answer, called.queued);
        called
    }
}
