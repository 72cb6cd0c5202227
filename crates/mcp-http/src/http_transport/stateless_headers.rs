//! The headers a stateless-era request carries beside its body: its version (told by the
//! request, not read from its `_meta`), its method, and what it names.

use maljan_mcp_proto::mcp::{ProtocolVersion, encode_header_value, methods};
use serde_json::Value;

/// The headers a stateless-era POST carries beside its body: its version, the method, and
/// the tool (or resource, or prompt) it names.
#[derive(Debug)]
pub(super) struct StatelessHeaders {
    pub(super) version: String,
    pub(super) method: String,
    pub(super) name: Option<String>,
    /// The tool's parameters repeated in headers (`mcp-param-*`), named and written by
    /// the caller.
    pub(super) params: Vec<(String, String)>,
}

impl StatelessHeaders {
    /// The headers of a request in `version` of `method` with `params`.
    pub(super) fn of(version: ProtocolVersion, method: &str, params: &Value) -> StatelessHeaders {
        let name = match method {
            methods::TOOLS_CALL | "prompts/get" => params.get("name"),
            "resources/read" => params.get("uri"),
            _ => None,
        }
        .and_then(Value::as_str)
        .map(encode_header_value);
        StatelessHeaders {
            version: version.as_str().to_owned(),
            method: method.to_owned(),
            name,
            params: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use maljan_mcp_proto::mcp::Era;
    use serde_json::json;

    use super::*;

    #[test]
    fn a_stateless_request_names_its_version_method_and_tool() {
        let version = ProtocolVersion::newest_of(Era::Stateless);
        let headers = StatelessHeaders::of(version, "tools/call", &json!({"name": "file_info"}));
        assert_eq!(
            (headers.version.as_str(), headers.method.as_str()),
            ("2026-07-28", "tools/call")
        );
        assert_eq!(headers.name.as_deref(), Some("file_info"));
        let listing = StatelessHeaders::of(version, "tools/list", &json!({}));
        assert!(listing.name.is_none());
    }
}
