//! The fleet's commands: `maljan store migrate`, `maljan submit`, `maljan worker`, `maljan
//! runs`, and the fleet's side of `maljan report RUN` and `maljan ledger --fleet`.

pub(crate) mod demo;
pub(crate) mod submit;
pub(crate) mod worker;

use std::process::ExitCode;
use std::time::Duration;

use maljan_client::{IndexError, IndexedRun, RunIndex, RunListing, RunReport};
use maljan_fleet::{FleetSettings, LedgerQuery, Objects, Queue, RunState};

pub(crate) use submit::SubmitCommand;
pub(crate) use worker::WorkerCommand;

use crate::config::{Config, StoreSection};
use crate::error::CliError;
use crate::stdout::{out, outln};
use crate::{Format, print_json};

/// The fleet's stores, connected.
pub(crate) struct Fleet {
    pub(crate) settings: FleetSettings,
    pub(crate) queue: Queue,
    pub(crate) objects: Objects,
    pub(crate) max_attempts: u32,
    pub(crate) lease: Duration,
    /// How long a store out of reach is waited for before an operation gives up.
    pub(crate) patience: Duration,
}

/// `[store]` of the configuration, or why there is none.
pub(crate) fn store_section(config: &Config) -> Result<&StoreSection, CliError> {
    config.store.as_ref().ok_or(CliError::NoStore)
}

impl Fleet {
    /// Connects to the stores `[store]` names.
    pub(crate) async fn connect(config: &Config) -> Result<Fleet, CliError> {
        let section = store_section(config)?;
        let settings = section.fleet_settings()?;
        let queue = Queue::connect(&settings.postgres).await?;
        let objects = Objects::open(&settings.objects)?;
        Ok(Fleet {
            settings,
            queue,
            objects,
            max_attempts: section.max_attempts,
            lease: Duration::from_secs_f64(section.lease_s),
            patience: Duration::from_secs_f64(section.patience_s),
        })
    }
}

/// `maljan store migrate`: brings the schema to this build's version.
pub(crate) async fn migrate(config: &Config) -> Result<ExitCode, CliError> {
    let fleet = Fleet::connect(config).await?;
    let applied = fleet.queue.migrate().await?;
    if applied.is_empty() {
        outln!(
            "the schema at {} is at version {} already",
            fleet.settings.postgres.url(),
            maljan_fleet::SCHEMA_VERSION
        );
    } else {
        let versions: Vec<String> = applied.iter().map(i64::to_string).collect();
        outln!(
            "applied schema version(s) {} at {}",
            versions.join(", "),
            fleet.settings.postgres.url()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The fleet's run index: the queue says where each run is, the object store holds the
/// reports.
pub(crate) struct FleetRuns(pub(crate) Fleet);

fn unreadable(e: maljan_fleet::FleetError) -> IndexError {
    IndexError::Unreadable(Box::new(e))
}

impl RunIndex for FleetRuns {
    async fn latest(&self, limit: usize) -> Result<RunListing, IndexError> {
        let queue = &self.0.queue;
        let limit = u32::try_from(limit).unwrap_or(u32::MAX);
        let latest = queue
            .recent(limit)
            .await
            .map_err(unreadable)?
            .into_iter()
            .map(|r| IndexedRun {
                run: r.id,
                state: r.state.as_str().to_owned(),
                verdict: r.verdict,
                attempts: Some(r.attempts),
                sample: Some(r.sample_name),
                sha256: Some(r.sample_sha256),
                why: r.why,
                place: r.worker,
            })
            .collect();
        let counts = queue
            .counts()
            .await
            .map_err(unreadable)?
            .into_iter()
            .map(|(state, n)| (state.as_str().to_owned(), n))
            .collect();
        Ok(RunListing { latest, counts })
    }

    async fn report(&self, run: &str) -> Result<RunReport, IndexError> {
        let no_report = |why: String| IndexError::NoReport {
            run: run.to_owned(),
            why,
        };
        let status = self.0.queue.status(run).await.map_err(unreadable)?;
        let status = status.ok_or_else(|| IndexError::NoSuchRun {
            run: run.to_owned(),
        })?;
        match (status.state, status.why) {
            (RunState::Completed, Some(why)) => return Err(no_report(why)),
            (RunState::Completed, None) => {}
            (state, _) => {
                return Err(no_report(format!(
                    "it is {}; try again once it is completed",
                    state.as_str()
                )));
            }
        }
        let bytes = self
            .0
            .objects
            .report(run, "report.json")
            .await
            .map_err(unreadable)?
            .ok_or_else(|| no_report("the object store holds none (was it removed?)".to_owned()))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            no_report(format!(
                "the object store's report.json is not a report this build reads: {e}"
            ))
        })
    }
}

/// Which of the fleet's calls `maljan ledger --fleet` shows.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct LedgerFilter {
    /// With --fleet: only the calls of this run.
    #[arg(long, requires = "fleet")]
    run: Option<String>,
    /// With --fleet: only the calls to this server.
    #[arg(long, requires = "fleet")]
    server: Option<String>,
    /// With --fleet: only the calls of this job (its directory as the worker named it,
    /// which the run's report shows).
    #[arg(long = "fleet-job", requires = "fleet", value_name = "JOB")]
    fleet_job: Option<String>,
    /// With --fleet: only the calls started within this long before now (`7d`, `12h`).
    #[arg(long, requires = "fleet", value_parser = humantime::parse_duration)]
    within: Option<Duration>,
    /// With --fleet: list at most this many calls (the summary counts every call).
    #[arg(long, requires = "fleet", default_value_t = 1000)]
    limit: u32,
}

/// `maljan ledger --fleet`: the failure summary the database computes, then the calls.
pub(crate) async fn print_ledger(
    config: &Config,
    filter: &LedgerFilter,
    format: Format,
) -> Result<ExitCode, CliError> {
    let fleet = Fleet::connect(config).await?;
    let query = LedgerQuery {
        run: filter.run.clone(),
        server: filter.server.clone(),
        job: filter.fleet_job.clone(),
        since: filter
            .within
            .and_then(|d| std::time::SystemTime::now().checked_sub(d)),
        until: None,
    };
    let pool = fleet.queue.pool();
    let failures = maljan_fleet::ledger_failures(pool, &query).await?;
    let (entries, unreadable) = maljan_fleet::ledger_entries(pool, &query, filter.limit).await?;
    if unreadable > 0 {
        crate::stdout::errln!(
            "{unreadable} row(s) of the fleet's ledger are not entries this build reads; they are left out"
        );
    }
    if format == Format::Json {
        // The summary is the database's, over every call the filter names, not only those
        // listed.
        let report = maljan_ledger::LedgerReport {
            failures,
            entries: &entries,
        };
        print_json(&report);
    } else {
        out!("{}", maljan_ledger::render_summary(&failures));
        out!("{}", maljan_ledger::render_table(&entries));
    }
    Ok(ExitCode::SUCCESS)
}
