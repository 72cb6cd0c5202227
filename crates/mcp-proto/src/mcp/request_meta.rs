//! The `_meta` of a modern-era (2026-07-28) request: the keys every request carries (its
//! version, the client's capabilities, who the client is), and a request's params with them
//! added beside the keys it holds.

use serde_json::{Map, Value, json};

use super::{Implementation, meta_keys};

/// The `_meta` every modern-era request carries: the version, the client's capabilities
/// and who it is.
///
/// ```
/// use maljan_mcp_proto::mcp::{Implementation, stateless_meta};
/// let me = Implementation { name: "maljan".into(), version: "0.1.0".into(), title: None };
/// let meta = stateless_meta("2026-07-28", &Default::default(), &me);
/// assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
/// assert_eq!(meta["io.modelcontextprotocol/clientCapabilities"], serde_json::json!({}));
/// ```
pub fn stateless_meta(
    version: &str,
    capabilities: &Map<String, Value>,
    client_info: &Implementation,
) -> Map<String, Value> {
    let mut meta = Map::new();
    meta.insert(
        meta_keys::PROTOCOL_VERSION.to_owned(),
        Value::String(version.to_owned()),
    );
    meta.insert(
        meta_keys::CLIENT_CAPABILITIES.to_owned(),
        Value::Object(capabilities.clone()),
    );
    meta.insert(meta_keys::CLIENT_INFO.to_owned(), json!(client_info));
    meta
}

/// `params` with `meta`'s keys added to its `_meta`, beside the keys it holds (a call's
/// `traceparent` or `progressToken`); no params become an object holding `_meta` alone;
/// params that are not an object are left as they are, for the server to refuse.
///
/// ```
/// use maljan_mcp_proto::mcp::with_request_meta;
/// use serde_json::{Map, json};
/// let meta = Map::from_iter([("io.modelcontextprotocol/protocolVersion".to_owned(), json!("2026-07-28"))]);
/// let params = with_request_meta(Some(json!({"name": "t", "_meta": {"progressToken": 1}})), &meta);
/// assert_eq!(params["_meta"]["progressToken"], 1);
/// assert_eq!(params["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
/// assert_eq!(with_request_meta(None, &meta)["_meta"], json!(meta));
/// ```
pub fn with_request_meta(params: Option<Value>, meta: &Map<String, Value>) -> Value {
    let mut params = params.unwrap_or_else(|| Value::Object(Map::new()));
    if let Value::Object(fields) = &mut params {
        let own = fields
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if !own.is_object() {
            *own = Value::Object(Map::new());
        }
        if let Value::Object(own) = own {
            own.extend(meta.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
    }
    params
}
