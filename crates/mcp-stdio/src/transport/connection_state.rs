//! What the reader, the writer and the callers of one stdio connection share: the requests
//! waiting for their answers (each marked once its line is on its way to the server's
//! stdin), the queue of lines for the writer, and why the connection ended. A request that
//! the connection loses before its line was written fails as not sent.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};

use maljan_mcp_proto::jsonrpc::{Reply, RequestId};
use maljan_mcp_transport::EndsSetup;
use tokio::sync::{mpsc, oneshot};

use super::stderr::StderrTail;
use super::{LostBecause, StdioError};
use crate::BusyPoll;
use crate::classifier::LineCounts;

pub(super) struct PendingEntry {
    pub(super) reply: oneshot::Sender<Result<Reply, StdioError>>,
    pub(super) ends_setup: Option<EndsSetup>,
    /// The request's line reached the server's stdin: a request lost before that is failed
    /// as [`StdioError::NotSent`], so it may be sent again to a server started anew.
    pub(super) written: bool,
}

/// A line waiting for the writer, with the request it carries (none for a notification or
/// a reply).
pub(super) struct OutgoingLine {
    pub(super) line: Vec<u8>,
    pub(super) request: Option<RequestId>,
}

pub(super) struct ConnectionState {
    pub(super) server: String,
    pub(super) pending: Mutex<HashMap<RequestId, PendingEntry>>,
    pub(super) failure: Mutex<Option<StdioError>>,
    pub(super) counts: Mutex<LineCounts>,
    /// Answers to no pending request (late, or an id never sent), dropped.
    pub(super) unmatched: AtomicU64,
    pub(super) outgoing: Mutex<Option<mpsc::Sender<OutgoingLine>>>,
    pub(super) next_id: AtomicI64,
    pub(super) close_window: AtomicBool,
    pub(super) batches_allowed: AtomicBool,
    pub(super) stderr: Arc<Mutex<StderrTail>>,
    pub(super) child_pid: Option<u32>,
    /// Armed by the writer as each request goes out, for the reader.
    pub(super) busy_poll: BusyPoll,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind; keep going.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ConnectionState {
    /// Ends the connection: remembers why, and fails every pending request with it.
    pub(super) fn fail(&self, error: StdioError) {
        let error = {
            let mut failure = lock(&self.failure);
            failure.get_or_insert(error).clone()
        };
        let pending: Vec<PendingEntry> = lock(&self.pending).drain().map(|(_, e)| e).collect();
        for entry in pending {
            let failure = if entry.written {
                error.clone()
            } else {
                StdioError::NotSent {
                    server: self.server.clone(),
                    cause: Box::new(error.clone()),
                }
            };
            let _ = entry.reply.send(Err(failure));
        }
        lock(&self.outgoing).take();
    }

    /// Whether the request `id`'s line is on its way to the server's stdin.
    pub(super) fn mark_written(&self, id: &RequestId, written: bool) {
        if let Some(entry) = lock(&self.pending).get_mut(id) {
            entry.written = written;
        }
    }

    /// Fails the connection because its reader panicked, and returns the failure.
    pub(super) fn fail_as_panicked(&self) -> StdioError {
        self.fail(self.lost(LostBecause::ReaderPanicked));
        self.failure().expect("just failed")
    }

    pub(super) fn failure(&self) -> Option<StdioError> {
        lock(&self.failure).clone()
    }

    /// The connection lost, and why.
    pub(super) fn lost(&self, cause: LostBecause) -> StdioError {
        StdioError::ConnectionLost {
            server: self.server.clone(),
            cause,
        }
    }

    pub(super) async fn send_line(&self, line: Vec<u8>) -> Result<(), StdioError> {
        self.send(OutgoingLine {
            line,
            request: None,
        })
        .await
    }

    pub(super) async fn send(&self, line: OutgoingLine) -> Result<(), StdioError> {
        if let Some(failure) = self.failure() {
            return Err(failure);
        }
        let sender = lock(&self.outgoing).clone();
        let Some(sender) = sender else {
            return Err(self.failure().unwrap_or(StdioError::Closed {
                server: self.server.clone(),
            }));
        };
        sender.send(line).await.map_err(|_| {
            self.failure()
                .unwrap_or_else(|| self.lost(LostBecause::StdinClosed))
        })
    }
}

impl std::fmt::Debug for ConnectionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionState")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// An answer on its way.
///
/// Resolves to the server's [`Reply`], or to the [`StdioError`] that ended the wait.
/// Dropping it forgets the request (send `notifications/cancelled` for the server's sake).
#[derive(Debug)]
pub struct PendingRequest {
    pub(super) id: RequestId,
    pub(super) answer: oneshot::Receiver<Result<Reply, StdioError>>,
    pub(super) shared: Arc<ConnectionState>,
}

impl PendingRequest {
    /// The request's id.
    pub fn id(&self) -> &RequestId {
        &self.id
    }
}

impl Future for PendingRequest {
    type Output = Result<Reply, StdioError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let shared = self.shared.clone();
        Pin::new(&mut self.answer).poll(cx).map(|answer| {
            answer.unwrap_or_else(|_| {
                Err(shared.failure().unwrap_or(StdioError::Closed {
                    server: shared.server.clone(),
                }))
            })
        })
    }
}

impl Drop for PendingRequest {
    fn drop(&mut self) {
        lock(&self.shared.pending).remove(&self.id);
    }
}
