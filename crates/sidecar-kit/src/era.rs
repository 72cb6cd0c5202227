//! The modern era (2026-07-28) as a kit server speaks it beside the legacy one: a request
//! is modern when its `_meta` names a protocol version; it must then carry every required
//! `_meta` key, for a version the kit speaks.

use maljan_mcp_proto::jsonrpc::{ErrorObject, error_codes};
use maljan_mcp_proto::mcp::{Era, ProtocolVersion, meta_keys, stateless_error_codes};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

/// The stateless version the kit speaks.
pub(crate) const STATELESS_VERSION: &str = ProtocolVersion::newest_of(Era::Stateless).as_str();

/// Every version the kit speaks, newest first.
pub(crate) fn supported() -> Vec<&'static str> {
    ProtocolVersion::ALL.map(ProtocolVersion::as_str).to_vec()
}
/// How long a client may keep `server/discover` and `tools/list` results: the tools of a
/// kit server do not change while it runs.
pub(crate) const TTL_MS: u64 = 5 * 60 * 1000;

fn refusal(code: i64, message: String, data: Option<Value>) -> ErrorObject {
    let mut error = ErrorObject::new(code, message);
    error.data = data.and_then(|d| serde_json::value::to_raw_value(&d).ok());
    error
}

/// A request's params, read for their `_meta` only.
#[derive(Deserialize)]
struct MetaOnly {
    #[serde(rename = "_meta", default)]
    meta: Option<Map<String, Value>>,
}

/// Reads the era of a request from its params' `_meta`. A request `modern` by nature
/// (`server/discover`, or one sent with the modern HTTP headers) needs the keys too.
pub(crate) fn request_era(params: Option<&RawValue>, modern: bool) -> Result<Era, ErrorObject> {
    // Params are read for `_meta` only when it is named in them, and then into `_meta`
    // alone. (A tool call's, which may be a multi-MiB file chunk, are not read here at all:
    // its `_meta` is checked with [`meta_era`] as the call is read.)
    let meta = params
        .filter(|p| memchr::memmem::find(p.get().as_bytes(), b"\"_meta\"").is_some())
        .and_then(|p| serde_json::from_str::<MetaOnly>(p.get()).ok())
        .and_then(|p| p.meta);
    meta_era(meta.as_ref(), modern)
}

/// The era of a request whose `_meta` is `meta`: modern when it names a protocol version,
/// which must then be ours, beside every other required key (and when `modern`, it must).
pub(crate) fn meta_era(
    meta: Option<&Map<String, Value>>,
    modern: bool,
) -> Result<Era, ErrorObject> {
    let version = meta.and_then(|m| m.get(meta_keys::PROTOCOL_VERSION));
    let Some(version) = version else {
        if modern {
            return Err(refusal(
                error_codes::INVALID_PARAMS,
                format!(
                    "a modern request (server/discover, or one with the Mcp-Method header) \
                     needs _meta[{:?}]",
                    meta_keys::PROTOCOL_VERSION
                ),
                None,
            ));
        }
        return Ok(Era::Session);
    };
    let version = version.as_str().unwrap_or_default();
    if version != STATELESS_VERSION {
        return Err(refusal(
            stateless_error_codes::UNSUPPORTED_PROTOCOL_VERSION,
            format!(
                "protocol version {version:?} is not spoken here: send {STATELESS_VERSION:?} (data.supported), or initialize for a version with a session"
            ),
            Some(json!({"supported": [STATELESS_VERSION], "requested": version})),
        ));
    }
    if !meta.is_some_and(|m| {
        m.get(meta_keys::CLIENT_CAPABILITIES)
            .is_some_and(Value::is_object)
    }) {
        return Err(refusal(
            error_codes::INVALID_PARAMS,
            format!(
                "a modern request needs _meta[{:?}] (an object)",
                meta_keys::CLIENT_CAPABILITIES
            ),
            None,
        ));
    }
    Ok(Era::Stateless)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(value: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&value).unwrap()
    }

    #[test]
    fn a_request_without_a_version_in_meta_is_legacy_except_discover() {
        let plain = params(json!({"name": "x"}));
        assert!(matches!(request_era(Some(&plain), false), Ok(Era::Session)));
        assert!(matches!(request_era(None, false), Ok(Era::Session)));
        let refused = request_era(None, true).unwrap_err();
        assert_eq!(refused.code, -32602);
    }

    #[test]
    fn a_modern_request_needs_every_required_key_and_our_version() {
        let full = params(json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}
        }}));
        assert!(matches!(
            request_era(Some(&full), false),
            Ok(Era::Stateless)
        ));
        let missing = params(json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"
        }}));
        assert_eq!(request_era(Some(&missing), false).unwrap_err().code, -32602);
        let other = params(json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2027-01-01",
            "io.modelcontextprotocol/clientCapabilities": {}
        }}));
        let refused = request_era(Some(&other), true).unwrap_err();
        assert_eq!(refused.code, -32022);
        assert!(refused.data.unwrap().get().contains("2026-07-28"));
    }

    proptest::proptest! {
        #[test]
        fn any_params_get_an_era_or_a_refusal_without_panicking(
            name in ".{0,40}",
            version in proptest::prop_oneof![
                proptest::strategy::Just("2026-07-28".to_owned()),
                ".{0,12}"
            ],
            capabilities in proptest::prop_oneof![
                proptest::strategy::Just(json!({})),
                proptest::strategy::Just(json!([])),
                proptest::strategy::Just(Value::Null),
            ],
            with_meta in proptest::prelude::any::<bool>(),
        ) {
            let mut value = json!({"name": name, "arguments": {"text": "\"_meta\""}});
            if with_meta {
                value["_meta"] = json!({
                    "io.modelcontextprotocol/protocolVersion": version,
                    "io.modelcontextprotocol/clientCapabilities": capabilities,
                });
            }
            let era = request_era(Some(&params(value)), false);
            if !with_meta {
                proptest::prop_assert!(matches!(era, Ok(Era::Session)));
            } else if let Ok(Era::Stateless) = era {
                proptest::prop_assert_eq!(version, "2026-07-28");
            }
        }
    }
}
