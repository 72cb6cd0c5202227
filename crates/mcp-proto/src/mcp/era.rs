//! Telling a server's protocol era from its answer to `server/discover`, sans-IO.
//!
//! A dual-era client sends `server/discover` with the modern version first. The rules
//! (the MCP digest, §5 and §6): a `DiscoverResult`, or a recognized modern error, means the
//! server is modern and the client does not fall back; any other answer, an unrecognized
//! error or no answer at all (a timeout, an HTTP error without a modern body) means legacy:
//! the client sends `initialize`. No one error code decides.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::jsonrpc::{ErrorObject, Reply};

use super::{Era, Implementation, ProtocolVersion, meta_keys};

/// Whether `version` is a stateless version this client speaks.
fn ours_stateless(version: &str) -> bool {
    ProtocolVersion::parse(version).is_some_and(|v| v.era() == Era::Stateless)
}

/// The versions of `era` this client speaks, as a list for a message.
fn ours_in(era: Era) -> String {
    ProtocolVersion::of_era(era)
        .map(ProtocolVersion::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Modern-era error codes.
pub mod stateless_error_codes {
    /// A header does not match the body, or is missing (HTTP).
    pub const HEADER_MISMATCH: i64 = -32020;
    /// The request needs a client capability that was not declared.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// The protocol version is not supported; `data.supported` lists those that are.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// The `server/discover` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// Every version the server speaks.
    pub supported_versions: Vec<String>,
    /// The server's capabilities.
    #[serde(default)]
    pub capabilities: Map<String, Value>,
    /// How to use the server, for a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// How long the result may be cached, in milliseconds.
    pub ttl_ms: u64,
    /// Who may share a cached result: `public` or `private`.
    pub cache_scope: String,
    /// The result's metadata, where the server says who it is.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
}

impl DiscoverResult {
    /// Who the server says it is (`_meta["io.modelcontextprotocol/serverInfo"]`), when it
    /// says so in a readable form: for display only.
    ///
    /// ```
    /// use maljan_mcp_proto::mcp::DiscoverResult;
    /// let result: DiscoverResult = serde_json::from_value(serde_json::json!({
    ///     "supportedVersions": ["2026-07-28"], "ttlMs": 0, "cacheScope": "public",
    ///     "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "kit", "version": "1"}}
    /// })).unwrap();
    /// assert_eq!(result.server_info().unwrap().name, "kit");
    /// ```
    pub fn server_info(&self) -> Option<Implementation> {
        let info = self.meta.as_ref()?.get(meta_keys::SERVER_INFO)?;
        serde_json::from_value(info.clone()).ok()
    }
}

/// What the answer to `server/discover` says of the server's era.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum EraVerdict {
    /// Stateless, speaking a stateless version of ours: go on without `initialize`.
    Stateless(DiscoverResult),
    /// Stateless, but it refused the version offered and speaks this one of ours: ask
    /// again with it.
    RetryWith(String),
    /// A server with sessions (or a stateless one that also speaks a session version of
    /// ours and no stateless one): send `initialize`.
    Session,
    /// Stateless, and nothing this client can use: it speaks none of our versions, or it
    /// needs what this client does not declare.
    Unusable(NoCommonGround),
}

/// Why a stateless server is of no use to this client.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NoCommonGround {
    /// It speaks none of this client's versions.
    NoVersion {
        /// The versions it lists.
        server_speaks: Vec<String>,
    },
    /// It refused the version offered and lists none of this client's.
    VersionRefused {
        /// The versions it lists.
        server_speaks: Vec<String>,
        /// Its words.
        message: String,
    },
    /// It refused, twice, a version it lists as supported.
    ListedVersionRefused(String),
    /// It needs client capabilities this client does not declare.
    MissingCapabilities {
        /// Its words.
        message: String,
    },
}

impl fmt::Display for NoCommonGround {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NoCommonGround::NoVersion { server_speaks } => write!(
                f,
                "the server speaks {} and this client {} or {}",
                server_speaks.join(", "),
                ours_in(Era::Stateless),
                ours_in(Era::Session)
            ),
            NoCommonGround::VersionRefused {
                server_speaks,
                message,
            } => write!(
                f,
                "the server speaks {} only: {message}",
                server_speaks.join(", ")
            ),
            NoCommonGround::ListedVersionRefused(value) => write!(
                f,
                "the server refused version {value} twice, though it lists it as supported"
            ),
            NoCommonGround::MissingCapabilities { message } => write!(
                f,
                "the server needs client capabilities this client does not declare: {message}"
            ),
        }
    }
}

impl std::error::Error for NoCommonGround {}

/// Reads the answer to `server/discover`: `None` when there was none (a timeout, a lost
/// connection, an HTTP error whose body is not a JSON-RPC error).
///
/// ```
/// use maljan_mcp_proto::jsonrpc::{ErrorObject, Reply};
/// use maljan_mcp_proto::mcp::{EraVerdict, read_discover_answer};
/// assert_eq!(read_discover_answer(None), EraVerdict::Session);
/// let not_found = Reply::Error(ErrorObject::new(-32601, "method not found"));
/// assert_eq!(read_discover_answer(Some(&not_found)), EraVerdict::Session);
/// ```
pub fn read_discover_answer(answer: Option<&Reply>) -> EraVerdict {
    match answer {
        None => EraVerdict::Session,
        Some(Reply::Result(raw)) => match serde_json::from_str::<DiscoverResult>(raw.get()) {
            // Anything that is not a DiscoverResult (an empty result, say) is a legacy
            // server answering an unknown method loosely.
            Err(_) => EraVerdict::Session,
            Ok(result) => {
                if result.supported_versions.iter().any(|v| ours_stateless(v)) {
                    EraVerdict::Stateless(result)
                } else if speaks_legacy(&result.supported_versions) {
                    EraVerdict::Session
                } else {
                    EraVerdict::Unusable(NoCommonGround::NoVersion {
                        server_speaks: result.supported_versions,
                    })
                }
            }
        },
        Some(Reply::Error(error)) => read_discover_error(error),
    }
}

fn speaks_legacy(versions: &[String]) -> bool {
    versions
        .iter()
        .any(|v| ProtocolVersion::parse(v).is_some_and(|v| v.era() == Era::Session))
}

fn read_discover_error(error: &ErrorObject) -> EraVerdict {
    let data: Option<Value> = error
        .data
        .as_ref()
        .and_then(|d| serde_json::from_str(d.get()).ok());
    match error.code {
        stateless_error_codes::UNSUPPORTED_PROTOCOL_VERSION => {
            let supported: Vec<String> = data
                .as_ref()
                .and_then(|d| d.get("supported"))
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default();
            if supported.is_empty() {
                // Without the list the code is not recognizably modern.
                EraVerdict::Session
            } else if let Some(ours) = supported.iter().find(|v| ours_stateless(v)) {
                EraVerdict::RetryWith(ours.clone())
            } else if speaks_legacy(&supported) {
                EraVerdict::Session
            } else {
                EraVerdict::Unusable(NoCommonGround::VersionRefused {
                    server_speaks: supported,
                    message: error.message.clone(),
                })
            }
        }
        stateless_error_codes::MISSING_REQUIRED_CLIENT_CAPABILITY
            if data
                .as_ref()
                .is_some_and(|d| d.get("requiredCapabilities").is_some()) =>
        {
            EraVerdict::Unusable(NoCommonGround::MissingCapabilities {
                message: error.message.clone(),
            })
        }
        _ => EraVerdict::Session,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use serde_json::value::to_raw_value;

    fn result(value: Value) -> Reply {
        Reply::Result(to_raw_value(&value).unwrap().into())
    }

    fn error(code: i64, data: Option<Value>) -> Reply {
        let mut error = ErrorObject::new(code, "refused");
        error.data = data.map(|d| to_raw_value(&d).unwrap());
        Reply::Error(error)
    }

    fn discover(versions: &[&str]) -> Value {
        json!({"supportedVersions": versions, "capabilities": {"tools": {}},
               "ttlMs": 60000, "cacheScope": "public"})
    }

    #[test]
    fn a_discover_result_with_our_version_is_modern() {
        let verdict = read_discover_answer(Some(&result(discover(&["2026-07-28"]))));
        assert!(matches!(verdict, EraVerdict::Stateless(r) if r.ttl_ms == 60000));
    }

    #[test]
    fn a_dual_era_server_without_our_modern_version_is_spoken_to_in_legacy() {
        let verdict = read_discover_answer(Some(&result(discover(&["2027-01-01", "2025-11-25"]))));
        assert_eq!(verdict, EraVerdict::Session);
        let verdict = read_discover_answer(Some(&result(discover(&["2027-01-01"]))));
        assert_eq!(
            verdict,
            EraVerdict::Unusable(NoCommonGround::NoVersion {
                server_speaks: vec!["2027-01-01".to_owned()]
            })
        );
        let EraVerdict::Unusable(why) = verdict else {
            unreachable!()
        };
        assert!(
            why.to_string()
                .starts_with("the server speaks 2027-01-01 and this client")
        );
    }

    #[test]
    fn a_result_that_is_not_a_discover_result_is_legacy() {
        for loose in [
            json!({}),
            json!({"supportedVersions": "2026-07-28"}),
            json!([1]),
        ] {
            assert_eq!(
                read_discover_answer(Some(&result(loose))),
                EraVerdict::Session
            );
        }
    }

    #[test]
    fn unsupported_version_retries_with_one_of_ours_or_falls_back() {
        let ours = error(
            -32022,
            Some(json!({"supported": ["2026-07-28"], "requested": "x"})),
        );
        assert_eq!(
            read_discover_answer(Some(&ours)),
            EraVerdict::RetryWith("2026-07-28".to_owned())
        );
        let legacy = error(-32022, Some(json!({"supported": ["2025-06-18"]})));
        assert_eq!(read_discover_answer(Some(&legacy)), EraVerdict::Session);
        let none = error(-32022, Some(json!({"supported": ["2030-01-01"]})));
        assert!(matches!(
            read_discover_answer(Some(&none)),
            EraVerdict::Unusable { .. }
        ));
    }

    #[test]
    fn no_single_code_decides_without_its_modern_data() {
        // -32022 or -32021 without their data are some legacy server's own codes.
        assert_eq!(
            read_discover_answer(Some(&error(-32022, None))),
            EraVerdict::Session
        );
        assert_eq!(
            read_discover_answer(Some(&error(-32021, None))),
            EraVerdict::Session
        );
        let needs = error(
            -32021,
            Some(json!({"requiredCapabilities": {"sampling": {}}})),
        );
        assert!(matches!(
            read_discover_answer(Some(&needs)),
            EraVerdict::Unusable { .. }
        ));
        for code in [-32601, -32600, -32602, -32000, -32603, 1] {
            assert_eq!(
                read_discover_answer(Some(&error(code, None))),
                EraVerdict::Session
            );
        }
    }

    #[test]
    fn no_answer_is_legacy() {
        assert_eq!(read_discover_answer(None), EraVerdict::Session);
    }

    fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            prop_oneof![
                Just("2026-07-28".to_owned()),
                Just("2025-11-25".to_owned()),
                ".{0,12}"
            ]
            .prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 32, 6, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                proptest::collection::btree_map(
                    prop_oneof![
                        Just("supportedVersions".to_owned()),
                        Just("supported".to_owned()),
                        Just("ttlMs".to_owned()),
                        Just("cacheScope".to_owned()),
                        Just("requiredCapabilities".to_owned()),
                        "[a-z]{1,6}"
                    ],
                    inner,
                    0..6
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn any_answer_gets_a_verdict_and_modern_only_with_our_version(
            value in any_json(),
            code in proptest::prop_oneof![-32022i64..=-32020, proptest::prelude::any::<i64>()],
        ) {
            if let EraVerdict::Stateless(found) = read_discover_answer(Some(&result(value.clone()))) {
                proptest::prop_assert!(found.supported_versions.iter().any(|v| ours_stateless(v)));
            }
            let verdict = read_discover_answer(Some(&error(code, Some(value))));
            proptest::prop_assert!(!matches!(verdict, EraVerdict::Stateless(_)));
        }
    }
}
