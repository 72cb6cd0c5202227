use std::fmt;

/// A protocol version this client speaks: the four of the legacy era (with `initialize`)
/// and [`ProtocolVersion::MODERN`], the stateless 2026-07-28.
///
/// In `initialize` the client offers [`ProtocolVersion::LATEST`] and accepts any of
/// [`ProtocolVersion::SUPPORTED`] in the server's answer; the modern version is agreed by
/// `server/discover` instead.
///
/// ```
/// use maljan_mcp_proto::mcp::ProtocolVersion;
/// assert_eq!(ProtocolVersion::LATEST.as_str(), "2025-11-25");
/// assert!(ProtocolVersion::MODERN.is_modern() && !ProtocolVersion::LATEST.is_modern());
/// assert_eq!(ProtocolVersion::parse("2025-03-26").unwrap(), ProtocolVersion::V2025_03_26);
/// let refused = ProtocolVersion::parse("2023-01-01").unwrap_err();
/// assert!(refused.to_string().contains("2023-01-01"));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProtocolVersion {
    /// 2024-11-05.
    V2024_11_05,
    /// 2025-03-26: the only version with JSON-RPC batches.
    V2025_03_26,
    /// 2025-06-18.
    V2025_06_18,
    /// 2025-11-25: the last of the legacy era.
    V2025_11_25,
    /// 2026-07-28: the modern era (no `initialize`, no session, `_meta` on every request).
    V2026_07_28,
}

impl ProtocolVersion {
    /// The modern era's version.
    pub const MODERN: ProtocolVersion = ProtocolVersion::V2026_07_28;
    /// The version the client offers in `initialize`.
    pub const LATEST: ProtocolVersion = ProtocolVersion::V2025_11_25;
    /// Every version the client accepts in an `initialize` answer, newest first.
    pub const SUPPORTED: [ProtocolVersion; 4] = [
        ProtocolVersion::V2025_11_25,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_03_26,
        ProtocolVersion::V2024_11_05,
    ];

    /// The version's date string.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2024_11_05 => "2024-11-05",
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    /// Reads the version a server chose in its `initialize` answer; a version this client
    /// does not speak there (the modern one included: it has no `initialize`) is refused.
    pub fn parse(text: &str) -> Result<ProtocolVersion, UnsupportedVersion> {
        Self::SUPPORTED
            .into_iter()
            .find(|v| v.as_str() == text)
            .ok_or_else(|| UnsupportedVersion {
                chosen: text.to_owned(),
            })
    }

    /// Whether this is the modern era's version.
    pub fn is_modern(self) -> bool {
        self == ProtocolVersion::V2026_07_28
    }

    /// `modern` or `legacy`, for display.
    pub fn era(self) -> &'static str {
        if self.is_modern() { "modern" } else { "legacy" }
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

/// A server chose a protocol version this client does not speak.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the server chose protocol version {chosen:?}, which this client does not speak \
     (it speaks 2025-11-25, 2025-06-18, 2025-03-26 and 2024-11-05); upgrade the server or \
     the client"
)]
pub struct UnsupportedVersion {
    /// The version the server chose.
    pub chosen: String,
}
