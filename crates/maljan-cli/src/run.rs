//! `maljan run PACK SAMPLE`: a triage pack carried out over the configured servers, in one
//! job.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use maljan_client::{
    ConnectionContext, Job, Ledger, Pack, PackErrors, Run, StepOutcome, StepStatus,
    distinct_failures,
};
use serde_json::json;

use crate::config::Config;
use crate::error::CliError;
use crate::{Format, ledger_file, print_json, progress, render};

/// Every step completed.
pub(crate) const EXIT_COMPLETED: u8 = 0;
/// Refused before anything ran: a bad pack, sample, job directory or configuration.
pub(crate) const EXIT_REFUSED: u8 = 2;
/// The run went through with less: some steps failed or were skipped, or an upload was
/// degraded, but at least one step completed.
pub(crate) const EXIT_DEGRADED: u8 = 3;
/// No step completed.
pub(crate) const EXIT_FAILED: u8 = 4;

/// The version of `maljan run --format json`'s document.
const SCHEMA_VERSION: u32 = 1;

/// The `run` subcommand's options.
#[derive(Debug, clap::Args)]
pub(crate) struct RunOptions {
    /// The triage pack (TOML; see the README).
    pack: PathBuf,
    /// The sample to triage (copied into the job's directory).
    #[arg(required_unless_present = "check")]
    sample: Option<PathBuf>,
    /// The job's directory (default: a new one beside the ledger). An existing, non-empty
    /// directory is refused unless --reuse-job.
    #[arg(long, value_name = "DIR")]
    job: Option<PathBuf>,
    /// Use --job DIR even though it holds an earlier job's files.
    #[arg(long)]
    reuse_job: bool,
    /// Check the pack against the configuration without running it.
    #[arg(long)]
    check: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// The JSON Lines file the calls are recorded in (default as for `maljan call`).
    #[arg(long, env = "MALJAN_LEDGER", value_name = "PATH")]
    ledger: Option<PathBuf>,
}

fn refused(errors: &PackErrors) -> ExitCode {
    eprintln!("error: {errors}");
    ExitCode::from(EXIT_REFUSED)
}

/// The job's directory: new, or one the user named (refused when it holds files unless
/// they asked to reuse it).
fn job_dir(options: &RunOptions) -> Result<PathBuf, CliError> {
    let Some(dir) = &options.job else {
        return Ok(ledger_file::new_job_dir());
    };
    let holds_files = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some());
    if holds_files && !options.reuse_job {
        return Err(CliError::BadArgument {
            argument: dir.display().to_string(),
            detail: "the job directory already holds files (an earlier job?); name a new one, \
                     or pass --reuse-job to add this run to it"
                .to_owned(),
        });
    }
    Ok(dir.clone())
}

pub(crate) async fn run(config: Config, options: RunOptions) -> Result<ExitCode, CliError> {
    let pack = match Pack::load(&options.pack) {
        Ok(pack) => pack,
        Err(errors) => return Ok(refused(&errors)),
    };
    if let Err(errors) = pack.check_servers(config.server_names()) {
        return Ok(refused(&errors));
    }
    if options.check {
        println!(
            "{}: {} steps, servers {}; tools are checked when the servers are set up",
            pack.origin(),
            pack.steps().len(),
            config.server_names().collect::<Vec<_>>().join(", ")
        );
        return Ok(ExitCode::SUCCESS);
    }
    let sample = options.sample.clone().unwrap_or_default();
    if !sample.is_file() {
        return Err(CliError::BadArgument {
            argument: sample.display().to_string(),
            detail: "the sample is not a readable file; name the file to triage".to_owned(),
        });
    }
    let dir = job_dir(&options)?;
    let job_error = |path: &Path, source| CliError::Job {
        path: path.to_owned(),
        source,
    };
    let job = Arc::new(Job::create(&dir).map_err(|e| job_error(&dir, e))?);
    job.add_sample(&sample).map_err(|e| job_error(&sample, e))?;
    let ledger_path = options
        .ledger
        .clone()
        .unwrap_or_else(ledger_file::default_path);
    let mut context = ConnectionContext::default().with_ledger(Arc::new(
        Ledger::json_lines(&ledger_path).map_err(CliError::Ledger)?,
    ));
    if let Some(reporter) = progress::terminal_reporter() {
        context = context.with_progress(reporter);
    }
    let run = Run::new(
        job.clone(),
        config.servers(),
        config.settings.clone(),
        context,
    );
    let terminal = std::io::stderr().is_terminal();
    let total = pack.steps().len();
    let mut seen = 0;
    let executed = run
        .execute_observed(&pack, |outcome| {
            seen += 1;
            if terminal {
                eprintln!("[{seen}] {}", render::step_line(outcome));
            }
        })
        .await;
    let run_id = run.id().to_owned();
    let end = run.finish().await;
    let outcomes = match executed {
        Ok(outcomes) => outcomes,
        Err(errors) => return Ok(refused(&errors)),
    };
    let failures = distinct_failures(&outcomes);
    let status = status_of(&outcomes, !job.degradations().is_empty());
    match options.format {
        Format::Json => print_json(&json!({
            "schema_version": SCHEMA_VERSION,
            "run": run_id,
            "pack": pack.origin(),
            "job": job.dir(),
            "ledger": ledger_path,
            "status": status.0,
            "steps": outcomes,
            "failures": failures,
            "disclosures": job.disclosures(),
            "degradations": job.degradations(),
            "servers": end.servers.iter().map(|s| json!({
                "server": s.server,
                "restarts": s.restarts,
                "stdout": s.counts(),
                "last_failure": s.last_failure,
            })).collect::<Vec<_>>(),
        })),
        Format::Text => {
            print!(
                "{}",
                render::run_summary(&outcomes, &failures, &end.servers, total)
            );
            println!("status: {}", status.0);
            println!("job directory: {}", job.dir().display());
            println!("ledger: {} (run {run_id})", ledger_path.display());
        }
    }
    Ok(ExitCode::from(status.1))
}

/// The run's status and exit code.
fn status_of(outcomes: &[StepOutcome], degraded: bool) -> (&'static str, u8) {
    let completed = outcomes
        .iter()
        .filter(|o| o.status == StepStatus::Completed)
        .count();
    if completed == 0 {
        ("failed", EXIT_FAILED)
    } else if completed < outcomes.len() || degraded {
        ("degraded", EXIT_DEGRADED)
    } else {
        ("completed", EXIT_COMPLETED)
    }
}
