//! The call pipeline: cap → breaker → call (timeout, cancellation) → answer → ledger.

use std::time::{Duration, Instant, SystemTime};

use maljan_breaker::{Refused, Verdict};
use maljan_ledger::CallRecord;
use maljan_mcp_proto::maljan::{ErrorCode, ToolAnswer, ToolFailure, is_platform_primitive};
use serde_json::Value;

use crate::{ClientError, ServerConnection};

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

/// Whether the server answered: no answer within the wait, or a connection lost before the
/// answer, is unanswered; anything else, a tool's error included, is an answer.
fn verdict(answer: &ToolAnswer) -> Verdict {
    match answer.failure().map(|f| &f.code) {
        Some(ErrorCode::Unanswered | ErrorCode::ConnectionLost) => Verdict::Unanswered,
        _ => Verdict::Answered,
    }
}

fn resting(server: &str, refused: Refused, threshold: u32) -> ToolFailure {
    let message = match refused {
        Refused::Resting { remaining, .. } => format!(
            "server {server} is resting for {:.0} s more after {threshold} unanswered calls in \
             a row; the call was not sent",
            remaining.as_secs_f64().ceil()
        ),
        _ => format!("server {server} is being probed after a rest; the call was not sent"),
    };
    ToolFailure::new(
        ErrorCode::ServerResting,
        message,
        Some(format!(
            "wait for the rest to end, or check the server (maljan probe {server}); the rest \
             is core.mcp.breaker.rest_s"
        )),
    )
}

impl ServerConnection {
    /// Calls a tool through the whole pipeline and reads its answer by Maljan's rules.
    ///
    /// The call waits for a slot under the concurrency cap (FIFO), is refused at once with
    /// `server_resting` while the server rests, waits the manifest's `timeout_s` (the
    /// configured default when null), tells the server with `notifications/cancelled` when
    /// it gives up, and is recorded in the ledger whatever happened (strings over 64 KiB,
    /// such as file chunks, recorded by their length only). A failed call (the
    /// tool's error envelope, a JSON-RPC error, no answer, a lost connection, an invalid
    /// answer, a resting server) is a failed [`ToolAnswer`] with its code, not an `Err`.
    ///
    /// `arguments` must be a JSON object (or null for none). A platform primitive
    /// (`get_file`, `put_sample*`, `capabilities`) is refused by name
    /// ([`ClientError::PlatformPrimitive`]): this is the model-facing call, and only staging
    /// moves files.
    pub async fn call(&self, tool: &str, arguments: Value) -> Result<ToolAnswer, ClientError> {
        if is_platform_primitive(tool) {
            return Err(ClientError::PlatformPrimitive {
                server: self.name().to_owned(),
                tool: tool.to_owned(),
            });
        }
        let sent = match &arguments {
            Value::Object(_) if self.setup_info().is_some() => {
                let sent = self.stage_arguments(&arguments).await;
                (sent != arguments).then_some(sent)
            }
            _ => None,
        };
        self.call_prepared(tool, arguments, sent, None).await
    }

    /// [`call`](Self::call), asking the server for progress notifications under `token`
    /// (`_meta.progressToken`); read them from [`take_notifications`](Self::take_notifications).
    pub async fn call_with_progress(
        &self,
        tool: &str,
        arguments: Value,
        token: Value,
    ) -> Result<ToolAnswer, ClientError> {
        let mut meta = serde_json::Map::new();
        meta.insert("progressToken".to_owned(), token);
        self.call_prepared(tool, arguments, None, Some(meta)).await
    }

    /// A call without staging: how the transfer primitives themselves are called.
    pub(crate) async fn call_unstaged(
        &self,
        tool: &str,
        arguments: Value,
    ) -> Result<ToolAnswer, ClientError> {
        self.call_prepared(tool, arguments, None, None).await
    }

    /// Cap → breaker → call → answer → ledger, with `sent` going out in place of the
    /// arguments as written when staging rewrote them.
    async fn call_prepared(
        &self,
        tool: &str,
        arguments: Value,
        sent: Option<Value>,
        meta: Option<serde_json::Map<String, Value>>,
    ) -> Result<ToolAnswer, ClientError> {
        let started_at = SystemTime::now();
        let start = Instant::now();
        // What the ledger keeps is taken first; the arguments then move into the call.
        let written = for_ledger(&arguments);
        let sent_for_ledger = sent.as_ref().map(for_ledger);
        let checked = self.check_call(tool, sent.unwrap_or(arguments))?;
        let (answer, queued) = match checked {
            Err(refused) => (refused, Duration::ZERO),
            Ok(map) => {
                let wait = self.timeout_for(tool);
                let guarded = self
                    .guard
                    .run(|| async {
                        let answer = self.send_tool_call(tool, map, meta, wait).await;
                        let verdict = verdict(&answer);
                        (answer, verdict)
                    })
                    .await;
                match guarded {
                    Ok(g) => (g.value, g.queued),
                    Err(refused) => (
                        ToolAnswer::failed(resting(
                            self.name(),
                            refused,
                            self.settings.breaker.unanswered_threshold,
                        )),
                        refused.queued(),
                    ),
                }
            }
        };
        let record = CallRecord {
            server: self.name().to_owned(),
            tool: tool.to_owned(),
            arguments: written,
            sent_arguments: sent_for_ledger,
            answer: for_ledger(&answer.value),
            outcome: answer.outcome.clone(),
            started_at,
            duration: start.elapsed(),
            queued,
        };
        if let Err(e) = self.settings.ledger.record(record) {
            tracing::error!(
                server = self.name(),
                "the call was made but not ledgered: {e}"
            );
        }
        Ok(answer)
    }

    /// The breaker's state.
    pub fn breaker_state(&self) -> maljan_breaker::BreakerState {
        self.guard.state()
    }
}
