//! The standalone GET stream, on which the server may send its own messages.

use std::fmt;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use futures_util::StreamExt;
use tokio::sync::oneshot;

use super::{HttpTransport, gateway_busy, lock};
use crate::error::error_chain;
use crate::{SseItem, SseParser};

impl HttpTransport {
    /// Opens the optional GET stream for messages the server sends on its own, and answers
    /// it may send there. A server without one answers 405, which is fine: the stream is
    /// then simply not there. The stream's messages are handled as any reply's. A stream the
    /// server closes or the network cuts is opened again, after the last event it carried
    /// (`Last-Event-ID`), with capped, jittered backoff, at most ten times; the task ends
    /// with the connection, or when the server refuses the stream.
    pub fn listen(&self) -> tokio::task::JoinHandle<()> {
        self.spawn_listener(None)
    }

    /// [`listen`](Self::listen), waiting until the server answered the GET (or
    /// `connect_timeout` passed): from then on, what the server sends on its own has a
    /// stream to go on.
    pub(super) async fn open_listener(&self) {
        let (ready, answered) = oneshot::channel();
        drop(self.spawn_listener(Some(ready)));
        let _ = tokio::time::timeout(self.state.config.connect_timeout, answered).await;
    }

    pub(super) fn spawn_listener(
        &self,
        ready: Option<oneshot::Sender<()>>,
    ) -> tokio::task::JoinHandle<()> {
        let connection = self.clone();
        let task = tokio::spawn(async move {
            let ready = Mutex::new(ready);
            let last_event_id = Mutex::new(None);
            let ended = (|| connection.listen_once(&ready, &last_event_id))
                .retry(reopen_backoff())
                .when(ListenEnd::reopens)
                .notify(|end, delay| {
                    tracing::info!(
                        server = connection.server(),
                        "the GET stream ended ({end}); it is opened again in {} ms",
                        delay.as_millis()
                    );
                })
                .await;
            if let Err(end) = ended {
                tracing::debug!(server = connection.server(), "no GET stream: {end}");
            }
        });
        if let Some(old) = lock(&self.state.listener).replace(task.abort_handle()) {
            old.abort();
        }
        task
    }

    /// Opens the GET stream once (after the last event seen, when there was one) and reads
    /// it to its end; `ready` is told once the server answered, whatever it answered.
    async fn listen_once(
        &self,
        ready: &Mutex<Option<oneshot::Sender<()>>>,
        last_event_id: &Mutex<Option<String>>,
    ) -> Result<(), ListenEnd> {
        let answered = lock(ready).take();
        let since = lock(last_event_id).clone();
        let get = self
            .get_stream(since.as_deref())
            .map_err(|e| ListenEnd::NoRequest(e.to_string()))?;
        let response = match get.send().await {
            Ok(r) if r.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED => {
                return Err(ListenEnd::NotOffered);
            }
            Ok(r) if r.status().is_success() => r,
            Ok(r) => return Err(ListenEnd::Status(r.status().as_u16())),
            Err(e) => {
                return Err(ListenEnd::Unreachable {
                    connecting: e.is_connect(),
                    why: error_chain(&e),
                });
            }
        };
        self.state.listening.store(true, Ordering::Release);
        drop(answered);
        let _open = ListeningFlag(&self.state.listening);
        let mut parser = SseParser::new(self.state.config.max_event_bytes);
        let mut stream = response.bytes_stream();
        loop {
            let chunk = match stream.next().await {
                Some(Ok(chunk)) => chunk,
                Some(Err(_)) => return Err(ListenEnd::Cut),
                None => return Err(ListenEnd::Closed),
            };
            parser.handle_bytes(&chunk);
            while let Some(item) = parser.poll_item() {
                match item {
                    SseItem::Event(event) => {
                        if let Some(id) = &event.id {
                            *lock(last_event_id) = Some(id.clone());
                        }
                        let _ = self.handle_line(event.data.as_bytes()).await;
                    }
                    SseItem::Oversized { .. } => lock(&self.state.counts).oversized += 1,
                    SseItem::NotUtf8 { .. } => return Err(ListenEnd::NotUtf8),
                    SseItem::Retry(_) => {}
                }
            }
        }
    }
}

/// Up to ten reopenings over the stream's life, half a second apart at first, doubling, at
/// most 30 s, jittered: a server that keeps closing it is not called on for ever.
fn reopen_backoff() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(30))
        .with_max_times(10)
        .with_jitter()
}

/// How a GET stream ended.
#[derive(Debug)]
enum ListenEnd {
    /// The server offers none (405).
    NotOffered,
    /// Another status.
    Status(u16),
    /// The server was not reached.
    Unreachable { connecting: bool, why: String },
    /// The request could not be made (its token, say).
    NoRequest(String),
    /// The stream was cut.
    Cut,
    /// The server closed the stream.
    Closed,
    /// The stream was not UTF-8.
    NotUtf8,
}

impl ListenEnd {
    /// Whether the stream is opened again: when it was closed or cut, the connection was
    /// refused, or a gateway answered 502, 503 or 504.
    fn reopens(&self) -> bool {
        match self {
            ListenEnd::Closed | ListenEnd::Cut => true,
            ListenEnd::Unreachable { connecting, .. } => *connecting,
            ListenEnd::Status(status) => gateway_busy(*status),
            ListenEnd::NotOffered | ListenEnd::NoRequest(_) | ListenEnd::NotUtf8 => false,
        }
    }
}

impl fmt::Display for ListenEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenEnd::NotOffered => f.write_str("the server offers none (405)"),
            ListenEnd::Status(status) => write!(f, "HTTP {status}"),
            ListenEnd::Unreachable { why, .. } => write!(f, "unreachable: {why}"),
            ListenEnd::NoRequest(why) => f.write_str(why),
            ListenEnd::Cut => f.write_str("cut"),
            ListenEnd::Closed => f.write_str("closed by the server"),
            ListenEnd::NotUtf8 => f.write_str("not UTF-8"),
        }
    }
}

/// Clears the listening flag when the GET stream's task ends, however it ends.
pub(super) struct ListeningFlag<'a>(&'a AtomicBool);

impl Drop for ListeningFlag<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}
