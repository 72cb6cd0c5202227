//! The staging layer: before a call, path arguments inside the job's directory reach a
//! server elsewhere (uploaded once per server per job, or rewritten through its sample
//! mount); after a call, [`taking`](crate::taking) brings the files a tool named back.

use std::path::Path;
use std::sync::OnceLock;
use std::time::Instant;

use maljan_mcp_proto::maljan::{Outcome, ToolAnswer, ToolFailure, is_platform_primitive};
use maljan_staging::{
    CHUNK_BYTES, Degradation, Disclosed, Disclosure, DisclosureOutcome, Reach, SampleMount,
    Staging, ToolCaller, UploadMode, decide, upload, upload_announced,
};
use serde_json::Value;

use crate::call::{CallService, Called, ToolCall};
use crate::job::lock;
use crate::progress::TransferProgress;
use crate::{ClientError, ConnectionContext, Job, TakenFile};

/// Where a server is, as staging sees it: whether it shares this host's files.
#[derive(Debug, Clone)]
pub(crate) struct ServerReach {
    /// The server's name.
    pub(crate) server: String,
    /// Whether the server is elsewhere (does not share this host's files).
    pub(crate) remote: bool,
    /// Where it sees the job's files, when it shares them through a mount.
    pub(crate) sample_mount: Option<SampleMount>,
}

impl ServerReach {
    pub(crate) fn reach(&self) -> Reach<'_> {
        if self.remote || self.sample_mount.is_some() {
            Reach::Remote {
                sample_mount: self.sample_mount.as_ref(),
            }
        } else {
            Reach::Local
        }
    }
}

/// The file name of a path, for display and for the name a file is stored under.
pub(crate) fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Reports transfer progress to the context's reporter, if any.
pub(crate) fn report_progress(
    context: &ConnectionContext,
    direction: &'static str,
    name: &str,
    done: u64,
    total: Option<u64>,
) {
    if let Some(reporter) = context.progress() {
        reporter.report(TransferProgress {
            direction,
            name,
            done,
            total,
        });
    }
}

/// Stages path arguments for the layer below, and takes the files its answers name.
#[derive(Debug)]
pub(crate) struct Staged<S> {
    inner: S,
    place: ServerReach,
    context: ConnectionContext,
    tools: OnceLock<Vec<String>>,
}

/// The platform primitives, called through the layer below (ledgered, under the cap).
pub(crate) struct Primitives<'a, S> {
    inner: &'a S,
    server: &'a str,
    tools: &'a [String],
}

impl<S: CallService> ToolCaller for Primitives<'_, S> {
    async fn call_tool(&self, tool: &str, arguments: Value) -> Result<Value, ToolFailure> {
        if !self.tools.iter().any(|t| t == tool) {
            let unknown = ClientError::UnknownTool {
                server: self.server.to_owned(),
                tool: tool.to_owned(),
                known: self
                    .tools
                    .iter()
                    .filter(|t| !is_platform_primitive(t))
                    .cloned()
                    .collect(),
            };
            return Err(ToolFailure::new(
                maljan_mcp_proto::maljan::ErrorCode::BadArgument,
                unknown.to_string(),
                None,
            ));
        }
        let called = self.inner.call(ToolCall::new(tool, arguments)).await;
        match called.answer.outcome {
            Outcome::Ok => Ok(called.answer.value),
            Outcome::Failed(failure) => Err(failure),
        }
    }
}

impl<S> Staged<S> {
    /// Stages for `inner`, a server at `place`, within `context`'s job.
    pub(crate) fn new(inner: S, place: ServerReach, context: ConnectionContext) -> Self {
        Staged {
            inner,
            place,
            context,
            tools: OnceLock::new(),
        }
    }

    /// The layer below.
    pub(crate) fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The layer below.
    pub(crate) fn into_inner(self) -> S {
        self.inner
    }

    /// Says whether the server is elsewhere, and where it sees the job's files.
    pub(crate) fn set_reach(&mut self, remote: bool, sample_mount: Option<SampleMount>) {
        self.place.remote = remote;
        self.place.sample_mount = sample_mount;
    }

    /// The server's tools, once setup listed them: which upload primitives it offers.
    pub(crate) fn set_tools(&self, tools: Vec<String>) {
        let _ = self.tools.set(tools);
    }

    /// The platform primitives, called through the layer below.
    pub(crate) fn primitives(&self) -> Primitives<'_, S> {
        Primitives {
            inner: &self.inner,
            server: &self.place.server,
            tools: self.tools.get().map_or(&[], Vec::as_slice),
        }
    }

    /// What a file sent from the job's directory is, for the disclosure block.
    fn disclosed(job: &Job, local: &Path) -> Disclosed {
        if job.sample().is_some_and(|s| s.path == local) {
            return Disclosed::Sample;
        }
        if local.starts_with(job.store().root()) {
            let sha = file_name(local);
            if let Some(entry) = job
                .store()
                .index()
                .ok()
                .and_then(|index| index.into_iter().find(|e| e.sha256 == sha))
            {
                return Disclosed::ToolOutput {
                    step: entry.origin.step,
                    tool: entry.origin.tool,
                };
            }
        }
        Disclosed::JobFile
    }
}

impl<S: CallService> Staged<S> {
    /// Rewrites path arguments for this server: files inside the job's directory are
    /// uploaded to a server elsewhere (once per server per job) or rewritten through its
    /// sample mount; anything else is passed as written and never read. A failed upload
    /// is a degradation: the argument keeps its local path.
    async fn stage_arguments(&self, arguments: &Value) -> Value {
        let (Some(job), Value::Object(map)) = (self.context.job(), arguments) else {
            return arguments.clone();
        };
        let mut sent = map.clone();
        for (key, value) in map {
            let Value::String(written) = value else {
                continue;
            };
            match decide(self.place.reach(), job.dir(), written) {
                Staging::AsWritten => {}
                Staging::Rewrite(path) => {
                    sent.insert(key.clone(), Value::String(path));
                }
                Staging::Upload(local) => match self.stage_file(job, &local).await {
                    Ok(remote) => {
                        sent.insert(key.clone(), Value::String(remote));
                    }
                    Err(reason) => lock(&job.degradations).push(Degradation {
                        server: self.place.server.clone(),
                        subject: written.clone(),
                        reason: format!("{reason}; the call went out with the local path"),
                    }),
                },
            }
        }
        Value::Object(sent)
    }

    async fn stage_file(&self, job: &Job, local: &Path) -> Result<String, String> {
        let server = self.place.server.as_str();
        let key = (server.to_owned(), local.to_owned());
        if let Some(remote) = lock(&job.staged).get(&key) {
            return Ok(remote.clone());
        }
        let primitives = self.primitives();
        let mode = UploadMode::offered(primitives.tools.iter().map(String::as_str))
            .ok_or_else(|| {
                format!(
                    "server {server} offers neither put_sample nor put_sample_begin/_chunk/_finish, \
                     so {} could not be staged",
                    local.display()
                )
            })?;
        let name = file_name(local);
        let started = Instant::now();
        let progress =
            |done, total| report_progress(&self.context, "upload", &name, done, Some(total));
        // The digest of the sample (taken as it was copied in) and of a file of the artefact
        // store (its name) is known: it is announced without the file being hashed first,
        // and the upload fails if the bytes are no longer those.
        let announced = match job.sample() {
            Some(sample) if sample.path == local => Some((sample.size, sample.sha256)),
            _ => job.store().named_digest(local).and_then(|sha256| {
                let size = std::fs::metadata(local).ok()?.len();
                Some((size, sha256.to_owned()))
            }),
        };
        let chunk = CHUNK_BYTES as usize;
        let result = match announced {
            Some(announced) => {
                upload_announced(&primitives, local, &name, announced, mode, chunk, progress).await
            }
            None => upload(&primitives, local, &name, mode, chunk, progress).await,
        };
        let (outcome, staged) = match &result {
            Ok(receipt) => (
                DisclosureOutcome::Sent {
                    remote_path: receipt.remote_path.clone(),
                },
                Ok(receipt.remote_path.clone()),
            ),
            Err(e) => (
                DisclosureOutcome::Failed {
                    reason: e.to_string(),
                },
                Err(format!(
                    "uploading {} to {server} failed: {e}",
                    local.display()
                )),
            ),
        };
        // The receipt names what was sent; after a failure the file is hashed for the record.
        let (size, sha256) = match &result {
            Ok(receipt) => (receipt.size, receipt.sha256.clone()),
            Err(_) => maljan_staging::hash_file(local)
                .await
                .unwrap_or((0, String::new())),
        };
        lock(&job.disclosures).push(Disclosure {
            server: server.to_owned(),
            what: Self::disclosed(job, local),
            name,
            size,
            sha256,
            mode,
            outcome,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        });
        if let Ok(remote) = &staged {
            lock(&job.staged).insert(key, remote.clone());
        }
        staged
    }

    /// Takes the files a tool named in its answer's `files` into the job's artefact store
    /// (see [`taking`](crate::taking)). Needs a job in the context.
    pub(crate) async fn take_files(
        &self,
        tool: &str,
        answer: &ToolAnswer,
        step: Option<&str>,
    ) -> Vec<TakenFile> {
        let Some(job) = self.context.job() else {
            return Vec::new();
        };
        crate::taking::take_files(
            &self.primitives(),
            &self.place,
            job,
            &self.context,
            tool,
            answer,
            step,
        )
        .await
    }
}

impl<S: CallService> CallService for Staged<S> {
    async fn call(&self, mut call: ToolCall) -> Called {
        if call.arguments.is_object() {
            let sent = self.stage_arguments(&call.arguments).await;
            if sent != call.arguments {
                call.as_written = Some(std::mem::replace(&mut call.arguments, sent));
            }
        }
        self.inner.call(call).await
    }
}
