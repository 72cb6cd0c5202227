//! The staging layer: before a call, path arguments inside the job's directory reach a
//! server elsewhere (uploaded once per server per job, or rewritten through its sample
//! mount); after a call, [`taking`](crate::taking) brings the files a tool named back.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use maljan_mcp_proto::maljan::{Outcome, ToolAnswer, ToolFailure, is_platform_primitive};
use maljan_staging::{
    CHUNK_BYTES, Degradation, Disclosed, Disclosure, DisclosureOutcome, Staging, ToolCaller,
    UploadMode, upload, upload_with_digest,
};
use serde_json::Value;

use crate::call::{CallService, CallTrace, ToolCall};
use crate::context::ConnectionContext;
use crate::error::ClientError;
use crate::events::RunEvent;
use crate::job::file_name;
use crate::job::{Job, TakenFile};
use crate::reach::ServerReach;
use crate::uploads::NotStaged;

/// The uploads of this process, numbered: the events of one upload name it.
static UPLOADS: AtomicU64 = AtomicU64::new(0);

/// Stages path arguments for the layer below, and takes the files its answers name.
#[derive(Debug)]
pub(crate) struct Staged<S> {
    inner: S,
    place: ServerReach,
    context: ConnectionContext,
    /// The server's tools, as set-up listed them: which upload primitives it offers.
    tools: Vec<String>,
}

/// The platform primitives, called through the layer below (ledgered, under the cap), for
/// the step whose files they move.
pub(crate) struct Primitives<'a, S> {
    inner: &'a S,
    server: &'a str,
    tools: &'a [String],
    step: Option<&'a str>,
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
        let mut call = ToolCall::new(tool, arguments);
        call.step = self.step.map(str::to_owned);
        let called = self.inner.call(call).await;
        match called.answer.outcome {
            Outcome::Ok => Ok(called.answer.value),
            Outcome::Failed(failure) => Err(failure),
        }
    }
}

impl<S> Staged<S> {
    /// Stages for `inner`, a server at `place` offering `tools`, within `context`'s job.
    pub(crate) fn new(
        inner: S,
        place: ServerReach,
        tools: Vec<String>,
        context: ConnectionContext,
    ) -> Self {
        Staged {
            inner,
            place,
            context,
            tools,
        }
    }

    /// The layer below.
    pub(crate) fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The job and recorders the connection works in.
    pub(crate) fn context(&self) -> &ConnectionContext {
        &self.context
    }

    /// The layer below.
    pub(crate) fn into_inner(self) -> S {
        self.inner
    }

    /// The platform primitives, called through the layer below.
    pub(crate) fn primitives(&self) -> Primitives<'_, S> {
        self.primitives_for(None)
    }

    /// The platform primitives, called through the layer below for `step`.
    fn primitives_for<'a>(&'a self, step: Option<&'a str>) -> Primitives<'a, S> {
        Primitives {
            inner: &self.inner,
            server: &self.place.server,
            tools: &self.tools,
            step,
        }
    }

    /// What a file sent from the job's directory is, for the disclosure block.
    fn disclosed(job: &Job, local: &Path) -> Disclosed {
        if job.sample().is_some_and(|s| s.path == local) {
            return Disclosed::Sample;
        }
        if let Some(handed) = job.handed(local) {
            return Disclosed::ToolOutput {
                step: handed.origin.step,
                tool: handed.origin.tool,
            };
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
    /// Rewrites path arguments for this server, wherever they are in the arguments (inside
    /// arrays and nested objects too): files inside the job's directory are uploaded to a
    /// server elsewhere (once per server per job) or rewritten through its sample mount;
    /// anything else is passed as written and never read. A failed upload is a
    /// degradation: the argument keeps its local path.
    async fn stage_arguments(&self, arguments: &Value, step: Option<&str>) -> Value {
        let Some(job) = self.context.job() else {
            return arguments.clone();
        };
        let mut strings = Vec::new();
        strings_in(arguments, String::new(), &mut strings);
        let mut sent = arguments.clone();
        for (pointer, written) in strings {
            let staged = match Staging::for_argument(self.place.reach(), job.dir(), written) {
                Staging::AsWritten => continue,
                Staging::Rewrite(path) => path,
                Staging::Upload(local) => match self.stage_file(job, &local, step).await {
                    Ok(remote) => remote,
                    Err(reason) => {
                        self.context.record(&RunEvent::Degraded(&Degradation {
                            server: self.place.server.clone(),
                            subject: written.to_owned(),
                            reason: format!("{reason}; the call went out with the local path"),
                        }));
                        continue;
                    }
                },
            };
            if let Some(slot) = sent.pointer_mut(&pointer) {
                *slot = Value::String(staged);
            }
        }
        sent
    }

    /// Uploads a file of the job to the server once per job: calls at the same time wait
    /// for the one upload, later calls get its outcome.
    async fn stage_file(
        &self,
        job: &Job,
        local: &Path,
        step: Option<&str>,
    ) -> Result<String, NotStaged> {
        let upload = job.uploads().of(&self.place.server, local);
        upload
            .get_or_init(|| self.upload_file(job, local, step))
            .await
            .clone()
    }

    async fn upload_file(
        &self,
        job: &Job,
        local: &Path,
        step: Option<&str>,
    ) -> Result<String, NotStaged> {
        let server = self.place.server.as_str();
        let primitives = self.primitives_for(step);
        let mode =
            UploadMode::offered(primitives.tools.iter().map(String::as_str)).ok_or_else(|| {
                NotStaged::NoUploadTool {
                    server: server.to_owned(),
                    path: local.to_owned(),
                }
            })?;
        let name = file_name(local);
        let started = Instant::now();
        let progress = |done, total| {
            self.context
                .report_progress("upload", &name, done, Some(total))
        };
        // The digest of the sample (taken as it was copied in) and of a file of the artefact
        // store (its name) is known: it is announced without the file being hashed first,
        // and the upload fails if the bytes are no longer those.
        let announced = match (job.sample(), job.handed(local)) {
            (Some(sample), _) if sample.path == local => Some((sample.size, sample.sha256)),
            (_, Some(handed)) => Some((handed.size, handed.sha256)),
            _ => job.store().named_digest(local).and_then(|sha256| {
                let size = std::fs::metadata(local).ok()?.len();
                Some((size, sha256.to_owned()))
            }),
        };
        // Disclosed before its first byte is sent, so that a run stopped during the upload
        // still says what went where; the entry is completed below.
        let (known_size, known_sha256) = announced.clone().unwrap_or_else(|| {
            let size = std::fs::metadata(local).map_or(0, |m| m.len());
            (size, String::new())
        });
        let upload_id = UPLOADS.fetch_add(1, Ordering::Relaxed);
        let mut disclosure = Disclosure {
            server: server.to_owned(),
            what: Self::disclosed(job, local),
            needed_by: step.map(str::to_owned),
            name: name.clone(),
            size: known_size,
            sha256: known_sha256,
            mode,
            outcome: DisclosureOutcome::InProgress,
            duration_ms: 0,
        };
        self.context.record(&RunEvent::UploadStarted {
            upload: upload_id,
            disclosure: &disclosure,
        });
        let chunk = CHUNK_BYTES as usize;
        let result = match announced {
            Some(announced) => {
                upload_with_digest(&primitives, local, &name, announced, mode, chunk, progress)
                    .await
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
                Err(NotStaged::Upload {
                    server: server.to_owned(),
                    path: local.to_owned(),
                    cause: e.clone(),
                }),
            ),
        };
        // The receipt names what was sent; after a failure the file is hashed for the record.
        let (size, sha256) = match &result {
            Ok(receipt) => (receipt.size, receipt.sha256.clone()),
            Err(_) => maljan_staging::hash_file(local)
                .await
                .unwrap_or((0, String::new())),
        };
        disclosure.size = size;
        disclosure.sha256 = sha256;
        disclosure.outcome = outcome;
        disclosure.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.context.record(&RunEvent::UploadEnded {
            upload: upload_id,
            disclosure: &disclosure,
        });
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
            &self.primitives_for(step),
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

/// Every string in `value` with its JSON pointer (under `pointer`).
fn strings_in<'a>(value: &'a Value, pointer: String, out: &mut Vec<(String, &'a str)>) {
    match value {
        Value::String(s) => out.push((pointer, s)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                strings_in(item, format!("{pointer}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let key = key.replace('~', "~0").replace('/', "~1");
                strings_in(item, format!("{pointer}/{key}"), out);
            }
        }
        _ => {}
    }
}

impl<S: CallService> CallService for Staged<S> {
    async fn call(&self, mut call: ToolCall) -> CallTrace {
        if call.arguments.is_object() {
            let sent = self
                .stage_arguments(&call.arguments, call.step.as_deref())
                .await;
            if sent != call.arguments {
                call.as_written = Some(std::mem::replace(&mut call.arguments, sent));
            }
        }
        let sent = call.as_written.is_some().then(|| call.arguments.clone());
        let mut called = self.inner.call(call).await;
        called.sent_arguments = sent;
        called
    }
}

// The report builder hears what staging tells: a recorder that comes with runs.
#[cfg(all(test, feature = "runs"))]
mod tests {
    use std::sync::Arc;

    use maljan_mcp_proto::maljan::ErrorCode;
    use serde_json::json;

    use super::*;
    use crate::call::Scripted;
    use crate::report::ReportBuilder;

    const CONTENT: &[u8] = b"console.log(1)";

    fn answer_of(value: Value) -> ToolAnswer {
        ToolAnswer::read(
            &serde_json::from_value(json!({"structuredContent": value, "content": []}))
                .expect("a result"),
        )
    }

    /// A server elsewhere that stores what `put_sample` sends under `/remote/NAME`.
    fn remote_server(call: &ToolCall) -> ToolAnswer {
        match call.tool.as_str() {
            "put_sample" => answer_of(json!({
                "path": format!("/remote/{}", call.arguments["name"].as_str().expect("name")),
                "size": CONTENT.len(),
                "sha256": call.arguments["sha256"],
            })),
            _ => answer_of(json!({"seen": call.arguments})),
        }
    }

    type Script = fn(&ToolCall) -> ToolAnswer;

    /// Staging for a server `remote` or not, offering `tools`, and what it told.
    fn staged_for(
        job: &Arc<Job>,
        remote: bool,
        tools: &[&str],
    ) -> (Staged<Scripted<Script>>, Arc<ReportBuilder>) {
        let place = ServerReach {
            server: "far".to_owned(),
            remote,
            sample_mount: None,
        };
        let heard = Arc::new(ReportBuilder::default());
        let context = ConnectionContext::default()
            .with_job(job.clone())
            .recording_to(heard.clone());
        let tools = tools.iter().map(|t| (*t).to_owned()).collect();
        let staged = Staged::new(
            Scripted::new(remote_server as Script),
            place,
            tools,
            context,
        );
        (staged, heard)
    }

    fn job_with_payload() -> (tempfile::TempDir, Arc<Job>, String) {
        let dir = tempfile::tempdir().expect("temp dir");
        let job = Arc::new(Job::create(dir.path().join("job")).expect("job"));
        let payload = job.dir().join("payload.js");
        std::fs::write(&payload, CONTENT).expect("payload");
        (dir, job, payload.display().to_string())
    }

    #[tokio::test]
    async fn a_job_file_reaches_a_server_elsewhere_once_under_its_own_name() {
        let (_dir, job, payload) = job_with_payload();
        let (staged, heard) = staged_for(&job, true, &["put_sample", "strings"]);
        for _ in 0..2 {
            let called = staged
                .call(ToolCall::new("strings", json!({"path": payload, "min": 4})))
                .await;
            assert_eq!(
                called.answer.value["seen"],
                json!({"path": "/remote/payload.js", "min": 4})
            );
        }
        let calls = staged.get_ref().calls();
        let uploads = calls.iter().filter(|c| c.tool == "put_sample").count();
        assert_eq!(uploads, 1, "uploaded once per server per job");
        let sent = calls
            .iter()
            .find(|c| c.tool == "strings")
            .expect("the call");
        assert_eq!(sent.as_written, Some(json!({"path": payload, "min": 4})));
        let disclosures = heard.disclosures();
        assert_eq!(disclosures.len(), 1);
        assert_eq!(disclosures[0].name, "payload.js");
        assert_eq!(disclosures[0].size, CONTENT.len() as u64);
        assert!(matches!(disclosures[0].what, Disclosed::JobFile));
    }

    #[tokio::test]
    async fn paths_inside_arrays_and_nested_objects_are_staged_and_the_upload_names_the_step() {
        let (_dir, job, payload) = job_with_payload();
        let (staged, heard) = staged_for(&job, true, &["put_sample", "strings"]);
        let mut call = ToolCall::new(
            "strings",
            json!({"paths": [payload, "/etc/hosts"], "in": {"a/b": {"deep": [payload]}}}),
        );
        call.step = Some("scan".to_owned());
        let called = staged.call(call).await;
        assert_eq!(
            called.answer.value["seen"],
            json!({"paths": ["/remote/payload.js", "/etc/hosts"],
                   "in": {"a/b": {"deep": ["/remote/payload.js"]}}})
        );
        let calls = staged.get_ref().calls();
        let uploads: Vec<_> = calls.iter().filter(|c| c.tool == "put_sample").collect();
        assert_eq!(uploads.len(), 1, "the same file twice is one upload");
        assert_eq!(uploads[0].step.as_deref(), Some("scan"));
        let disclosures = heard.disclosures();
        assert_eq!(disclosures.len(), 1, "one upload, told once it ended");
        assert_eq!(disclosures[0].needed_by.as_deref(), Some("scan"));
        assert!(matches!(
            disclosures[0].outcome,
            DisclosureOutcome::Sent { ref remote_path } if remote_path == "/remote/payload.js"
        ));
    }

    #[tokio::test]
    async fn a_path_outside_the_job_goes_as_written_and_is_never_read() {
        let (_dir, job, _) = job_with_payload();
        let (staged, heard) = staged_for(&job, true, &["put_sample", "strings"]);
        let called = staged
            .call(ToolCall::new("strings", json!({"path": "/etc/passwd"})))
            .await;
        assert_eq!(called.answer.value["seen"], json!({"path": "/etc/passwd"}));
        assert!(
            staged
                .get_ref()
                .calls()
                .iter()
                .all(|c| c.tool != "put_sample")
        );
        assert!(heard.disclosures().is_empty());
    }

    #[tokio::test]
    async fn a_local_server_gets_the_path_itself() {
        let (_dir, job, payload) = job_with_payload();
        let (staged, _) = staged_for(&job, false, &["put_sample", "strings"]);
        let called = staged
            .call(ToolCall::new("strings", json!({"path": payload})))
            .await;
        assert_eq!(called.answer.value["seen"], json!({"path": payload}));
        assert_eq!(staged.get_ref().calls()[0].as_written, None);
    }

    #[tokio::test]
    async fn a_server_without_uploads_gets_the_local_path_and_the_degradation_is_kept() {
        let (_dir, job, payload) = job_with_payload();
        let (staged, heard) = staged_for(&job, true, &["strings"]);
        let called = staged
            .call(ToolCall::new("strings", json!({"path": payload})))
            .await;
        assert_eq!(called.answer.value["seen"], json!({"path": payload}));
        let degradations = heard.degradations();
        assert_eq!(degradations.len(), 1);
        assert!(
            degradations[0]
                .reason
                .contains("offers neither put_sample nor put_sample_begin"),
            "{}",
            degradations[0].reason
        );
        assert!(
            degradations[0]
                .reason
                .ends_with("the call went out with the local path")
        );
    }

    #[tokio::test]
    async fn a_primitive_the_server_does_not_offer_is_refused_without_a_call() {
        let (_dir, job, _) = job_with_payload();
        let (staged, _) = staged_for(&job, true, &["strings"]);
        let refused = staged
            .primitives()
            .call_tool("get_file", json!({"path": "x"}))
            .await
            .expect_err("refused");
        assert_eq!(refused.code, ErrorCode::BadArgument);
        assert!(refused.message.contains("has no tool named \"get_file\""));
        assert!(staged.get_ref().calls().is_empty());
    }
}
