//! The run report: what a run did, written into the job's directory as `report.json`
//! (versioned), `report.md` and `report.html` (one self-contained page).

mod html;
mod markdown;
mod wording;

use std::io;
use std::path::{Path, PathBuf};

use maljan_mcp_transport::TransportCounts;
use maljan_staging::{Degradation, Disclosure, DisclosureOutcome};
use serde::Serialize;

use crate::{DistinctFailure, Job, RunEnd, ServerCard, StepOutcome, StepStatus, distinct_failures};

/// The version of `report.json`'s schema (documented in the workspace README).
pub const REPORT_SCHEMA_VERSION: u32 = 1;

/// How a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Every step completed and nothing was done with less.
    Completed,
    /// At least one step completed, and some failed or were skipped, or a file was not
    /// staged.
    Degraded,
    /// No step completed.
    Failed,
    /// It was stopped (Ctrl-C, SIGTERM) before every step finished.
    Interrupted,
}

impl Verdict {
    /// The verdict of a run that ended with `outcomes`, with `degraded` when a staging
    /// failed.
    ///
    /// ```
    /// use maljan_client::Verdict;
    /// assert_eq!(Verdict::of(&[], false), Verdict::Failed);
    /// ```
    pub fn of(outcomes: &[StepOutcome], degraded: bool) -> Verdict {
        let completed = outcomes
            .iter()
            .filter(|o| o.status == StepStatus::Completed)
            .count();
        if completed == 0 {
            Verdict::Failed
        } else if completed < outcomes.len() || degraded {
            Verdict::Degraded
        } else {
            Verdict::Completed
        }
    }

    /// Its name, as in the report.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Completed => "completed",
            Verdict::Degraded => "degraded",
            Verdict::Failed => "failed",
            Verdict::Interrupted => "interrupted",
        }
    }
}

/// The pack a run carried out.
#[derive(Debug, Clone, Serialize)]
pub struct PackInfo {
    /// Its file.
    pub origin: String,
    /// Its name, when it has one.
    pub name: Option<String>,
}

/// The sample, as the report names it.
#[derive(Debug, Clone, Serialize)]
pub struct SampleInfo {
    /// Its file name.
    pub name: String,
    /// Its size.
    pub size: u64,
    /// Its sha256.
    pub sha256: String,
}

/// One server of the run.
#[derive(Debug, Clone, Serialize)]
pub struct ServerReport {
    /// Its name.
    pub server: String,
    /// Its card (tools, unavailable ones with reason and remediation, protocol, transport),
    /// when it was set up.
    pub card: Option<ServerCard>,
    /// How many times it was connected again after its connection was lost.
    pub restarts: u32,
    /// Each connection lost, in order, with why.
    pub losses: Vec<LossReport>,
    /// Why it last stopped or failed to start.
    pub last_failure: Option<String>,
    /// What each connection's stdout (or stream) held: messages, stray, invalid, salvaged,
    /// oversized and blank lines.
    pub connections: Vec<TransportCounts>,
}

/// A connection the run lost.
#[derive(Debug, Clone, Serialize)]
pub struct LossReport {
    /// How the server's process ended (`exit status: 3`, `signal: 9 (SIGKILL)`), when it had
    /// one and it ended.
    pub exit: Option<String>,
    /// The failure of the call that found the connection lost.
    pub failure: String,
    /// The last lines the server wrote on stderr.
    pub stderr_tail: String,
}

/// What a run did: the verdict and each distinct failure once, the servers, every step, the
/// disclosure block (every upload) and the degradation reasons.
#[derive(Debug, Clone, Serialize)]
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
    pub verdict: Verdict,
    /// Each distinct failure once, with its count and steps.
    pub failures: Vec<DistinctFailure>,
    /// The servers.
    pub servers: Vec<ServerReport>,
    /// Every step's outcome (one per file for a step run once per matching file), in the
    /// order they finished.
    pub steps: Vec<StepOutcome>,
    /// Every upload: what was sent where.
    pub disclosures: Vec<Disclosure>,
    /// What was done with less, and why.
    pub degradations: Vec<Degradation>,
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
    /// The report of a run of `pack` in `job` that ended with `outcomes` and `end`;
    /// `interrupted` when it was stopped before every step finished.
    pub fn new(
        pack: PackInfo,
        job: &Job,
        outcomes: Vec<StepOutcome>,
        end: &RunEnd,
        interrupted: bool,
    ) -> RunReport {
        let degradations = job.degradations();
        let verdict = if interrupted {
            Verdict::Interrupted
        } else {
            Verdict::of(&outcomes, !degradations.is_empty())
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
            failures: distinct_failures(&outcomes),
            servers: end
                .servers
                .iter()
                .map(|s| ServerReport {
                    server: s.server.clone(),
                    card: s.card.clone(),
                    restarts: s.restarts,
                    losses: s
                        .losses
                        .iter()
                        .map(|loss| LossReport {
                            exit: loss.exit.clone(),
                            failure: loss.failure.clone(),
                            stderr_tail: loss.stderr_tail.clone(),
                        })
                        .collect(),
                    last_failure: s.last_failure.clone(),
                    connections: s.connections.iter().map(|c| c.counts).collect(),
                })
                .collect(),
            steps: outcomes,
            // An upload still under way when the report is made was cut short.
            disclosures: job
                .disclosures()
                .into_iter()
                .map(|mut d| {
                    if d.outcome == DisclosureOutcome::InProgress {
                        d.outcome = DisclosureOutcome::Interrupted;
                    }
                    d
                })
                .collect(),
            degradations,
        }
    }

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
    use crate::StepStatus;

    #[test]
    fn a_long_run_shows_its_first_rows_and_counts_the_rest() {
        let step = StepOutcome {
            step: "s".into(),
            instance: None,
            server: "x".into(),
            tool: "t".into(),
            arguments: serde_json::json!({}),
            resolved: None,
            status: StepStatus::Completed,
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
            verdict: Verdict::Completed,
            failures: Vec::new(),
            servers: Vec::new(),
            steps: vec![step; 600],
            disclosures: Vec::new(),
            degradations: Vec::new(),
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
