use std::any::Any;
use std::collections::HashMap;
use std::fs::File;
use std::future::Future;
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::FileTypeExt;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use maljan_mcp_proto::jsonrpc::{
    ErrorObject, ErrorResponse, Message, Request, RequestId, error_codes,
};
use maljan_mcp_proto::maljan::{CapabilityManifest, ErrorCode, ToolFailure};
use maljan_mcp_proto::mcp::{
    CancelledParams, Implementation, InitializeParams, InitializeResult, ListToolsResult,
    ProtocolVersion, Tool, meta_keys, methods, modern_error_codes,
};
use maljan_mcp_stdio::{ClassifierConfig, Event, LineClassifier};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::unix::pipe;
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

use crate::buffers::BUFFERS;
use crate::call_gate::{CallGates, CallLimits};
use crate::call_params::ToolCall;
use crate::era::{self, RequestEra};
use crate::reply::{response_line, tool_reply};
use crate::tool::{Cancellation, ChunkHandler, Handler};
use crate::{Arguments, JobDir, ServerBuilder, ToolContext, ToolSpec};
use maljan_confine::Root;

/// Bytes read from stdin at a time: a file chunk's request line (several MiB) takes a few
/// reads, not one per 64 KiB.
const READ_BYTES: usize = 1024 * 1024;

/// The name of the manifest tool every kit server offers.
pub const CAPABILITIES: &str = "capabilities";

/// What a request needs: a line now, or a tool call to run. The call's parameters stay
/// raw: they are parsed on the call's own thread, so a large argument (a file chunk) does
/// not hold up reading the next request.
pub(crate) enum Answer {
    Line(Vec<u8>),
    Call(RequestId, Box<RawValue>),
}

/// A tool as the builder registered it, its dependency probed.
pub(crate) struct RegisteredTool {
    pub(crate) spec: ToolSpec,
    pub(crate) handler: Handler,
    /// How a tool whose arguments are a file chunk takes them read straight from the request.
    pub(crate) chunk_handler: Option<ChunkHandler>,
    /// `Ok(found)` or `Err(reason)` from the dependency's probe.
    pub(crate) dependency: Option<Result<String, String>>,
}

/// The job a call works in: the one its stdio process or HTTP session holds, or one chosen
/// from the call's own `_meta` as its params are read (a stateless HTTP caller's job key).
pub(crate) enum CallJob {
    Given(Arc<JobDir>),
    ChosenBy(Box<ChooseJob>),
}

/// Chooses a call's job from its `_meta`; `Err` refuses the call.
pub(crate) type ChooseJob =
    dyn FnOnce(Option<&serde_json::Map<String, Value>>) -> Result<Arc<JobDir>, ErrorObject> + Send;

/// A call in flight: how to stop its answer, and how to tell its handler to stop.
#[derive(Debug)]
pub(crate) struct InFlight {
    pub(crate) answer: AbortHandle,
    pub(crate) cancellation: Cancellation,
}

impl InFlight {
    pub(crate) fn cancel(&self) {
        self.cancellation.cancel();
        self.answer.abort();
    }
}

/// A tool server: answers `initialize`, `tools/list`, `tools/call` and `ping`, honours
/// `notifications/cancelled`, and offers the `capabilities` manifest.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use maljan_sidecar_kit::{Server, ToolSpec};
/// let server = Server::builder("demo", "1.0.0")
///     .tool(ToolSpec::new("hello", "Says hello"), |_args, _ctx| Ok(serde_json::json!({"hello": "world"})))
///     .build();
/// assert_eq!(server.manifest().tools.len(), 1);
///
/// let requests = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"hello\"}}\n";
/// let mut out = Vec::new();
/// server.serve(&requests[..], &mut out).await.unwrap();
/// let answer = String::from_utf8(out).unwrap();
/// assert!(answer.contains("world"));
/// # }
/// ```
pub struct Server {
    info: Implementation,
    tools: Vec<RegisteredTool>,
    manifest: CapabilityManifest,
    /// Directories besides each job's whose files tools may read.
    roots: Arc<[Root]>,
    gates: CallGates,
    /// Each job's disk budget, in bytes.
    job_bytes: u64,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("info", &self.info)
            .field("manifest", &self.manifest)
            .finish_non_exhaustive()
    }
}

pub(crate) fn encode(message: &Message) -> Vec<u8> {
    message.to_line()
}

pub(crate) fn error_reply(id: RequestId, code: i64, message: String) -> Message {
    Message::Error(ErrorResponse {
        id: Some(id),
        error: ErrorObject::new(code, message),
    })
}

fn panic_text(panic: &(dyn Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

impl Server {
    pub(crate) fn new(
        info: Implementation,
        tools: Vec<RegisteredTool>,
        manifest: CapabilityManifest,
        roots: Arc<[Root]>,
        call_limits: CallLimits,
        job_bytes: u64,
    ) -> Server {
        Server {
            info,
            tools,
            manifest,
            roots,
            gates: CallGates::new(call_limits),
            job_bytes,
        }
    }

    /// Each job's disk budget, in bytes.
    pub fn job_bytes(&self) -> u64 {
        self.job_bytes
    }

    /// How many calls it runs at once, and how many may wait.
    pub fn call_limits(&self) -> CallLimits {
        self.gates.limits()
    }

    /// Starts building a server.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        ServerBuilder::new(name.into(), version.into())
    }

    /// The capability manifest, as probed at build.
    pub fn manifest(&self) -> &CapabilityManifest {
        &self.manifest
    }

    fn tool_list(&self) -> Vec<Tool> {
        let capabilities = Tool {
            name: CAPABILITIES.to_owned(),
            title: None,
            description: Some("What this server can do on the host it runs on".to_owned()),
            input_schema: json!({"type": "object", "additionalProperties": false}),
            output_schema: None,
            annotations: None,
        };
        std::iter::once(capabilities)
            .chain(self.tools.iter().map(|t| Tool {
                name: t.spec.name.clone(),
                title: None,
                description: Some(t.spec.description.clone()),
                input_schema: t.spec.input_schema.clone(),
                output_schema: None,
                annotations: None,
            }))
            .collect()
    }

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
    async fn serve_job_watched<R, W>(
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
        let (read, write) = tokio::join!(
            self.read_requests(job, reader, out_tx, client_gone),
            write_lines(writer, out_rx)
        );
        read.and(write)
    }

    /// Reads requests until the reader ends, then waits for calls in flight (cancelling
    /// them when `client_gone` completes first); dropping the last sender then ends the
    /// writer.
    async fn read_requests<R: AsyncRead + Unpin>(
        self: Arc<Self>,
        job: Arc<JobDir>,
        mut reader: R,
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
            let read = reader
                .read_buf(&mut classifier.read_target(READ_BYTES).buf())
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

    /// Answers a request at once, or says it is a tool call to run. A request in the
    /// modern era (a protocol version in its `_meta`) must carry every required `_meta`
    /// key, for a version spoken here (else `-32602` or `-32022`); `server/discover` and a
    /// modern `tools/list` say how long their results may be cached.
    pub(crate) fn answer(&self, request: Request) -> Answer {
        let Request { id, method, params } = request;
        if method == methods::TOOLS_CALL {
            // A call's `_meta` is checked as its params are read, in one pass: they may be a
            // multi-MiB file chunk.
            return match params {
                Some(params) => Answer::Call(id, params),
                None => Answer::Line(invalid_call_params(id)),
            };
        }
        let discover = method == methods::SERVER_DISCOVER;
        let era = match era::request_era(params.as_deref(), discover) {
            Ok(era) => era,
            Err(error) => {
                return Answer::Line(encode(&Message::Error(ErrorResponse {
                    id: Some(id),
                    error,
                })));
            }
        };
        let line = match method.as_str() {
            methods::SERVER_DISCOVER => response_line(
                &id,
                &json!({
                    "supportedVersions": era::SUPPORTED,
                    "capabilities": {"tools": {}},
                    "ttlMs": era::TTL_MS,
                    "cacheScope": "public",
                    "resultType": "complete",
                    "_meta": {meta_keys::SERVER_INFO: self.info},
                }),
            ),
            methods::INITIALIZE => {
                let offered = params
                    .as_ref()
                    .and_then(|p| serde_json::from_str::<InitializeParams>(p.get()).ok())
                    .and_then(|p| ProtocolVersion::parse(&p.protocol_version).ok())
                    .unwrap_or(ProtocolVersion::LATEST);
                let result = InitializeResult {
                    protocol_version: offered.as_str().to_owned(),
                    capabilities: json!({"tools": {}})
                        .as_object()
                        .cloned()
                        .unwrap_or_default(),
                    server_info: self.info.clone(),
                    instructions: None,
                };
                response_line(&id, &result)
            }
            methods::PING => response_line(&id, &json!({})),
            methods::TOOLS_LIST if era == RequestEra::Modern => response_line(
                &id,
                &json!({
                    "tools": self.tool_list(),
                    "ttlMs": era::TTL_MS,
                    "cacheScope": "public",
                    "resultType": "complete",
                    "_meta": {meta_keys::SERVER_INFO: self.info},
                }),
            ),
            methods::TOOLS_LIST => {
                let result = ListToolsResult {
                    tools: self.tool_list(),
                    next_cursor: None,
                };
                response_line(&id, &result)
            }
            other => encode(&error_reply(
                id,
                error_codes::METHOD_NOT_FOUND,
                format!("this server does not serve {other}"),
            )),
        };
        Answer::Line(line)
    }

    async fn handle_request(
        self: &Arc<Self>,
        request: Request,
        job: &Arc<JobDir>,
        out: &mpsc::Sender<Vec<u8>>,
        in_flight: &Arc<Mutex<HashMap<RequestId, InFlight>>>,
        calls: &mut JoinSet<()>,
    ) {
        let (id, call) = match self.answer(request) {
            Answer::Line(line) => {
                let _ = out.send(line).await;
                return;
            }
            Answer::Call(id, call) => (id, call),
        };
        let server = self.clone();
        let out = out.clone();
        let registry = in_flight.clone();
        let call_id = id.clone();
        let job = job.clone();
        let cancellation = Cancellation::default();
        let handler_cancellation = cancellation.clone();
        // The registry stays locked until the call is in it, so the call's own removal
        // below cannot run first.
        let mut registered = in_flight.lock().unwrap_or_else(|p| p.into_inner());
        let answer = calls.spawn(async move {
            let reply = server
                .call(call_id.clone(), call, job, handler_cancellation)
                .await;
            registry
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&call_id);
            let _ = out.send(reply).await;
        });
        registered.insert(
            id,
            InFlight {
                answer,
                cancellation,
            },
        );
    }

    /// Runs a tool call on a blocking thread: parsing its parameters, the handler (a panic
    /// becomes `tool_failed`) and serializing the reply.
    pub(crate) async fn call(
        self: Arc<Self>,
        id: RequestId,
        params: Box<RawValue>,
        job: Arc<JobDir>,
        cancellation: Cancellation,
    ) -> Vec<u8> {
        match self
            .call_named(id, params, CallJob::Given(job), cancellation, None)
            .await
        {
            Ok(line) | Err((_, line)) => line,
        }
    }

    /// [`call`](Self::call); `Err` is a call refused before it runs, with the tool it named
    /// and the refusal: a modern call whose `_meta` lacks a required key or names another
    /// version (`-32602`, `-32022`), or whose tool is not `expected` (a modern HTTP request's
    /// `Mcp-Name` header: `-32020`). The call's params are read once, whatever their size.
    pub(crate) async fn call_named(
        self: Arc<Self>,
        id: RequestId,
        params: Box<RawValue>,
        job: CallJob,
        cancellation: Cancellation,
        expected: Option<String>,
    ) -> Result<Vec<u8>, (String, Vec<u8>)> {
        let turn = match self.gates.turn(self.is_chunk_call(&params)).await {
            Ok(turn) => turn,
            Err(busy) => return Ok(tool_reply(&id, Err(busy), &tool_name(&params))),
        };
        let reply_id = id.clone();
        let call = move || {
            let _turn = turn;
            self.call_blocking(id, &params, job, cancellation, expected.as_deref())
        };
        match tokio::task::spawn_blocking(call).await {
            Ok(outcome) => outcome,
            Err(_) => Ok(encode(&error_reply(
                reply_id,
                error_codes::INTERNAL_ERROR,
                "the call was stopped".to_owned(),
            ))),
        }
    }

    /// Whether a call's params name the chunk tool at their start, where a client writes
    /// the name: such a call passes the chunks' gate. (A call that names it elsewhere
    /// passes the other gate, bounded all the same.)
    fn is_chunk_call(&self, params: &RawValue) -> bool {
        let Some(tool) = self.chunk_tool() else {
            return false;
        };
        let head = &params.get().as_bytes()[..params.get().len().min(256)];
        let quoted = format!("\"{tool}\"");
        memchr::memmem::find(head, quoted.as_bytes()).is_some()
    }

    /// The tool whose arguments are read as a file chunk, if the server has one.
    fn chunk_tool(&self) -> Option<&str> {
        self.tools
            .iter()
            .find(|t| t.chunk_handler.is_some())
            .map(|t| t.spec.name.as_str())
    }

    fn call_blocking(
        &self,
        id: RequestId,
        params: &RawValue,
        job: CallJob,
        cancellation: Cancellation,
        expected: Option<&str>,
    ) -> Result<Vec<u8>, (String, Vec<u8>)> {
        let Some(call) = ToolCall::read(params.get(), self.chunk_tool()) else {
            return Ok(invalid_call_params(id));
        };
        let name = call.name().to_owned();
        // A call made with the modern HTTP headers (`expected`) must be modern in its body too.
        if let Err(error) = era::meta_era(call.meta(), expected.is_some()) {
            let refusal = encode(&Message::Error(ErrorResponse {
                id: Some(id),
                error,
            }));
            return Err((name, refusal));
        }
        if let Some(expected) = expected.filter(|e| *e != name) {
            let refusal = encode(&error_reply(
                id,
                modern_error_codes::HEADER_MISMATCH,
                format!("the Mcp-Name header names {expected:?} and params.name {name:?}"),
            ));
            return Err((name, refusal));
        }
        let job = match job {
            CallJob::Given(job) => job,
            CallJob::ChosenBy(choose) => match choose(call.meta()) {
                Ok(job) => job,
                Err(error) => {
                    let refusal = encode(&Message::Error(ErrorResponse {
                        id: Some(id),
                        error,
                    }));
                    return Err((name, refusal));
                }
            },
        };
        Ok(self.run_tool(id, call, name, job, cancellation))
    }

    fn run_tool(
        &self,
        id: RequestId,
        call: ToolCall<'_>,
        name: String,
        job: Arc<JobDir>,
        cancellation: Cancellation,
    ) -> Vec<u8> {
        if name == CAPABILITIES {
            return tool_reply(
                &id,
                Ok(serde_json::to_value(&self.manifest).unwrap_or(Value::Null)),
                CAPABILITIES,
            );
        }
        let Some(tool) = self.tools.iter().find(|t| t.spec.name == name) else {
            return encode(&error_reply(
                id,
                error_codes::INVALID_PARAMS,
                format!("unknown tool {name:?}; tools/list names the tools"),
            ));
        };
        if let (Some(Err(reason)), Some(dep)) = (&tool.dependency, &tool.spec.dependency) {
            let failure = ToolFailure::new(
                ErrorCode::MissingDependency,
                reason.clone(),
                Some(dep.remediation.clone()),
            );
            return tool_reply(&id, Err(failure), &name);
        }
        let dependency = match &tool.dependency {
            Some(Ok(found)) => Some(found.clone()),
            _ => None,
        };
        let context = ToolContext::for_job(name.clone(), job)
            .with_dependency(dependency)
            .reading(self.roots.clone())
            .cancelled_by(cancellation)
            .with_job_bytes(self.job_bytes);
        let outcome = match (call, &tool.chunk_handler) {
            (ToolCall::Chunk { chunk, .. }, Some(chunk_handler)) => {
                std::panic::catch_unwind(AssertUnwindSafe(|| chunk_handler(&chunk, &context)))
            }
            (ToolCall::Chunk { name, .. }, None) => {
                unreachable!("{name} has no chunk handler, so its call is not read as a chunk")
            }
            (ToolCall::Parsed(call), _) => {
                let arguments = Arguments::new(call.arguments.unwrap_or_default());
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    (tool.handler)(&arguments, &context)
                }));
                BUFFERS.give_strings(Value::Object(arguments.into_map()));
                outcome
            }
        };
        let result = outcome.unwrap_or_else(|panic| {
            Err(ToolFailure::new(
                ErrorCode::ToolFailed,
                format!("the tool failed unexpectedly: {}", panic_text(&*panic)),
                Some("report this to the server's authors with the arguments used".to_owned()),
            ))
        });
        tool_reply(&id, result, &name)
    }
}

/// The tool a call's params name, for an answer given without reading them whole.
fn tool_name(params: &RawValue) -> String {
    #[derive(serde::Deserialize)]
    struct NameOnly {
        #[serde(default)]
        name: String,
    }
    serde_json::from_str::<NameOnly>(params.get())
        .map(|p| p.name)
        .unwrap_or_default()
}

fn invalid_call_params(id: RequestId) -> Vec<u8> {
    encode(&error_reply(
        id,
        error_codes::INVALID_PARAMS,
        "tools/call needs {name, arguments}".to_owned(),
    ))
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

async fn write_lines<W: AsyncWrite + Unpin>(
    mut writer: W,
    mut lines: mpsc::Receiver<Vec<u8>>,
) -> io::Result<()> {
    while let Some(line) = lines.recv().await {
        writer.write_all(&line).await?;
        writer.flush().await?;
        BUFFERS.give(line);
    }
    writer.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_transfer_server_reads_put_sample_chunk_calls_as_chunks_and_no_other() {
        let files = Server::builder("files", "1").file_transfer().build();
        assert_eq!(files.chunk_tool(), Some("put_sample_chunk"));
        let plain = Server::builder("plain", "1")
            .tool(
                ToolSpec::new("put_sample_chunk", "a tool of its own"),
                |_, _| Ok(json!({})),
            )
            .build();
        assert_eq!(plain.chunk_tool(), None);
    }
}
