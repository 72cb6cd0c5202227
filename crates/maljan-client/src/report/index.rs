//! Where finished runs are found again by their id: the run index. The embedded default is
//! the jobs directory on this host, each job's `report.json`; a fleet's is its queue and
//! object store.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::RunReport;

/// One run as an index lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedRun {
    /// The run's id.
    pub run: String,
    /// Where the run is in its life (`finished` for a report in the jobs directory; a
    /// fleet's `queued`, `taken`, `completed` or `failed`).
    pub state: String,
    /// The report's verdict, once there is one.
    pub verdict: Option<String>,
    /// How many times a fleet's workers took it; `None` for a run carried out here.
    pub attempts: Option<u32>,
    /// The sample's name.
    pub sample: Option<String>,
    /// The sample's sha256.
    pub sha256: Option<String>,
    /// Why it has no report, when it should have one.
    pub why: Option<String>,
    /// Where it was carried out: the job's directory here, a fleet's worker.
    pub place: Option<String>,
}

/// The latest runs of an index, and how many it holds in each state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunListing {
    /// The latest runs, newest first.
    pub latest: Vec<IndexedRun>,
    /// How many runs are in each state, over the whole index.
    pub counts: Vec<(String, u64)>,
}

/// Why an index did not answer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IndexError {
    /// No run of that id.
    #[error("no run has the id {run:?}; name a run `maljan runs` lists")]
    NoSuchRun {
        /// The id asked for.
        run: String,
    },
    /// The run is known, but its report cannot be shown.
    #[error("the run {run} has no report to show: {why}")]
    NoReport {
        /// The run.
        run: String,
        /// Why (not finished yet; its report is elsewhere, and where).
        why: String,
    },
    /// The index itself could not be read.
    #[error("the run index cannot be read: {0}")]
    Unreadable(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// Where runs are found by their id, once finished: `maljan runs` and `maljan report RUN`
/// read either store through this.
///
/// ```
/// use maljan_client::{JobsDirectory, RunIndex};
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let dir = tempfile::tempdir().unwrap();
/// let index = JobsDirectory::new(dir.path());
/// assert!(index.latest(10).await.unwrap().latest.is_empty());
/// assert!(index.report("no-such-run").await.is_err());
/// # }
/// ```
pub trait RunIndex {
    /// The latest `limit` runs, newest first, and the count in each state.
    fn latest(&self, limit: usize) -> impl Future<Output = Result<RunListing, IndexError>> + Send;

    /// The report of the run `run`.
    fn report(&self, run: &str) -> impl Future<Output = Result<RunReport, IndexError>> + Send;
}

/// The embedded run index: the jobs directory on this host, where each run's job holds its
/// `report.json`. Only directories named `job-…` directly in it are read; links are not
/// followed.
#[derive(Debug, Clone)]
pub struct JobsDirectory {
    dir: PathBuf,
}

/// The most bytes of a `report.json` the index reads: a larger file is no report of ours.
const MAX_REPORT_BYTES: u64 = 256 * 1024 * 1024;

impl JobsDirectory {
    /// The index of the jobs in `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> JobsDirectory {
        JobsDirectory { dir: dir.into() }
    }

    /// Each job's `report.json` with the time it was written, newest first.
    fn reports(&self) -> io::Result<Vec<(SystemTime, PathBuf)>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut found = Vec::new();
        for entry in entries {
            let entry = entry?;
            let is_job = entry.file_name().to_string_lossy().starts_with("job-")
                && entry.file_type().is_ok_and(|t| t.is_dir());
            if !is_job {
                continue;
            }
            let path = entry.path().join("report.json");
            if let Ok(meta) = std::fs::symlink_metadata(&path)
                && meta.is_file()
            {
                found.push((meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), path));
            }
        }
        found.sort_by_key(|(written, _)| std::cmp::Reverse(*written));
        Ok(found)
    }
}

fn read_report(path: &Path) -> Result<RunReport, String> {
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let reader = io::BufReader::new(io::Read::take(file, MAX_REPORT_BYTES));
    serde_json::from_reader(reader).map_err(|e| e.to_string())
}

fn unreadable(e: io::Error) -> IndexError {
    IndexError::Unreadable(Box::new(e))
}

impl RunIndex for JobsDirectory {
    async fn latest(&self, limit: usize) -> Result<RunListing, IndexError> {
        let reports = self.reports().map_err(unreadable)?;
        let latest = reports
            .iter()
            .filter_map(|(_, path)| read_report(path).ok())
            .take(limit)
            .map(|report| {
                let (sample, sha256) = report.sample.map(|s| (s.name, s.sha256)).unzip();
                IndexedRun {
                    run: report.run,
                    state: "finished".to_owned(),
                    verdict: Some(report.verdict.as_str().to_owned()),
                    attempts: report.attempts,
                    sample,
                    sha256,
                    why: None,
                    place: Some(report.job.display().to_string()),
                }
            })
            .collect();
        let counts = if reports.is_empty() {
            Vec::new()
        } else {
            vec![("finished".to_owned(), reports.len() as u64)]
        };
        Ok(RunListing { latest, counts })
    }

    async fn report(&self, run: &str) -> Result<RunReport, IndexError> {
        for (_, path) in self.reports().map_err(unreadable)? {
            if let Ok(report) = read_report(&path)
                && report.run == run
            {
                return Ok(report);
            }
        }
        Err(IndexError::NoSuchRun {
            run: run.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(run: &str) -> RunReport {
        serde_json::from_value(serde_json::json!({
            "schema_version": 1, "run": run, "pack": {"origin": "p.toml", "name": null},
            "job": "/jobs/x", "sample": {"name": "s.bin", "size": 1, "sha256": "ab"},
            "verdict": "degraded", "failures": [], "servers": [], "steps": [],
            "disclosures": [], "degradations": []
        }))
        .expect("a report")
    }

    #[tokio::test]
    async fn only_the_reports_of_job_directories_are_found_and_links_are_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let jobs = dir.path().join("jobs");
        for (name, run) in [("job-1", "r1"), ("elsewhere", "r2")] {
            std::fs::create_dir_all(jobs.join(name)).unwrap();
            report(run).write(&jobs.join(name)).unwrap();
        }
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        report("r3").write(&dir.path().join("outside")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("outside"), jobs.join("job-link")).unwrap();
        std::fs::create_dir_all(jobs.join("job-empty")).unwrap();
        std::fs::create_dir_all(jobs.join("job-garbled")).unwrap();
        std::fs::write(jobs.join("job-garbled/report.json"), "{not json").unwrap();
        let index = JobsDirectory::new(&jobs);
        let listing = index.latest(10).await.unwrap();
        let runs: Vec<&str> = listing.latest.iter().map(|r| r.run.as_str()).collect();
        assert_eq!(runs, ["r1"]);
        assert_eq!(listing.latest[0].verdict.as_deref(), Some("degraded"));
        assert_eq!(listing.latest[0].sample.as_deref(), Some("s.bin"));
        assert_eq!(index.report("r1").await.unwrap().run, "r1");
        for hidden in ["r2", "r3"] {
            let refused = index.report(hidden).await.unwrap_err();
            assert!(matches!(refused, IndexError::NoSuchRun { .. }), "{refused}");
        }
    }
}
