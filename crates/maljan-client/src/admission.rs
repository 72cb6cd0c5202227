//! The admission layer: a slot under the server's concurrency cap (FIFO), then the breaker,
//! which refuses calls at once while the server rests after unanswered calls.

use std::sync::Arc;

use maljan_breaker::{CallGuard, Refused, Verdict};
use maljan_mcp_proto::maljan::{ErrorCode, ToolAnswer, ToolFailure};

use crate::call::{CallService, CallTrace, ToolCall};

/// Admits calls to the layer below under the cap and the breaker of one server.
#[derive(Debug)]
pub(crate) struct Admitted<S> {
    inner: S,
    server: String,
    guard: Arc<CallGuard>,
}

impl<S> Admitted<S> {
    /// Admits calls to `inner`, a server named `server`, under `guard` (its cap and breaker,
    /// which may outlive this connection: a run keeps them across a server's restarts).
    pub(crate) fn new(inner: S, server: impl Into<String>, guard: Arc<CallGuard>) -> Self {
        Admitted {
            inner,
            server: server.into(),
            guard,
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

    fn resting(&self, refused: Refused) -> ToolFailure {
        let server = &self.server;
        let threshold = self.guard.settings().unanswered_threshold;
        let message = match refused {
            Refused::Resting { remaining, .. } => format!(
                "server {server} is resting for {:.0} s more after {threshold} unanswered calls \
                 in a row; the call was not sent",
                remaining.as_secs_f64().ceil()
            ),
            _ => format!("server {server} is being probed after a rest; the call was not sent"),
        };
        ToolFailure::new(
            ErrorCode::ServerResting,
            message,
            Some(format!(
                "wait for the rest to end, or check the server (maljan probe {server}); the \
                 rest is core.mcp.breaker.rest_s"
            )),
        )
    }
}

/// Whether the server answered: no answer within the wait is unanswered; a connection lost
/// under the call says nothing of how a live server answers (the server is started again,
/// not rested); anything else, a tool's error included, is an answer.
fn verdict(answer: &ToolAnswer) -> Verdict {
    match answer.failure().map(|f| &f.code) {
        Some(ErrorCode::Unanswered) => Verdict::Unanswered,
        Some(ErrorCode::ConnectionLost) => Verdict::Lost,
        _ => Verdict::Answered,
    }
}

impl<S: CallService> CallService for Admitted<S> {
    async fn call(&self, call: ToolCall) -> CallTrace {
        let guarded = self
            .guard
            .run(|| async {
                let called = self.inner.call(call).await;
                let verdict = verdict(&called.answer);
                (called, verdict)
            })
            .await;
        match guarded {
            Ok(guarded) => CallTrace {
                queued: guarded.queued,
                ..guarded.value
            },
            Err(refused) => CallTrace {
                queued: refused.queued(),
                ..CallTrace::of(ToolAnswer::failed(self.resting(refused)))
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use maljan_breaker::{BreakerSettings, BreakerState};

    use super::*;
    use crate::call::Scripted;

    fn unanswered(_: &ToolCall) -> ToolAnswer {
        ToolAnswer::failed(ToolFailure::new(ErrorCode::Unanswered, "no answer", None))
    }

    #[tokio::test]
    async fn after_the_threshold_of_unanswered_calls_the_server_rests_and_calls_stay_here() {
        let settings = BreakerSettings {
            unanswered_threshold: 2,
            rest_s: 60,
            ..BreakerSettings::default()
        };
        let guard = Arc::new(CallGuard::new(settings));
        let admission = Admitted::new(Scripted::new(unanswered), "slow", guard.clone());
        for _ in 0..2 {
            let called = admission.call(ToolCall::new("t", json!({}))).await;
            assert_eq!(
                called.answer.failure().map(|f| &f.code),
                Some(&ErrorCode::Unanswered)
            );
        }
        let refused = admission.call(ToolCall::new("t", json!({}))).await;
        let failure = refused.answer.failure().expect("refused");
        assert_eq!(failure.code, ErrorCode::ServerResting);
        assert!(
            failure
                .message
                .contains("server slow is resting for 60 s more")
        );
        assert!(failure.message.contains("after 2 unanswered calls"));
        assert_eq!(
            admission.get_ref().calls().len(),
            2,
            "the third never went below"
        );
        assert!(matches!(guard.state(), BreakerState::Resting { .. }));
    }

    #[tokio::test]
    async fn a_tools_own_error_is_an_answer_and_keeps_the_breaker_closed() {
        let settings = BreakerSettings {
            unanswered_threshold: 1,
            ..BreakerSettings::default()
        };
        let failing =
            |_: &ToolCall| ToolAnswer::failed(ToolFailure::new(ErrorCode::BadArgument, "no", None));
        let guard = Arc::new(CallGuard::new(settings));
        let admission = Admitted::new(Scripted::new(failing), "s", guard.clone());
        for _ in 0..3 {
            let called = admission.call(ToolCall::new("t", json!({}))).await;
            assert_eq!(
                called.answer.failure().map(|f| &f.code),
                Some(&ErrorCode::BadArgument)
            );
        }
        assert_eq!(admission.get_ref().calls().len(), 3);
        assert_eq!(guard.state(), BreakerState::Closed { unanswered: 0 });
    }
}
