//! `maljan jobs`: the jobs beside the ledger, with their size, age and verdict, and pruning
//! the old ones. Only directories named `job-…` directly in the jobs directory are ever
//! listed or removed; links are neither followed nor removed through.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::error::CliError;
use crate::stdout::outln;
use crate::{Format, FormatOption, ledger_file, print_json};

/// The `jobs` subcommand's options.
#[derive(Debug, clap::Args)]
pub(crate) struct JobsCommand {
    #[command(subcommand)]
    action: Option<JobsAction>,
    /// The ledger whose jobs these are (the jobs directory is beside it).
    #[arg(long, env = "MALJAN_LEDGER", value_name = "PATH", global = true)]
    ledger: Option<PathBuf>,
    #[command(flatten)]
    format: FormatOption,
}

#[derive(Debug, clap::Subcommand)]
enum JobsAction {
    /// Remove the jobs older than DURATION (`7d`, `12h`, `30min`), saying what was freed.
    Prune {
        /// How old a job must be to go: its directory's last change, this long ago.
        #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
        older_than: Duration,
    },
}

/// One job as listed.
#[derive(Debug, Serialize)]
struct JobEntry {
    dir: PathBuf,
    bytes: u64,
    age_s: u64,
    /// The run's verdict from its report, or none for a call's job.
    verdict: Option<String>,
}

pub(crate) fn run(options: JobsCommand) -> Result<ExitCode, CliError> {
    let ledger = options.ledger.unwrap_or_else(ledger_file::default_path);
    let dir = ledger_file::jobs_dir(&ledger);
    let jobs = list(&dir).map_err(|source| CliError::Job {
        path: dir.clone(),
        source,
    })?;
    match options.action {
        None => {
            if options.format.get() == Format::Json {
                print_json(&serde_json::json!({"jobs_dir": dir, "jobs": jobs}));
            } else if jobs.is_empty() {
                outln!("no jobs in {}", dir.display());
            } else {
                for job in &jobs {
                    outln!(
                        "{}  {:>10}  {:>8}  {}",
                        job.dir.display(),
                        size_words(job.bytes),
                        age_words(job.age_s),
                        job.verdict.as_deref().unwrap_or("(a call)")
                    );
                }
            }
        }
        Some(JobsAction::Prune { older_than }) => {
            let old: Vec<&JobEntry> = jobs
                .iter()
                .filter(|job| job.age_s >= older_than.as_secs())
                .collect();
            let mut freed = 0;
            for job in &old {
                std::fs::remove_dir_all(&job.dir).map_err(|source| CliError::Job {
                    path: job.dir.clone(),
                    source,
                })?;
                freed += job.bytes;
            }
            if options.format.get() == Format::Json {
                print_json(&serde_json::json!({
                    "jobs_dir": dir,
                    "removed": old.iter().map(|job| &job.dir).collect::<Vec<_>>(),
                    "freed_bytes": freed,
                }));
            } else {
                outln!(
                    "removed {} of {} jobs, {} freed",
                    old.len(),
                    jobs.len(),
                    size_words(freed)
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The jobs in `dir`, oldest first; none when it does not exist.
fn list(dir: &Path) -> std::io::Result<Vec<JobEntry>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let now = SystemTime::now();
    let mut jobs = Vec::new();
    for entry in entries {
        let entry = entry?;
        let metadata = entry.path().symlink_metadata()?;
        let named_job = entry.file_name().to_string_lossy().starts_with("job-");
        if !named_job || !metadata.is_dir() {
            continue;
        }
        let age = metadata
            .modified()
            .ok()
            .and_then(|changed| now.duration_since(changed).ok())
            .unwrap_or_default();
        jobs.push(JobEntry {
            dir: entry.path(),
            bytes: bytes_under(&entry.path()),
            age_s: age.as_secs(),
            verdict: verdict_of(&entry.path()),
        });
    }
    jobs.sort_by(|a, b| b.age_s.cmp(&a.age_s).then_with(|| a.dir.cmp(&b.dir)));
    Ok(jobs)
}

/// The bytes of the regular files under `dir`, links not followed.
fn bytes_under(dir: &Path) -> u64 {
    let mut total = 0;
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(metadata) = entry.path().symlink_metadata() else {
                continue;
            };
            if metadata.is_dir() {
                pending.push(entry.path());
            } else if metadata.is_file() {
                total += metadata.len();
            }
        }
    }
    total
}

/// The verdict in the job's `report.json`, when a run wrote one.
fn verdict_of(job: &Path) -> Option<String> {
    let report = job.join("report.json");
    if !report.symlink_metadata().ok()?.is_file() {
        return None;
    }
    /// Only the verdict is kept: the rest of a report, however large, is read past.
    #[derive(serde::Deserialize)]
    struct Verdict {
        verdict: String,
    }
    let file = std::fs::File::open(&report).ok()?;
    serde_json::from_reader::<_, Verdict>(std::io::BufReader::new(file))
        .ok()
        .map(|report| report.verdict)
}

fn size_words(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

fn age_words(seconds: u64) -> String {
    match seconds {
        s if s < 120 => format!("{s} s"),
        s if s < 2 * 3600 => format!("{} min", s / 60),
        s if s < 2 * 86_400 => format!("{} h", s / 3600),
        s => format!("{} d", s / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_job_directories_are_listed_with_their_size_and_verdict() {
        let dir = tempfile::tempdir().expect("dir");
        let job = dir.path().join("job-1");
        std::fs::create_dir_all(job.join("sample")).expect("job");
        std::fs::write(job.join("sample/a.bin"), [0u8; 1000]).expect("write");
        std::fs::write(job.join("report.json"), r#"{"verdict": "degraded"}"#).expect("write");
        std::fs::create_dir(dir.path().join("not-a-job")).expect("dir");
        std::fs::write(dir.path().join("job-file"), "x").expect("write");
        std::os::unix::fs::symlink("/", dir.path().join("job-link")).expect("link");
        let jobs = list(dir.path()).expect("listed");
        assert_eq!(jobs.len(), 1, "{jobs:?}");
        assert_eq!(jobs[0].bytes, 1000 + 23);
        assert_eq!(jobs[0].verdict.as_deref(), Some("degraded"));
        assert!(list(&dir.path().join("none")).expect("empty").is_empty());
    }

    #[test]
    fn sizes_and_ages_read_as_a_person_says_them() {
        assert_eq!(size_words(512), "512 B");
        assert_eq!(size_words(47 * 1024 * 1024), "47.0 MiB");
        assert_eq!(age_words(30), "30 s");
        assert_eq!(age_words(3 * 86_400), "3 d");
    }
}
