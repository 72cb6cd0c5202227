//! The era each HTTP origin was found to speak, so that a legacy server is not probed with
//! `server/discover` (and waited on) by every connection to it.

use std::collections::HashMap;
use std::sync::Mutex;

use maljan_mcp_proto::mcp::ProtocolVersion;

/// The protocol version each server origin (`scheme://host:port`) agreed on, shared by the
/// connections of a [`ConnectionContext`](crate::context::ConnectionContext).
///
/// ```
/// use maljan_client::KnownEras;
/// use maljan_mcp_proto::mcp::ProtocolVersion;
/// let known = KnownEras::default();
/// known.remember("http://127.0.0.1:8080", ProtocolVersion::V2025_06_18);
/// assert_eq!(known.get("http://127.0.0.1:8080"), Some(ProtocolVersion::V2025_06_18));
/// assert_eq!(known.get("http://127.0.0.1:9090"), None);
/// ```
#[derive(Debug, Default)]
pub struct KnownEras {
    by_origin: Mutex<HashMap<String, ProtocolVersion>>,
}

impl KnownEras {
    /// The version `origin` agreed on last, if any.
    pub fn get(&self, origin: &str) -> Option<ProtocolVersion> {
        self.by_origin
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(origin)
            .copied()
    }

    /// Remembers that `origin` agreed on `version`.
    pub fn remember(&self, origin: &str, version: ProtocolVersion) {
        self.by_origin
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(origin.to_owned(), version);
    }
}
