//! What a tool is to the kit: its handler, its context, its answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use maljan_confine::Root;
use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
use serde_json::{Map, Value};

use crate::call_params::Chunk;
use crate::confined::{ConfinedFile, open_beneath};
use crate::{JobDir, Probe};

/// What a handler returns: the answer, or the failure the kit turns into an error envelope.
pub type ToolResult = Result<Value, ToolFailure>;

pub(crate) type Handler = Arc<dyn Fn(&Arguments, &ToolContext) -> ToolResult + Send + Sync>;

/// A handler of a file chunk's arguments read straight from the request (see
/// [`ToolCall`](crate::call_params::ToolCall)).
pub(crate) type ChunkHandler = Arc<dyn Fn(&Chunk<'_>, &ToolContext) -> ToolResult + Send + Sync>;

/// An optional dependency of a tool, probed when the server starts.
#[derive(Debug, Clone)]
pub struct Dependency {
    /// How to find it.
    pub probe: Probe,
    /// What to do when it is missing.
    pub remediation: String,
    /// What is lost without it.
    pub without: Option<String>,
}

/// A tool's description.
///
/// ```
/// use maljan_sidecar_kit::ToolSpec;
/// let spec = ToolSpec::new("file_info", "Size, digest, type and entropy of a file")
///     .required_string("path", "the file to read")
///     .timeout_s(30.0);
/// assert_eq!(spec.input_schema["required"][0], "path");
/// ```
#[derive(Debug, Clone)]
pub struct ToolSpec {
    /// The tool's name.
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its arguments.
    pub input_schema: Value,
    /// How long a client should wait for it; `None`: the client's default.
    pub timeout_s: Option<f64>,
    /// Its optional dependency.
    pub dependency: Option<Dependency>,
}

impl ToolSpec {
    /// A tool without arguments.
    pub fn new(name: impl Into<String>, description: impl Into<String>) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema: serde_json::json!({
                "type": "object",
                "properties": {},
                "additionalProperties": false,
            }),
            timeout_s: None,
            dependency: None,
        }
    }

    fn property(mut self, name: &str, schema: Value, required: bool) -> Self {
        self.input_schema["properties"][name] = schema;
        if required {
            match self.input_schema["required"].as_array_mut() {
                Some(list) => list.push(Value::from(name)),
                None => self.input_schema["required"] = serde_json::json!([name]),
            }
        }
        self
    }

    /// Adds a required string argument.
    pub fn required_string(self, name: &str, description: &str) -> Self {
        self.property(
            name,
            serde_json::json!({"type": "string", "description": description}),
            true,
        )
    }

    /// Adds an optional argument with its own schema.
    pub fn optional(self, name: &str, schema: Value) -> Self {
        self.property(name, schema, false)
    }

    /// Sets the timeout the manifest states.
    pub fn timeout_s(mut self, seconds: f64) -> Self {
        self.timeout_s = Some(seconds);
        self
    }

    /// Declares an optional dependency.
    pub fn depends_on(mut self, probe: Probe, remediation: &str, without: Option<&str>) -> Self {
        self.dependency = Some(Dependency {
            probe,
            remediation: remediation.to_owned(),
            without: without.map(str::to_owned),
        });
        self
    }
}

/// Whether the client still wants a call's answer: set when it cancels the call
/// (`notifications/cancelled`) or, over HTTP, goes away. A handler's loops check it and
/// stop early.
#[derive(Debug, Clone, Default)]
pub struct Cancellation(Arc<AtomicBool>);

impl Cancellation {
    /// Whether the call was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// What a handler knows besides its arguments.
///
/// ```
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("sample.txt"), "hello")?;
/// let job = maljan_sidecar_kit::JobDir::in_dir(dir.path())?;
/// let ctx = maljan_sidecar_kit::ToolContext::for_job("demo", job);
/// let opened = ctx.open("sample.txt").unwrap();
/// assert_eq!(opened.size, 5);
/// assert_eq!(ctx.open("/etc/passwd").unwrap_err().code.as_str(), "bad_argument");
/// assert!(ctx.check_cancelled().is_ok());
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The tool's name.
    pub tool: String,
    /// What the dependency's probe found (a program's path, a variable's value).
    pub dependency: Option<String>,
    /// The job the call belongs to: where the tool writes its files.
    pub job: Arc<JobDir>,
    /// The directories besides the job's whose files the server reads.
    roots: Arc<[Root]>,
    cancellation: Cancellation,
    /// The job's disk budget, in bytes.
    job_bytes: u64,
}

impl ToolContext {
    /// A context for a call of `tool` in `job`, with no other roots (for tests and tools
    /// that call each other).
    pub fn for_job(tool: impl Into<String>, job: Arc<JobDir>) -> Self {
        ToolContext {
            tool: tool.into(),
            dependency: None,
            job,
            roots: Arc::new([]),
            cancellation: Cancellation::default(),
            job_bytes: JOB_BYTES,
        }
    }

    pub(crate) fn with_job_bytes(mut self, bytes: u64) -> Self {
        self.job_bytes = bytes;
        self
    }

    /// Holds up to `wanted` bytes of the job's disk budget for files the tool is about to
    /// write, as many as are left when fewer are: write at most
    /// [`bytes`](DiskReservation::bytes), then [`keep`](DiskReservation::keep) what was
    /// written; the rest goes back when the reservation is dropped.
    ///
    /// ```
    /// use maljan_sidecar_kit::{JobDir, ToolContext};
    /// let ctx = ToolContext::for_job("unpack", JobDir::temporary().unwrap());
    /// let room = ctx.reserve_disk(1 << 20);
    /// assert_eq!(room.bytes(), 1 << 20);
    /// room.keep(1000);
    /// assert_eq!(ctx.job.disk_used(), 1000);
    /// ```
    pub fn reserve_disk(&self, wanted: u64) -> DiskReservation<'_> {
        DiskReservation {
            job: &self.job,
            bytes: self.job.take_disk_up_to(wanted, self.job_bytes),
        }
    }

    /// Holds exactly `bytes` of the job's disk budget, or fails with `over_limit` naming
    /// the budget and what is left.
    pub fn reserve_disk_exactly(&self, bytes: u64) -> Result<DiskReservation<'_>, ToolFailure> {
        match self.job.take_disk(bytes, self.job_bytes) {
            Ok(()) => Ok(DiskReservation {
                job: &self.job,
                bytes,
            }),
            Err(left) => Err(self.over_budget(bytes, left)),
        }
    }

    /// The failure of a write the job's disk budget has no room for.
    pub fn over_budget(&self, wanted: u64, left: u64) -> ToolFailure {
        ToolFailure::new(
            ErrorCode::OverLimit,
            format!(
                "{wanted} bytes do not fit the job's disk budget of {} bytes ({left} left)",
                self.job_bytes
            ),
            Some(
                "start a new job (a new session or job key) for more files, or ask the \
                 server's operator for a larger budget (the sidecar's --job-bytes)"
                    .to_owned(),
            ),
        )
    }

    pub(crate) fn with_dependency(mut self, found: Option<String>) -> Self {
        self.dependency = found;
        self
    }

    pub(crate) fn reading(mut self, roots: Arc<[Root]>) -> Self {
        self.roots = roots;
        self
    }

    pub(crate) fn cancelled_by(mut self, cancellation: Cancellation) -> Self {
        self.cancellation = cancellation;
        self
    }

    /// Opens a file a client named, beneath the server's roots: a relative path in the
    /// job's directory, an absolute one beneath the job's directory or a root the operator
    /// named. `..`, a symlink leading out, a `/proc` link, anything but a regular file are
    /// refused as `bad_argument` saying why; a missing file is `no_such_file`. The file is
    /// opened in the same step as the path is checked: read it, never the path again.
    pub fn open(&self, named: &str) -> Result<ConfinedFile, ToolFailure> {
        let job = self.job.root().map_err(|e| {
            ToolFailure::new(
                ErrorCode::ToolFailed,
                format!("the job's directory cannot be made: {e}"),
                None,
            )
        })?;
        let mut roots = vec![job];
        roots.extend(self.roots.iter());
        open_beneath(&roots, named)
    }

    /// Whether the client cancelled the call (or went away).
    pub fn is_cancelled(&self) -> bool {
        self.cancellation.is_cancelled()
    }

    /// `Err(tool_failed)` once the call is cancelled: for `?` in a handler's loop.
    pub fn check_cancelled(&self) -> Result<(), ToolFailure> {
        if self.is_cancelled() {
            return Err(ToolFailure::new(
                ErrorCode::ToolFailed,
                format!("{} was cancelled by the client", self.tool),
                None,
            ));
        }
        Ok(())
    }
}

/// How many bytes a job's files may take on a server's disk, unless the operator says
/// otherwise ([`ServerBuilder::job_bytes`](crate::ServerBuilder::job_bytes)): every upload,
/// every unpacked member and every file a tool writes counts.
pub const JOB_BYTES: u64 = 4 * 1024 * 1024 * 1024;

/// Room held in a job's disk budget for a write under way (see
/// [`ToolContext::reserve_disk`]).
#[derive(Debug)]
#[must_use = "a reservation dropped at once gives its room back"]
pub struct DiskReservation<'a> {
    job: &'a JobDir,
    bytes: u64,
}

impl DiskReservation<'_> {
    /// How many bytes it holds: the most the write may take.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Keeps `written` bytes (at most those held) charged to the job for good, and gives
    /// the rest back.
    pub fn keep(mut self, written: u64) {
        let kept = written.min(self.bytes);
        self.bytes -= kept;
    }
}

impl Drop for DiskReservation<'_> {
    fn drop(&mut self) {
        self.job.release_disk(self.bytes);
    }
}

/// A tool's arguments, with readers that fail as `bad_argument` naming the argument.
///
/// ```
/// use maljan_sidecar_kit::Arguments;
/// let args = Arguments::new(serde_json::json!({"path": "/x", "min_len": 6}).as_object().unwrap().clone());
/// assert_eq!(args.string("path").unwrap(), "/x");
/// assert_eq!(args.optional_u64("min_len").unwrap(), Some(6));
/// assert_eq!(args.string("nope").unwrap_err().code.as_str(), "bad_argument");
/// ```
#[derive(Debug, Clone, Default)]
pub struct Arguments(Map<String, Value>);

impl Arguments {
    /// Wraps an argument object.
    pub fn new(map: Map<String, Value>) -> Self {
        Arguments(map)
    }

    /// The argument object.
    pub(crate) fn into_map(self) -> Map<String, Value> {
        self.0
    }

    /// The raw argument, if present.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    /// A required string.
    pub fn string(&self, name: &str) -> Result<&str, ToolFailure> {
        match self.get(name) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(bad_argument(name, &format!("is {other}, not a string"))),
            None => Err(bad_argument(name, "is missing")),
        }
    }

    /// An optional non-negative integer.
    pub fn optional_u64(&self, name: &str) -> Result<Option<u64>, ToolFailure> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| bad_argument(name, &format!("is {v}, not a non-negative integer"))),
        }
    }

    /// An optional string or list of strings, as a list.
    pub fn string_list(&self, name: &str) -> Result<Vec<String>, ToolFailure> {
        match self.get(name) {
            None => Ok(Vec::new()),
            Some(Value::String(s)) => Ok(vec![s.clone()]),
            Some(Value::Array(items)) => items
                .iter()
                .map(|i| {
                    i.as_str()
                        .map(str::to_owned)
                        .ok_or_else(|| bad_argument(name, &format!("holds {i}, not a string")))
                })
                .collect(),
            Some(other) => Err(bad_argument(
                name,
                &format!("is {other}, not a string or a list of strings"),
            )),
        }
    }
}

fn bad_argument(name: &str, what: &str) -> ToolFailure {
    ToolFailure::new(
        ErrorCode::BadArgument,
        format!("the argument {name} {what}"),
        Some(format!("pass {name} as the tool's input schema says")),
    )
}
