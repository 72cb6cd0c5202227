//! `maljan run PACK SAMPLE`: a triage pack carried out over the configured servers, in one
//! job.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use maljan_client::{
    ClientSettings, ConnectionContext, Job, Ledger, Pack, PackErrors, PackInfo, ReportBuilder, Run,
    RunEvent, RunReport, RunVerdict, ServerConfig, ServerRecord, StepOutcome, distinct_failures,
};

use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::config::Config;
use crate::error::CliError;
use crate::stdout::{errln, out, outln};
use crate::{Format, exit_status, ledger_file, print_json, progress, render};

/// The `run` subcommand's options.
#[derive(Debug, clap::Args)]
pub(crate) struct RunCommand {
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
    /// A stdio server's command, beside the configured servers. It takes the name of the
    /// pack's server when the pack's steps name only one, so that `maljan run pack.toml
    /// sample -- uvx mcp-server-time` runs a one-server pack on it.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

fn refused(errors: &PackErrors) -> ExitCode {
    errln!("error: {errors}");
    ExitCode::from(exit_status::USAGE)
}

/// The job's directory: new, or one the user named (refused when it holds files unless
/// they asked to reuse it).
fn job_dir(options: &RunCommand) -> Result<PathBuf, CliError> {
    let Some(dir) = &options.job else {
        let ledger = options
            .ledger
            .clone()
            .unwrap_or_else(ledger_file::default_path);
        return Ok(ledger_file::new_job_dir(&ledger));
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

pub(crate) async fn run(mut config: Config, options: RunCommand) -> Result<ExitCode, CliError> {
    let pack = match Pack::load(&options.pack) {
        Ok(pack) => pack,
        Err(errors) => return Ok(refused(&errors)),
    };
    let mut servers: Vec<&str> = pack.steps().iter().map(|s| s.server()).collect();
    servers.sort_unstable();
    servers.dedup();
    let only_server = match servers.as_slice() {
        [only] => Some(*only),
        _ => None,
    };
    config.add_command_server(&options.command, only_server);
    if let Err(errors) = pack.check_servers(config.server_names()) {
        return Ok(refused(&errors));
    }
    if options.check {
        outln!(
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
    // Caught before the sample's copy: a stop during it still leaves a report, and no
    // partial copy.
    let mut stop = StopSignals::catch()?;
    let job = Arc::new(Job::create(&dir).map_err(|e| job_error(&dir, e))?);
    let halt = Arc::new(AtomicBool::new(false));
    let mut copied = std::pin::pin!(copy_sample(job.clone(), sample.clone(), halt.clone()));
    tokio::select! {
        biased;
        () = stop.requested() => {
            // The copy stops at its next write and removes what it wrote.
            halt.store(true, Ordering::Relaxed);
            let _ = copied.await;
            stop = stop.stopped_already();
        }
        added = &mut copied => added.map_err(|e| job_error(&sample, e))?,
    }
    let ledger_path = options
        .ledger
        .clone()
        .unwrap_or_else(ledger_file::default_path);
    let run = PackRun {
        pack: &pack,
        job,
        servers: config.servers(),
        settings: config.settings.clone(),
    };
    run.carry_out(ledger_path, options.format, stop).await
}

/// Copies the sample into the job on a thread of its own, until `halt` is set.
async fn copy_sample(job: Arc<Job>, sample: PathBuf, halt: Arc<AtomicBool>) -> std::io::Result<()> {
    let (done, copied) = tokio::sync::oneshot::channel();
    tracing::info!(sample = %sample.display(), "copying the sample into the job");
    std::thread::spawn(move || {
        let _ = done.send(job.add_sample_until(&sample, &halt).map(drop));
    });
    copied
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("the sample's copy stopped")))
}

/// A pack to carry out in a job, over servers, and where it goes.
pub(crate) struct PackRun<'a> {
    pub(crate) pack: &'a Pack,
    pub(crate) job: Arc<Job>,
    pub(crate) servers: Vec<ServerConfig>,
    pub(crate) settings: ClientSettings,
}

/// How a pack run ended: its report, what each step did, and what the run learned of its
/// servers.
pub(crate) struct Carried {
    pub(crate) report: RunReport,
    pub(crate) outcomes: Vec<StepOutcome>,
    pub(crate) servers: Vec<ServerRecord>,
}

impl PackRun<'_> {
    /// Runs the pack until it ends or `stop` comes, shows its outcome, writes its report
    /// into the job's directory and gives the exit code of its verdict.
    pub(crate) async fn carry_out(
        self,
        ledger_path: PathBuf,
        format: Format,
        mut stop: StopSignals,
    ) -> Result<ExitCode, CliError> {
        let total = self.pack.steps().len();
        let context = ConnectionContext::default().with_ledger(Arc::new(
            Ledger::json_lines(&ledger_path).map_err(CliError::Ledger)?,
        ));
        let job = self.job.clone();
        let carried = match self.execute(context, None, &mut stop).await {
            Ok(carried) => carried,
            Err(errors) => return Ok(refused(&errors)),
        };
        let report = carried.report;
        let written = report.write(job.dir());
        match format {
            Format::Json => print_json(&report),
            Format::Text => {
                out!(
                    "{}",
                    render::run_summary(
                        &carried.outcomes,
                        &distinct_failures(&carried.outcomes),
                        &carried.servers,
                        total
                    )
                );
                outln!("verdict: {}", report.verdict.as_str());
                outln!("job directory: {}", job.dir().display());
                outln!("ledger: {} (run {})", ledger_path.display(), report.run);
            }
        }
        match written {
            Ok(files) => errln!("report: {}", files.html.display()),
            Err(e) => errln!(
                "error: the report could not be written into {}: {e}; the job's files are there",
                job.dir().display()
            ),
        }
        Ok(ExitCode::from(exit_code(report.verdict)))
    }

    /// Runs the pack, recording to `context` (its ledger), under the run id `id` when one
    /// is given, until it ends or `stop` comes (then the report says what was done so
    /// far); the servers are closed when this returns.
    pub(crate) async fn execute(
        self,
        mut context: ConnectionContext,
        id: Option<&str>,
        stop: &mut StopSignals,
    ) -> Result<Carried, PackErrors> {
        let PackRun {
            pack,
            job,
            servers,
            settings,
        } = self;
        if let Some(reporter) = progress::terminal_reporter() {
            context = context.with_progress(reporter);
        }
        let terminal = std::io::stderr().is_terminal();
        // The report is folded from what the run tells as it goes: a run that is stopped
        // reports what was done so far.
        let report = Arc::new(ReportBuilder::default());
        let finished = AtomicUsize::new(0);
        let mut run = Run::new(job.clone(), servers, settings, context)
            .recording_to(report.clone())
            .recording_to(move |event: &RunEvent<'_>| {
                if let RunEvent::StepFinished(outcome) = event
                    && terminal
                {
                    let count = finished.fetch_add(1, Ordering::Relaxed) + 1;
                    errln!("[{count}] {}", render::step_line(outcome));
                }
            });
        if let Some(id) = id {
            run = run.with_id(id);
        }
        let executed = {
            let execution = run.execute(pack);
            // Ctrl-C or SIGTERM ends the run: the steps' calls are dropped (and cancelled on
            // their servers), the servers closed, and the report says what was done so far.
            tokio::select! {
                biased;
                () = stop.requested() => None,
                executed = execution => Some(executed),
            }
        };
        let interrupted = executed.is_none();
        let end = run.finish().await;
        if let Some(Err(errors)) = executed {
            return Err(errors);
        }
        let pack_info = PackInfo {
            origin: pack.origin().to_owned(),
            name: pack.name().map(str::to_owned),
        };
        Ok(Carried {
            report: report.report(pack_info, &job, &end, interrupted),
            outcomes: report.steps(),
            servers: end.servers,
        })
    }
}

/// Ctrl-C and SIGTERM, caught from the moment this is made (before the sample is copied
/// and any server starts), so neither ends the process without its report.
pub(crate) struct StopSignals {
    interrupt: Signal,
    terminate: Signal,
    /// One came already.
    came: bool,
}

impl StopSignals {
    pub(crate) fn catch() -> Result<StopSignals, CliError> {
        let catch = |kind| signal(kind).map_err(CliError::Signals);
        Ok(StopSignals {
            interrupt: catch(SignalKind::interrupt())?,
            terminate: catch(SignalKind::terminate())?,
            came: false,
        })
    }

    /// The same, one having come already: [`requested`](Self::requested) is ready at once.
    fn stopped_already(mut self) -> StopSignals {
        self.came = true;
        self
    }

    /// The first of them to come.
    pub(crate) async fn requested(&mut self) {
        if self.came {
            return;
        }
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

/// `maljan report JOB_DIR`: a finished run's report, as text or JSON.
pub(crate) fn print_report(job: &Path, format: Format) -> Result<ExitCode, CliError> {
    let name = match format {
        Format::Json => "report.json",
        Format::Text => "report.md",
    };
    let path = job.join(name);
    let unreadable = |why: String| CliError::BadArgument {
        argument: job.display().to_string(),
        detail: format!(
            "{} cannot be read ({why}); name the directory of a job a run has finished",
            path.display()
        ),
    };
    // A FIFO or a device under the report's name would hang or flood the reader: only a
    // regular file is opened, and it is streamed, never held whole.
    let regular = std::fs::metadata(&path).map_err(|e| unreadable(e.to_string()))?;
    if !regular.is_file() {
        return Err(unreadable("not a regular file".to_owned()));
    }
    let mut file = std::fs::File::open(&path).map_err(|e| unreadable(e.to_string()))?;
    let show: fn(&str) = match format {
        Format::Json => crate::stdout::write_json,
        Format::Text => crate::stdout::write_out,
    };
    let mut buffer = vec![0u8; 64 * 1024];
    // Bytes read but not yet shown: the start of a character the next read completes.
    let mut pending = Vec::new();
    loop {
        let read =
            std::io::Read::read(&mut file, &mut buffer).map_err(|e| unreadable(e.to_string()))?;
        if read == 0 {
            show(&String::from_utf8_lossy(&pending));
            break;
        }
        pending.extend_from_slice(&buffer[..read]);
        let whole = match std::str::from_utf8(&pending) {
            Err(cut) if cut.error_len().is_none() => cut.valid_up_to(),
            _ => pending.len(),
        };
        show(&String::from_utf8_lossy(&pending[..whole]));
        pending.drain(..whole);
    }
    Ok(ExitCode::SUCCESS)
}

/// The exit code of a verdict.
pub(crate) fn exit_code(verdict: RunVerdict) -> u8 {
    match verdict {
        RunVerdict::Completed => exit_status::SUCCESS,
        RunVerdict::Degraded => exit_status::RUN_DEGRADED,
        RunVerdict::Failed => exit_status::RUN_FAILED,
        RunVerdict::Interrupted => exit_status::INTERRUPTED,
        // A verdict this build does not know is not a success.
        _ => exit_status::RUN_FAILED,
    }
}
