//! The queue of runs on PostgreSQL: submitted runs wait in `maljan_runs`; a worker takes
//! one with a lease (`FOR UPDATE SKIP LOCKED`, so workers never wait on each other's
//! rows), renews the lease while the run goes on, and records how it ended. A run whose
//! lease runs out (its worker died) is taken again by another worker, up to its attempts.

use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions, PgRow};
use sqlx::{Row, migrate::Migrator};

use crate::migrations::migrator;
use crate::{FleetError, PostgresSettings};

/// A run to submit: a pack and a sample the object store holds.
#[derive(Debug, Clone)]
pub struct Submission {
    /// Where the pack came from (its path, as the report names it).
    pub pack_origin: String,
    /// The pack's TOML.
    pub pack_text: String,
    /// The sample's sha256 (its name in the object store).
    pub sample_sha256: String,
    /// The sample's file name, as submitted.
    pub sample_name: String,
    /// How many times the run may be taken before it is failed (hand-backs do not count).
    pub max_attempts: u32,
}

/// A run a worker took.
#[derive(Debug, Clone)]
pub struct TakenRun {
    /// The run's id.
    pub id: String,
    /// Where the pack came from.
    pub pack_origin: String,
    /// The pack's TOML.
    pub pack_text: String,
    /// The sample's sha256.
    pub sample_sha256: String,
    /// The sample's file name.
    pub sample_name: String,
    /// This attempt's number, from 1.
    pub attempt: u32,
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunState {
    /// Waiting for a worker.
    Queued,
    /// A worker has it.
    Running,
    /// It ran to its end (whatever its verdict).
    Completed,
    /// It could not be carried out: see its `why`.
    Failed,
}

impl RunState {
    fn parse(text: &str) -> RunState {
        match text {
            "queued" => RunState::Queued,
            "running" => RunState::Running,
            "completed" => RunState::Completed,
            _ => RunState::Failed,
        }
    }

    /// Its name, as the database and the CLI write it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
        }
    }
}

/// What the queue knows of a run.
#[derive(Debug, Clone)]
pub struct RunStatus {
    /// The run's id.
    pub id: String,
    /// Where it is.
    pub state: RunState,
    /// Times it was taken.
    pub attempts: u32,
    /// Takes a stopping worker handed back.
    pub handed_back: u32,
    /// The sample's file name.
    pub sample_name: String,
    /// The sample's sha256.
    pub sample_sha256: String,
    /// The run's verdict, once completed.
    pub verdict: Option<String>,
    /// Why it failed, when it did.
    pub why: Option<String>,
    /// The worker that has (or last had) it.
    pub worker: Option<String>,
}

/// The queue.
///
/// ```no_run
/// # async fn demo() -> Result<(), maljan_fleet::FleetError> {
/// use std::time::Duration;
/// use maljan_fleet::{PostgresSettings, Queue};
/// let queue = Queue::connect(&PostgresSettings::new("postgres://maljan@127.0.0.1/maljan")?).await?;
/// queue.migrate().await?;
/// if let Some(run) = queue.take("worker-1", Duration::from_secs(30)).await? {
///     // ... carry the run out, renewing the lease ...
///     queue.complete(&run.id, "worker-1", "completed", None).await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Queue {
    pool: PgPool,
}

fn postgres(action: &'static str) -> impl FnOnce(sqlx::Error) -> FleetError {
    move |source| FleetError::Postgres { action, source }
}

const STATUS_COLUMNS: &str = "id, state, attempts, handed_back, sample_name, sample_sha256, \
                              verdict, why, lease_owner";

fn status_of(row: &PgRow) -> RunStatus {
    let count = |name: &str| u32::try_from(row.get::<i32, _>(name)).unwrap_or(0);
    RunStatus {
        id: row.get("id"),
        state: RunState::parse(row.get("state")),
        attempts: count("attempts"),
        handed_back: count("handed_back"),
        sample_name: row.get("sample_name"),
        sample_sha256: row.get("sample_sha256"),
        verdict: row.get("verdict"),
        why: row.get("why"),
        worker: row.get("lease_owner"),
    }
}

impl Queue {
    /// Connects to the server (a pool of a few connections, made as they are needed).
    pub async fn connect(settings: &PostgresSettings) -> Result<Queue, FleetError> {
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(settings.connect_options())
            .await
            .map_err(postgres("connecting"))?;
        Ok(Queue { pool })
    }

    /// A queue on a pool made elsewhere.
    pub fn with_pool(pool: PgPool) -> Queue {
        Queue { pool }
    }

    /// The pool, for the ledger and the index on the same server.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Brings the schema to this build's version; a newer schema is left alone. Several
    /// workers may do this at once: the migrator holds an advisory lock.
    pub async fn migrate(&self) -> Result<Vec<i64>, FleetError> {
        let migrator: Migrator = migrator();
        let before: Vec<i64> = applied_versions(&self.pool).await?;
        migrator.run(&self.pool).await?;
        let after = applied_versions(&self.pool).await?;
        Ok(after.into_iter().filter(|v| !before.contains(v)).collect())
    }

    /// Queues a run; returns its id.
    pub async fn submit(&self, submission: &Submission) -> Result<String, FleetError> {
        let max_attempts = i32::try_from(submission.max_attempts.max(1)).unwrap_or(i32::MAX);
        sqlx::query_scalar(
            "INSERT INTO maljan_runs (pack_origin, pack_text, sample_sha256, sample_name, max_attempts) \
             VALUES ($1, $2, $3, $4, $5) RETURNING id",
        )
        .bind(&submission.pack_origin)
        .bind(&submission.pack_text)
        .bind(&submission.sample_sha256)
        .bind(&submission.sample_name)
        .bind(max_attempts)
        .fetch_one(&self.pool)
        .await
        .map_err(postgres("queueing a run"))
    }

    /// Takes the oldest run waiting (queued, or running under a lease that ran out) for
    /// `worker`, leased for `lease`. Runs whose leases ran out as often as they may be
    /// taken are failed first, with why.
    pub async fn take(
        &self,
        worker: &str,
        lease: Duration,
    ) -> Result<Option<TakenRun>, FleetError> {
        sqlx::query(
            "UPDATE maljan_runs SET state = 'failed', finished_at = now(), lease_until = NULL, \
             why = format('taken %s times; each time its worker stopped renewing its lease (last: %s)', \
                          attempts - handed_back, lease_owner) \
             WHERE state = 'running' AND lease_until < now() AND attempts - handed_back >= max_attempts",
        )
        .execute(&self.pool)
        .await
        .map_err(postgres("failing runs out of attempts"))?;
        let row = sqlx::query(
            "UPDATE maljan_runs AS r SET state = 'running', attempts = r.attempts + 1, \
             lease_owner = $1, lease_until = now() + make_interval(secs => $2) \
             FROM (SELECT id FROM maljan_runs \
                   WHERE (state = 'queued' OR (state = 'running' AND lease_until < now())) \
                     AND attempts - handed_back < max_attempts \
                   ORDER BY submitted_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) AS next \
             WHERE r.id = next.id \
             RETURNING r.id, r.pack_origin, r.pack_text, r.sample_sha256, r.sample_name, r.attempts",
        )
        .bind(worker)
        .bind(lease.as_secs_f64())
        .fetch_optional(&self.pool)
        .await
        .map_err(postgres("taking a run"))?;
        Ok(row.map(|row| TakenRun {
            id: row.get("id"),
            pack_origin: row.get("pack_origin"),
            pack_text: row.get("pack_text"),
            sample_sha256: row.get("sample_sha256"),
            sample_name: row.get("sample_name"),
            attempt: u32::try_from(row.get::<i32, _>("attempts")).unwrap_or(0),
        }))
    }

    /// Extends `worker`'s lease of `run`; false when the worker no longer holds it (the
    /// lease ran out and another worker took the run).
    pub async fn renew(
        &self,
        run: &str,
        worker: &str,
        lease: Duration,
    ) -> Result<bool, FleetError> {
        let renewed = sqlx::query(
            "UPDATE maljan_runs SET lease_until = now() + make_interval(secs => $3) \
             WHERE id = $1 AND lease_owner = $2 AND state = 'running'",
        )
        .bind(run)
        .bind(worker)
        .bind(lease.as_secs_f64())
        .execute(&self.pool)
        .await
        .map_err(postgres("renewing a lease"))?;
        Ok(renewed.rows_affected() == 1)
    }

    /// Records that `worker` carried `run` out to its end with `verdict`, its report in the
    /// object store unless `report_missing` says why not and where it is instead; false
    /// when the worker no longer held the run (then another attempt's record stands).
    pub async fn complete(
        &self,
        run: &str,
        worker: &str,
        verdict: &str,
        report_missing: Option<&str>,
    ) -> Result<bool, FleetError> {
        let done = sqlx::query(
            "UPDATE maljan_runs SET state = 'completed', verdict = $3, finished_at = now(), \
             lease_until = NULL, why = $4, \
             report_prefix = CASE WHEN $4::text IS NULL THEN 'reports/' || id END \
             WHERE id = $1 AND lease_owner = $2 AND state = 'running'",
        )
        .bind(run)
        .bind(worker)
        .bind(verdict)
        .bind(report_missing)
        .execute(&self.pool)
        .await
        .map_err(postgres("recording a run's end"))?;
        Ok(done.rows_affected() == 1)
    }

    /// Gives `run` back to the queue undone (its worker is stopping): the take does not
    /// count against its attempts.
    pub async fn hand_back(&self, run: &str, worker: &str) -> Result<bool, FleetError> {
        let back = sqlx::query(
            "UPDATE maljan_runs SET state = 'queued', handed_back = handed_back + 1, \
             lease_until = NULL WHERE id = $1 AND lease_owner = $2 AND state = 'running'",
        )
        .bind(run)
        .bind(worker)
        .execute(&self.pool)
        .await
        .map_err(postgres("handing a run back"))?;
        Ok(back.rows_affected() == 1)
    }

    /// Records that `worker` could not carry `run` out (its sample could not be fetched,
    /// say): queued again while it has attempts left, else failed with `why`.
    pub async fn give_up(
        &self,
        run: &str,
        worker: &str,
        why: &str,
    ) -> Result<RunState, FleetError> {
        let state: Option<String> = sqlx::query_scalar(
            "UPDATE maljan_runs SET lease_until = NULL, why = $3, \
             state = CASE WHEN attempts - handed_back >= max_attempts THEN 'failed' ELSE 'queued' END, \
             finished_at = CASE WHEN attempts - handed_back >= max_attempts THEN now() END \
             WHERE id = $1 AND lease_owner = $2 AND state = 'running' RETURNING state",
        )
        .bind(run)
        .bind(worker)
        .bind(why)
        .fetch_optional(&self.pool)
        .await
        .map_err(postgres("recording a failed attempt"))?;
        Ok(state.as_deref().map_or(RunState::Running, RunState::parse))
    }

    /// What the queue knows of `run`.
    pub async fn status(&self, run: &str) -> Result<Option<RunStatus>, FleetError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {STATUS_COLUMNS} FROM maljan_runs WHERE id = $1"
        )))
        .bind(run)
        .fetch_optional(&self.pool)
        .await
        .map_err(postgres("reading a run"))?;
        Ok(row.as_ref().map(status_of))
    }

    /// The most recent `limit` runs, newest first.
    pub async fn recent(&self, limit: u32) -> Result<Vec<RunStatus>, FleetError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {STATUS_COLUMNS} FROM maljan_runs ORDER BY submitted_at DESC, id DESC LIMIT $1"
        )))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(postgres("listing runs"))?;
        Ok(rows.iter().map(status_of).collect())
    }

    /// How many runs wait for a worker or are under way: none means a batch is through.
    pub async fn unfinished(&self) -> Result<u64, FleetError> {
        let n: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM maljan_runs WHERE state IN ('queued', 'running')",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(postgres("counting unfinished runs"))?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// How many runs are in each state.
    pub async fn counts(&self) -> Result<Vec<(RunState, u64)>, FleetError> {
        let rows = sqlx::query(
            "SELECT state, count(*) AS n FROM maljan_runs GROUP BY state ORDER BY state",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(postgres("counting runs"))?;
        Ok(rows
            .iter()
            .map(|row| {
                (
                    RunState::parse(row.get("state")),
                    u64::try_from(row.get::<i64, _>("n")).unwrap_or(0),
                )
            })
            .collect())
    }
}

async fn applied_versions(pool: &PgPool) -> Result<Vec<i64>, FleetError> {
    let exists: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(pool)
        .await
        .map_err(postgres("reading the schema's version"))?;
    if !exists {
        return Ok(Vec::new());
    }
    sqlx::query_scalar("SELECT version FROM _sqlx_migrations WHERE success ORDER BY version")
        .fetch_all(pool)
        .await
        .map_err(postgres("reading the schema's version"))
}
