//! Carrying out a pack: steps run as soon as what they refer to is there, ready steps at
//! once; a step whose input never came is skipped with the reason; a failed step stops
//! nothing else.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::Instant;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::sync::atomic::Ordering;

use maljan_mcp_proto::maljan::{ErrorCode, Outcome, ToolAnswer, ToolFailure};
use maljan_staging::Origin;
use serde_json::Value;

use super::resolve::{Finished, Instance, NotRun, instances};
use super::{HandedFile, Run, StepOutcome, StepStatus};
use crate::call::CallOptions;
use crate::job::TakenFile;
use crate::pack::{Pack, PackErrors, Step};

/// A run of a step, finished.
struct Ran<'p> {
    step: &'p Step,
    outcome: StepOutcome,
}

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
    /// The outcomes are in the order the steps finished.
    pub async fn execute(&self, pack: &Pack) -> Result<Vec<StepOutcome>, PackErrors> {
        self.execute_observed(pack, |_| {}).await
    }

    /// [`execute`](Self::execute), telling `observe` of each step's outcome as it comes (to
    /// show progress).
    pub async fn execute_observed(
        &self,
        pack: &Pack,
        mut observe: impl FnMut(&StepOutcome),
    ) -> Result<Vec<StepOutcome>, PackErrors> {
        pack.check_servers(self.server_names())?;
        self.check_tools(pack).await?;
        let mut finished: HashMap<String, Finished> = HashMap::new();
        let mut waiting: Vec<&Step> = pack.steps().iter().collect();
        let mut runs_left: HashMap<&str, usize> = HashMap::new();
        // Steps with runs still going: what their finished runs came to.
        let mut partial: HashMap<&str, Finished> = HashMap::new();
        let mut running = FuturesUnordered::new();
        let mut outcomes = Vec::new();
        loop {
            // Start every step whose references are all finished; a skip can make more
            // steps ready, so look again until nothing changes.
            loop {
                let ready: Vec<&Step> = waiting
                    .iter()
                    .copied()
                    .filter(|s| s.dependencies().iter().all(|d| finished.contains_key(d)))
                    .collect();
                if ready.is_empty() {
                    break;
                }
                waiting.retain(|s| !ready.iter().any(|r| r.id() == s.id()));
                for step in ready {
                    let most = self.settings.run.max_instances_per_step;
                    match instances(step, self.job(), &finished, most) {
                        Ok(list) => {
                            runs_left.insert(step.id(), list.len());
                            for instance in list {
                                running.push(self.run_step(step, instance));
                            }
                        }
                        Err(NotRun::TooMany(count)) => {
                            let failure = too_many_runs(step, count, most);
                            finished.insert(
                                step.id().to_owned(),
                                Finished {
                                    completed: false,
                                    why_not: format!("failed: {}", failure.message),
                                    outputs: Vec::new(),
                                },
                            );
                            let outcome = failed_before_running(step, failure);
                            observe(&outcome);
                            outcomes.push(outcome);
                        }
                        Err(NotRun::Skipped(reason)) => {
                            finished.insert(
                                step.id().to_owned(),
                                Finished {
                                    completed: false,
                                    why_not: format!("was skipped: {reason}"),
                                    outputs: Vec::new(),
                                },
                            );
                            let outcome = skipped(step, reason);
                            observe(&outcome);
                            outcomes.push(outcome);
                        }
                    }
                }
            }
            let Some(ran) = running.next().await else {
                break;
            };
            let Ran { step, outcome } = ran;
            let progress = partial.entry(step.id()).or_insert_with(|| Finished {
                completed: false,
                why_not: String::new(),
                outputs: Vec::new(),
            });
            match &outcome.status {
                StepStatus::Completed => {
                    progress.completed = true;
                    progress.outputs.extend(outcome.handed.iter().cloned());
                }
                StepStatus::Failed { failure } if progress.why_not.is_empty() => {
                    progress.why_not = format!("failed: {}", failure.message);
                }
                _ => {}
            }
            observe(&outcome);
            outcomes.push(outcome);
            let left = runs_left.entry(step.id()).or_insert(1);
            *left -= 1;
            if *left == 0
                && let Some(done) = partial.remove(step.id())
            {
                finished.insert(step.id().to_owned(), done);
            }
        }
        Ok(outcomes)
    }

    /// Sets up every server the pack uses, at once, and checks each step's tool against
    /// its server's tools. A server that cannot be set up is not an error here: its steps
    /// fail when they run.
    async fn check_tools(&self, pack: &Pack) -> Result<(), PackErrors> {
        let used: BTreeSet<&str> = pack.steps().iter().map(Step::server).collect();
        let connections = futures::future::join_all(
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
    async fn run_step<'p>(&self, step: &'p Step, instance: Instance) -> Ran<'p> {
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
            let mut outcome = failed_before_running(step, failure);
            outcome.instance = instance.label;
            outcome.resolved = Some(instance.arguments);
            return Ran { step, outcome };
        }
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
        Ran {
            step,
            outcome: StepOutcome {
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
        }
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
    let matchers: Vec<_> = step
        .outputs()
        .iter()
        .filter_map(|p| crate::pack::reference::name_matcher(p).ok())
        .collect();
    if let Some(Value::Array(files)) = declared.value.get_mut("files") {
        files.retain(|file| {
            let path = match file {
                Value::String(path) => Some(path.as_str()),
                other => other.get("path").and_then(Value::as_str),
            };
            path.is_some_and(|p| matchers.iter().any(|m| m.is_match(file_name(p))))
        });
    }
    declared
}

/// The failure of a step whose glob matched more files than a step may run for.
fn too_many_runs(step: &Step, count: usize, most: usize) -> ToolFailure {
    ToolFailure::new(
        ErrorCode::OverLimit,
        format!(
            "step {} would run {count} times, once per matching file, more than the {most} \
             a step may",
            step.id()
        ),
        Some(format!(
            "narrow the step's glob, or raise core.run.max_instances_per_step (now {most})"
        )),
    )
}

/// A step that failed before any call was made.
fn failed_before_running(step: &Step, failure: ToolFailure) -> StepOutcome {
    StepOutcome {
        status: StepStatus::Failed { failure },
        ..skipped(step, String::new())
    }
}

fn skipped(step: &Step, reason: String) -> StepOutcome {
    StepOutcome {
        step: step.id().to_owned(),
        instance: None,
        server: step.server().to_owned(),
        tool: step.tool().to_owned(),
        arguments: step.arguments().clone(),
        resolved: None,
        status: StepStatus::Skipped { reason },
        answer: None,
        taken: Vec::new(),
        handed: Vec::new(),
        duration_ms: 0,
        sent_arguments: None,
        queued_ms: 0,
    }
}
