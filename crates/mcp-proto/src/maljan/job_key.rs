//! The job key: how a caller in the stateless 2026-07-28 era names its job on a kit server.
//!
//! That era has no sessions, so nothing on the wire ties two calls together. A caller that
//! wants its files kept between calls (a sample uploaded, then analysed) sends the same
//! unguessable key in every request's `_meta` under [`JOB_KEY_META`]; a kit server keeps
//! one job directory per key (and per bearer token, when there is one). A call without a
//! key works in a job of its own that ends with the call.

use std::fmt;

/// The `_meta` member that names the caller's job.
pub const JOB_KEY_META: &str = "io.maljan/jobKey";

/// The fewest characters a key may have: 32 hex digits are 128 bits.
pub const MIN_JOB_KEY_CHARS: usize = 32;
/// The most characters a key may have.
pub const MAX_JOB_KEY_CHARS: usize = 128;

/// A job key, as checked: [`MIN_JOB_KEY_CHARS`] to [`MAX_JOB_KEY_CHARS`] characters of
/// `A`–`Z`, `a`–`z`, `0`–`9`, `-` and `_` (base64url without padding, or hex).
///
/// ```
/// use maljan_mcp_proto::maljan::JobKey;
/// let key = JobKey::parse("3f1c9a7be0d24c5a8e6b1f0a2d4c6e8f").unwrap();
/// assert_eq!(key.as_str().len(), 32);
/// assert!(JobKey::parse("short").is_err());
/// assert!(JobKey::parse(&"x/".repeat(20)).is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct JobKey(String);

/// Why a job key was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobKeyError {
    /// Not a string.
    NotAString,
    /// Too short to be unguessable, or too long.
    Length(usize),
    /// A character outside base64url.
    Character,
}

impl fmt::Display for JobKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobKeyError::NotAString => write!(f, "_meta[{JOB_KEY_META:?}] must be a string"),
            JobKeyError::Length(value) => write!(
                f,
                "a job key has {MIN_JOB_KEY_CHARS} to {MAX_JOB_KEY_CHARS} characters, not {value}: make it from at least 16 random bytes"
            ),
            JobKeyError::Character => write!(f, "a job key is made of A-Z, a-z, 0-9, - and _ only"),
        }
    }
}

impl std::error::Error for JobKeyError {}

impl JobKey {
    /// Checks a key as written.
    pub fn parse(key: &str) -> Result<JobKey, JobKeyError> {
        if !(MIN_JOB_KEY_CHARS..=MAX_JOB_KEY_CHARS).contains(&key.len()) {
            return Err(JobKeyError::Length(key.chars().count()));
        }
        if !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(JobKeyError::Character);
        }
        Ok(JobKey(key.to_owned()))
    }

    /// A key made from 16 random bytes, in hex (32 characters, 128 bits).
    ///
    /// ```
    /// use maljan_mcp_proto::maljan::JobKey;
    /// let key = JobKey::from_random([7u8; 16]);
    /// assert_eq!(key.as_str(), "07".repeat(16));
    /// ```
    pub fn from_random(bytes: [u8; 16]) -> JobKey {
        JobKey(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    /// Reads the key a request's `_meta` names: `Ok(None)` when it names none.
    ///
    /// ```
    /// use maljan_mcp_proto::maljan::{JOB_KEY_META, JobKey};
    /// let meta = serde_json::json!({JOB_KEY_META: "a".repeat(40)});
    /// let key = JobKey::in_meta(meta.as_object()).unwrap().unwrap();
    /// assert_eq!(key.as_str(), "a".repeat(40));
    /// assert_eq!(JobKey::in_meta(None), Ok(None));
    /// ```
    pub fn in_meta(
        meta: Option<&serde_json::Map<String, serde_json::Value>>,
    ) -> Result<Option<JobKey>, JobKeyError> {
        match meta.and_then(|m| m.get(JOB_KEY_META)) {
            None => Ok(None),
            Some(serde_json::Value::String(key)) => JobKey::parse(key).map(Some),
            Some(_) => Err(JobKeyError::NotAString),
        }
    }

    /// The key as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Only its length shows: a key is as good as a password to its job.
impl fmt::Debug for JobKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobKey(<{} characters>)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_key_is_accepted_exactly_when_its_length_and_characters_fit(key in ".{0,140}") {
            let fits = (MIN_JOB_KEY_CHARS..=MAX_JOB_KEY_CHARS).contains(&key.len())
                && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
            prop_assert_eq!(JobKey::parse(&key).is_ok(), fits);
        }

        #[test]
        fn random_keys_are_always_accepted(bytes in any::<[u8; 16]>()) {
            let key = JobKey::from_random(bytes);
            prop_assert!(JobKey::parse(key.as_str()).is_ok());
        }
    }

    #[test]
    fn the_debug_form_hides_the_key() {
        let key = JobKey::parse(&"k".repeat(40)).unwrap();
        assert!(!format!("{key:?}").contains("kkkk"));
    }
}
