//! How the report words a step's outcome and an upload, the same in every format.

use maljan_staging::{Disclosed, Disclosure, DisclosureOutcome, UploadMode};

/// The most rows of one list (steps, files, uploads) the Markdown and HTML pages show: a
/// run's whole lists stay in `report.json`, and the pages stay readable and bounded.
pub(super) const MAX_ROWS: usize = 500;

/// The line that stands for the rows left out of a list of `total`.
pub(super) fn rows_left_out(total: usize, what: &str) -> Option<String> {
    (total > MAX_ROWS).then(|| {
        format!(
            "… and {} more {what}, listed in report.json.",
            total - MAX_ROWS
        )
    })
}

use crate::{StepOutcome, StepStatus};

/// A step's name, with the file it ran for when it runs once per file.
pub(super) fn step_name(step: &StepOutcome) -> String {
    match &step.instance {
        Some(file) => format!("{} ({file})", step.step),
        None => step.step.clone(),
    }
}

/// How a step ended, in words.
pub(super) fn outcome(status: &StepStatus) -> String {
    match status {
        StepStatus::Completed => "completed".to_owned(),
        StepStatus::Failed { failure } => {
            format!("failed: {}: {}", failure.code.as_str(), failure.message)
        }
        StepStatus::Skipped { reason } => format!("skipped: {reason}"),
    }
}

/// What an uploaded file was, how it went and how it ended.
pub(super) fn upload(d: &Disclosure) -> (String, &'static str, String) {
    let mut what = match &d.what {
        Disclosed::Sample => "the sample".to_owned(),
        Disclosed::ToolOutput { step, tool } => match step {
            Some(step) => format!("written by {tool} (step {step})"),
            None => format!("written by {tool}"),
        },
        Disclosed::Capture => "a capture".to_owned(),
        Disclosed::Report => "a report".to_owned(),
        Disclosed::JobFile => "a job file".to_owned(),
    };
    if let Some(step) = &d.needed_by {
        what.push_str(&format!(", for step {step}"));
    }
    let how = match d.mode {
        UploadMode::Chunked => "chunked",
        UploadMode::Single => "single",
    };
    let outcome = match &d.outcome {
        DisclosureOutcome::Sent { remote_path } => format!("sent as {remote_path}"),
        DisclosureOutcome::Failed { reason } => format!("failed: {reason}"),
        DisclosureOutcome::InProgress => "under way".to_owned(),
        DisclosureOutcome::Interrupted => {
            "interrupted: the run stopped while it was sent".to_owned()
        }
        _ => "ended in a way this version does not know".to_owned(),
    };
    (what, how, outcome)
}
