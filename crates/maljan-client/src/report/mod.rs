//! The run report: what a run did, written into the job's directory as `report.json`
//! (versioned: its types are [`v1`]'s, apart from the runtime types), `report.md` and
//! `report.html` (one self-contained page).

mod builder;
mod html;
mod index;
mod markdown;
pub mod v1;
mod wording;

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use builder::ReportBuilder;
pub use index::{IndexError, IndexedRun, JobsDirectory, RunIndex, RunListing};
pub use v1::{PackInfo, RunVerdict, SampleInfo};

use crate::outcome::{StepOutcome, StepStatus};

/// The version of `report.json`'s schema (documented in the workspace README).
pub const REPORT_SCHEMA_VERSION: u32 = v1::VERSION;

impl RunVerdict {
    /// The verdict of a run that ended with `outcomes`, with `degraded` when a staging
    /// failed.
    ///
    /// ```
    /// use maljan_client::RunVerdict;
    /// assert_eq!(RunVerdict::of(&[], false), RunVerdict::Failed);
    /// ```
    pub fn of(outcomes: &[StepOutcome], degraded: bool) -> RunVerdict {
        let completed = outcomes
            .iter()
            .filter(|o| o.status == StepStatus::Completed)
            .count();
        if completed == 0 {
            RunVerdict::Failed
        } else if completed < outcomes.len() || degraded {
            RunVerdict::Degraded
        } else {
            RunVerdict::Completed
        }
    }
}

/// What a run did: the verdict and each distinct failure once, the servers, every step, the
/// disclosure block (every upload) and the degradation reasons. Its fields are the schema's
/// own types ([`v1`]), made from the run's when the report is made, by the
/// [`ReportBuilder`] that heard the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunReport {
    /// [`REPORT_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The run's id (its ledger entries name it).
    pub run: String,
    /// The pack.
    pub pack: PackInfo,
    /// The job's directory.
    pub job: PathBuf,
    /// The sample.
    pub sample: Option<SampleInfo>,
    /// How the run ended.
    pub verdict: RunVerdict,
    /// Each distinct failure once, with its count and steps.
    pub failures: Vec<v1::DistinctFailure>,
    /// The servers.
    pub servers: Vec<v1::Server>,
    /// Every step's outcome (one per file for a step run once per matching file), in the
    /// order they finished.
    pub steps: Vec<v1::Step>,
    /// Every upload: what was sent where.
    pub disclosures: Vec<v1::Disclosure>,
    /// What was done with less, and why.
    pub degradations: Vec<v1::Degradation>,
    /// How many times a fleet's workers took the run, this attempt included (a worker
    /// that died leaves its attempt unfinished); absent for a run carried out here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
}

/// Where a report was written.
#[derive(Debug, Clone)]
pub struct ReportFiles {
    /// `report.json`.
    pub json: PathBuf,
    /// `report.md`.
    pub markdown: PathBuf,
    /// `report.html`.
    pub html: PathBuf,
}

impl RunReport {
    /// The report as Markdown.
    pub fn to_markdown(&self) -> String {
        markdown::render(self)
    }

    /// The report as one self-contained HTML page (no external assets).
    pub fn to_html(&self) -> String {
        html::render(self)
    }

    /// Writes `report.json`, `report.md` and `report.html` into `dir`, each whole or not at
    /// all (written to a temporary name, then renamed).
    pub fn write(&self, dir: &Path) -> io::Result<ReportFiles> {
        let json = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        let files = ReportFiles {
            json: dir.join("report.json"),
            markdown: dir.join("report.md"),
            html: dir.join("report.html"),
        };
        write_whole(&files.json, &json)?;
        write_whole(&files.markdown, self.to_markdown().as_bytes())?;
        write_whole(&files.html, self.to_html().as_bytes())?;
        Ok(files)
    }
}

fn write_whole(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let temporary = path.with_extension("partial");
    std::fs::write(&temporary, bytes)?;
    std::fs::rename(&temporary, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_run_shows_its_first_rows_and_counts_the_rest() {
        let step = v1::Step {
            step: "s".into(),
            instance: None,
            server: "x".into(),
            tool: "t".into(),
            arguments: serde_json::json!({}),
            resolved: None,
            status: v1::StepStatus::Completed,
            answer: None,
            taken: Vec::new(),
            handed: Vec::new(),
            duration_ms: 1,
            sent_arguments: None,
            queued_ms: 0,
        };
        let report = RunReport {
            schema_version: REPORT_SCHEMA_VERSION,
            run: "r".into(),
            pack: PackInfo {
                origin: "p".into(),
                name: None,
            },
            job: "/j".into(),
            sample: None,
            verdict: RunVerdict::Completed,
            failures: Vec::new(),
            servers: Vec::new(),
            steps: vec![step; 600],
            disclosures: Vec::new(),
            degradations: Vec::new(),
            attempts: None,
        };
        let markdown = report.to_markdown();
        let rows = markdown.lines().filter(|l| l.starts_with("| s |")).count();
        assert_eq!(rows, wording::MAX_ROWS);
        assert!(markdown.contains("… and 100 more steps, listed in report.json."));
        let html = report.to_html();
        assert_eq!(html.matches("<td>s</td>").count(), wording::MAX_ROWS);
        assert!(html.contains("… and 100 more steps, listed in report.json."));
        assert_eq!(
            serde_json::to_value(&report).expect("JSON")["steps"]
                .as_array()
                .map(Vec::len),
            Some(600)
        );
    }
}
