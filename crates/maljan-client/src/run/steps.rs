//! Carrying out a pack: steps run as soon as what they refer to is there, ready steps at
//! once; a step whose input never came is skipped with the reason; a failed step stops
//! nothing else.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use std::sync::atomic::Ordering;

use maljan_mcp_proto::maljan::{ErrorCode, Outcome, ToolAnswer, ToolFailure, resources_in};
use maljan_staging::Origin;
use serde_json::Value;

use super::Run;
use super::resolve::Instance;
use super::schedule::{Next, Scheduler};
use crate::call::CallOptions;
use crate::events::RunEvent;
use crate::job::TakenFile;
use crate::outcome::{HandedFile, StepOutcome, StepStatus};
use crate::pack::{Pack, PackErrors, Step};

impl Run {
    /// Carries out `pack`: checks it against the configured servers, sets up every server
    /// it uses at once and checks its tools against theirs (an error of either kind
    /// refuses the pack before any step runs: each error with its line), then runs each
    /// step as soon as the steps it refers to are finished, ready steps at once (each
    /// server's cap still holds). A step's declared outputs are taken into the job's
    /// artefact store and handed to later steps under their names. A step whose input
    /// never came is skipped with the reason; a failed step does not stop the others; a
    /// server that cannot start fails its steps with its stderr tail.
    ///
    /// The outcomes are in the order the steps finished; the run's recorders hear each
    /// step start and finish as it happens ([`Run::recording_to`]).
    pub async fn execute(&self, pack: &Pack) -> Result<Vec<StepOutcome>, PackErrors> {
        pack.check_servers(self.server_names())?;
        self.check_tools(pack).await?;
        let mut scheduler = Scheduler::new(pack, self.settings.run.max_instances_per_step);
        let mut running = FuturesUnordered::new();
        let mut outcomes = Vec::new();
        loop {
            while let Some(next) = scheduler.poll_ready(self.job()) {
                match next {
                    Next::Run { step, instance } => running.push(self.run_step(step, instance)),
                    Next::Ended(outcome) => {
                        self.record(&RunEvent::StepFinished(&outcome));
                        outcomes.push(*outcome);
                    }
                }
            }
            let Some((step, outcome)) = running.next().await else {
                break;
            };
            scheduler.handle_finished(step, &outcome);
            self.record(&RunEvent::StepFinished(&outcome));
            outcomes.push(outcome);
        }
        debug_assert!(scheduler.finish(), "a step was left waiting");
        Ok(outcomes)
    }

    /// Sets up every server the pack uses, at once, and checks each step's tool against
    /// its server's tools. A server that cannot be set up is not an error here: its steps
    /// fail when they run.
    async fn check_tools(&self, pack: &Pack) -> Result<(), PackErrors> {
        let used: BTreeSet<&str> = pack.steps().iter().map(Step::server).collect();
        let connections = futures_util::future::join_all(
            used.iter()
                .map(|server| async move { (*server, self.connection(server).await) }),
        )
        .await;
        let mut errors = Vec::new();
        for (server, connection) in connections {
            let Ok(connection) = connection else {
                continue;
            };
            let tools = connection.model_tools();
            if let Err(refused) = pack.check_tools(server, tools.iter().map(|t| t.name.as_str())) {
                errors.extend(refused.errors().iter().cloned());
            }
        }
        errors.sort_by_key(|e| e.line);
        PackErrors::refuse_if_any(errors)
    }

    /// Runs one step (or one of its runs) and takes its declared outputs; past the run's
    /// cap on calls it fails without a call.
    async fn run_step<'p>(&self, step: &'p Step, instance: Instance) -> (&'p Step, StepOutcome) {
        let most = self.settings.run.max_calls;
        if self.calls_made.fetch_add(1, Ordering::AcqRel) >= most {
            let failure = ToolFailure::new(
                ErrorCode::OverLimit,
                format!("the run made {most} calls, the most a run may make"),
                Some(format!(
                    "raise core.run.max_calls (now {most}) if the pack really needs more, or \
                     narrow its globs"
                )),
            );
            let mut outcome = StepOutcome::failed_before_running(step, failure);
            outcome.instance = instance.label;
            outcome.resolved = Some(instance.arguments);
            return (step, outcome);
        }
        self.record(&RunEvent::StepStarted {
            step: step.id(),
            instance: instance.label.as_deref(),
            server: step.server(),
            tool: step.tool(),
        });
        let start = Instant::now();
        let mut options = CallOptions::default().in_step(step.id());
        if let Some(wait) = step.timeout() {
            options = options.wait(wait);
        }
        let (trace, connection) = self
            .call_on(
                step.server(),
                step.tool(),
                instance.arguments.clone(),
                &options,
            )
            .await;
        let answer = &trace.answer;
        let mut taken = Vec::new();
        let mut handed = Vec::new();
        if let (Some(connection), Outcome::Ok) = (&connection, &answer.outcome)
            && !step.outputs().is_empty()
        {
            let declared = declared_only(answer, step);
            taken = connection
                .take_files(step.tool(), &declared, Some(step.id()))
                .await;
            handed = self.hand_out(step, &taken);
        }
        let status = match &answer.outcome {
            Outcome::Ok => StepStatus::Completed,
            Outcome::Failed(failure) => StepStatus::Failed {
                failure: failure.clone(),
            },
        };
        (
            step,
            StepOutcome {
                step: step.id().to_owned(),
                instance: instance.label,
                server: step.server().to_owned(),
                tool: step.tool().to_owned(),
                arguments: step.arguments().clone(),
                resolved: Some(instance.arguments),
                status,
                answer: (!answer.value.is_null()).then(|| answer.value.clone()),
                taken,
                handed,
                duration_ms: millis(start.elapsed()),
                sent_arguments: trace.sent_arguments.clone(),
                queued_ms: millis(trace.queued),
            },
        )
    }

    /// Hands the files a step took to later steps, under the names the tool gave them.
    fn hand_out(&self, step: &Step, taken: &[TakenFile]) -> Vec<HandedFile> {
        let mut handed = Vec::new();
        for file in taken {
            let TakenFile::Taken {
                server,
                path,
                sha256,
                ..
            } = file
            else {
                continue;
            };
            let origin = Origin {
                step: Some(step.id().to_owned()),
                server: server.clone(),
                tool: step.tool().to_owned(),
            };
            match self.job().hand_out(step.id(), path, sha256, origin) {
                Ok(local) => handed.push(HandedFile {
                    name: file_name(path),
                    path: local,
                    sha256: sha256.clone(),
                }),
                Err(e) => tracing::warn!(step = step.id(), path, "not handed to later steps: {e}"),
            }
        }
        handed
    }
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn file_name(path: &str) -> String {
    Path::new(path)
        .file_name()
        .map_or_else(|| path.to_owned(), |n| n.to_string_lossy().into_owned())
}

/// The answer with only the files the step declares left in its `files`.
fn declared_only(answer: &ToolAnswer, step: &Step) -> ToolAnswer {
    let mut declared = answer.clone();
    if let Some(Value::Array(files)) = declared.value.get_mut("files") {
        files.retain(|file| {
            let path = match file {
                Value::String(path) => Some(path.as_str()),
                other => other.get("path").and_then(Value::as_str),
            };
            path.is_some_and(|p| step.declares(&file_name(p)))
        });
    }
    // Resources the answer links or embeds are taken under their names, as declared too.
    if let Value::Array(blocks) = &mut declared.value {
        blocks.retain(|block| {
            resources_in(&Value::Array(vec![block.clone()]))
                .iter()
                .all(|resource| step.declares(&file_name(&resource.name)))
        });
    }
    declared
}
