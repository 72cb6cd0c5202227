//! How many tool calls a server runs at once, and how many wait for a turn: every call's
//! handler holds a thread and its memory, so callers who send hundreds of calls at once
//! get a clear "busy" answer past the queue instead of hundreds of threads.
//!
//! File chunks pass a gate of their own: a chunk that arrived ahead of its turn holds its
//! thread while it waits for the chunk before it, which must not wait behind it for a turn
//! of the same gate. Their gate lets run the chunks that may wait on the whole server
//! ([`MAX_CHUNKS_WAITING_IN_ALL`](crate::MAX_CHUNKS_WAITING_IN_ALL)) and as many more as
//! calls run.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// How many tool calls run at once, unless the operator says otherwise.
pub const MAX_CALLS_RUNNING: usize = 16;
/// How many tool calls may wait for a turn, unless the operator says otherwise; past that
/// a call is answered `server_busy` at once.
pub const MAX_CALLS_QUEUED: usize = 64;

/// The bounds on a server's tool calls (see [`ServerBuilder::call_limits`](crate::ServerBuilder::call_limits)).
///
/// ```
/// use maljan_sidecar_kit::{CallLimits, Server};
/// let limits = CallLimits::default().running(4).queued(8);
/// let server = Server::builder("demo", "1").call_limits(limits).build();
/// assert_eq!(server.call_limits().max_running(), 4);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallLimits {
    running: usize,
    queued: usize,
}

impl Default for CallLimits {
    fn default() -> Self {
        CallLimits {
            running: MAX_CALLS_RUNNING,
            queued: MAX_CALLS_QUEUED,
        }
    }
}

impl CallLimits {
    /// How many calls run at once ([`MAX_CALLS_RUNNING`], at least 1).
    pub fn running(mut self, calls: usize) -> Self {
        self.running = calls.max(1);
        self
    }

    /// How many calls may wait for a turn ([`MAX_CALLS_QUEUED`]).
    pub fn queued(mut self, calls: usize) -> Self {
        self.queued = calls;
        self
    }

    /// How many calls run at once.
    pub fn max_running(&self) -> usize {
        self.running
    }

    /// How many calls may wait for a turn.
    pub fn max_queued(&self) -> usize {
        self.queued
    }
}

/// The gates tool calls pass: one for file chunks, one for every other call.
#[derive(Debug)]
pub(crate) struct CallGates {
    limits: CallLimits,
    calls: CallGate,
    chunks: CallGate,
}

impl CallGates {
    pub(crate) fn new(limits: CallLimits) -> CallGates {
        let chunks = CallLimits {
            running: limits.running + crate::MAX_CHUNKS_WAITING_IN_ALL,
            queued: limits.queued,
        };
        CallGates {
            limits,
            calls: CallGate::new(limits),
            chunks: CallGate::new(chunks),
        }
    }

    pub(crate) fn limits(&self) -> CallLimits {
        self.limits
    }

    /// Waits for a call's turn at the gate for its kind.
    pub(crate) async fn turn(&self, chunk: bool) -> Result<Turn, ToolFailure> {
        if chunk {
            self.chunks.turn().await
        } else {
            self.calls.turn().await
        }
    }
}

/// One gate: calls running, and calls waiting for a turn.
#[derive(Debug)]
struct CallGate {
    limits: CallLimits,
    running: Arc<Semaphore>,
    queued: AtomicUsize,
}

/// A call's turn: the next waiting call runs when it is dropped.
pub(crate) type Turn = OwnedSemaphorePermit;

/// A place in the queue, given back when dropped (the call ran, or its caller went away).
struct Waiting<'a>(&'a AtomicUsize);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl CallGate {
    fn new(limits: CallLimits) -> CallGate {
        CallGate {
            limits,
            running: Arc::new(Semaphore::new(limits.running)),
            queued: AtomicUsize::new(0),
        }
    }

    /// Waits for a call's turn; `Err` is the `server_busy` failure when the queue is full.
    async fn turn(&self) -> Result<Turn, ToolFailure> {
        if let Ok(turn) = self.running.clone().try_acquire_owned() {
            return Ok(turn);
        }
        if self.queued.fetch_add(1, Ordering::AcqRel) >= self.limits.queued {
            self.queued.fetch_sub(1, Ordering::AcqRel);
            return Err(ToolFailure::new(
                ErrorCode::ServerBusy,
                format!(
                    "the server runs {} calls and {} more wait, the most it takes",
                    self.limits.running, self.limits.queued
                ),
                Some("try again later, or send fewer calls at once".to_owned()),
            ));
        }
        let _waiting = Waiting(&self.queued);
        // The semaphore is never closed, so acquiring fails only if it were.
        self.running
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ToolFailure::new(ErrorCode::ToolFailed, "the server is ending", None))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn past_the_running_and_the_queued_calls_a_call_is_busy() {
        let gate = Arc::new(CallGate::new(CallLimits::default().running(1).queued(1)));
        let first = gate.turn().await.expect("runs");
        let waiter = tokio::spawn({
            let gate = gate.clone();
            async move { gate.turn().await.map(drop).is_ok() }
        });
        // The waiter takes the one place in the queue before a third call comes.
        while gate.queued.load(Ordering::Acquire) == 0 {
            tokio::task::yield_now().await;
        }
        let busy = gate.turn().await.expect_err("busy");
        assert_eq!(busy.code, ErrorCode::ServerBusy);
        drop(first);
        assert!(waiter.await.expect("join"), "the waiting call ran");
        assert_eq!(gate.queued.load(Ordering::Acquire), 0);
        drop(gate.turn().await.expect("room again"));
    }
}
