//! The report as a fold over a run's events: a recorder that keeps what the report will
//! say (every step, every upload, every degradation, every file taken or not) as the run
//! tells it, and makes the [`RunReport`] once the run is finished.

use std::collections::HashMap;
use std::sync::Mutex;

use maljan_staging::{Degradation, Disclosure};

use super::{REPORT_SCHEMA_VERSION, RunReport, RunVerdict, SampleInfo, v1};
use crate::events::{Recorder, RunEvent};
use crate::job::{Job, TakenFile, lock};
use crate::outcome::{StepOutcome, distinct_failures};
use crate::report::PackInfo;
use crate::run::RunEnd;

/// Folds a run's events into its report. Give a run (or a connection's context) an
/// `Arc` of it as a recorder; once the run is finished, [`report`](Self::report) makes the
/// report. What it has folded so far can be read at any time: a run stopped half-way
/// still reports the steps that finished and every upload that began.
///
/// ```
/// use std::sync::Arc;
/// use maljan_client::{Recorder, RunEvent, report::ReportBuilder};
/// use maljan_staging::Degradation;
/// let builder = Arc::new(ReportBuilder::default());
/// let degradation = Degradation {
///     server: "remote".into(),
///     subject: "/job/sample/a.zip".into(),
///     reason: "no upload tool".into(),
/// };
/// builder.record(&RunEvent::Degraded(&degradation));
/// assert_eq!(builder.degradations(), vec![degradation]);
/// ```
#[derive(Debug, Default)]
pub struct ReportBuilder {
    folded: Mutex<Folded>,
}

/// What the events said so far.
#[derive(Debug, Default)]
struct Folded {
    steps: Vec<StepOutcome>,
    uploads: Vec<Disclosure>,
    /// Where each upload's entry is in `uploads`, so that its end completes it.
    upload_entries: HashMap<u64, usize>,
    degradations: Vec<Degradation>,
    taken: Vec<TakenFile>,
}

impl Folded {
    fn fold(&mut self, event: &RunEvent<'_>) {
        match *event {
            RunEvent::StepFinished(outcome) => self.steps.push(outcome.clone()),
            RunEvent::FileTaken(file) => self.taken.push(file.clone()),
            RunEvent::Degraded(degradation) => self.degradations.push(degradation.clone()),
            RunEvent::UploadStarted { upload, disclosure } => {
                self.upload_entries.insert(upload, self.uploads.len());
                self.uploads.push(disclosure.clone());
            }
            RunEvent::UploadEnded { upload, disclosure } => {
                match self.upload_entries.remove(&upload) {
                    Some(entry) => self.uploads[entry] = disclosure.clone(),
                    None => self.uploads.push(disclosure.clone()),
                }
            }
            RunEvent::StepStarted { .. } | RunEvent::CallMade(_) | RunEvent::ServerLost { .. } => {}
        }
    }
}

impl Recorder for ReportBuilder {
    fn record(&self, event: &RunEvent<'_>) {
        lock(&self.folded).fold(event);
    }
}

impl ReportBuilder {
    /// Every step's outcome so far, in the order they finished.
    pub fn steps(&self) -> Vec<StepOutcome> {
        lock(&self.folded).steps.clone()
    }

    /// Every upload so far, in the order they began: the run's disclosure block.
    pub fn disclosures(&self) -> Vec<Disclosure> {
        lock(&self.folded).uploads.clone()
    }

    /// What was done with less so far, and why.
    pub fn degradations(&self) -> Vec<Degradation> {
        lock(&self.folded).degradations.clone()
    }

    /// The files tools named so far, taken or not.
    pub fn taken(&self) -> Vec<TakenFile> {
        lock(&self.folded).taken.clone()
    }

    /// The report of a run of `pack` in `job` that ended with `end`, from what the run told
    /// this builder; `interrupted` when it was stopped before every step finished.
    pub fn report(&self, pack: PackInfo, job: &Job, end: &RunEnd, interrupted: bool) -> RunReport {
        let folded = lock(&self.folded);
        let verdict = if interrupted {
            RunVerdict::Interrupted
        } else {
            RunVerdict::of(&folded.steps, !folded.degradations.is_empty())
        };
        RunReport {
            schema_version: REPORT_SCHEMA_VERSION,
            run: end.id.clone(),
            pack,
            job: job.dir().to_owned(),
            sample: job.sample().map(|s| SampleInfo {
                name: s
                    .path
                    .file_name()
                    .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
                size: s.size,
                sha256: s.sha256,
            }),
            verdict,
            failures: distinct_failures(&folded.steps)
                .iter()
                .map(v1::DistinctFailure::from)
                .collect(),
            servers: end.servers.iter().map(v1::Server::from).collect(),
            steps: folded.steps.iter().map(v1::Step::from).collect(),
            disclosures: folded.uploads.iter().map(v1::Disclosure::from).collect(),
            degradations: folded
                .degradations
                .iter()
                .map(v1::Degradation::from)
                .collect(),
            attempts: None,
        }
    }
}
