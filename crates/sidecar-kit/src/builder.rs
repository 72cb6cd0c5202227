//! Registering a server's tools and probing their dependencies.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use maljan_confine::Root;
use maljan_mcp_proto::maljan::{CapabilityManifest, FileReach, ToolCapability};
use maljan_mcp_proto::mcp::Implementation;
use maljan_mcp_stdio::DEFAULT_BUSY_POLL;

use crate::call_gate::CallLimits;
use crate::call_params::Chunk;
use crate::server::RegisteredTool;
use crate::tool::JOB_BYTES;
use crate::tool::{ChunkHandler, Handler};
use crate::{Arguments, ProbeResult, Server, ToolContext, ToolResult, ToolSpec};

/// Builds a [`Server`]: tools with their handlers; the manifest is probed at `build`.
#[derive(Default)]
pub struct ServerBuilder {
    name: String,
    version: String,
    tools: Vec<RegisteredTool>,
    roots: Vec<Root>,
    call_limits: CallLimits,
    job_bytes: u64,
    busy_poll: Duration,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("name", &self.name)
            .field(
                "tools",
                &self.tools.iter().map(|t| &t.spec.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl ServerBuilder {
    pub(crate) fn new(name: String, version: String) -> ServerBuilder {
        ServerBuilder {
            name,
            version,
            tools: Vec::new(),
            roots: Vec::new(),
            call_limits: CallLimits::default(),
            job_bytes: JOB_BYTES,
            busy_poll: DEFAULT_BUSY_POLL,
        }
    }

    /// How long the stdio server polls stdin after each answer before it sleeps
    /// ([`DEFAULT_BUSY_POLL`]; zero: never). A client calling quick tools one after another
    /// sends its next request within it, and the server reads it without being woken (a
    /// wake-up costs tens of microseconds on a virtual machine). Polling yields to every
    /// other task between attempts; it costs at most the window in CPU time per answer.
    ///
    /// ```
    /// use std::time::Duration;
    /// let server = maljan_sidecar_kit::Server::builder("demo", "1")
    ///     .busy_poll(Duration::ZERO)
    ///     .build();
    /// assert!(server.busy_poll().is_zero());
    /// ```
    pub fn busy_poll(mut self, window: Duration) -> Self {
        self.busy_poll = window;
        self
    }

    /// How many bytes each job's files may take on disk ([`JOB_BYTES`]): uploads, unpacked
    /// members and files tools write count; a write past it fails with `over_limit`.
    ///
    /// ```
    /// let server = maljan_sidecar_kit::Server::builder("demo", "1").job_bytes(1 << 30).build();
    /// assert_eq!(server.job_bytes(), 1 << 30);
    /// ```
    pub fn job_bytes(mut self, bytes: u64) -> Self {
        self.job_bytes = bytes;
        self
    }

    /// How many calls run at once and how many may wait for a turn ([`CallLimits`]); past
    /// that a call is answered `server_busy`.
    ///
    /// ```
    /// use maljan_sidecar_kit::{CallLimits, Server};
    /// let server = Server::builder("demo", "1").call_limits(CallLimits::default().running(2)).build();
    /// assert_eq!(server.call_limits().max_running(), 2);
    /// ```
    pub fn call_limits(mut self, limits: CallLimits) -> Self {
        self.call_limits = limits;
        self
    }

    /// Adds a tool. Its handler runs on a blocking thread; a panic in it becomes a
    /// `tool_failed` answer.
    pub fn tool<F>(self, spec: ToolSpec, handler: F) -> Self
    where
        F: Fn(&Arguments, &ToolContext) -> ToolResult + Send + Sync + 'static,
    {
        self.registered(spec, Arc::new(handler), None, false)
    }

    /// Adds a tool whose handler is quick and never blocks (no file or network I/O, no
    /// long computation): it runs on the task that serves the call, without the hand-off
    /// to a blocking thread and back that [`tool`](Self::tool) pays, a few microseconds
    /// and two thread wake-ups a call. While it runs, that task reads no other request;
    /// a panic in it becomes a `tool_failed` answer all the same. A call whose params
    /// are large (over [`QUICK_PARAMS_BYTES`](crate::QUICK_PARAMS_BYTES)) still runs on a blocking thread.
    ///
    /// ```
    /// use maljan_sidecar_kit::{Server, ToolSpec};
    /// let server = Server::builder("demo", "1")
    ///     .quick_tool(
    ///         ToolSpec::new("echo", "Answers its message").required_string("message", "the words"),
    ///         |args, _ctx| Ok(serde_json::json!({ "message": args.string("message")? })),
    ///     )
    ///     .build();
    /// assert_eq!(server.manifest().tools[0].name, "echo");
    /// ```
    pub fn quick_tool<F>(self, spec: ToolSpec, handler: F) -> Self
    where
        F: Fn(&Arguments, &ToolContext) -> ToolResult + Send + Sync + 'static,
    {
        self.registered(spec, Arc::new(handler), None, true)
    }

    fn registered(
        mut self,
        spec: ToolSpec,
        handler: Handler,
        chunk_handler: Option<ChunkHandler>,
        quick: bool,
    ) -> Self {
        self.tools.push(RegisteredTool {
            spec,
            handler,
            chunk_handler,
            dependency: None,
            quick,
        });
        self
    }

    /// Adds a tool whose arguments are a file chunk: `handler` takes them as any tool's,
    /// `chunk_handler` as a [`Chunk`] read straight from the request when they can be
    /// (see [`ToolCall::read`]). Both must answer alike.
    pub(crate) fn chunk_tool<F, C>(self, spec: ToolSpec, handler: F, chunk_handler: C) -> Self
    where
        F: Fn(&Arguments, &ToolContext) -> ToolResult + Send + Sync + 'static,
        C: Fn(&Chunk<'_>, &ToolContext) -> ToolResult + Send + Sync + 'static,
    {
        self.registered(
            spec,
            Arc::new(handler),
            Some(Arc::new(chunk_handler)),
            false,
        )
    }

    /// Lets tools read files beneath `root` as well as the job's directory (see
    /// [`ToolContext::open`]); nothing is ever written there.
    ///
    /// ```
    /// let samples = tempfile::tempdir()?;
    /// let root = maljan_confine::Root::open(samples.path())?;
    /// let server = maljan_sidecar_kit::Server::builder("demo", "1").root(root).build();
    /// # drop(server);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn root(mut self, root: Root) -> Self {
        self.roots.push(root);
        self
    }

    /// Adds the roots `MALJAN_ROOTS` names (separated by `:`), failing with the one that
    /// cannot be opened.
    pub fn roots_from_env(mut self) -> io::Result<Self> {
        self.roots.extend(crate::confined::roots_from_env()?);
        Ok(self)
    }

    /// Probes every tool's dependency and builds the server and its manifest.
    pub fn build(self) -> Server {
        let tools = self
            .tools
            .into_iter()
            .map(|tool| RegisteredTool {
                dependency: tool.spec.dependency.as_ref().map(|d| match d.probe.run() {
                    ProbeResult::Found(found) => Ok(found),
                    ProbeResult::Missing(reason) => Err(reason),
                }),
                ..tool
            })
            .collect::<Vec<_>>();
        let manifest = CapabilityManifest {
            server: self.name.clone(),
            version: self.version.clone(),
            tools: tools
                .iter()
                .map(|t| ToolCapability {
                    name: t.spec.name.clone(),
                    optional_dependency: t.spec.dependency.as_ref().map(|d| d.probe.name()),
                    available: !matches!(t.dependency, Some(Err(_))),
                    reason: match &t.dependency {
                        Some(Err(reason)) => Some(reason.clone()),
                        _ => None,
                    },
                    timeout_s: t.spec.timeout_s,
                    remediation: match &t.dependency {
                        Some(Err(_)) => t.spec.dependency.as_ref().map(|d| d.remediation.clone()),
                        _ => None,
                    },
                    without: t.spec.dependency.as_ref().and_then(|d| d.without.clone()),
                })
                .collect(),
            // Tools read their job's directory and the roots the operator named, nothing
            // else of the host: a client stages files into the job.
            files: Some(FileReach::Job),
        };
        let info = Implementation {
            name: self.name,
            version: self.version,
            title: None,
        };
        Server::new(
            info,
            tools,
            manifest,
            self.roots.into(),
            self.call_limits,
            self.job_bytes,
            self.busy_poll,
        )
    }
}
