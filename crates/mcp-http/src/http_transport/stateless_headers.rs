//! The headers a 2026-07-28 request carries beside its body, read from its `_meta`.

use maljan_mcp_proto::mcp::{encode_header_value, meta_keys, methods};
use serde_json::Value;

/// The headers a modern-era POST carries beside its body: the version its `_meta` names,
/// the method, and the tool (or resource, or prompt) it names.
#[derive(Debug)]
pub(super) struct StatelessHeaders {
    pub(super) version: String,
    pub(super) method: String,
    pub(super) name: Option<String>,
}

impl StatelessHeaders {
    /// The headers of a request whose params name a protocol version in `_meta`; `None` for
    /// a legacy request.
    pub(super) fn of(method: &str, params: &Value) -> Option<StatelessHeaders> {
        let version = params
            .get("_meta")?
            .get(meta_keys::PROTOCOL_VERSION)?
            .as_str()?;
        let name = match method {
            methods::TOOLS_CALL | "prompts/get" => params.get("name"),
            "resources/read" => params.get("uri"),
            _ => None,
        }
        .and_then(Value::as_str)
        .map(encode_header_value);
        Some(StatelessHeaders {
            version: version.to_owned(),
            method: method.to_owned(),
            name,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_modern_request_names_its_version_method_and_tool() {
        let params =
            json!({"name": "file_info", "_meta": {meta_keys::PROTOCOL_VERSION: "2026-07-28"}});
        let headers = StatelessHeaders::of("tools/call", &params).expect("modern");
        assert_eq!(
            (headers.version.as_str(), headers.method.as_str()),
            ("2026-07-28", "tools/call")
        );
        assert_eq!(headers.name.as_deref(), Some("file_info"));
        let listing = StatelessHeaders::of(
            "tools/list",
            &json!({"_meta": {meta_keys::PROTOCOL_VERSION: "2026-07-28"}}),
        );
        assert!(listing.expect("modern").name.is_none());
        assert!(
            StatelessHeaders::of("tools/call", &json!({"name": "x"})).is_none(),
            "legacy"
        );
    }
}
