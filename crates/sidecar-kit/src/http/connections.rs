//! Accepting connections: each bounded in time (its headers, an idle spell between
//! requests) and all of them in number, overall and per peer address.
//!
//! At a cap, a new connection takes the place of the oldest one carrying no request (a
//! half-open one, one trickling its headers, one idle between requests): connections that
//! send nothing useful cannot lock a caller out, and one that is carrying a request is never
//! cut. Only when every connection is carrying a request is the new one refused.

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tower_service::Service;

use super::HttpOptions;
use crate::job::lock;

/// The largest request head (request line and headers) read.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// How long accepting pauses when the process is out of file descriptors: the connections
/// it holds time out meanwhile.
const FD_EXHAUSTED_PAUSE: Duration = Duration::from_millis(50);

/// One open connection as the table knows it.
#[derive(Debug)]
struct Open {
    peer: IpAddr,
    /// Requests it carries now.
    busy: Arc<AtomicUsize>,
    /// Told when the connection is to close at once.
    evict: Arc<Notify>,
}

#[derive(Debug, Default)]
struct Table {
    next: u64,
    /// By age: the oldest first.
    open: BTreeMap<u64, Open>,
    per_peer: HashMap<IpAddr, usize>,
}

impl Table {
    fn remove(&mut self, id: u64) -> Option<Open> {
        let open = self.open.remove(&id)?;
        if let Some(count) = self.per_peer.get_mut(&open.peer) {
            *count -= 1;
            if *count == 0 {
                self.per_peer.remove(&open.peer);
            }
        }
        Some(open)
    }

    /// Closes the oldest connection carrying no request (of `peer`, when named): `false`
    /// when there is none.
    fn evict_oldest_idle(&mut self, peer: Option<IpAddr>) -> bool {
        let victim = self
            .open
            .iter()
            .find(|(_, o)| peer.is_none_or(|p| o.peer == p) && o.busy.load(Ordering::Acquire) == 0)
            .map(|(id, _)| *id);
        match victim.and_then(|id| self.remove(id)) {
            Some(open) => {
                open.evict.notify_one();
                true
            }
            None => false,
        }
    }
}

/// The open connections of one server, and their caps.
#[derive(Debug)]
pub(super) struct Connections {
    table: Mutex<Table>,
    max: usize,
    max_per_peer: usize,
}

/// A connection let in: it leaves the table when dropped.
#[derive(Debug)]
pub(super) struct Admitted {
    id: u64,
    connections: Arc<Connections>,
    busy: Arc<AtomicUsize>,
    evict: Arc<Notify>,
}

impl Admitted {
    /// Completes when the connection is to close at once, to make room for another.
    pub(super) async fn evicted(&self) {
        self.evict.notified().await;
    }

    /// Marks a request carried until the guard is dropped: the connection is not evicted
    /// meanwhile.
    pub(super) fn carrying(&self) -> Carrying {
        self.busy.fetch_add(1, Ordering::AcqRel);
        Carrying(self.busy.clone())
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        lock(&self.connections.table).remove(self.id);
    }
}

/// A request in progress on a connection.
#[derive(Debug)]
pub(super) struct Carrying(Arc<AtomicUsize>);

impl Drop for Carrying {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Connections {
    pub(super) fn new(max: usize, max_per_peer: usize) -> Arc<Connections> {
        Arc::new(Connections {
            table: Mutex::default(),
            max,
            max_per_peer,
        })
    }

    /// Lets a connection from `peer` in, making room by closing an idle one where a cap is
    /// reached; `None` when no room can be made.
    pub(super) fn admit(self: &Arc<Self>, peer: SocketAddr) -> Option<Admitted> {
        let peer = peer.ip();
        let mut table = lock(&self.table);
        let of_peer = table.per_peer.get(&peer).copied().unwrap_or(0);
        if of_peer >= self.max_per_peer && !table.evict_oldest_idle(Some(peer)) {
            return None;
        }
        if table.open.len() >= self.max && !table.evict_oldest_idle(None) {
            return None;
        }
        let id = table.next;
        table.next += 1;
        let busy = Arc::new(AtomicUsize::new(0));
        let evict = Arc::new(Notify::new());
        table.open.insert(
            id,
            Open {
                peer,
                busy: busy.clone(),
                evict: evict.clone(),
            },
        );
        *table.per_peer.entry(peer).or_default() += 1;
        Some(Admitted {
            id,
            connections: self.clone(),
            busy,
            evict,
        })
    }

    /// How many connections are open.
    #[cfg(test)]
    fn open(&self) -> usize {
        lock(&self.table).open.len()
    }
}

/// Serves `app` on every connection `listener` accepts, within the options' bounds, until
/// `shutdown` completes; then lets each connection finish the request it carries.
pub(super) async fn serve_connections(
    listener: TcpListener,
    app: Router,
    options: &HttpOptions,
    shutdown: impl Future<Output = ()>,
) {
    let connections = Connections::new(options.max_connections, options.max_connections_per_peer);
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(options.header_timeout)
        .max_buf_size(MAX_HEAD_BYTES.max(8192));
    let (stop, stopped) = watch::channel(false);
    let mut tasks = JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    tracing::warn!("accepting a connection failed: {e}");
                    if is_out_of_descriptors(&e) {
                        tokio::time::sleep(FD_EXHAUSTED_PAUSE).await;
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        while tasks.try_join_next().is_some() {}
        let Some(admitted) = connections.admit(peer) else {
            tracing::warn!(%peer, "a connection was refused: every open one carries a request");
            continue;
        };
        let admitted = Arc::new(admitted);
        let carrier = admitted.clone();
        let app = app.clone();
        let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            let carrying = carrier.carrying();
            let answer = app.clone().call(request.map(Body::new));
            async move {
                let response = answer.await;
                drop(carrying);
                response
            }
        });
        let connection = http.serve_connection(TokioIo::new(stream), service);
        let mut stopped = stopped.clone();
        tasks.spawn(async move {
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => return,
                () = admitted.evicted() => return,
                _ = stopped.wait_for(|stop| *stop) => connection.as_mut().graceful_shutdown(),
            }
            let _ = connection.await;
        });
    }
    let _ = stop.send(true);
    while tasks.join_next().await.is_some() {}
}

fn is_out_of_descriptors(e: &io::Error) -> bool {
    use rustix::io::Errno;
    matches!(Errno::from_io_error(e), Some(Errno::MFILE | Errno::NFILE))
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use super::*;

    fn from(last: u8) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, last], 40000))
    }

    #[test]
    fn a_peer_at_its_cap_makes_room_by_closing_its_own_oldest_idle_connection() {
        let connections = Connections::new(10, 2);
        let first = connections.admit(from(1)).unwrap();
        let _second = connections.admit(from(1)).unwrap();
        let other = connections.admit(from(2)).unwrap();
        let _third = connections.admit(from(1)).unwrap();
        assert_eq!(connections.open(), 3);
        // The first was evicted: it is told so, and the other peer's was not.
        let evicted = told_to_close(&first);
        assert!(evicted);
        assert!(!told_to_close(&other));
    }

    #[test]
    fn a_connection_carrying_a_request_is_never_evicted() {
        let connections = Connections::new(2, 2);
        let a = connections.admit(from(1)).unwrap();
        let b = connections.admit(from(1)).unwrap();
        let _a_busy = a.carrying();
        let _b_busy = b.carrying();
        assert!(connections.admit(from(3)).is_none());
        drop(_b_busy);
        assert!(connections.admit(from(3)).is_some());
        assert!(told_to_close(&b));
        assert!(!told_to_close(&a));
    }

    #[test]
    fn a_closed_connection_frees_its_place() {
        let connections = Connections::new(1, 1);
        let only = connections.admit(from(1)).unwrap();
        let _busy = only.carrying();
        assert!(connections.admit(from(1)).is_none());
        drop(_busy);
        drop(only);
        assert_eq!(connections.open(), 0);
        assert!(connections.admit(from(1)).is_some());
    }

    /// Whether the connection has been told to close (its stored notification).
    fn told_to_close(admitted: &Admitted) -> bool {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let evicted = std::pin::pin!(admitted.evicted());
        evicted.poll(&mut cx).is_ready()
    }
}
