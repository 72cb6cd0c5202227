//! What can go wrong between a worker and the fleet's stores.

/// A fleet store could not be set up or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FleetError {
    /// The `[store]` settings are incomplete or wrong.
    #[error("the fleet's store settings: {detail}; {remedy}")]
    Settings {
        /// What is wrong.
        detail: String,
        /// What to do.
        remedy: String,
    },
    /// PostgreSQL refused or could not be reached.
    #[error(
        "PostgreSQL: {action} failed: {source}; check that the server is up and the [store] postgres URL"
    )]
    Postgres {
        /// What was being done.
        action: &'static str,
        /// sqlx's error (it never holds the password: the URL given has none).
        #[source]
        source: sqlx::Error,
    },
    /// A schema migration failed.
    #[error(
        "PostgreSQL: the schema migration failed: {0}; run `maljan store migrate` again once the cause is fixed"
    )]
    Migration(#[from] sqlx::migrate::MigrateError),
    /// The object store refused or could not be reached.
    #[error(
        "the object store: {action} {key} failed: {source}; check that it is up and the [store] objects settings"
    )]
    Objects {
        /// What was being done.
        action: &'static str,
        /// The object's key.
        key: String,
        /// object_store's error.
        #[source]
        source: object_store::Error,
    },
    /// A local file could not be read or written.
    #[error("{action} {path} failed: {source}")]
    File {
        /// What was being done.
        action: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// An object's bytes are not those its key names.
    #[error(
        "the object {key} holds bytes of sha256 {found}, not those its name says; it was not used (delete it from the store so the next upload replaces it)"
    )]
    DigestMismatch {
        /// The object's key.
        key: String,
        /// The sha256 of what was read.
        found: String,
    },
}

impl FleetError {
    /// Whether the settings are at fault (not the stores).
    pub fn is_settings(&self) -> bool {
        matches!(self, FleetError::Settings { .. })
    }

    /// Whether trying again later may succeed: the server was not reached, or it is
    /// restarting or shutting down (SQLSTATE classes 08 and 57P).
    pub fn is_transient(&self) -> bool {
        match self {
            FleetError::Postgres { source, .. } => sqlx_error_is_transient(source),
            FleetError::Objects { source, .. } => !matches!(
                source,
                object_store::Error::NotFound { .. }
                    | object_store::Error::InvalidPath { .. }
                    | object_store::Error::NotSupported { .. }
                    | object_store::Error::NotImplemented { .. }
            ),
            _ => false,
        }
    }
}

/// Whether sqlx's `error` may not happen again: the server was not reached, or it is
/// restarting or shutting down (SQLSTATE classes 08 and 57P).
pub(crate) fn sqlx_error_is_transient(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => true,
        sqlx::Error::Database(e) => e
            .code()
            .is_some_and(|code| code.starts_with("08") || code.starts_with("57P")),
        _ => false,
    }
}
