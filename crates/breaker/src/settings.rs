//! The breaker's and the cap's settings, as a configuration names them.

use std::fmt;
use std::time::Duration;

/// The breaker's and the cap's settings, under the keys `core.mcp.breaker.*`.
///
/// ```
/// use maljan_breaker::BreakerSettings;
/// let mut settings = BreakerSettings::default();
/// assert_eq!((settings.max_concurrent_calls, settings.unanswered_threshold, settings.rest_s), (4, 3, 60));
/// settings.set("core.mcp.breaker.rest_s", 5).unwrap();
/// assert_eq!(settings.rest(), std::time::Duration::from_secs(5));
/// assert!(settings.set("core.mcp.breaker.rest", 5).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Deserialize),
    serde(default, deny_unknown_fields)
)]
pub struct BreakerSettings {
    /// `core.mcp.breaker.max_concurrent_calls`: calls in flight per server (4).
    pub max_concurrent_calls: u32,
    /// `core.mcp.breaker.unanswered_threshold`: unanswered calls in a row before a rest (3).
    pub unanswered_threshold: u32,
    /// `core.mcp.breaker.rest_s`: how long a server rests, in seconds (60).
    pub rest_s: u64,
}

impl Default for BreakerSettings {
    fn default() -> Self {
        BreakerSettings {
            max_concurrent_calls: 4,
            unanswered_threshold: 3,
            rest_s: 60,
        }
    }
}

/// A key that is not one of the breaker's, or a value out of range.
///
/// Its `Display` is written out rather than derived so that the sans-IO core depends on no
/// crate at all.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SettingError {
    /// Not a breaker key.
    UnknownKey(String),
    /// Zero where at least one is needed.
    Zero(&'static str),
}

impl fmt::Display for SettingError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SettingError::UnknownKey(key) => write!(
                f,
                "{key:?} is not a breaker setting; the keys are \
                 core.mcp.breaker.max_concurrent_calls, core.mcp.breaker.unanswered_threshold \
                 and core.mcp.breaker.rest_s"
            ),
            SettingError::Zero(key) => write!(f, "{key} must be at least 1"),
        }
    }
}

impl std::error::Error for SettingError {}

impl BreakerSettings {
    /// The key of the concurrency cap.
    pub const MAX_CONCURRENT_CALLS: &'static str = "core.mcp.breaker.max_concurrent_calls";
    /// The key of the threshold.
    pub const UNANSWERED_THRESHOLD: &'static str = "core.mcp.breaker.unanswered_threshold";
    /// The key of the rest.
    pub const REST_S: &'static str = "core.mcp.breaker.rest_s";

    /// Sets one setting by its key.
    pub fn set(&mut self, key: &str, value: u64) -> Result<(), SettingError> {
        let at_least_one = |name| {
            u32::try_from(value)
                .ok()
                .filter(|v| *v >= 1)
                .ok_or(SettingError::Zero(name))
        };
        match key {
            Self::MAX_CONCURRENT_CALLS => {
                self.max_concurrent_calls = at_least_one(Self::MAX_CONCURRENT_CALLS)?
            }
            Self::UNANSWERED_THRESHOLD => {
                self.unanswered_threshold = at_least_one(Self::UNANSWERED_THRESHOLD)?
            }
            Self::REST_S => self.rest_s = value,
            other => return Err(SettingError::UnknownKey(other.to_owned())),
        }
        Ok(())
    }

    /// Checks the values (as read from a file).
    pub fn validate(&self) -> Result<(), SettingError> {
        if self.max_concurrent_calls == 0 {
            return Err(SettingError::Zero(Self::MAX_CONCURRENT_CALLS));
        }
        if self.unanswered_threshold == 0 {
            return Err(SettingError::Zero(Self::UNANSWERED_THRESHOLD));
        }
        Ok(())
    }

    /// The rest as a duration.
    pub fn rest(&self) -> Duration {
        Duration::from_secs(self.rest_s)
    }
}
