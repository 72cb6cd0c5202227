//! Where the fleet's stores are: PostgreSQL and an object store.

use std::str::FromStr;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::prefix::PrefixStore;
use sqlx::postgres::PgConnectOptions;

use crate::{FleetError, Secret};

/// The PostgreSQL server of the fleet: a URL without its password, and the password
/// apart, so that the URL can be shown and the password never is.
///
/// ```
/// use maljan_fleet::{PostgresSettings, Secret};
/// let settings = PostgresSettings::new("postgres://maljan@db.internal:5432/maljan")?
///     .with_password(Secret::new("s3cret"));
/// assert_eq!(settings.url(), "postgres://maljan@db.internal:5432/maljan");
/// assert!(PostgresSettings::new("postgres://maljan:s3cret@db.internal/maljan").is_err());
/// # Ok::<(), maljan_fleet::FleetError>(())
/// ```
#[derive(Debug, Clone)]
pub struct PostgresSettings {
    url: String,
    options: PgConnectOptions,
    password: Option<Secret>,
}

impl PostgresSettings {
    /// The server at `url` (`postgres://user@host:port/database`). A URL that holds a
    /// password is refused: it would be shown wherever the URL is.
    pub fn new(url: &str) -> Result<PostgresSettings, FleetError> {
        let invalid = |detail: String| FleetError::Settings {
            detail,
            remedy: "write it as postgres://USER@HOST:PORT/DATABASE".to_owned(),
        };
        let parsed = url::Url::parse(url)
            .map_err(|e| invalid(format!("the postgres URL cannot be read: {e}")))?;
        if !matches!(parsed.scheme(), "postgres" | "postgresql") {
            return Err(invalid(format!(
                "the postgres URL's scheme is {:?}",
                parsed.scheme()
            )));
        }
        if parsed.password().is_some() {
            return Err(FleetError::Settings {
                detail: "the postgres URL holds a password, which would be shown wherever the URL is"
                    .to_owned(),
                remedy: "remove it from the URL and name it with postgres_password_env or postgres_password_file"
                    .to_owned(),
            });
        }
        let options = PgConnectOptions::from_str(url)
            .map_err(|e| invalid(format!("the postgres URL cannot be used: {e}")))?;
        Ok(PostgresSettings {
            url: url.to_owned(),
            options,
            password: None,
        })
    }

    /// The password to log in with.
    pub fn with_password(mut self, password: Secret) -> PostgresSettings {
        self.password = Some(password);
        self
    }

    /// The URL (it holds no password).
    pub fn url(&self) -> &str {
        &self.url
    }

    pub(crate) fn connect_options(&self) -> PgConnectOptions {
        let options = self.options.clone().application_name("maljan");
        match &self.password {
            Some(password) => options.password(password.expose()),
            None => options,
        }
    }
}

/// The object store of the fleet: `s3://BUCKET/PREFIX` (with an endpoint for a store other
/// than AWS, a region and credentials) or `file:///PATH` (a directory every worker mounts).
///
/// ```
/// use maljan_fleet::ObjectsSettings;
/// let here = ObjectsSettings::new("file:///srv/maljan-objects");
/// assert_eq!(here.url(), "file:///srv/maljan-objects");
/// ```
#[derive(Debug, Clone)]
pub struct ObjectsSettings {
    url: String,
    endpoint: Option<String>,
    region: Option<String>,
    access_key_id: Option<String>,
    secret_access_key: Option<Secret>,
}

impl ObjectsSettings {
    /// The store at `url`.
    pub fn new(url: impl Into<String>) -> ObjectsSettings {
        ObjectsSettings {
            url: url.into(),
            endpoint: None,
            region: None,
            access_key_id: None,
            secret_access_key: None,
        }
    }

    /// The S3 endpoint (`http://127.0.0.1:3900` for a local Garage); plain HTTP is allowed
    /// only when the endpoint says so.
    pub fn with_endpoint(mut self, endpoint: impl Into<String>) -> ObjectsSettings {
        self.endpoint = Some(endpoint.into());
        self
    }

    /// The S3 region.
    pub fn with_region(mut self, region: impl Into<String>) -> ObjectsSettings {
        self.region = Some(region.into());
        self
    }

    /// The access key's id and secret.
    pub fn with_credentials(
        mut self,
        access_key_id: impl Into<String>,
        secret_access_key: Secret,
    ) -> ObjectsSettings {
        self.access_key_id = Some(access_key_id.into());
        self.secret_access_key = Some(secret_access_key);
        self
    }

    /// The URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The store these settings name.
    pub(crate) fn open(&self) -> Result<Arc<dyn ObjectStore>, FleetError> {
        let invalid = |detail: String| FleetError::Settings {
            detail,
            remedy: "write objects as s3://BUCKET/PREFIX or file:///DIRECTORY".to_owned(),
        };
        let parsed = url::Url::parse(&self.url).map_err(|e| {
            invalid(format!(
                "the objects URL {:?} cannot be read: {e}",
                self.url
            ))
        })?;
        let prefix = parsed.path().trim_matches('/').to_owned();
        match parsed.scheme() {
            "file" => {
                let dir = parsed
                    .to_file_path()
                    .map_err(|()| invalid(format!("{} names no directory", self.url)))?;
                std::fs::create_dir_all(&dir).map_err(|source| FleetError::File {
                    action: "creating the objects directory",
                    path: dir.clone(),
                    source,
                })?;
                let store = LocalFileSystem::new_with_prefix(&dir).map_err(|source| {
                    FleetError::Objects {
                        action: "opening",
                        key: dir.display().to_string(),
                        source,
                    }
                })?;
                Ok(Arc::new(store))
            }
            "s3" => {
                let bucket = parsed
                    .host_str()
                    .filter(|b| !b.is_empty())
                    .ok_or_else(|| invalid(format!("{} names no bucket", self.url)))?;
                let mut builder = AmazonS3Builder::new().with_bucket_name(bucket);
                if let Some(endpoint) = &self.endpoint {
                    builder = builder
                        .with_endpoint(endpoint)
                        .with_allow_http(endpoint.starts_with("http://"));
                }
                if let Some(region) = &self.region {
                    builder = builder.with_region(region);
                }
                if let (Some(id), Some(secret)) = (&self.access_key_id, &self.secret_access_key) {
                    builder = builder
                        .with_access_key_id(id)
                        .with_secret_access_key(secret.expose());
                }
                let store = builder.build().map_err(|source| FleetError::Objects {
                    action: "opening",
                    key: self.url.clone(),
                    source,
                })?;
                if prefix.is_empty() {
                    Ok(Arc::new(store))
                } else {
                    Ok(Arc::new(PrefixStore::new(store, prefix.as_str())))
                }
            }
            other => Err(invalid(format!(
                "the objects URL's scheme {other:?} is not known"
            ))),
        }
    }
}

/// Both stores of a fleet.
#[derive(Debug, Clone)]
pub struct FleetSettings {
    /// The queue, the ledger and the index of runs.
    pub postgres: PostgresSettings,
    /// Samples, artefacts and reports.
    pub objects: ObjectsSettings,
}
