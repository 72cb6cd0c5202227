//! Serving over stdio (or any reader and writer): requests read through the line
//! classifier, answers written whole, calls cancelled when the client is gone.

use std::collections::HashMap;
use std::fs::File;
use std::future::Future;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::FileTypeExt;
use std::sync::{Arc, Mutex};

use maljan_mcp_proto::jsonrpc::{Message, RequestId, error_codes};
use maljan_mcp_proto::mcp::{CancelledParams, methods};
use maljan_mcp_stdio::{BusyPoll, ClassifierConfig, Event, LineClassifier};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::JobDir;
use maljan_mcp_proto::large_buffers::LARGE_BUFFERS;

use super::{InFlight, Server, encode, error_reply};

/// Bytes read from stdin at a time: a file chunk's request line (several MiB) takes a few
/// reads, not one per 64 KiB.
const READ_BYTES: usize = 1024 * 1024;

impl Server {
    /// Serves over stdio: calls [`stdio_safe`](crate::stdio_safe) first, then reads stdin and
    /// answers on the private duplicate of stdout until stdin ends.
    ///
    /// When stdin and stdout are pipes (as a client that starts the server makes them),
    /// they are read and written without blocking, by the runtime's event loop; anything
    /// else (a file, a terminal) goes through blocking reads and writes on another thread.
    pub async fn serve_stdio(self) -> io::Result<()> {
        let protocol_out = crate::stdio_safe()?;
        // A second handle on the protocol stream, watched for the client's end closing.
        let watched = protocol_out.try_clone()?;
        let stdin = File::from(io::stdin().as_fd().try_clone_to_owned()?);
        let reader: Box<dyn AsyncRead + Unpin + Send> = if is_pipe(&stdin) {
            Box::new(pipe::Receiver::from_file(stdin)?)
        } else {
            Box::new(tokio::io::stdin())
        };
        let writer: Box<dyn AsyncWrite + Unpin + Send> = if is_pipe(&protocol_out) {
            Box::new(pipe::Sender::from_file(protocol_out)?)
        } else {
            Box::new(tokio::fs::File::from_std(protocol_out))
        };
        let job = JobDir::from_env()?;
        Arc::new(self)
            .serve_job_watched(job, reader, writer, reader_gone(watched))
            .await
    }

    /// Serves newline-delimited JSON-RPC over any reader and writer until the reader ends,
    /// then waits for calls in flight to answer, and shuts the writer down.
    ///
    /// The job is the one `MALJAN_JOB_DIR` names, or a temporary one removed at the end.
    pub async fn serve<R, W>(self, reader: R, writer: W) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let job = JobDir::from_env()?;
        Arc::new(self).serve_job(job, reader, writer).await
    }

    /// Serves one job over a reader and a writer (see [`Server::serve`]).
    pub async fn serve_job<R, W>(
        self: Arc<Self>,
        job: Arc<JobDir>,
        reader: R,
        writer: W,
    ) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        self.serve_job_watched(job, reader, writer, std::future::pending())
            .await
    }

    /// [`serve_job`](Self::serve_job); once the reader ends, the calls still in flight are
    /// cancelled if `client_gone` completes (nobody is left to read their answers).
    pub(super) async fn serve_job_watched<R, W>(
        self: Arc<Self>,
        job: Arc<JobDir>,
        reader: R,
        writer: W,
        client_gone: impl Future<Output = ()>,
    ) -> io::Result<()>
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let (out_tx, out_rx) = mpsc::channel::<Vec<u8>>(64);
        let busy_poll = BusyPoll::new(self.busy_poll());
        let (read, write) = tokio::join!(
            self.read_requests(job, reader, &busy_poll, out_tx, client_gone),
            write_lines(writer, &busy_poll, out_rx)
        );
        read.and(write)
    }

    /// Reads requests until the reader ends, then waits for calls in flight (cancelling
    /// them when `client_gone` completes first); dropping the last sender then ends the
    /// writer. Reads poll as `busy_poll` (armed by the writer) says.
    async fn read_requests<R: AsyncRead + Unpin>(
        self: Arc<Self>,
        job: Arc<JobDir>,
        mut reader: R,
        busy_poll: &BusyPoll,
        out_tx: mpsc::Sender<Vec<u8>>,
        client_gone: impl Future<Output = ()>,
    ) -> io::Result<()> {
        let server = self;
        let in_flight: Arc<Mutex<HashMap<RequestId, InFlight>>> = Arc::default();
        let mut calls = JoinSet::new();
        let config = ClassifierConfig::default();
        let max_line_bytes = config.max_line_bytes;
        let mut classifier = LineClassifier::new(config);
        loop {
            let read = busy_poll
                .read(&mut reader, &mut classifier.read_target(READ_BYTES))
                .await?;
            if read == 0 {
                classifier.handle_eof();
            }
            while let Some(event) = classifier.poll_event() {
                match event {
                    Event::Message(Message::Request(request)) => {
                        server
                            .handle_request(request, &job, &out_tx, &in_flight, &mut calls)
                            .await;
                    }
                    Event::Message(Message::Notification(n)) if n.method == methods::CANCELLED => {
                        let cancelled = n
                            .params
                            .and_then(|p| serde_json::from_str::<CancelledParams>(p.get()).ok());
                        if let Some(c) = cancelled {
                            let handle = in_flight
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .remove(&c.request_id);
                            if let Some(call) = handle {
                                tracing::info!(id = %c.request_id, "call cancelled by the client");
                                call.cancel();
                            }
                        }
                    }
                    Event::Invalid { invalid, .. } => {
                        tracing::warn!("invalid message from the client: {}", invalid.reason);
                        if let Some(id) = invalid.id {
                            let reply = error_reply(
                                id,
                                error_codes::INVALID_REQUEST,
                                invalid.reason.to_string(),
                            );
                            let _ = out_tx.send(encode(&reply)).await;
                        }
                    }
                    Event::Oversized { length, excerpt } => {
                        let id = maljan_mcp_proto::jsonrpc::id_in_head(excerpt.as_str());
                        tracing::warn!(
                            length,
                            id = ?id,
                            "a request line of {length} bytes is over the {} byte cap and was \
                             not read: {}",
                            max_line_bytes,
                            excerpt
                        );
                        if let Some(id) = id {
                            let reply = error_reply(
                                id,
                                error_codes::INVALID_REQUEST,
                                format!(
                                    "the request is {length} bytes, over this server's cap of {} \
                                     bytes a line; send large files in chunks (put_sample_begin)",
                                    max_line_bytes
                                ),
                            );
                            let _ = out_tx.send(encode(&reply)).await;
                        }
                    }
                    Event::NotUtf8 { offset } => {
                        tracing::error!(offset, "stdin is not UTF-8; stopping");
                    }
                    other => tracing::debug!("ignored from the client: {other:?}"),
                }
            }
            if classifier.is_finished() {
                break;
            }
        }
        let mut client_gone = std::pin::pin!(client_gone);
        loop {
            tokio::select! {
                next = calls.join_next() => if next.is_none() { break },
                () = &mut client_gone => {
                    let cancelled: Vec<InFlight> = in_flight
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .drain()
                        .map(|(_, call)| call)
                        .collect();
                    tracing::info!(
                        calls = cancelled.len(),
                        "the client is gone: its calls in flight are cancelled"
                    );
                    for call in &cancelled {
                        call.cancel();
                    }
                    while calls.join_next().await.is_some() {}
                    break;
                }
            }
        }
        Ok(())
    }
}

/// Completes when the reading end of `out` (a pipe) is closed: the client that would read
/// the answers is gone. Never, for anything but a pipe. A thread of its own waits in
/// poll(2) asking for nothing, which reports a pipe's error and hang-up whatever is asked.
fn reader_gone(out: File) -> impl Future<Output = ()> {
    use rustix::event::{PollFd, PollFlags, poll};
    let (gone, told) = tokio::sync::oneshot::channel();
    if is_pipe(&out) {
        std::thread::spawn(move || {
            let mut fds = [PollFd::new(&out, PollFlags::empty())];
            loop {
                match poll(&mut fds, None) {
                    Ok(_) if fds[0].revents().intersects(PollFlags::ERR | PollFlags::HUP) => {
                        let _ = gone.send(());
                        return;
                    }
                    Ok(_) | Err(rustix::io::Errno::INTR) => continue,
                    Err(_) => return,
                }
            }
        });
    }
    async move {
        if told.await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

fn is_pipe(file: &File) -> bool {
    file.metadata().is_ok_and(|m| m.file_type().is_fifo())
}

/// Writes each line whole, then arms `busy_poll`: the client's next request is expected
/// soon after an answer.
async fn write_lines<W: AsyncWrite + Unpin>(
    mut writer: W,
    busy_poll: &BusyPoll,
    mut lines: mpsc::Receiver<Vec<u8>>,
) -> io::Result<()> {
    while let Some(line) = lines.recv().await {
        writer.write_all(&line).await?;
        writer.flush().await?;
        busy_poll.arm();
        LARGE_BUFFERS.give(line);
    }
    writer.shutdown().await
}
