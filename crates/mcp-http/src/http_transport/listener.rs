//! The standalone GET stream, on which the server may send its own messages.

use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt;
use tokio::sync::oneshot;

use super::{HttpTransport, lock};
use crate::error::error_chain;
use crate::{SseItem, SseParser};

impl HttpTransport {
    /// Opens the optional GET stream for messages the server sends on its own, and answers
    /// it may send there. A server without one answers 405, which is fine: the stream is
    /// then simply not there. The stream's messages are handled as any reply's; it ends with
    /// the connection or when the server closes it.
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
            let Ok(get) = connection.get_stream(None) else {
                return;
            };
            let response = get.send().await;
            let response = match response {
                Ok(r) if r.status() == reqwest::StatusCode::METHOD_NOT_ALLOWED => {
                    tracing::debug!(
                        server = connection.server(),
                        "the server offers no GET stream (405)"
                    );
                    return;
                }
                Ok(r) if r.status().is_success() => r,
                Ok(r) => {
                    tracing::debug!(
                        server = connection.server(),
                        status = r.status().as_u16(),
                        "no GET stream"
                    );
                    return;
                }
                Err(e) => {
                    tracing::debug!(
                        server = connection.server(),
                        "no GET stream: {}",
                        error_chain(&e)
                    );
                    return;
                }
            };
            connection.state.listening.store(true, Ordering::Release);
            drop(ready);
            let _open = ListeningFlag(&connection.state.listening);
            let mut parser = SseParser::new(connection.state.config.max_event_bytes);
            let mut stream = response.bytes_stream();
            while let Some(Ok(chunk)) = stream.next().await {
                parser.handle_bytes(&chunk);
                while let Some(item) = parser.poll_item() {
                    match item {
                        SseItem::Event(event) => {
                            let _ = connection.handle_line(event.data.as_bytes()).await;
                        }
                        SseItem::Oversized { .. } => lock(&connection.state.counts).oversized += 1,
                        SseItem::NotUtf8 { .. } => return,
                        SseItem::Retry(_) => {}
                    }
                }
            }
        });
        if let Some(old) = lock(&self.state.listener).replace(task.abort_handle()) {
            old.abort();
        }
        task
    }
}

/// Clears the listening flag when the GET stream's task ends, however it ends.
pub(super) struct ListeningFlag<'a>(&'a AtomicBool);

impl Drop for ListeningFlag<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}
