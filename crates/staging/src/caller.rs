//! How staging calls a server's primitives: any caller of a tool will do.

use std::future::Future;

use maljan_mcp_proto::maljan::ToolFailure;
use serde_json::Value;

/// Calls a tool on one server: how staging reaches `get_file` and `put_sample*`.
///
/// The client implements it with its whole call pipeline (cap, breaker, ledger), so every
/// transfer call is ledgered. The answer is the tool's value read by Maljan's rules; a
/// failed call (the server's `{error}` included) is the failure.
pub trait ToolCaller {
    /// Calls `tool` with `arguments`.
    fn call_tool(
        &self,
        tool: &str,
        arguments: Value,
    ) -> impl Future<Output = Result<Value, ToolFailure>> + Send;
}

/// Polls a call once, now, and gives back the rest of it.
///
/// A call's request goes out when it is first polled. A driver that pushes a call into a
/// `FuturesOrdered` and then takes an answer that is already there does not poll the new
/// call until it waits again, after decoding or encoding a chunk: the server idles that
/// long. Started here, the request is on its way while the driver works.
pub(crate) async fn send_at_once<F: Future>(call: F) -> impl Future<Output = F::Output> {
    let mut call = Box::pin(call);
    let first = futures_util::poll!(call.as_mut());
    async move {
        match first {
            std::task::Poll::Ready(output) => output,
            std::task::Poll::Pending => call.await,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    #[tokio::test]
    async fn a_started_call_has_run_up_to_its_first_wait() {
        let sent = AtomicBool::new(false);
        let (answer_tx, answer_rx) = tokio::sync::oneshot::channel::<u32>();
        let rest = send_at_once(async {
            sent.store(true, Ordering::SeqCst);
            answer_rx.await
        })
        .await;
        assert!(
            sent.load(Ordering::SeqCst),
            "the request went out when started"
        );
        answer_tx.send(7).expect("the call waits for its answer");
        assert_eq!(rest.await, Ok(7));
    }

    #[tokio::test]
    async fn a_call_that_ends_at_once_keeps_its_output() {
        assert_eq!(send_at_once(async { 7 }).await.await, 7);
    }
}
