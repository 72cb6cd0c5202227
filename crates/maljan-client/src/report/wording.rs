//! How the report words a step's outcome and an upload, the same in every format.

use super::v1::{Disclosure, Mode, Sent, Step, StepStatus, Upload};

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

/// A step's name, with the file it ran for when it runs once per file.
pub(super) fn step_name(step: &Step) -> String {
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
            format!("failed: {}: {}", failure.code, failure.message)
        }
        StepStatus::Skipped { reason } => format!("skipped: {reason}"),
    }
}

/// What an uploaded file was, how it went and how it ended.
pub(super) fn upload(d: &Disclosure) -> (String, &'static str, String) {
    let mut what = match &d.what {
        Sent::Sample => "the sample".to_owned(),
        Sent::ToolOutput { step, tool } => match step {
            Some(step) => format!("written by {tool} (step {step})"),
            None => format!("written by {tool}"),
        },
        Sent::JobFile => "a job file".to_owned(),
    };
    if let Some(step) = &d.needed_by {
        what.push_str(&format!(", for step {step}"));
    }
    let how = match d.mode {
        Mode::Chunked => "chunked",
        Mode::Single => "single",
    };
    let outcome = match &d.outcome {
        Upload::Sent { remote_path } => format!("sent as {remote_path}"),
        Upload::Failed { reason } => format!("failed: {reason}"),
        Upload::Interrupted => "interrupted: the run stopped while it was sent".to_owned(),
    };
    (what, how, outcome)
}
