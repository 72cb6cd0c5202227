//! How the report words a step's outcome and an upload, the same in every format.

use std::path::Path;

use serde_json::Value;

use super::RunReport;
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
/// How many times a fleet's workers took the run.
pub(super) fn attempts(attempts: u32) -> String {
    match attempts {
        1 => "Attempts: 1 (taken once by the fleet's workers).".to_owned(),
        n => format!(
            "Attempts: {n} (the run was taken {n} times: a worker before this one stopped or was lost mid-run; every call is ledgered with its attempt)."
        ),
    }
}

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

/// The completed steps that have an answer, with their index in the report's steps (a
/// failed step's answer is its failure, already in the failures and the steps).
pub(super) fn answered_steps(report: &RunReport) -> Vec<(usize, &Step, &Value)> {
    report
        .steps
        .iter()
        .enumerate()
        .filter(|(_, step)| matches!(step.status, StepStatus::Completed))
        .filter_map(|(i, step)| step.answer.as_ref().map(|answer| (i, step, answer)))
        .collect()
}

/// The most characters of one step's answer the Markdown and HTML pages show; past it the
/// answer is cut, and the whole is in `report.json` (at `steps[N].answer`).
pub(super) const MAX_ANSWER_CHARS: usize = 4096;
/// An answer shown longer than this (characters) or with more lines than
/// [`FOLD_LINES`] is folded (`<details>`), its summary saying its size.
pub(super) const FOLD_CHARS: usize = 600;
/// See [`FOLD_CHARS`].
pub(super) const FOLD_LINES: usize = 12;

/// A step's answer as the pages show it.
#[derive(Debug, PartialEq)]
pub(super) enum AnswerView {
    /// An answer that is text.
    Text(String),
    /// An object: each field, its value as text (a string as written, anything else as
    /// JSON).
    Fields(Vec<(String, String)>),
    /// Anything else, as indented JSON.
    Json(String),
}

/// How `answer` is shown, with paths under `job` made relative to it, and whether it was
/// cut at [`MAX_ANSWER_CHARS`].
pub(super) fn answer_view(answer: &Value, job: &Path) -> (AnswerView, bool) {
    let mut budget = MAX_ANSWER_CHARS;
    let mut cut = false;
    let mut take = |text: String| {
        let (kept, was_cut) = cut_at(relative(&text, job), budget);
        budget = budget.saturating_sub(kept.chars().count());
        cut |= was_cut;
        kept
    };
    let view = match answer {
        Value::String(text) => AnswerView::Text(take(text.clone())),
        Value::Object(fields) => AnswerView::Fields(
            fields
                .iter()
                .map(|(name, value)| {
                    let text = match value {
                        Value::String(text) => text.clone(),
                        other => serde_json::to_string_pretty(other).unwrap_or_default(),
                    };
                    (name.clone(), take(text))
                })
                .collect(),
        ),
        other => AnswerView::Json(take(
            serde_json::to_string_pretty(other).unwrap_or_default(),
        )),
    };
    (view, cut)
}

/// Whether a view is folded: longer than [`FOLD_CHARS`] or [`FOLD_LINES`].
pub(super) fn folded(view: &AnswerView) -> bool {
    let texts: Vec<&str> = match view {
        AnswerView::Text(text) | AnswerView::Json(text) => vec![text],
        AnswerView::Fields(fields) => fields.iter().map(|(_, v)| v.as_str()).collect(),
    };
    let chars: usize = texts.iter().map(|t| t.chars().count()).sum();
    let lines: usize = texts.iter().map(|t| t.lines().count().max(1)).sum();
    chars > FOLD_CHARS || lines > FOLD_LINES
}

/// The line that says an answer was cut, and where the whole is.
pub(super) fn answer_cut_note(index: usize) -> String {
    format!(
        "cut at {MAX_ANSWER_CHARS} characters: the whole answer is in report.json at \
         steps[{index}].answer"
    )
}

/// `text` with every path under `job` written relative to it.
pub(super) fn relative(text: &str, job: &Path) -> String {
    let prefix = format!("{}/", job.display());
    if prefix.len() <= 1 {
        return text.to_owned();
    }
    text.replace(&prefix, "")
}

/// At most `limit` characters of `text`, and whether any were left out.
fn cut_at(text: String, limit: usize) -> (String, bool) {
    match text.char_indices().nth(limit) {
        Some((at, _)) => (text[..at].to_owned(), true),
        None => (text, false),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn an_answer_is_shown_by_its_shape_with_job_paths_relative() {
        let job = Path::new("/state/jobs/job-1");
        let (view, cut) = answer_view(&json!("see /state/jobs/job-1/out/a.txt"), job);
        assert_eq!(view, AnswerView::Text("see out/a.txt".to_owned()));
        assert!(!cut);
        let (view, _) = answer_view(
            &json!({"path": "/state/jobs/job-1/sample/x", "entropy": 7.5}),
            job,
        );
        assert_eq!(
            view,
            AnswerView::Fields(vec![
                ("entropy".to_owned(), "7.5".to_owned()),
                ("path".to_owned(), "sample/x".to_owned()),
            ])
        );
        assert!(!folded(&view));
    }

    #[test]
    fn a_long_answer_is_cut_and_folded() {
        let long = "line\n".repeat(5000);
        let (view, cut) = answer_view(&json!({"text": long, "more": "x"}), Path::new("/j"));
        assert!(cut);
        assert!(folded(&view));
        let AnswerView::Fields(fields) = &view else {
            panic!("{view:?}")
        };
        let shown: usize = fields.iter().map(|(_, v)| v.chars().count()).sum();
        assert!(shown <= MAX_ANSWER_CHARS, "{shown}");
        assert!(answer_cut_note(3).contains("steps[3].answer"));
    }
}
