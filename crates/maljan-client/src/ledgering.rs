//! The ledger layer: every call that reaches it is told to the recorders as the ledger
//! keeps it ([`RunEvent::CallMade`](crate::events::RunEvent::CallMade)), whatever happened
//! to it (strings over 64 KiB, such as file chunks, by their length only), and then given
//! to the ledgers.

use std::time::{Instant, SystemTime};

use maljan_ledger::{CallRecord, CallScope};
use maljan_mcp_proto::maljan::{ErrorCode, ToolAnswer, ToolFailure};
use maljan_mcp_proto::mcp::ProtocolVersion;
use serde_json::Value;

use crate::call::{CallService, CallTrace, ToolCall, not_an_object};
use crate::events::Recorders;

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

/// Tells the recorders (the ledger among them) of each call to the layer below.
#[derive(Debug)]
pub(crate) struct Ledgered<S> {
    inner: S,
    server: String,
    recorders: Recorders,
    /// The job and run the calls belong to; each call names its step.
    scope: CallScope,
    /// The protocol version agreed at set-up.
    protocol: ProtocolVersion,
}

/// What the ledger keeps of a call before it goes out: its arguments as written and, when
/// staging rewrote them, as sent.
struct CallStart {
    started_at: SystemTime,
    start: Instant,
    tool: String,
    step: Option<String>,
    traceparent: Option<String>,
    written: Value,
    sent: Option<Value>,
}

impl CallStart {
    fn of(call: &ToolCall) -> Self {
        let (written, sent) = match &call.as_written {
            Some(written) => (for_ledger(written), Some(for_ledger(&call.arguments))),
            None => (for_ledger(&call.arguments), None),
        };
        CallStart {
            started_at: SystemTime::now(),
            start: Instant::now(),
            tool: call.tool.clone(),
            step: call.step.clone(),
            traceparent: call.traceparent.clone(),
            written,
            sent,
        }
    }
}

impl<S> Ledgered<S> {
    /// Tells `recorders` of the calls to `inner`, a server named `server` speaking
    /// `protocol`, each as part of `scope` (its job and run) and of the call's step.
    pub(crate) fn new(
        inner: S,
        server: impl Into<String>,
        protocol: ProtocolVersion,
        recorders: Recorders,
        scope: CallScope,
    ) -> Self {
        Ledgered {
            inner,
            server: server.into(),
            recorders,
            scope,
            protocol,
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
    fn refuse(&self, call: &ToolCall, failure: ToolFailure) -> ToolAnswer {
        let answer = ToolAnswer::failed(failure);
        if let Some(start) = self.start(call) {
            self.record(start, &answer, std::time::Duration::ZERO);
        }
        answer
    }

    fn record(&self, start: CallStart, answer: &ToolAnswer, queued: std::time::Duration) {
        let mut scope = self.scope.clone();
        scope.step = start.step;
        scope.traceparent = start.traceparent;
        let record = CallRecord {
            scope,
            server: self.server.clone(),
            protocol_version: Some(self.protocol.as_str().to_owned()),
            tool: start.tool,
            arguments: start.written,
            sent_arguments: start.sent,
            answer: for_ledger(&answer.value),
            outcome: answer.outcome.clone(),
            started_at: start.started_at,
            duration: start.start.elapsed(),
            queued,
        };
        self.recorders.record_call(record);
    }

    /// What the ledger keeps of `call` as it goes out, when anyone listens.
    fn start(&self, call: &ToolCall) -> Option<CallStart> {
        (!self.recorders.is_empty()).then(|| CallStart::of(call))
    }
}

impl<S: CallService> CallService for Ledgered<S> {
    async fn call(&self, call: ToolCall) -> CallTrace {
        // Arguments that are not an object never take a slot under the cap: they are
        // refused here, and ledgered as refused.
        if !matches!(call.arguments, Value::Object(_) | Value::Null) {
            return CallTrace::of(self.refuse(&call, not_an_object(&call.arguments)));
        }
        // What the ledger keeps is taken first; the arguments then move into the call.
        let start = self.start(&call);
        let resent_if_unsent = call.resend_unsent;
        let called = self.inner.call(call).await;
        // A call lost before it reached the server, which its caller sends again to the
        // server started anew, is ledgered once: when it is made.
        let unsent_and_resent = resent_if_unsent
            && !called.written
            && called.answer.failure().map(|f| &f.code) == Some(&ErrorCode::ConnectionLost);
        if let Some(start) = start
            && !unsent_and_resent
        {
            self.record(start, &called.answer, called.queued);
        }
        called
    }
}

#[cfg(test)]
mod tests {
    use maljan_ledger::MemorySink;
    use maljan_mcp_proto::maljan::ErrorCode;
    use serde_json::json;

    use std::sync::Arc;

    use maljan_ledger::Ledger;

    use super::*;
    use crate::call::Scripted;

    fn recording_to(memory: &MemorySink) -> Recorders {
        let mut recorders = Recorders::default();
        recorders.push_ledger(Arc::new(Ledger::from(memory.clone())));
        recorders
    }

    fn ok(_: &ToolCall) -> ToolAnswer {
        ToolAnswer::read(
            &serde_json::from_value(json!({"structuredContent": {"n": 1}, "content": []}))
                .expect("a result"),
        )
    }

    #[tokio::test]
    async fn every_call_is_recorded_with_its_arguments_as_written_and_as_sent() {
        let memory = MemorySink::default();
        let ledgered = Ledgered::new(
            Scripted::new(ok),
            "s",
            ProtocolVersion::parse_session("2025-06-18").expect("known"),
            recording_to(&memory),
            CallScope::default().job("/job").run("r1"),
        );
        let mut call = ToolCall::new("strings", json!({"path": "/remote/a.bin"}));
        call.as_written = Some(json!({"path": "/job/a.bin"}));
        call.step = Some("strings-of-sample".to_owned());
        let called = ledgered.call(call).await;
        assert!(called.answer.is_ok());
        let entries = memory.entries();
        assert_eq!(entries.len(), 1);
        let record = &entries[0].call;
        assert_eq!(record.server, "s");
        assert_eq!(
            record.scope,
            CallScope::default()
                .job("/job")
                .run("r1")
                .step("strings-of-sample")
        );
        assert_eq!(record.tool, "strings");
        assert_eq!(record.arguments, json!({"path": "/job/a.bin"}));
        assert_eq!(
            record.sent_arguments,
            Some(json!({"path": "/remote/a.bin"}))
        );
        assert_eq!(record.answer, json!({"n": 1}));
        assert_eq!(
            ledgered.get_ref().calls()[0].arguments,
            json!({"path": "/remote/a.bin"}),
            "the arguments as sent go below"
        );
    }

    #[tokio::test]
    async fn a_file_chunk_is_recorded_by_its_length_only() {
        let memory = MemorySink::default();
        let ledgered = Ledgered::new(
            Scripted::new(ok),
            "s",
            ProtocolVersion::parse_session("2025-06-18").expect("known"),
            recording_to(&memory),
            CallScope::default(),
        );
        let chunk = "A".repeat(LEDGER_STRING_BYTES + 1);
        ledgered
            .call(ToolCall::new("put_sample_chunk", json!({"data": [chunk]})))
            .await;
        let record = &memory.entries()[0].call;
        assert_eq!(
            record.arguments,
            json!({"data": [format!("<{} bytes, not recorded>", LEDGER_STRING_BYTES + 1)]})
        );
        assert_eq!(record.sent_arguments, None);
    }

    #[tokio::test]
    async fn arguments_that_are_not_an_object_are_refused_here_and_recorded() {
        let memory = MemorySink::default();
        let ledgered = Ledgered::new(
            Scripted::new(ok),
            "s",
            ProtocolVersion::parse_session("2025-06-18").expect("known"),
            recording_to(&memory),
            CallScope::default(),
        );
        let called = ledgered.call(ToolCall::new("t", json!([7]))).await;
        assert!(!called.answer.is_ok());
        assert!(!called.written);
        assert!(ledgered.get_ref().calls().is_empty(), "nothing went below");
        let entries = memory.entries();
        assert_eq!(entries.len(), 1);
        assert_eq!(
            entries[0].failure().map(|f| &f.code),
            Some(&ErrorCode::BadArgument)
        );
    }
}
