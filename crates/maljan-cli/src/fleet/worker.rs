//! `maljan worker`: takes the fleet's runs one after another, carries each out on this host
//! (its sample fetched from the object store, its calls ledgered in PostgreSQL with the
//! attempt), stores its report in the object store and records its end. Ctrl-C or SIGTERM
//! hands the run under way back to the queue undone, and the worker stops.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backon::Retryable;
use maljan_client::{ConnectionContext, Job, Ledger, Pack, RunVerdict};
use maljan_fleet::{FleetError, PostgresLedger, TakenRun};

use super::Fleet;
use crate::config::Config;
use crate::error::CliError;
use crate::ledger_file;
use crate::run::{PackRun, StopSignals};
use crate::stdout::errln;

/// How often an idle worker asks the queue for a run.
const IDLE_POLL: Duration = Duration::from_millis(200);

/// The `worker` subcommand's options.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkerCommand {
    /// Stop once no run is queued or under way, instead of waiting for more.
    #[arg(long)]
    until_empty: bool,
    /// This worker's name in the queue's leases (default: HOST-PID).
    #[arg(long)]
    name: Option<String>,
    /// Where the worker keeps the jobs it carries out (default: beside the ledger).
    #[arg(long, value_name = "DIR")]
    jobs: Option<PathBuf>,
    /// Keep each job's directory once its report is stored (default: removed).
    #[arg(long)]
    keep_jobs: bool,
}

/// The time this worker spent on the fleet's own work, summed over the runs it recorded:
/// what carrying a run out in the fleet costs beyond carrying it out here.
#[derive(Default)]
struct FleetTime {
    runs: u32,
    take: Duration,
    fetch: Duration,
    store: Duration,
    record: Duration,
}

impl FleetTime {
    fn per_run(&self) -> String {
        let each = |d: Duration| d.as_secs_f64() * 1000.0 / f64::from(self.runs.max(1));
        format!(
            "the fleet's own time per run: {:.2} ms (take {:.2}, fetch the sample {:.2}, store the report {:.2}, record {:.2})",
            each(self.take + self.fetch + self.store + self.record),
            each(self.take),
            each(self.fetch),
            each(self.store),
            each(self.record)
        )
    }
}

/// How one taken run ended for this worker.
enum Ending {
    /// Carried out and recorded.
    Recorded,
    /// Given back to the queue because the worker is stopping.
    HandedBack,
    /// Not carried out: queued again or failed, with why.
    GaveUp,
    /// Another worker took it (this one's lease ran out).
    Lost,
}

fn default_name() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "host".to_owned());
    format!("{host}-{}", std::process::id())
}

/// Retries `operation` while the stores answer that they are restarting or out of reach,
/// backing off up to 5 s between tries, for up to `patience` (`patience_s` of `[store]`).
async fn patiently<T, F, Fut>(what: &str, patience: Duration, operation: F) -> Result<T, FleetError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, FleetError>>,
{
    operation
        .retry(maljan_fleet::store_backoff(patience))
        .when(FleetError::is_transient)
        .notify(|e, delay| {
            tracing::warn!("{what}: {e}; trying again in {} ms", delay.as_millis());
        })
        .await
}

pub(crate) async fn run(config: Config, options: WorkerCommand) -> Result<ExitCode, CliError> {
    let fleet = Fleet::connect(&config).await?;
    patiently("migrating the schema", fleet.patience, || {
        fleet.queue.migrate()
    })
    .await?;
    let ledger = PostgresLedger::start(&fleet.settings.postgres)?;
    let name = options.name.clone().unwrap_or_else(default_name);
    let jobs = options
        .jobs
        .clone()
        .unwrap_or_else(|| ledger_file::jobs_dir(&ledger_file::default_path()));
    let mut stop = StopSignals::catch()?;
    errln!(
        "worker {name}: taking runs from {} (jobs in {})",
        fleet.settings.postgres.url(),
        jobs.display()
    );
    let worker = Worker {
        fleet: &fleet,
        ledger: &ledger,
        config: &config,
        name: &name,
        jobs: &jobs,
        keep_jobs: options.keep_jobs,
    };
    let mut time = FleetTime::default();
    loop {
        let asked = Instant::now();
        let taken = tokio::select! {
            biased;
            () = stop.requested() => break,
            taken = patiently("taking a run", fleet.patience, || fleet.queue.take(&name, fleet.lease)) => taken?,
        };
        let Some(run) = taken else {
            if options.until_empty
                && patiently("counting runs", fleet.patience, || fleet.queue.unfinished()).await?
                    == 0
            {
                break;
            }
            tokio::select! {
                biased;
                () = stop.requested() => break,
                () = tokio::time::sleep(IDLE_POLL) => continue,
            }
        };
        time.take += asked.elapsed();
        match worker.carry_out(&run, &mut stop, &mut time).await? {
            Ending::Recorded => time.runs += 1,
            Ending::HandedBack => break,
            Ending::GaveUp | Ending::Lost => {}
        }
    }
    errln!(
        "worker {name}: stopped after recording {} run(s); {}",
        time.runs,
        time.per_run()
    );
    Ok(ExitCode::SUCCESS)
}

/// What of a run's files the object store lacks, and why, when anything: its report (the
/// store's words) and the artefacts it could not keep.
fn missing_from_objects(
    report: Option<String>,
    unkept: &[maljan_client::UnkeptArtefact],
) -> Option<String> {
    let mut missing = Vec::new();
    if let Some(why) = report {
        missing.push(format!("the report is not in the object store ({why})"));
    }
    if let Some(first) = unkept.first() {
        missing.push(format!(
            "{} taken file(s) are not in the object store (the first, {} ({}): {})",
            unkept.len(),
            first.name,
            first.sha256,
            first.why
        ));
    }
    (!missing.is_empty()).then(|| missing.join("; "))
}

/// What a worker works with.
struct Worker<'a> {
    fleet: &'a Fleet,
    ledger: &'a PostgresLedger,
    config: &'a Config,
    name: &'a str,
    jobs: &'a Path,
    keep_jobs: bool,
}

impl Worker<'_> {
    /// Carries `run` out, keeping its lease, and records how it ended.
    async fn carry_out(
        &self,
        run: &TakenRun,
        stop: &mut StopSignals,
        time: &mut FleetTime,
    ) -> Result<Ending, CliError> {
        let dir = self
            .jobs
            .join(format!("fleet-{}-attempt-{}", run.id, run.attempt));
        let started = Instant::now();
        let prepared = self.prepare(run, &dir).await;
        time.fetch += started.elapsed();
        let job = match prepared {
            Ok(job) => job,
            Err(why) => return self.give_up(run, &why).await,
        };
        let pack = match Pack::parse(&run.pack_text, &run.pack_origin) {
            Ok(pack) => pack,
            Err(errors) => return self.give_up(run, &errors.to_string()).await,
        };
        let calls = Ledger::new().with_sink(self.ledger.sink_for(&run.id, run.attempt));
        let context = ConnectionContext::default().with_ledger(Arc::new(calls));
        let pack_run = PackRun {
            pack: &pack,
            job: job.clone(),
            servers: self.config.servers(),
            settings: self.config.settings.clone(),
        };
        let carried = tokio::select! {
            carried = pack_run.execute(context, Some(&run.id), stop) => carried,
            () = self.keep_lease(run) => {
                errln!(
                    "{} attempt {}: another worker took the run (this worker's lease ran out); this attempt is dropped",
                    run.id, run.attempt
                );
                return Ok(Ending::Lost);
            }
        };
        let carried = match carried {
            Ok(carried) => carried,
            Err(errors) => return self.give_up(run, &errors.to_string()).await,
        };
        let mut report = carried.report;
        if report.verdict == RunVerdict::Interrupted {
            patiently("handing a run back", self.fleet.patience, || {
                self.fleet.queue.hand_back(&run.id, self.name)
            })
            .await?;
            errln!(
                "{} attempt {}: handed back (the worker is stopping)",
                run.id,
                run.attempt
            );
            return Ok(Ending::HandedBack);
        }
        report.attempts = Some(run.attempt);
        let started = Instant::now();
        // The run is done whether or not its report reaches the object store: one that does
        // not stays in the job's directory on this host, and the queue says where.
        let unstored = self.store_report(&report, &dir).await.err();
        let missing = missing_from_objects(unstored, &job.unkept()).map(|what| {
            format!(
                "{what}; the job's directory {} on {} holds it",
                dir.display(),
                self.name
            )
        });
        time.store += started.elapsed();
        let verdict = report.verdict.as_str();
        let started = Instant::now();
        let recorded = patiently("recording a run's end", self.fleet.patience, || {
            self.fleet
                .queue
                .complete(&run.id, self.name, verdict, missing.as_deref())
        })
        .await?;
        time.record += started.elapsed();
        if !recorded {
            errln!(
                "{} attempt {}: another worker took the run before this attempt ended; its record stands",
                run.id,
                run.attempt
            );
            return Ok(Ending::Lost);
        }
        errln!("{} attempt {}: {verdict}", run.id, run.attempt);
        if let Some(missing) = &missing {
            errln!("{} attempt {}: {missing}", run.id, run.attempt);
        } else if self.keep_jobs {
            if let Err(e) = report.write(&dir) {
                errln!(
                    "{} attempt {}: the kept job {} has no report files ({e})",
                    run.id,
                    run.attempt,
                    dir.display()
                );
            }
        } else {
            let _ = std::fs::remove_dir_all(&dir);
        }
        Ok(Ending::Recorded)
    }

    /// The run's job on this host, with its sample fetched from the object store.
    async fn prepare(&self, run: &TakenRun, dir: &Path) -> Result<Arc<Job>, String> {
        // A directory left by an earlier life of a worker of the same name holds nothing
        // this attempt may use.
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| {
                format!("the job directory {} cannot be emptied: {e}", dir.display())
            })?;
        }
        // Each file the run takes is kept in the object store as soon as it is taken.
        let job = Job::create(dir)
            .map_err(|e| format!("the job directory {} cannot be made: {e}", dir.display()))?
            .with_archive(Arc::new(self.fleet.objects.clone()));
        let incoming = self
            .jobs
            .join(format!(".incoming-{}-attempt-{}", run.id, run.attempt));
        std::fs::create_dir_all(&incoming)
            .map_err(|e| format!("{} cannot be made: {e}", incoming.display()))?;
        // The name as submitted, reduced to a file name: it is the sample's name in the job.
        let name = Path::new(&run.sample_name)
            .file_name()
            .map_or_else(|| "sample".into(), |n| n.to_owned());
        let fetched = incoming.join(name);
        let outcome = async {
            let size = patiently("fetching the sample", self.fleet.patience, || {
                self.fleet
                    .objects
                    .fetch_sample(&run.sample_sha256, &fetched)
            })
            .await
            .map_err(|e| e.to_string())?;
            // Checked against its digest as it was fetched: moved in, not copied again.
            job.adopt_sample(&fetched, size, &run.sample_sha256)
                .map_err(|e| format!("the sample cannot be put into the job: {e}"))
        }
        .await;
        let _ = std::fs::remove_dir_all(&incoming);
        outcome.map(|_| Arc::new(job))
    }

    /// Renews the run's lease at a third of its length; returns only when the lease is
    /// lost (another worker holds the run).
    async fn keep_lease(&self, run: &TakenRun) {
        let lease = self.fleet.lease;
        loop {
            tokio::time::sleep(lease / 3).await;
            match self.fleet.queue.renew(&run.id, self.name, lease).await {
                Ok(true) => {}
                Ok(false) => return,
                // Unreached for now: the lease may still be renewed before it runs out.
                Err(e) => tracing::warn!("the lease of run {} was not renewed: {e}", run.id),
            }
        }
    }

    /// Puts the report into the object store as `report.json` (its Markdown and HTML are
    /// made from it wherever it is read); one that cannot be put is written whole into the
    /// job's directory instead, which is then kept.
    async fn store_report(
        &self,
        report: &maljan_client::RunReport,
        dir: &Path,
    ) -> Result<(), String> {
        let json = serde_json::to_vec_pretty(report).map_err(|e| e.to_string())?;
        let json = bytes::Bytes::from(json);
        let stored = patiently("storing the report", self.fleet.patience, || {
            self.fleet
                .objects
                .put_report(&report.run, "report.json", json.clone())
        })
        .await;
        let Err(why) = stored else {
            return Ok(());
        };
        match report.write(dir) {
            Ok(_) => Err(why.to_string()),
            Err(e) => Err(format!(
                "{why}; nor could it be written into {}: {e}",
                dir.display()
            )),
        }
    }

    /// Records that this attempt could not be carried out.
    async fn give_up(&self, run: &TakenRun, why: &str) -> Result<Ending, CliError> {
        let state = patiently("recording a failed attempt", self.fleet.patience, || {
            self.fleet.queue.give_up(&run.id, self.name, why)
        })
        .await?;
        errln!(
            "{} attempt {}: not carried out ({why}); the run is {}",
            run.id,
            run.attempt,
            state.as_str()
        );
        Ok(Ending::GaveUp)
    }
}
