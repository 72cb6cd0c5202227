//! The call ledger in PostgreSQL: every call of every worker appended to `maljan_ledger`
//! (never read by a writer), and read back, or summed up by the database, for a run, a
//! job, a server or a time range.

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use backon::{ExponentialBuilder, Retryable};
use maljan_ledger::{FailureGroup, LedgerEntry, LedgerSink, SinkError};
use maljan_mcp_proto::maljan::ErrorCode;
use sqlx::Row;
use sqlx::postgres::{PgPool, PgPoolOptions};

use crate::error::sqlx_error_is_transient;
use crate::{FleetError, PostgresSettings};

/// How long an append waits for PostgreSQL to come back before the call is reported
/// unledgered: a server restarting takes seconds, a longer outage is an incident.
const APPEND_PATIENCE: Duration = Duration::from_secs(120);

/// What `SinkError::path` says for this sink: it writes no file.
const SINK_NAME: &str = "postgresql:maljan_ledger";

/// One append, handed to the ledger's thread.
struct Append {
    entry: LedgerEntry,
    fleet_run: Option<String>,
    attempt: Option<i32>,
    done: mpsc::SyncSender<Result<(), String>>,
}

/// The ledger in PostgreSQL. Appends go through a thread of its own with one connection,
/// so that [`LedgerSink::write`], which must have the entry stored when it returns, never
/// needs the caller's runtime; an append waits out a restart of the server (up to two
/// minutes, backing off), and one retried after a lost answer is stored once (entries are
/// unique by writer and number).
///
/// ```no_run
/// # fn demo() -> Result<(), maljan_fleet::FleetError> {
/// use maljan_fleet::{PostgresLedger, PostgresSettings};
/// use maljan_ledger::Ledger;
/// let ledger = PostgresLedger::start(&PostgresSettings::new("postgres://maljan@127.0.0.1/maljan")?)?;
/// let calls = Ledger::new().with_sink(ledger.sink_for("run-id", 1));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct PostgresLedger {
    appends: mpsc::Sender<AppendRequest>,
}

/// `Append` is not `Debug` (it holds a channel); this wrapper is what the sender carries.
struct AppendRequest(Append);

impl std::fmt::Debug for AppendRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Append")
            .field("seq", &self.0.entry.seq)
            .finish_non_exhaustive()
    }
}

impl PostgresLedger {
    /// Starts the ledger's thread; it connects when the first entry comes.
    pub fn start(settings: &PostgresSettings) -> Result<PostgresLedger, FleetError> {
        let options = settings.connect_options();
        let (appends, requests) = mpsc::channel::<AppendRequest>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|source| FleetError::File {
                action: "starting the ledger's runtime",
                path: PathBuf::from(SINK_NAME),
                source,
            })?;
        std::thread::Builder::new()
            .name("maljan-ledger-postgres".to_owned())
            .spawn(move || {
                let pool = {
                    let _entered = runtime.enter();
                    PgPoolOptions::new()
                        .max_connections(1)
                        .acquire_timeout(Duration::from_secs(5))
                        .connect_lazy_with(options)
                };
                while let Ok(AppendRequest(append)) = requests.recv() {
                    let stored = runtime.block_on(append_patiently(&pool, &append));
                    let _ = append.done.send(stored.map_err(|e| e.to_string()));
                }
            })
            .map_err(|source| FleetError::File {
                action: "starting the ledger's thread",
                path: PathBuf::from(SINK_NAME),
                source,
            })?;
        Ok(PostgresLedger { appends })
    }

    /// A sink that appends entries as calls of `attempt` of the fleet's run `run`.
    pub fn sink_for(&self, run: &str, attempt: u32) -> PostgresLedgerSink {
        PostgresLedgerSink {
            ledger: self.clone(),
            fleet_run: Some(run.to_owned()),
            attempt: i32::try_from(attempt).ok(),
        }
    }

    /// A sink for calls made outside the fleet's runs (`maljan call`, say).
    pub fn sink(&self) -> PostgresLedgerSink {
        PostgresLedgerSink {
            ledger: self.clone(),
            fleet_run: None,
            attempt: None,
        }
    }
}

/// Appends to a [`PostgresLedger`], each entry tagged with its fleet run and attempt.
#[derive(Debug, Clone)]
pub struct PostgresLedgerSink {
    ledger: PostgresLedger,
    fleet_run: Option<String>,
    attempt: Option<i32>,
}

fn sink_error(action: &'static str, why: impl Into<String>) -> SinkError {
    SinkError {
        path: PathBuf::from(SINK_NAME),
        action,
        source: std::io::Error::other(why.into()),
    }
}

impl LedgerSink for PostgresLedgerSink {
    fn write(&mut self, entry: &LedgerEntry) -> Result<(), SinkError> {
        let (done, stored) = mpsc::sync_channel(1);
        let append = Append {
            entry: entry.clone(),
            fleet_run: self.fleet_run.clone(),
            attempt: self.attempt,
            done,
        };
        self.ledger
            .appends
            .send(AppendRequest(append))
            .map_err(|_| sink_error("appending", "the ledger's thread has stopped"))?;
        let wait = || {
            stored
                .recv()
                .map_err(|_| sink_error("appending", "the ledger's thread has stopped"))?
                .map_err(|why| sink_error("appending", why))
        };
        // Called from a runtime's worker, the wait lets the runtime move its other tasks
        // elsewhere first; a current-thread runtime has nowhere to move them.
        match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
            Ok(tokio::runtime::RuntimeFlavor::MultiThread) => tokio::task::block_in_place(wait),
            _ => wait(),
        }
    }
}

fn micros(duration: Duration) -> i64 {
    i64::try_from(duration.as_micros()).unwrap_or(i64::MAX)
}

fn epoch_micros(at: SystemTime) -> i64 {
    match at.duration_since(UNIX_EPOCH) {
        Ok(after) => micros(after),
        Err(before) => -micros(before.duration()),
    }
}

/// How a store out of reach is waited for: tries 100 ms apart at first, doubling up to 5 s,
/// jittered, for `patience` in all. The ledger and the workers wait so.
///
/// ```
/// let backoff = maljan_fleet::store_backoff(std::time::Duration::from_secs(120));
/// # let _ = backoff;
/// ```
pub fn store_backoff(patience: Duration) -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(5))
        .with_max_times(usize::MAX)
        .with_total_delay(Some(patience))
        .with_jitter()
}

async fn append_patiently(pool: &PgPool, append: &Append) -> Result<(), sqlx::Error> {
    (|| append_once(pool, append))
        .retry(store_backoff(APPEND_PATIENCE))
        .when(sqlx_error_is_transient)
        .notify(|e, delay| {
            tracing::warn!(
                "the ledger could not reach PostgreSQL ({e}); trying again in {} ms",
                delay.as_millis()
            );
        })
        .await
}

async fn append_once(pool: &PgPool, append: &Append) -> Result<(), sqlx::Error> {
    let entry = &append.entry;
    let call = &entry.call;
    let failure = entry.failure();
    let whole = serde_json::to_value(entry).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
    sqlx::query(
        "INSERT INTO maljan_ledger (fleet_run, attempt, writer, seq, job, run, step, traceparent, \
         server, tool, arguments, sent_arguments, failed, error_code, error_message, remediation, \
         started_at, duration_us, entry) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, \
                 to_timestamp($17::float8 / 1e6), $18, $19) \
         ON CONFLICT (writer, seq) DO NOTHING",
    )
    .bind(&append.fleet_run)
    .bind(append.attempt)
    .bind(&entry.writer)
    .bind(i64::try_from(entry.seq).unwrap_or(i64::MAX))
    .bind(&call.scope.job)
    .bind(&call.scope.run)
    .bind(&call.scope.step)
    .bind(&call.scope.traceparent)
    .bind(&call.server)
    .bind(&call.tool)
    .bind(&call.arguments)
    .bind(&call.sent_arguments)
    .bind(failure.is_some())
    .bind(failure.map(|f| f.code.as_str().to_owned()))
    .bind(failure.map(|f| f.message.clone()))
    .bind(failure.and_then(|f| f.remediation.clone()))
    .bind(epoch_micros(call.started_at) as f64)
    .bind(micros(call.duration))
    .bind(whole)
    .execute(pool)
    .await
    .map(drop)
}

/// Which calls to read or sum up: every condition given must hold.
///
/// ```
/// use maljan_fleet::LedgerQuery;
/// let query = LedgerQuery { server: Some("sidecar".to_owned()), ..LedgerQuery::default() };
/// assert!(query.run.is_none());
/// ```
#[derive(Debug, Clone, Default)]
pub struct LedgerQuery {
    /// The run (the client's run id, which a fleet run's calls share with it).
    pub run: Option<String>,
    /// The job.
    pub job: Option<String>,
    /// The server.
    pub server: Option<String>,
    /// Calls started at or after.
    pub since: Option<SystemTime>,
    /// Calls started before.
    pub until: Option<SystemTime>,
}

const WHERE_QUERY: &str = "($1::text IS NULL OR run = $1 OR fleet_run = $1) \
     AND ($2::text IS NULL OR job = $2) AND ($3::text IS NULL OR server = $3) \
     AND ($4::float8 IS NULL OR started_at >= to_timestamp($4 / 1e6)) \
     AND ($5::float8 IS NULL OR started_at < to_timestamp($5 / 1e6))";

fn bind_query<'q>(
    statement: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    query: &'q LedgerQuery,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    statement
        .bind(&query.run)
        .bind(&query.job)
        .bind(&query.server)
        .bind(query.since.map(|t| epoch_micros(t) as f64))
        .bind(query.until.map(|t| epoch_micros(t) as f64))
}

/// The calls `query` names, oldest first, at most `limit`; rows that are not entries this
/// build can read are counted, not returned.
pub async fn ledger_entries(
    pool: &PgPool,
    query: &LedgerQuery,
    limit: u32,
) -> Result<(Vec<LedgerEntry>, usize), FleetError> {
    let rows = bind_query(
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT entry FROM maljan_ledger WHERE {WHERE_QUERY} ORDER BY id LIMIT $6"
        ))),
        query,
    )
    .bind(i64::from(limit))
    .fetch_all(pool)
    .await
    .map_err(|source| FleetError::Postgres {
        action: "reading the ledger",
        source,
    })?;
    let mut unreadable = 0;
    let mut entries = Vec::with_capacity(rows.len());
    for row in rows {
        match serde_json::from_value(row.get("entry")) {
            Ok(entry) => entries.push(entry),
            Err(_) => unreadable += 1,
        }
    }
    Ok((entries, unreadable))
}

/// Each distinct failure among the calls `query` names once, with its count, in the order
/// each first happened, computed by the database: messages and remediations that differ
/// only in a number are one failure, as [`maljan_ledger::failure_summary`] folds them.
pub async fn ledger_failures(
    pool: &PgPool,
    query: &LedgerQuery,
) -> Result<Vec<FailureGroup>, FleetError> {
    // The pattern is message_shape's: a run of digits, with a decimal point inside it.
    let rows = bind_query(
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT server, tool, error_code, \
                (array_agg(error_message ORDER BY id))[1] AS message, \
                (array_agg(remediation ORDER BY id))[1] AS remediation, count(*) AS n \
             FROM maljan_ledger WHERE failed AND {WHERE_QUERY} \
             GROUP BY server, tool, error_code, \
                regexp_replace(error_message, '[0-9]+(\\.[0-9]+)*', '#', 'g'), \
                regexp_replace(remediation, '[0-9]+(\\.[0-9]+)*', '#', 'g') \
             ORDER BY min(id)"
        ))),
        query,
    )
    .fetch_all(pool)
    .await
    .map_err(|source| FleetError::Postgres {
        action: "summing up the ledger's failures",
        source,
    })?;
    Ok(rows
        .iter()
        .map(|row| FailureGroup {
            server: row.get("server"),
            tool: row.get("tool"),
            code: ErrorCode::from(
                row.get::<Option<String>, _>("error_code")
                    .unwrap_or_default()
                    .as_str(),
            ),
            message: row.get::<Option<String>, _>("message").unwrap_or_default(),
            remediation: row.get("remediation"),
            count: u64::try_from(row.get::<i64, _>("n")).unwrap_or(0),
        })
        .collect())
}
