//! Protocol versions and their eras: the one list of what this client speaks.

use std::fmt;

/// How a protocol version holds a conversation.
///
/// ```
/// use maljan_mcp_proto::mcp::{Era, ProtocolVersion};
/// assert_eq!(ProtocolVersion::V2025_06_18.era(), Era::Session);
/// assert_eq!(ProtocolVersion::V2026_07_28.era(), Era::Stateless);
/// assert_eq!(Era::Stateless.to_string(), "stateless");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Era {
    /// A session, opened by `initialize` and `notifications/initialized`: the version is
    /// agreed once, for the session (2024-11-05 to 2025-11-25).
    Session,
    /// No session: every request carries the version and the client's capabilities in its
    /// `_meta`, and `server/discover` tells what a server speaks (2026-07-28).
    Stateless,
}

impl Era {
    /// `session` or `stateless`.
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Session => "session",
            Era::Stateless => "stateless",
        }
    }
}

impl fmt::Display for Era {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A protocol version this client speaks. [`ProtocolVersion::ALL`] is the one list of them.
///
/// In `initialize` the client offers the newest version of the session era and accepts any
/// version of that era in the server's answer ([`ProtocolVersion::parse_session`]); a
/// stateless version is agreed by `server/discover` instead.
///
/// ```
/// use maljan_mcp_proto::mcp::{Era, ProtocolVersion};
/// assert_eq!(ProtocolVersion::LATEST.as_str(), "2026-07-28");
/// assert_eq!(ProtocolVersion::newest_of(Era::Session).as_str(), "2025-11-25");
/// assert_eq!(ProtocolVersion::parse_session("2025-03-26").unwrap(), ProtocolVersion::V2025_03_26);
/// assert!(ProtocolVersion::parse_session("2026-07-28").is_err(), "no initialize in that era");
/// let refused = ProtocolVersion::parse_session("2023-01-01").unwrap_err();
/// assert!(refused.to_string().contains("2023-01-01"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ProtocolVersion {
    /// 2024-11-05.
    V2024_11_05,
    /// 2025-03-26: the only version with JSON-RPC batches.
    V2025_03_26,
    /// 2025-06-18.
    V2025_06_18,
    /// 2025-11-25: the last with a session.
    V2025_11_25,
    /// 2026-07-28: stateless (no `initialize`, no session, `_meta` on every request).
    V2026_07_28,
}

impl ProtocolVersion {
    /// Every version this client speaks, newest first.
    pub const ALL: [ProtocolVersion; 5] = [
        ProtocolVersion::V2026_07_28,
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_03_26,
        ProtocolVersion::V2024_11_05,
    ];
    /// The newest version this client speaks.
    pub const LATEST: ProtocolVersion = ProtocolVersion::ALL[0];

    /// The newest version of `era`: what the client offers or asks for in it.
    pub const fn newest_of(era: Era) -> ProtocolVersion {
        match era {
            Era::Session => ProtocolVersion::V2025_11_25,
            Era::Stateless => ProtocolVersion::V2026_07_28,
        }
    }

    /// The versions of `era`, newest first.
    pub fn of_era(era: Era) -> impl Iterator<Item = ProtocolVersion> {
        Self::ALL.into_iter().filter(move |v| v.era() == era)
    }

    /// How this version holds a conversation.
    pub const fn era(self) -> Era {
        match self {
            ProtocolVersion::V2026_07_28 => Era::Stateless,
            _ => Era::Session,
        }
    }

    /// The version's date string.
    pub const fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2024_11_05 => "2024-11-05",
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    /// The version `text` names, when this client speaks it.
    pub fn parse(text: &str) -> Option<ProtocolVersion> {
        Self::ALL.into_iter().find(|v| v.as_str() == text)
    }

    /// Reads the version a server chose in its `initialize` answer: a version of the session
    /// era this client speaks (a stateless one has no `initialize`), else refused.
    pub fn parse_session(text: &str) -> Result<ProtocolVersion, UnsupportedVersion> {
        Self::parse(text)
            .filter(|v| v.era() == Era::Session)
            .ok_or_else(|| UnsupportedVersion {
                chosen: text.to_owned(),
            })
    }

    /// Whether JSON-RPC batches are part of this version (2025-03-26 only).
    pub fn allows_batches(self) -> bool {
        self == ProtocolVersion::V2025_03_26
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The session-era versions, as a sentence: `2025-11-25, 2025-06-18, … and 2024-11-05`.
fn session_versions_in_words() -> String {
    let versions: Vec<&str> = ProtocolVersion::of_era(Era::Session)
        .map(ProtocolVersion::as_str)
        .collect();
    match versions.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// A server chose a protocol version this client does not speak.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnsupportedVersion {
    /// The version the server chose.
    pub chosen: String,
}

impl std::fmt::Display for UnsupportedVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the server chose protocol version {:?}, which this client does not speak (it \
             speaks {}); upgrade the server or the client",
            self.chosen,
            session_versions_in_words()
        )
    }
}

impl std::error::Error for UnsupportedVersion {}
