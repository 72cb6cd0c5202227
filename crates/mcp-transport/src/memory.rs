//! A transport in memory: the client's end implements [`Transport`], the other end
//! ([`MemoryPeer`]) plays the server in a test, message by message.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use maljan_mcp_proto::jsonrpc::Notification;
//! use maljan_mcp_transport::{Transport, memory};
//!
//! let (mut client, server) = memory::pair("scripted");
//! let mut incoming = client.take_incoming().expect("once");
//! server.notify(Notification { method: "notifications/message".into(), params: None });
//! assert_eq!(incoming.recv().await.unwrap().method, "notifications/message");
//! # }
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use maljan_mcp_proto::jsonrpc::{Message, Notification, Reply, Request, RequestId};
use maljan_mcp_proto::mcp::ProtocolVersion;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::{
    BoxFuture, CloseReport, OutgoingRequest, PendingReply, Transport, TransportCounts,
    TransportFailure, TransportInfo, TransportKind,
};

/// How many server notifications wait for the client before more are dropped.
const INCOMING_QUEUE: usize = 256;

/// Why the in-memory transport could not carry a message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryError {
    /// The peer was dropped before it answered.
    #[error("server {server}: the in-memory peer is gone")]
    PeerGone {
        /// The server's name.
        server: String,
    },
    /// The client's end was closed.
    #[error("server {server}: the connection is closed")]
    Closed {
        /// The server's name.
        server: String,
    },
}

struct Shared {
    server: String,
    pending: Mutex<HashMap<RequestId, oneshot::Sender<Result<Reply, TransportFailure>>>>,
    counts: Mutex<TransportCounts>,
    protocol: Mutex<Option<ProtocolVersion>>,
    setup_ended: Mutex<bool>,
    closed: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The client's end of an in-memory transport.
#[derive(Debug)]
pub struct MemoryTransport {
    shared: Arc<Shared>,
    next_id: AtomicI64,
    to_peer: Mutex<Option<mpsc::UnboundedSender<Message>>>,
    incoming: Option<mpsc::Receiver<Notification>>,
}

/// The server's end of an in-memory transport, driven by a test.
#[derive(Debug)]
pub struct MemoryPeer {
    shared: Arc<Shared>,
    from_client: mpsc::UnboundedReceiver<Message>,
    to_client: mpsc::Sender<Notification>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// A connected pair: the client's transport to a server named `server`, and the peer that
/// plays that server.
pub fn pair(server: impl Into<String>) -> (MemoryTransport, MemoryPeer) {
    let shared = Arc::new(Shared {
        server: server.into(),
        pending: Mutex::default(),
        counts: Mutex::default(),
        protocol: Mutex::default(),
        setup_ended: Mutex::new(false),
        closed: AtomicBool::new(false),
    });
    let (to_peer, from_client) = mpsc::unbounded_channel();
    let (to_client, incoming) = mpsc::channel(INCOMING_QUEUE);
    (
        MemoryTransport {
            shared: shared.clone(),
            next_id: AtomicI64::new(1),
            to_peer: Mutex::new(Some(to_peer)),
            incoming: Some(incoming),
        },
        MemoryPeer {
            shared,
            from_client,
            to_client,
        },
    )
}

/// Forgets a request whose reply is no longer awaited.
struct Forget {
    shared: Arc<Shared>,
    id: RequestId,
}

impl Drop for Forget {
    fn drop(&mut self) {
        lock(&self.shared.pending).remove(&self.id);
    }
}

impl MemoryTransport {
    fn closed(&self) -> TransportFailure {
        TransportFailure::lost(MemoryError::Closed {
            server: self.shared.server.clone(),
        })
    }

    fn send(&self, message: Message) -> Result<(), TransportFailure> {
        let to_peer = lock(&self.to_peer);
        let sender = to_peer.as_ref().ok_or_else(|| self.closed())?;
        sender.send(message).map_err(|_| {
            TransportFailure::lost(MemoryError::PeerGone {
                server: self.shared.server.clone(),
            })
        })
    }
}

impl Transport for MemoryTransport {
    fn server(&self) -> &str {
        &self.shared.server
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Memory
    }

    fn send_request(
        &self,
        request: OutgoingRequest,
    ) -> BoxFuture<'_, Result<PendingReply, TransportFailure>> {
        Box::pin(async move {
            let id = RequestId::Integer(self.next_id.fetch_add(1, Ordering::Relaxed));
            let (method, params, _) = request.into_parts();
            let (reply_tx, reply_rx) = oneshot::channel();
            lock(&self.shared.pending).insert(id.clone(), reply_tx);
            let forget = Forget {
                shared: self.shared.clone(),
                id: id.clone(),
            };
            let params = params
                .map(|p| serde_json::value::to_raw_value(&p))
                .transpose()
                .map_err(TransportFailure::lost)?;
            self.send(Message::Request(Request {
                id: id.clone(),
                method: method.into_owned(),
                params,
            }))?;
            let shared = self.shared.clone();
            Ok(PendingReply::new(id, async move {
                let reply = reply_rx.await;
                drop(forget);
                reply.unwrap_or_else(|_| {
                    let server = shared.server.clone();
                    Err(TransportFailure::lost(
                        if shared.closed.load(Ordering::Acquire) {
                            MemoryError::Closed { server }
                        } else {
                            MemoryError::PeerGone { server }
                        },
                    ))
                })
            }))
        })
    }

    fn notify(
        &self,
        method: &str,
        params: Option<Value>,
    ) -> BoxFuture<'_, Result<(), TransportFailure>> {
        let method = method.to_owned();
        Box::pin(async move {
            let params = params
                .map(|p| serde_json::value::to_raw_value(&p))
                .transpose()
                .map_err(TransportFailure::lost)?;
            self.send(Message::Notification(Notification { method, params }))
        })
    }

    fn take_incoming(&mut self) -> Option<mpsc::Receiver<Notification>> {
        self.incoming.take()
    }

    fn set_protocol(&self, version: ProtocolVersion) {
        *lock(&self.shared.protocol) = Some(version);
    }

    fn end_setup(&self) {
        *lock(&self.shared.setup_ended) = true;
    }

    fn info(&self) -> Arc<dyn TransportInfo> {
        self.shared.clone()
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, CloseReport> {
        self.shared.closed.store(true, Ordering::Release);
        lock(&self.to_peer).take();
        let pending: Vec<_> = lock(&self.shared.pending).drain().collect();
        drop(pending);
        let counts = self.shared.counts();
        Box::pin(async move { CloseReport::without_process(counts) })
    }
}

impl TransportInfo for Shared {
    fn counts(&self) -> TransportCounts {
        *lock(&self.counts)
    }
}

impl MemoryPeer {
    /// The next message the client sent; `None` once the client's end is closed or dropped.
    pub async fn next_message(&mut self) -> Option<Message> {
        self.from_client.recv().await
    }

    /// Answers the request `id`. Returns whether a request was waiting for it: a reply to an
    /// id nobody waits for (unknown, late, forgotten) is counted as invalid and dropped.
    pub fn answer(&self, id: &RequestId, reply: Reply) -> bool {
        let waiting = lock(&self.shared.pending).remove(id);
        let mut counts = lock(&self.shared.counts);
        match waiting {
            Some(sender) => {
                counts.messages += 1;
                drop(counts);
                sender.send(Ok(reply)).is_ok()
            }
            None => {
                counts.invalid += 1;
                false
            }
        }
    }

    /// Sends the client a notification (dropped when its queue is full or nobody took it).
    pub fn notify(&self, notification: Notification) {
        lock(&self.shared.counts).messages += 1;
        let _ = self.to_client.try_send(notification);
    }

    /// The protocol version the client set, once it has.
    pub fn protocol(&self) -> Option<ProtocolVersion> {
        *lock(&self.shared.protocol)
    }

    /// Whether the client said its setup is over.
    pub fn setup_ended(&self) -> bool {
        *lock(&self.shared.setup_ended)
    }
}

impl Drop for MemoryPeer {
    /// The server is gone: a request it never read fails as unsent (it reached no server),
    /// one it read and left unanswered as lost.
    fn drop(&mut self) {
        self.from_client.close();
        let mut unread = Vec::new();
        while let Ok(message) = self.from_client.try_recv() {
            if let Message::Request(request) = message {
                unread.push(request.id);
            }
        }
        let pending: Vec<_> = lock(&self.shared.pending).drain().collect();
        let server = self.shared.server.clone();
        for (id, reply) in pending {
            let gone = MemoryError::PeerGone {
                server: server.clone(),
            };
            let _ = reply.send(Err(if unread.contains(&id) {
                TransportFailure::unsent(gone)
            } else {
                TransportFailure::lost(gone)
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> Reply {
        Reply::Result(
            serde_json::value::to_raw_value(&serde_json::json!({}))
                .expect("JSON")
                .into(),
        )
    }

    async fn request_id(peer: &mut MemoryPeer) -> RequestId {
        match peer.next_message().await {
            Some(Message::Request(r)) => r.id,
            other => panic!("a request, not {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_peer_gone_fails_what_it_read_as_lost_and_what_it_never_read_as_unsent() {
        let (client, mut peer) = pair("memory");
        let read = client
            .send_request(OutgoingRequest::new("a", None))
            .await
            .expect("sent");
        let unread = client
            .send_request(OutgoingRequest::new("b", None))
            .await
            .expect("sent");
        request_id(&mut peer).await;
        drop(peer);
        let read = read.await.expect_err("lost");
        assert!(read.is_lost() && !read.is_unsent(), "{read}");
        let unread = unread.await.expect_err("unsent");
        assert!(unread.is_unsent(), "{unread}");
    }

    #[tokio::test]
    async fn a_reply_reaches_only_its_own_request() {
        let (client, mut peer) = pair("m");
        let first = client
            .send_request(OutgoingRequest::new("a", None))
            .await
            .expect("sent");
        let second = client
            .send_request(OutgoingRequest::new("b", None))
            .await
            .expect("sent");
        let (a, b) = (request_id(&mut peer).await, request_id(&mut peer).await);
        assert_ne!(a, b);
        assert_eq!(first.id(), &a);
        assert!(peer.answer(&b, empty()));
        assert!(second.await.is_ok());
        drop(first);
        assert!(
            !peer.answer(&a, empty()),
            "a forgotten request takes no reply"
        );
        assert_eq!(client.info().counts().messages, 1);
        assert_eq!(
            client.info().counts().invalid,
            1,
            "the stray reply is counted"
        );
    }

    #[tokio::test]
    async fn closing_fails_waiting_requests_and_refuses_new_ones() {
        let (client, _peer) = pair("m");
        let client: Box<dyn Transport> = Box::new(client);
        let waiting = client
            .send_request(OutgoingRequest::new("a", None))
            .await
            .expect("sent");
        let report = client.close().await;
        assert!(report.status.is_none());
        let failure = waiting.await.expect_err("closed");
        assert!(failure.is_lost());
        assert_eq!(failure.to_string(), "server m: the connection is closed");
    }

    #[tokio::test]
    async fn a_request_to_a_closed_client_end_is_refused() {
        let (client, peer) = pair("m");
        drop(peer);
        let failure = client
            .send_request(OutgoingRequest::new("a", None))
            .await
            .expect_err("nobody there");
        assert!(failure.is_lost());
        assert_eq!(failure.to_string(), "server m: the in-memory peer is gone");
    }
}
