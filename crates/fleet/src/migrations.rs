//! The schema's versions, embedded in the build: each one applied once, in order, and
//! checked by its checksum afterwards (sqlx's migrator).

use std::borrow::Cow;

use sqlx::SqlSafeStr;
use sqlx::migrate::{Migration, MigrationType, Migrator};

/// Each version: its number, what it does, its SQL.
const VERSIONS: [(i64, &str, &str); 2] = [
    (
        1,
        "the queue of runs",
        include_str!("../migrations/0001_runs.sql"),
    ),
    (
        2,
        "the call ledger",
        include_str!("../migrations/0002_ledger.sql"),
    ),
];

/// The migrator of this build's schema.
pub(crate) fn migrator() -> Migrator {
    let migrations = VERSIONS
        .iter()
        .map(|&(version, description, sql)| {
            Migration::new(
                version,
                Cow::Borrowed(description),
                MigrationType::Simple,
                sql.into_sql_str(),
                false,
            )
        })
        .collect();
    let mut migrator = Migrator::with_migrations(migrations);
    // A newer worker may have applied versions this one does not know: it runs on the
    // part of the schema it knows.
    migrator.set_ignore_missing(true);
    migrator
}

/// The newest schema version this build knows.
pub const SCHEMA_VERSION: i64 = VERSIONS[VERSIONS.len() - 1].0;
