//! Moving files around calls: staging path arguments to servers elsewhere before a call,
//! and taking the files a tool named into the job's artefact store after it.

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use maljan_mcp_proto::maljan::{ErrorCode, Outcome, ToolAnswer, ToolFailure, files_in};
use maljan_staging::{
    CHUNK_BYTES, Degradation, Disclosed, Disclosure, DisclosureOutcome, DownloadError, Origin,
    Reach, Staging, ToolCaller, UploadMode, decide, download, upload, upload_announced,
};
use serde_json::Value;

use maljan_confine::Root;

use crate::job::lock;
use crate::{Job, ServerConnection, TakenFile};

/// The environment variable naming a local server's staging directory (as the server kit
/// reads it).
pub(crate) const JOB_DIR_ENV: &str = "MALJAN_JOB_DIR";
/// The environment variable naming the directories, besides its own, a local server may
/// read (as the server kit reads it): the job's.
pub(crate) const ROOTS_ENV: &str = "MALJAN_ROOTS";

/// A transfer in progress, as shown to a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferProgress<'a> {
    /// `upload` or `download`.
    pub direction: &'static str,
    /// The file.
    pub name: &'a str,
    /// Bytes moved so far.
    pub done: u64,
    /// The total, when known.
    pub total: Option<u64>,
}

/// Where transfer progress goes (a progress bar, a log).
#[derive(Clone)]
pub struct ProgressReporter(Arc<dyn Fn(TransferProgress<'_>) + Send + Sync>);

impl ProgressReporter {
    /// Reports to `f`.
    pub fn new(f: impl Fn(TransferProgress<'_>) + Send + Sync + 'static) -> Self {
        ProgressReporter(Arc::new(f))
    }

    fn report(&self, progress: TransferProgress<'_>) {
        (self.0)(progress);
    }
}

impl fmt::Debug for ProgressReporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProgressReporter")
    }
}

impl ToolCaller for ServerConnection {
    /// A call through the whole pipeline (ledgered); a failed answer is the failure.
    async fn call_tool(&self, tool: &str, arguments: Value) -> Result<Value, ToolFailure> {
        match self.call_unstaged(tool, arguments).await {
            Ok(answer) => match answer.outcome {
                Outcome::Ok => Ok(answer.value),
                Outcome::Failed(failure) => Err(failure),
            },
            Err(e) => Err(ToolFailure::new(
                ErrorCode::BadArgument,
                e.to_string(),
                None,
            )),
        }
    }
}

fn file_name(path: &Path) -> String {
    path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

impl ServerConnection {
    fn reach(&self) -> Reach<'_> {
        if self.remote || self.sample_mount.is_some() {
            Reach::Remote {
                sample_mount: self.sample_mount.as_ref(),
            }
        } else {
            Reach::Local
        }
    }

    fn progress(&self, direction: &'static str, name: &str, done: u64, total: Option<u64>) {
        if let Some(reporter) = &self.settings.progress {
            reporter.report(TransferProgress {
                direction,
                name,
                done,
                total,
            });
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

    /// Rewrites path arguments for this server: files inside the job's directory are
    /// uploaded to a server elsewhere (once per server per job) or rewritten through its
    /// sample mount; anything else is passed as written and never read. A failed upload
    /// is a degradation: the argument keeps its local path.
    pub(crate) async fn stage_arguments(&self, arguments: &Value) -> Value {
        let (Some(job), Value::Object(map)) = (&self.settings.job, arguments) else {
            return arguments.clone();
        };
        let mut sent = map.clone();
        for (key, value) in map {
            let Value::String(written) = value else {
                continue;
            };
            match decide(self.reach(), job.dir(), written) {
                Staging::AsWritten => {}
                Staging::Rewrite(path) => {
                    sent.insert(key.clone(), Value::String(path));
                }
                Staging::Upload(local) => match self.stage_file(job, &local).await {
                    Ok(remote) => {
                        sent.insert(key.clone(), Value::String(remote));
                    }
                    Err(reason) => lock(&job.degradations).push(Degradation {
                        server: self.name().to_owned(),
                        subject: written.clone(),
                        reason: format!("{reason}; the call went out with the local path"),
                    }),
                },
            }
        }
        Value::Object(sent)
    }

    async fn stage_file(&self, job: &Job, local: &Path) -> Result<String, String> {
        let key = (self.name().to_owned(), local.to_owned());
        if let Some(remote) = lock(&job.staged).get(&key) {
            return Ok(remote.clone());
        }
        let tools = self
            .setup_info()
            .map(|s| s.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>())
            .unwrap_or_default();
        let mode = UploadMode::offered(tools.iter().map(String::as_str)).ok_or_else(|| {
            format!(
                "server {} offers neither put_sample nor put_sample_begin/_chunk/_finish, so {} \
                 could not be staged",
                self.name(),
                local.display()
            )
        })?;
        let name = file_name(local);
        let started = Instant::now();
        let progress = |done, total| self.progress("upload", &name, done, Some(total));
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
        let result = match announced {
            Some(announced) => {
                upload_announced(
                    self,
                    local,
                    &name,
                    announced,
                    mode,
                    CHUNK_BYTES as usize,
                    progress,
                )
                .await
            }
            None => upload(self, local, &name, mode, CHUNK_BYTES as usize, progress).await,
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
                    "uploading {} to {} failed: {e}",
                    local.display(),
                    self.name()
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
            server: self.name().to_owned(),
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

    /// Takes the files a tool named in its answer's `files` into the job's artefact store:
    /// from a local server without a sample mount, read directly, but only from inside its
    /// own staging directory; from any other server, through `get_file`. A file not taken is
    /// recorded with the server's words. Needs a job in the client settings.
    pub async fn take_files(
        &self,
        tool: &str,
        answer: &ToolAnswer,
        step: Option<&str>,
    ) -> Vec<TakenFile> {
        let Some(job) = &self.settings.job else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for file in files_in(&answer.value) {
            let origin = Origin {
                step: step.map(str::to_owned),
                server: self.name().to_owned(),
                tool: tool.to_owned(),
            };
            let result = if matches!(self.reach(), Reach::Local) {
                self.read_local(job, &file.path, origin)
            } else {
                download(
                    self,
                    &file.path,
                    job.store(),
                    origin,
                    CHUNK_BYTES,
                    |done, total| self.progress("download", &file.path, done, total),
                )
                .await
                .map_err(|e| match e {
                    DownloadError::NotServed { words, .. } => words,
                    other => other.to_string(),
                })
            };
            let taken = match result {
                Ok(stored)
                    if file
                        .sha256
                        .as_deref()
                        .is_some_and(|s| !s.eq_ignore_ascii_case(&stored.sha256)) =>
                {
                    TakenFile::NotTaken {
                        server: self.name().to_owned(),
                        path: file.path.clone(),
                        words: format!(
                            "its bytes have sha256 {}, not the {} the tool stated",
                            stored.sha256,
                            file.sha256.unwrap_or_default()
                        ),
                    }
                }
                Ok(stored) => TakenFile::Taken {
                    server: self.name().to_owned(),
                    path: file.path.clone(),
                    sha256: stored.sha256,
                    size: stored.size,
                },
                Err(words) => TakenFile::NotTaken {
                    server: self.name().to_owned(),
                    path: file.path.clone(),
                    words,
                },
            };
            lock(&job.taken).push(taken.clone());
            out.push(taken);
        }
        out
    }

    /// Reads a file a local server wrote, only from inside its staging directory: opened
    /// beneath it in one step (no `..`, no symlink out, nothing but a regular file), and
    /// read from that descriptor, so the name cannot be swapped once checked.
    fn read_local(
        &self,
        job: &Job,
        path: &str,
        origin: Origin,
    ) -> Result<maljan_staging::StoredArtefact, String> {
        let server_dir = Root::open(job.server_dir(self.name()))
            .map_err(|e| format!("the server's staging directory cannot be read: {e}"))?;
        let file = server_dir.open_file(path).map_err(|refusal| {
            format!(
                "{path} is refused: {refusal} (files are taken only from the server's staging \
                 directory {})",
                server_dir.path().display()
            )
        })?;
        job.store()
            .add_reader(file, &file_name(Path::new(path)), origin)
            .map_err(|e| format!("{path} could not be stored: {e}"))
    }
}
