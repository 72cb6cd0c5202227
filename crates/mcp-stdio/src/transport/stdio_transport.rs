use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use maljan_mcp_proto::json_writer::request_line;
use maljan_mcp_proto::jsonrpc::{
    ErrorResponse, Message, Notification, Reply, Request, RequestId, Response,
};
use maljan_mcp_proto::mcp::{ServerRequestPolicy, methods};
use maljan_mcp_proto::untrusted_text::escape_controls;
use maljan_mcp_transport::{CloseReport, EndsSetup, StoppedBy};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::child::ServerChild;
use super::stderr::StderrTail;
use super::stdout_reader::StdoutReader;
use super::{StdioConfig, StdioError};
use crate::classifier::{Event, LineClassifier, LineCounts};

/// How many outgoing lines may wait for the writer.
const OUTGOING_QUEUE: usize = 64;
/// Bytes read from stdout at a time: as much as the widened pipe holds, so a multi-MiB
/// answer takes a few reads, not one per 64 KiB.
const READ_CHUNK: usize = 1024 * 1024;

struct PendingEntry {
    reply: oneshot::Sender<Result<Reply, StdioError>>,
    ends_setup: Option<EndsSetup>,
    /// The request's line reached the server's stdin: a request lost before that is failed
    /// as [`StdioError::NotSent`], so it may be sent again to a server started anew.
    written: bool,
}

/// A line waiting for the writer, with the request it carries (none for a notification or
/// a reply).
struct OutgoingLine {
    line: Vec<u8>,
    request: Option<RequestId>,
}

pub(crate) struct ConnectionState {
    server: String,
    pending: Mutex<HashMap<RequestId, PendingEntry>>,
    failure: Mutex<Option<StdioError>>,
    counts: Mutex<LineCounts>,
    /// Answers to no pending request (late, or an id never sent), dropped.
    unmatched: AtomicU64,
    outgoing: Mutex<Option<mpsc::Sender<OutgoingLine>>>,
    next_id: AtomicI64,
    close_window: AtomicBool,
    batches_allowed: AtomicBool,
    stderr: Arc<Mutex<StderrTail>>,
    child_pid: Option<u32>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind; keep going.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ConnectionState {
    /// Ends the connection: remembers why, and fails every pending request with it.
    fn fail(&self, error: StdioError) {
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
    fn mark_written(&self, id: &RequestId, written: bool) {
        if let Some(entry) = lock(&self.pending).get_mut(id) {
            entry.written = written;
        }
    }

    /// Fails the connection because its reader panicked, and returns the failure.
    fn fail_as_panicked(&self) -> StdioError {
        self.fail(self.lost(
            "the client's reader of the server's stdout panicked (a bug in the client, or in a \
             setup request's ends_setup callback); connect again, and report it",
        ));
        self.failure().expect("just failed")
    }

    fn failure(&self) -> Option<StdioError> {
        lock(&self.failure).clone()
    }

    fn lost(&self, detail: impl Into<String>) -> StdioError {
        StdioError::ConnectionLost {
            server: self.server.clone(),
            detail: detail.into(),
            source: None,
        }
    }

    /// The connection lost to a system error, kept as the source.
    fn lost_to(&self, detail: impl Into<String>, error: std::io::Error) -> StdioError {
        StdioError::ConnectionLost {
            server: self.server.clone(),
            detail: format!("{}: {error}", detail.into()),
            source: Some(Arc::new(error)),
        }
    }

    async fn send_line(&self, line: Vec<u8>) -> Result<(), StdioError> {
        self.send(OutgoingLine {
            line,
            request: None,
        })
        .await
    }

    async fn send(&self, line: OutgoingLine) -> Result<(), StdioError> {
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
                .unwrap_or_else(|| self.lost("the server's stdin is closed"))
        })
    }
}

fn encode(message: &Message) -> Vec<u8> {
    message.to_line()
}

/// A connection to an MCP server over newline-delimited JSON-RPC: a child process's
/// stdin/stdout, or any [`AsyncRead`]/[`AsyncWrite`] pair.
///
/// Requests are correlated with responses by id. The server's stdout goes through a
/// [`LineClassifier`]: stray lines are left out and counted, invalid messages are stated
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
    shared: Arc<ConnectionState>,
    grace: Duration,
    max_statements: u64,
    reader: Option<StdoutReader>,
    writer: Option<JoinHandle<()>>,
    /// Reads stderr to its end; taken by [`wait_exit`](Self::wait_exit) once it ended.
    stderr_task: tokio::sync::Mutex<Option<JoinHandle<()>>>,
    child: Option<tokio::sync::Mutex<ServerChild>>,
    notifications: Option<mpsc::Receiver<Notification>>,
}

impl std::fmt::Debug for ConnectionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionState")
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
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
        });
        let read = read_loop(reader, shared.clone(), config.clone(), notify_tx);
        let reader = if child.is_some() {
            StdoutReader::on_thread(format!("stdout {}", config.name), read)
                .map_err(|e| {
                    shared.fail(shared.lost(format!(
                    "no thread could be started to read its stdout ({e}); the system is short of \
                     threads or memory: close other connections or processes and connect again"
                )))
                })
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
    /// neither escaped byte by byte nor copied into a raw value first. The value is dropped
    /// once written, before the line waits for the writer.
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
        self.send_request_inner(None, move |id| request_line(id, method, &params))
            .await
    }

    async fn send_request_with_raw(
        &self,
        method: &str,
        params: Option<Box<RawValue>>,
        ends_setup: Option<EndsSetup>,
    ) -> Result<PendingRequest, StdioError> {
        self.send_request_inner(ends_setup, |id| {
            encode(&Message::Request(Request {
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
        let line = encode(&Message::Notification(Notification {
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

/// An answer on its way.
///
/// Resolves to the server's [`Reply`], or to the [`StdioError`] that ended the wait.
/// Dropping it forgets the request (send `notifications/cancelled` for the server's sake).
#[derive(Debug)]
pub struct PendingRequest {
    id: RequestId,
    answer: oneshot::Receiver<Result<Reply, StdioError>>,
    shared: Arc<ConnectionState>,
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

async fn write_loop<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut outgoing: mpsc::Receiver<OutgoingLine>,
    shared: Arc<ConnectionState>,
) {
    while let Some(OutgoingLine { line, request }) = outgoing.recv().await {
        // Marked before the write: a server that reads the line and dies at once must find
        // its request in flight, never unsent, even when its death is read first.
        if let Some(id) = &request {
            shared.mark_written(id, true);
        }
        let written = async {
            writer.write_all(&line).await?;
            writer.flush().await
        };
        if let Err(e) = written.await {
            // A write that failed reached no one: the server's stdin has no reader.
            if let Some(id) = &request {
                shared.mark_written(id, false);
            }
            shared.fail(shared.lost_to("writing to the server's stdin failed", e));
            return;
        }
    }
    let _ = writer.shutdown().await;
}

async fn read_loop<R: AsyncRead + Unpin>(
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
        let read = reader
            .read_buf(&mut classifier.read_target(READ_CHUNK).buf())
            .await;
        match read {
            Ok(0) => classifier.handle_eof(),
            Ok(_) => {}
            Err(e) => {
                shared.fail(shared.lost_to("reading the server's stdout failed", e));
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
    shared.fail(shared.lost("the server closed its stdout"));
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
            let _ = shared.send_line(encode(&reply)).await;
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
                let _ = shared.send_line(encode(&refusal)).await;
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
