//! A password or key read from the environment or a file, never shown.

use std::fmt;
use std::path::Path;

use crate::FleetError;

/// A secret: its `Debug` and `Display` show `<hidden>`, so it cannot reach a log, an error
/// message or a report by accident.
///
/// ```
/// use maljan_fleet::Secret;
/// let secret = Secret::new("hunter2");
/// assert_eq!(format!("{secret:?}"), "<hidden>");
/// assert_eq!(secret.expose(), "hunter2");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// A secret with this value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value of the environment variable `name`.
    pub fn from_env(name: &str) -> Result<Secret, FleetError> {
        match std::env::var(name) {
            Ok(value) if !value.is_empty() => Ok(Secret(value)),
            _ => Err(FleetError::Settings {
                detail: format!("the environment variable {name} is not set (or is empty)"),
                remedy: format!("export {name} with the secret before starting maljan"),
            }),
        }
    }

    /// The first line of the file at `path` (a trailing newline is not part of it).
    pub fn from_file(path: &Path) -> Result<Secret, FleetError> {
        let text = std::fs::read_to_string(path).map_err(|e| FleetError::Settings {
            detail: format!("the secret file {} cannot be read: {e}", path.display()),
            remedy: "name a readable file holding the secret on its first line".to_owned(),
        })?;
        let value = text.lines().next().unwrap_or_default();
        if value.is_empty() {
            return Err(FleetError::Settings {
                detail: format!("the secret file {} is empty", path.display()),
                remedy: "write the secret on the file's first line".to_owned(),
            });
        }
        Ok(Secret(value.to_owned()))
    }

    /// The value, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<hidden>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<hidden>")
    }
}
