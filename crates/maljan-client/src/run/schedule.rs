//! The run's scheduler, sans-IO: given what has finished, it says what runs next. A step
//! starts once every step it refers to has finished, once per matching file when it fans out
//! over a glob; a step whose input never came is skipped with the reason; a step that would
//! run too many times fails before any call. The executor calls
//! [`poll_ready`](Scheduler::poll_ready) until it gives nothing, runs what it gave, and hands
//! each run's outcome to [`handle_finished`](Scheduler::handle_finished);
//! [`finish`](Scheduler::finish) says whether the pack is done.

use std::collections::{HashMap, VecDeque};

use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};

use super::resolve::{EarlierStep, Instance, NotRun, instances};
use crate::job::Job;
use crate::outcome::{StepOutcome, StepStatus};
use crate::pack::{Pack, Step};

/// What the scheduler says to do.
#[derive(Debug)]
pub(crate) enum Next<'p> {
    /// Make this run of the step.
    Run {
        /// The step.
        step: &'p Step,
        /// This run: its file, its arguments.
        instance: Instance,
    },
    /// The step ended without a call (skipped, or failed before running): its outcome.
    Ended(Box<StepOutcome>),
}

/// Decides what a run of a pack does next, from what finished.
#[derive(Debug)]
pub(crate) struct Scheduler<'p> {
    /// Steps not started, in the pack's order.
    waiting: Vec<&'p Step>,
    /// What the executor is to be told next.
    ready: VecDeque<Next<'p>>,
    /// Steps whose every run has finished, as later steps see them.
    finished: HashMap<String, EarlierStep>,
    /// Steps with runs still going: their runs left, and what the finished ones came to.
    going: HashMap<&'p str, (usize, EarlierStep)>,
    /// The most runs one step may make.
    most_runs: usize,
}

impl<'p> Scheduler<'p> {
    /// A scheduler of `pack`, a step running at most `most_runs` times.
    pub(crate) fn new(pack: &'p Pack, most_runs: usize) -> Self {
        Scheduler {
            waiting: pack.steps().iter().collect(),
            ready: VecDeque::new(),
            finished: HashMap::new(),
            going: HashMap::new(),
            most_runs,
        }
    }

    /// The next thing to do now, if any: a run to make, or a step that ended without one.
    /// `job` gives `$sample` and `$job`.
    pub(crate) fn poll_ready(&mut self, job: &Job) -> Option<Next<'p>> {
        if self.ready.is_empty() {
            self.release(job);
        }
        self.ready.pop_front()
    }

    /// A run of `step` finished with `outcome`.
    pub(crate) fn handle_finished(&mut self, step: &'p Step, outcome: &StepOutcome) {
        let (left, progress) = self
            .going
            .entry(step.id())
            .or_insert_with(|| (1, EarlierStep::not_yet()));
        match &outcome.status {
            StepStatus::Completed => {
                progress.completed = true;
                progress.outputs.extend(outcome.handed.iter().cloned());
            }
            StepStatus::Failed { failure } if progress.reason.is_empty() => {
                progress.reason = format!("failed: {}", failure.message);
            }
            _ => {}
        }
        *left = left.saturating_sub(1);
        if *left == 0
            && let Some((_, done)) = self.going.remove(step.id())
        {
            self.finished.insert(step.id().to_owned(), done);
        }
    }

    /// Whether the pack is done: nothing waits, nothing is ready, no run is going. (A step
    /// can wait only on steps that will finish: a pack with a cycle is refused at load.)
    pub(crate) fn finish(&self) -> bool {
        self.waiting.is_empty() && self.ready.is_empty() && self.going.is_empty()
    }

    /// Moves every step whose references have all finished out of the waiting list: its
    /// runs become ready, or it ends at once. A step that ends at once can release others,
    /// so this looks again until nothing changes.
    fn release(&mut self, job: &Job) {
        loop {
            let (now, later): (Vec<&'p Step>, Vec<&'p Step>) = self.waiting.iter().partition(|s| {
                s.dependencies()
                    .iter()
                    .all(|d| self.finished.contains_key(d))
            });
            if now.is_empty() {
                return;
            }
            self.waiting = later;
            for step in now {
                match instances(step, job, &self.finished, self.most_runs) {
                    Ok(runs) => {
                        self.going
                            .insert(step.id(), (runs.len(), EarlierStep::not_yet()));
                        self.ready.extend(
                            runs.into_iter()
                                .map(|instance| Next::Run { step, instance }),
                        );
                    }
                    Err(NotRun::TooMany(count)) => {
                        let failure = too_many_runs(step, count, self.most_runs);
                        self.end(step, format!("failed: {}", failure.message));
                        self.ready.push_back(Next::Ended(Box::new(
                            StepOutcome::failed_before_running(step, failure),
                        )));
                    }
                    Err(NotRun::Skipped(reason)) => {
                        self.end(step, format!("was skipped: {reason}"));
                        self.ready
                            .push_back(Next::Ended(Box::new(StepOutcome::skipped(step, reason))));
                    }
                }
            }
            if !self.ready.is_empty() {
                return;
            }
        }
    }

    /// `step` ended without a run, for the `reason` later steps are told.
    fn end(&mut self, step: &Step, reason: String) {
        self.finished.insert(
            step.id().to_owned(),
            EarlierStep {
                completed: false,
                reason,
                outputs: Vec::new(),
            },
        );
    }
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;
    use crate::outcome::HandedFile;

    const PACK: &str = r#"
[[step]]
id = "unpack"
server = "s"
tool = "unpack"
arguments = { path = "$sample" }
outputs = ["*"]

[[step]]
id = "each"
server = "s"
tool = "info"
arguments = { path = "$unpack/*.js" }
outputs = ["x"]

[[step]]
id = "after_each"
server = "s"
tool = "info"
arguments = { path = "$each/x" }

[[step]]
id = "alone"
server = "s"
tool = "ping"
arguments = {}
"#;

    fn completed(step: &Step, handed: &[&str]) -> StepOutcome {
        StepOutcome {
            status: StepStatus::Completed,
            handed: handed
                .iter()
                .map(|name| HandedFile {
                    name: (*name).to_owned(),
                    path: PathBuf::from("/job/outputs").join(name),
                    sha256: "0".repeat(64),
                })
                .collect(),
            ..StepOutcome::skipped(step, String::new())
        }
    }

    /// A job in a temporary directory, with a sample: what `$sample` resolves to.
    fn job_with_sample() -> (tempfile::TempDir, Job) {
        let dir = tempfile::tempdir().expect("temp dir");
        let job = Job::create(dir.path()).expect("job");
        std::fs::write(dir.path().join("s.bin"), b"x").expect("sample");
        job.add_sample(&dir.path().join("s.bin")).expect("sample");
        (dir, job)
    }

    fn drain<'p>(scheduler: &mut Scheduler<'p>, job: &Job) -> Vec<Next<'p>> {
        std::iter::from_fn(|| scheduler.poll_ready(job)).collect()
    }

    fn runs(next: &[Next<'_>]) -> Vec<(String, Option<String>)> {
        next.iter()
            .filter_map(|n| match n {
                Next::Run { step, instance } => {
                    Some((step.id().to_owned(), instance.label.clone()))
                }
                Next::Ended(_) => None,
            })
            .collect()
    }

    #[test]
    fn steps_start_when_their_inputs_finish_fan_out_and_skip_without_any_io_of_their_own() {
        let (_dir, job) = job_with_sample();
        let pack = Pack::parse(PACK, "p.toml").expect("pack");
        let step = |id: &str| pack.steps().iter().find(|s| s.id() == id).expect("step");
        let mut scheduler = Scheduler::new(&pack, 10);

        let first = drain(&mut scheduler, &job);
        assert_eq!(
            runs(&first),
            [("unpack".to_owned(), None), ("alone".to_owned(), None)]
        );
        assert!(!scheduler.finish());
        scheduler.handle_finished(step("alone"), &completed(step("alone"), &[]));
        assert!(
            drain(&mut scheduler, &job).is_empty(),
            "nothing new is ready"
        );

        scheduler.handle_finished(
            step("unpack"),
            &completed(step("unpack"), &["a.js", "b.js", "c.txt"]),
        );
        let fanned = drain(&mut scheduler, &job);
        assert_eq!(
            runs(&fanned),
            [
                ("each".to_owned(), Some("a.js".to_owned())),
                ("each".to_owned(), Some("b.js".to_owned()))
            ]
        );
        let Next::Run { instance, .. } = &fanned[0] else {
            panic!("a run")
        };
        assert_eq!(instance.arguments, json!({"path": "/job/outputs/a.js"}));

        // One run of `each` finishing is not the step finishing.
        scheduler.handle_finished(step("each"), &completed(step("each"), &[]));
        assert!(drain(&mut scheduler, &job).is_empty());
        let failed = StepOutcome::failed_before_running(
            step("each"),
            ToolFailure::new(ErrorCode::Unanswered, "no answer", None),
        );
        scheduler.handle_finished(step("each"), &failed);
        // It completed once, but took no file named x: the step after it is skipped.
        let ended = drain(&mut scheduler, &job);
        let [Next::Ended(skipped)] = &ended[..] else {
            panic!("one step ended: {ended:?}")
        };
        assert_eq!(skipped.step, "after_each");
        assert!(
            matches!(&skipped.status, StepStatus::Skipped { reason }
                if reason.contains("step each took no file named x")),
            "{:?}",
            skipped.status
        );
        assert!(scheduler.finish());
    }

    #[test]
    fn a_glob_over_too_many_files_fails_its_step_and_skips_what_needs_it() {
        let (_dir, job) = job_with_sample();
        let pack = Pack::parse(PACK, "p.toml").expect("pack");
        let step = |id: &str| pack.steps().iter().find(|s| s.id() == id).expect("step");
        let mut scheduler = Scheduler::new(&pack, 1);
        drain(&mut scheduler, &job);
        scheduler.handle_finished(step("alone"), &completed(step("alone"), &[]));
        scheduler.handle_finished(
            step("unpack"),
            &completed(step("unpack"), &["a.js", "b.js"]),
        );
        let ended: Vec<StepOutcome> = drain(&mut scheduler, &job)
            .into_iter()
            .map(|n| match n {
                Next::Ended(outcome) => *outcome,
                Next::Run { step, .. } => panic!("{} ran", step.id()),
            })
            .collect();
        assert_eq!(ended.len(), 2, "{ended:?}");
        assert_eq!(
            ended[0].failure().map(|f| &f.code),
            Some(&ErrorCode::OverLimit)
        );
        assert!(matches!(ended[1].status, StepStatus::Skipped { .. }));
        assert!(scheduler.finish());
    }
}
