//! A stdio connection: started over a child process or any reader/writer pair, its requests
//! sent under fresh ids, and closed in order (stdin, grace, SIGTERM, grace, SIGKILL).

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use maljan_mcp_proto::json_writer::request_line;
use maljan_mcp_proto::jsonrpc::{Message, Notification, Request, RequestId};
use maljan_mcp_proto::large_buffers::LARGE_BUFFERS;
use maljan_mcp_transport::{CloseReport, EndsSetup, StoppedBy};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::runtime::RuntimeFlavor;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::child::ServerChild;
use super::connection_state::{ConnectionState, OutgoingLine, PendingEntry, PendingRequest, lock};
use super::reader::read_loop;
use super::stderr::StderrTail;
use super::stdout_reader::StdoutReader;
use super::writer::write_loop;
use super::{LostBecause, StdioConfig, StdioError};
use crate::BusyPoll;
use crate::classifier::LineCounts;

/// How many outgoing lines may wait for the writer.
const OUTGOING_QUEUE: usize = 64;

/// A connection to an MCP server over newline-delimited JSON-RPC: a child process's
/// stdin/stdout, or any [`AsyncRead`]/[`AsyncWrite`] pair.
///
/// Requests are correlated with responses by id. The server's stdout goes through a
/// [`LineClassifier`](crate::LineClassifier): stray lines are left out and counted, invalid messages are stated
/// and fail the call they name, non-UTF-8 ends the connection and fails every pending call.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use maljan_mcp_stdio::{StdioTransport, Reply, StdioConfig};
/// use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
///
/// let (client_side, server_side) = tokio::io::duplex(4096);
/// let (client_read, client_write) = tokio::io::split(client_side);
/// let connection = StdioTransport::over(client_read, client_write, StdioConfig::named("echo"));
///
/// // A tiny server: answers request 1 with an empty result, after a banner line.
/// let (server_read, mut server_write) = tokio::io::split(server_side);
/// tokio::spawn(async move {
///     let mut lines = BufReader::new(server_read).lines();
///     let _request = lines.next_line().await;
///     server_write.write_all(b"banner\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n").await.unwrap();
/// });
///
/// let reply = connection.send_request("ping", None).await.unwrap().await.unwrap();
/// assert!(matches!(reply, Reply::Result(r) if r.get() == "{}"));
/// assert_eq!(connection.counts().stray, 1);
/// connection.close().await;
/// # }
/// ```
///
/// # Cancel safety
///
/// [`StdioTransport::send_request`] and [`StdioTransport::notify`] either queue a whole line or none.
/// Dropping a [`PendingRequest`] forgets the request; a late answer is then ignored.
#[derive(Debug)]
pub struct StdioTransport {
    pub(super) shared: Arc<ConnectionState>,
    grace: Duration,
    max_statements: u64,
    reader: Option<StdoutReader>,
    writer: Option<JoinHandle<()>>,
    /// Reads stderr to its end; taken by [`wait_exit`](Self::wait_exit) once it ended.
    stderr_task: tokio::sync::Mutex<Option<JoinHandle<()>>>,
    child: Option<tokio::sync::Mutex<ServerChild>>,
    notifications: Option<mpsc::Receiver<Notification>>,
}

impl StdioTransport {
    /// A connection over any reader (the server's output) and writer (its input).
    ///
    /// Must be called within a tokio runtime.
    pub fn over<R, W>(reader: R, writer: W, config: StdioConfig) -> StdioTransport
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        Self::start(reader, writer, None, config)
    }

    pub(crate) fn start<R, W>(
        reader: R,
        writer: W,
        child: Option<(ServerChild, JoinHandle<()>, Arc<Mutex<StderrTail>>)>,
        config: StdioConfig,
    ) -> StdioTransport
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (outgoing_tx, outgoing_rx) = mpsc::channel(OUTGOING_QUEUE);
        let (notify_tx, notify_rx) = mpsc::channel(config.notification_capacity.max(1));
        let (child, stderr_task, stderr) = match child {
            Some((c, t, s)) => (Some(c), Some(t), s),
            None => (None, None, Arc::default()),
        };
        // A thread of the reader's own pays off on a multi-thread runtime (see
        // `StdoutReader`); on a current-thread runtime the reader is a task beside the
        // callers, and an answer reaches its caller without waking another thread.
        let on_thread = child.is_some()
            && tokio::runtime::Handle::current().runtime_flavor() != RuntimeFlavor::CurrentThread;
        let busy_poll = if on_thread {
            Duration::ZERO
        } else {
            config.busy_poll
        };
        let shared = Arc::new(ConnectionState {
            server: config.name.clone(),
            pending: Mutex::default(),
            failure: Mutex::default(),
            counts: Mutex::default(),
            unmatched: AtomicU64::new(0),
            outgoing: Mutex::new(Some(outgoing_tx)),
            next_id: AtomicI64::new(1),
            close_window: AtomicBool::new(false),
            batches_allowed: AtomicBool::new(false),
            stderr,
            child_pid: child.as_ref().and_then(ServerChild::pid),
            busy_poll: BusyPoll::new(busy_poll),
        });
        let read = read_loop(reader, shared.clone(), config.clone(), notify_tx);
        let reader = if on_thread {
            StdoutReader::on_thread(format!("stdout {}", config.name), read)
                .map_err(|e| shared.fail(shared.lost(LostBecause::NoReaderThread(Arc::new(e)))))
                .ok()
        } else {
            Some(StdoutReader::on_runtime(read))
        };
        let writer = tokio::spawn(write_loop(writer, outgoing_rx, shared.clone()));
        StdioTransport {
            shared,
            grace: config.close_grace,
            max_statements: config.classifier.max_statements,
            reader,
            writer: Some(writer),
            stderr_task: tokio::sync::Mutex::new(stderr_task),
            child: child.map(tokio::sync::Mutex::new),
            notifications: Some(notify_rx),
        }
    }

    /// The server's name, as configured.
    pub fn server(&self) -> &str {
        &self.shared.server
    }

    /// Sends a request and returns the pending answer.
    pub async fn send_request(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<PendingRequest, StdioError> {
        self.send_request_with_raw(method, params, None).await
    }

    /// Sends a request whose answer may end the setup window: when `ends_setup` says so of
    /// its result, the window closes before the next line of stdout is read.
    pub async fn send_setup_request(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
        ends_setup: EndsSetup,
    ) -> Result<PendingRequest, StdioError> {
        self.send_request_with_raw(method, params, Some(ends_setup))
            .await
    }

    /// Sends a request whose params are a JSON value, written straight into the request's
    /// line ([`request_line`]): large arguments, a file chunk's base64 among them, are
    /// neither escaped byte by byte nor copied into a raw value first. The value's large
    /// strings go back to [`LARGE_BUFFERS`] once written, before the line waits for the
    /// writer.
    ///
    /// ```no_run
    /// # async fn call(connection: &maljan_mcp_stdio::StdioTransport) {
    /// let params = serde_json::json!({"name": "get_file", "arguments": {"path": "a.bin"}});
    /// let answer = connection.send_request_json("tools/call", params).await.unwrap().await;
    /// # }
    /// ```
    pub async fn send_request_json(
        &self,
        method: &str,
        params: Value,
    ) -> Result<PendingRequest, StdioError> {
        self.send_request_inner(None, move |id| {
            let line = request_line(id, method, &params);
            LARGE_BUFFERS.give_strings(params);
            line
        })
        .await
    }

    async fn send_request_with_raw(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
        ends_setup: Option<EndsSetup>,
    ) -> Result<PendingRequest, StdioError> {
        self.send_request_inner(ends_setup, |id| {
            Message::to_line(&Message::Request(Request {
                id: id.clone(),
                method: method.to_owned(),
                params,
            }))
        })
        .await
    }

    /// Registers a request under a new id and sends the line `line` writes for that id.
    pub(super) async fn send_request_inner(
        &self,
        ends_setup: Option<EndsSetup>,
        line: impl FnOnce(&RequestId) -> Vec<u8>,
    ) -> Result<PendingRequest, StdioError> {
        let id = RequestId::Integer(self.shared.next_id.fetch_add(1, Ordering::Relaxed));
        let (reply, answer) = oneshot::channel();
        lock(&self.shared.pending).insert(
            id.clone(),
            PendingEntry {
                reply,
                ends_setup,
                written: false,
            },
        );
        let line = line(&id);
        let pending = PendingRequest {
            id: id.clone(),
            answer,
            shared: self.shared.clone(),
        };
        self.shared
            .send(OutgoingLine {
                line,
                request: Some(id),
            })
            .await?;
        Ok(pending)
    }

    /// Sends a notification.
    pub async fn notify(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
    ) -> Result<(), StdioError> {
        let line = Message::to_line(&Message::Notification(Notification {
            method: method.to_owned(),
            params,
        }));
        self.shared.send_line(line).await
    }

    /// Closes the setup window for good: from the next line on, nothing is salvaged.
    pub fn close_setup_window(&self) {
        self.shared.close_window.store(true, Ordering::Release);
    }

    /// Allows batches on stdout (protocol 2025-03-26 only).
    pub fn set_batches_allowed(&self, allowed: bool) {
        self.shared
            .batches_allowed
            .store(allowed, Ordering::Release);
    }

    /// The server's process id, when this connection spawned it (as it was at spawn: the
    /// server may have exited since).
    pub fn server_pid(&self) -> Option<u32> {
        self.shared.child_pid
    }

    /// Waits up to `grace` for the server's process to exit and says how it exited: for a
    /// connection found lost, what ended the server (its exit code or signal). `None` over
    /// pipes without a process, or when it has not exited within `grace`.
    ///
    /// Once it exited, what it last wrote on stderr is read to the end (within `grace`), so
    /// [`stderr_tail`](Self::stderr_tail) holds its last words.
    pub async fn wait_exit(&self, grace: Duration) -> Option<std::process::ExitStatus> {
        let status = self.child.as_ref()?.lock().await.wait_exit(grace).await?;
        let mut stderr = self.stderr_task.lock().await;
        if let Some(task) = stderr.as_mut()
            && tokio::time::timeout(grace, task).await.is_ok()
        {
            stderr.take();
        }
        Some(status)
    }

    /// The counts of what stdout held so far.
    pub fn counts(&self) -> LineCounts {
        *lock(&self.shared.counts)
    }

    /// How many answers came to no pending request (late ones, after their call gave up,
    /// or ids never sent): each was dropped, never given to another request.
    pub fn unmatched(&self) -> u64 {
        self.shared.unmatched.load(Ordering::Relaxed)
    }

    /// The last lines the server wrote on stderr.
    pub fn stderr_tail(&self) -> String {
        lock(&self.shared.stderr).text()
    }

    /// Why the connection ended, once it has.
    pub fn failure(&self) -> Option<StdioError> {
        self.shared.failure()
    }

    /// Takes the receiver of the server's notifications (once). Notifications that arrive
    /// while it is full or not taken are dropped.
    pub fn take_notifications(&mut self) -> Option<mpsc::Receiver<Notification>> {
        self.notifications.take()
    }

    /// Closes the connection: closes stdin, waits the grace for the child to exit, then
    /// SIGTERM, waits again, then SIGKILL, and reaps it. Pending requests fail as closed.
    pub async fn close(mut self) -> CloseReport {
        lock(&self.shared.outgoing).take();
        if let Some(writer) = self.writer.take() {
            finish_task(writer, self.grace).await;
        }
        let (status, stopped_by) = match self.child.as_mut() {
            Some(child) => child.get_mut().stop(self.grace).await,
            None => (None, StoppedBy::NoChild),
        };
        if let Some(reader) = self.reader.take() {
            reader.finish(self.grace).await;
        }
        if let Some(stderr) = self.stderr_task.get_mut().take() {
            finish_task(stderr, self.grace).await;
        }
        self.shared.fail(StdioError::Closed {
            server: self.shared.server.clone(),
        });
        let counts = self.counts();
        let stderr_tail = self.stderr_tail();
        if counts.stray > 0 || counts.invalid > 0 || counts.oversized > 0 {
            let unstated = counts.invalid.saturating_sub(self.max_statements);
            let unstated = if unstated > 0 {
                format!(
                    "; {unstated} invalid messages past the first {} were only counted",
                    self.max_statements
                )
            } else {
                String::new()
            };
            tracing::warn!(
                server = %self.shared.server,
                "stdout held lines that were not protocol messages: {counts}{unstated}"
            );
        }
        CloseReport::of_process(status, stopped_by, counts.into(), stderr_tail)
    }
}

/// Waits for a task to end by itself within the grace, then aborts it.
async fn finish_task(task: JoinHandle<()>, grace: Duration) {
    let abort = task.abort_handle();
    if tokio::time::timeout(grace, task).await.is_err() {
        abort.abort();
    }
}

impl Drop for StdioTransport {
    fn drop(&mut self) {
        // The reader stops as its handle drops.
        for task in [self.writer.as_ref(), self.stderr_task.get_mut().as_ref()]
            .into_iter()
            .flatten()
        {
            task.abort();
        }
        // The child, if any, is killed by its own drop (kill_on_drop); nothing is spawned.
    }
}
