//! `[store]`: where a fleet's runs, ledger and files are, for `maljan submit`, `maljan
//! worker` and the commands that read them.

use std::path::PathBuf;

use maljan_fleet::{FleetError, FleetSettings, ObjectsSettings, PostgresSettings, Secret};
use serde::Deserialize;

/// The `[store]` table.
///
/// ```toml
/// [store]
/// postgres = "postgres://maljan@db.internal:5432/maljan"
/// postgres_password_env = "MALJAN_PG_PASSWORD"    # or postgres_password_file = "/run/secrets/pg"
/// objects = "s3://maljan/triage"                   # or "file:///srv/maljan-objects"
/// endpoint = "http://objects.internal:3900"        # an S3-compatible store other than AWS
/// region = "garage"
/// access_key_id = "GK31c2f218a2e44f485b94239e"
/// secret_access_key_env = "MALJAN_S3_SECRET"       # or secret_access_key_file
/// max_attempts = 3                                 # takes of a run before it is failed
/// lease_s = 30                                     # a worker's lease, renewed at a third of it
/// patience_s = 120                                 # how long a store out of reach is waited for
/// ```
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StoreSection {
    postgres: String,
    postgres_password_env: Option<String>,
    postgres_password_file: Option<PathBuf>,
    objects: String,
    endpoint: Option<String>,
    region: Option<String>,
    access_key_id: Option<String>,
    secret_access_key_env: Option<String>,
    secret_access_key_file: Option<PathBuf>,
    #[serde(default = "default_max_attempts")]
    pub(crate) max_attempts: u32,
    #[serde(default = "default_lease_s")]
    pub(crate) lease_s: f64,
    #[serde(default = "default_patience_s")]
    pub(crate) patience_s: f64,
}

fn default_patience_s() -> f64 {
    120.0
}

fn default_max_attempts() -> u32 {
    3
}

fn default_lease_s() -> f64 {
    30.0
}

fn secret(
    env: Option<&str>,
    file: Option<&PathBuf>,
    what: &str,
) -> Result<Option<Secret>, FleetError> {
    match (env, file) {
        (Some(_), Some(_)) => Err(FleetError::Settings {
            detail: format!("{what} is named both by an environment variable and by a file"),
            remedy: "keep one of the two".to_owned(),
        }),
        (Some(variable), None) => Secret::from_env(variable).map(Some),
        (None, Some(path)) => Secret::from_file(path).map(Some),
        (None, None) => Ok(None),
    }
}

impl StoreSection {
    /// The settings of both stores, with their secrets read.
    pub(crate) fn fleet_settings(&self) -> Result<FleetSettings, FleetError> {
        let mut postgres = PostgresSettings::new(&self.postgres)?;
        if let Some(password) = secret(
            self.postgres_password_env.as_deref(),
            self.postgres_password_file.as_ref(),
            "the PostgreSQL password",
        )? {
            postgres = postgres.with_password(password);
        }
        let mut objects = ObjectsSettings::new(&self.objects);
        if let Some(endpoint) = &self.endpoint {
            objects = objects.with_endpoint(endpoint);
        }
        if let Some(region) = &self.region {
            objects = objects.with_region(region);
        }
        let key = secret(
            self.secret_access_key_env.as_deref(),
            self.secret_access_key_file.as_ref(),
            "the object store's secret access key",
        )?;
        match (&self.access_key_id, key) {
            (Some(id), Some(key)) => objects = objects.with_credentials(id, key),
            (None, None) => {}
            _ => {
                return Err(FleetError::Settings {
                    detail: "the object store's access_key_id and secret go together".to_owned(),
                    remedy:
                        "name both (access_key_id and secret_access_key_env or _file), or neither"
                            .to_owned(),
                });
            }
        }
        if !(self.lease_s.is_finite() && self.lease_s >= 1.0) {
            return Err(FleetError::Settings {
                detail: format!(
                    "lease_s = {} is not a number of seconds of 1 or more",
                    self.lease_s
                ),
                remedy: "write a lease of a few seconds or more, such as 30".to_owned(),
            });
        }
        if !(self.patience_s.is_finite() && self.patience_s >= 0.0) {
            return Err(FleetError::Settings {
                detail: format!(
                    "patience_s = {} is not a number of seconds",
                    self.patience_s
                ),
                remedy: "write how long a store out of reach is waited for, such as 120".to_owned(),
            });
        }
        Ok(FleetSettings { postgres, objects })
    }
}
