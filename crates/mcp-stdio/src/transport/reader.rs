//! The reader of one stdio connection: the server's stdout goes through the line classifier,
//! and each event it yields is handled: an answer goes to the request waiting for it, a
//! notification to the receiver, a request of the server's is answered by the policy, a
//! line that is not a message is counted, and the end of stdout ends the connection.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use maljan_mcp_proto::jsonrpc::{ErrorResponse, Message, Notification, Reply, Response};
use maljan_mcp_proto::mcp::{ServerRequestPolicy, methods};
use maljan_mcp_proto::untrusted_text::escape_controls;
use tokio::io::AsyncRead;
use tokio::sync::mpsc;

use super::connection_state::{ConnectionState, lock};
use super::{LostBecause, StdioConfig, StdioError};
use crate::classifier::{Event, LineClassifier};

/// Bytes read from stdout at a time: as much as the widened pipe holds, so a multi-MiB
/// answer takes a few reads, not one per 64 KiB.
const READ_CHUNK: usize = 1024 * 1024;

pub(super) async fn read_loop<R: AsyncRead + Unpin>(
    mut reader: R,
    shared: Arc<ConnectionState>,
    config: StdioConfig,
    notifications: mpsc::Sender<Notification>,
) {
    let _panic_guard = FailPendingOnPanic(&shared);
    let mut classifier = LineClassifier::in_setup(config.classifier);
    loop {
        // The room hands what was read to the classifier as it goes, at the end of this
        // statement.
        let read = shared
            .busy_poll
            .read(&mut reader, &mut classifier.read_target(READ_CHUNK))
            .await;
        match read {
            Ok(0) => classifier.handle_eof(),
            Ok(_) => {}
            Err(e) => {
                shared.fail(shared.lost(LostBecause::ReadFailed(Arc::new(e))));
                return;
            }
        }
        loop {
            if shared.close_window.load(Ordering::Acquire) {
                classifier.close_setup_window();
            }
            classifier.set_batches_allowed(shared.batches_allowed.load(Ordering::Acquire));
            let Some(event) = classifier.poll_event() else {
                break;
            };
            // Counted before an answer is handed over: whoever gets it sees counts that
            // include it and everything before it.
            *lock(&shared.counts) = classifier.counts();
            handle_event(
                event,
                &shared,
                &mut classifier,
                &notifications,
                &config.server_requests,
            )
            .await;
        }
        *lock(&shared.counts) = classifier.counts();
        if classifier.is_finished() {
            break;
        }
    }
    shared.fail(shared.lost(LostBecause::StdoutClosed));
}

/// Fails the connection, and every call waiting on it, if the reader ends in a panic (a bug,
/// or an [`EndsSetup`] callback that panicked): nobody would read their answers.
struct FailPendingOnPanic<'a>(&'a ConnectionState);

impl Drop for FailPendingOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.fail_as_panicked();
        }
    }
}

async fn handle_event(
    event: Event,
    shared: &ConnectionState,
    classifier: &mut LineClassifier,
    notifications: &mpsc::Sender<Notification>,
    server_requests: &ServerRequestPolicy,
) {
    let server = shared.server.as_str();
    match event {
        Event::Message(Message::Response(Response { id, result })) => {
            let entry = lock(&shared.pending).remove(&id);
            match entry {
                Some(entry) => {
                    let ends_setup = match entry.ends_setup {
                        None => false,
                        Some(ends) => match std::panic::catch_unwind(|| ends(&result)) {
                            Ok(ends) => ends,
                            Err(panic) => {
                                // The entry is no longer pending: its caller is told here,
                                // before the unwind drops its channel (it would see "closed").
                                let _ = entry.reply.send(Err(shared.fail_as_panicked()));
                                std::panic::resume_unwind(panic)
                            }
                        },
                    };
                    if ends_setup {
                        classifier.close_setup_window();
                        shared.close_window.store(true, Ordering::Release);
                    }
                    let _ = entry.reply.send(Ok(Reply::Result(result)));
                }
                None => {
                    shared.unmatched.fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(server, %id, "an answer to no pending request (given up on?)")
                }
            }
        }
        Event::Message(Message::Error(ErrorResponse { id, error })) => {
            let entry = id.as_ref().and_then(|id| lock(&shared.pending).remove(id));
            match entry {
                Some(entry) => {
                    let _ = entry.reply.send(Ok(Reply::Error(error)));
                }
                None => {
                    shared.unmatched.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(
                        server,
                        code = error.code,
                        "an error answer to no pending request: {}",
                        escape_controls(&error.message)
                    );
                }
            }
        }
        Event::Message(Message::Request(request)) => {
            let reply = server_requests.answer(request);
            let _ = shared.send_line(reply.to_line()).await;
        }
        Event::Message(Message::Notification(notification)) => {
            if notification.method == methods::MESSAGE {
                let text = notification.params.as_ref().map_or("", |p| p.get());
                let text = escape_controls(text);
                tracing::info!(target: "maljan_mcp_stdio::server_log", server, "{text}");
            }
            let _ = notifications.try_send(notification);
        }
        Event::Salvaged { prefix } => {
            tracing::info!(
                server,
                "read a message from after a progress bar or byte-order mark during setup: {prefix:?}"
            );
        }
        Event::FirstStray { excerpt } => {
            tracing::warn!(
                server,
                "a line on stdout is not a protocol message and was left out (later ones are \
                 counted and reported at close); the server should log to stderr: {excerpt}"
            );
        }
        Event::Invalid {
            invalid,
            excerpt,
            stated,
        } => {
            if stated {
                tracing::warn!(
                    server,
                    "invalid protocol message on stdout: {}: {excerpt}",
                    escape_controls(&invalid.reason.to_string())
                );
            }
            if let Some(refusal) = invalid.refusal() {
                // The server's own request, malformed: refused, so that it does not wait; its
                // id is the server's, never one of ours.
                let _ = shared.send_line(refusal.to_line()).await;
                return;
            }
            if invalid.request {
                return;
            }
            let entry = invalid
                .id
                .as_ref()
                .and_then(|id| lock(&shared.pending).remove(id));
            if let Some(entry) = entry {
                let _ = entry.reply.send(Err(StdioError::InvalidAnswer {
                    server: shared.server.clone(),
                    reason: invalid.reason,
                }));
            }
        }
        Event::Oversized { length, excerpt } => {
            tracing::warn!(
                server,
                length,
                "a line over the line cap was discarded unread: {excerpt}"
            );
        }
        Event::NotUtf8 { offset } => {
            tracing::error!(
                server,
                offset,
                "stdout is not UTF-8; closing the connection"
            );
            shared.fail(StdioError::NotUtf8 {
                server: shared.server.clone(),
                offset,
            });
            if let Some(pid) = shared.child_pid {
                super::child::kill_now(pid);
            }
        }
    }
}
