//! A modern result's `resultType`, and the `input_required` result of a multi-round-trip
//! request (MRTR): the server asks for input (an elicitation, `roots/list`…) in its result
//! instead of sending the client a request, and the client asks again with the answers.

use memchr::memmem;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::jsonrpc::RawJson;

/// What a result is, by its `resultType` (absent: complete).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ResultKind {
    /// The request's own result (`resultType` absent, null or `"complete"`).
    Complete,
    /// The server needs input first.
    InputRequired(InputRequired),
    /// Any other kind (`"task"`, for a client that declared the tasks extension), as written.
    Other(String),
}

impl ResultKind {
    /// The `resultType` as written.
    pub fn as_str(&self) -> &str {
        match self {
            ResultKind::Complete => "complete",
            ResultKind::InputRequired(_) => "input_required",
            ResultKind::Other(kind) => kind,
        }
    }
}

/// An `input_required` result: what the server asks, keyed, and the state to echo.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct InputRequired {
    /// Each request for input under the key its answer goes back under.
    #[serde(default)]
    pub input_requests: Map<String, Value>,
    /// The state to send back exactly, when the server gave one.
    #[serde(default)]
    pub request_state: Option<Value>,
}

/// One request for input: a method the client would otherwise have been sent, and its
/// params.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct InputRequest {
    /// `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub method: String,
    /// Its params.
    #[serde(default)]
    pub params: Option<Value>,
}

impl InputRequired {
    /// Each request for input, read; a malformed one is `Err` with the key.
    pub fn requests(&self) -> impl Iterator<Item = (&str, Result<InputRequest, String>)> {
        self.input_requests.iter().map(|(key, request)| {
            let read = InputRequest::deserialize(request)
                .map_err(|e| format!("input request {key:?} is malformed: {e}"));
            (key.as_str(), read)
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct KindOnly {
    #[serde(default)]
    result_type: Option<String>,
}

/// Reads what a result is. A result whose every `"resultType"` member says `"complete"`
/// (or that names none, a legacy one's) is complete without being parsed here: a tool's
/// answer may be megabytes, and is parsed once, as a tool result.
///
/// ```
/// use maljan_mcp_proto::mcp::{ResultKind, read_result_kind};
/// let raw = |s: &str| {
///     maljan_mcp_proto::jsonrpc::RawJson::from(
///         serde_json::value::RawValue::from_string(s.to_owned()).unwrap(),
///     )
/// };
/// assert_eq!(read_result_kind(&raw(r#"{"content":[]}"#)).unwrap(), ResultKind::Complete);
/// let asked = read_result_kind(&raw(
///     r#"{"resultType":"input_required","inputRequests":{"k":{"method":"roots/list"}}}"#,
/// ))
/// .unwrap();
/// assert!(matches!(asked, ResultKind::InputRequired(input) if input.input_requests.len() == 1));
/// ```
pub fn read_result_kind(result: &RawJson) -> Result<ResultKind, serde_json::Error> {
    if says_complete_wherever_typed(result.get().as_bytes()) {
        return Ok(ResultKind::Complete);
    }
    let kind: KindOnly = serde_json::from_str(result.get())?;
    Ok(match kind.result_type.as_deref() {
        None | Some("complete") => ResultKind::Complete,
        Some("input_required") => ResultKind::InputRequired(serde_json::from_str(result.get())?),
        Some(other) => ResultKind::Other(other.to_owned()),
    })
}

/// Whether every `"resultType"` in the JSON text is a member whose value is `"complete"`.
/// The result's own member, when it has one, is among them; one inside a string is escaped
/// (`\"resultType\"`) and never matches.
fn says_complete_wherever_typed(json: &[u8]) -> bool {
    const KEY: &[u8] = b"\"resultType\"";
    memmem::find_iter(json, KEY).all(|at| {
        let after = &json[at + KEY.len()..];
        let after = skip_whitespace(after);
        after.first() == Some(&b':') && skip_whitespace(&after[1..]).starts_with(b"\"complete\"")
    })
}

fn skip_whitespace(json: &[u8]) -> &[u8] {
    let start = json
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .unwrap_or(json.len());
    &json[start..]
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use serde_json::value::RawValue;

    use super::*;

    /// Results with or without a `resultType` (of any JSON type), and strings that say
    /// `"resultType"` inside content.
    fn any_result() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<i64>().prop_map(|n| json!(n)),
            prop_oneof![
                Just("complete".to_owned()),
                Just("input_required".to_owned()),
                Just("\"resultType\"".to_owned()),
                ".{0,8}"
            ]
            .prop_map(Value::String),
        ];
        let value = leaf.prop_recursive(2, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(
                    prop_oneof![Just("resultType".to_owned()), "[a-z]{1,6}"],
                    inner,
                    0..4
                )
                .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        });
        prop::collection::btree_map(
            prop_oneof![
                Just("resultType".to_owned()),
                Just("inputRequests".to_owned()),
                Just("content".to_owned()),
                "[a-z]{1,6}"
            ],
            value,
            0..5,
        )
        .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    proptest! {
        #[test]
        fn the_shortcut_tells_kinds_as_a_whole_parse_would(result in any_result()) {
            let text = result.to_string();
            let read = read_result_kind(&raw(&text));
            match result.get("resultType") {
                None | Some(Value::Null) => prop_assert_eq!(read.unwrap(), ResultKind::Complete),
                Some(Value::String(kind)) => match read {
                    Ok(kind_read) => prop_assert_eq!(kind_read.as_str(), kind.as_str()),
                    Err(_) => prop_assert_eq!(kind.as_str(), "input_required"),
                },
                Some(_) => prop_assert!(read.is_err()),
            }
        }
    }

    fn raw(s: &str) -> RawJson {
        RawJson::from(RawValue::from_string(s.to_owned()).unwrap())
    }

    #[test]
    fn complete_results_are_told_by_their_type_or_its_absence() {
        for text in [
            r#"{"content":[]}"#,
            r#"{"resultType":"complete","content":[]}"#,
            r#"{"content":[{"type":"text","text":"\"resultType\""}]}"#,
            r#"{"resultType" :  "complete","content":[]}"#,
            r#"{"content":[],"structuredContent":{"resultType":"complete"}}"#,
        ] {
            assert_eq!(read_result_kind(&raw(text)).unwrap(), ResultKind::Complete);
        }
    }

    #[test]
    fn input_required_keeps_its_requests_and_state() {
        let kind = read_result_kind(&raw(r#"{"resultType":"input_required","requestState":"s1",
                "inputRequests":{"a":{"method":"roots/list"},"b":{"params":{}}}}"#))
        .unwrap();
        let ResultKind::InputRequired(input) = kind else {
            panic!("input required");
        };
        assert_eq!(input.request_state, Some(Value::String("s1".into())));
        let read: Vec<_> = input.requests().collect();
        assert_eq!(read[0].1.as_ref().unwrap().method, "roots/list");
        assert!(read[1].1.as_ref().unwrap_err().contains("\"b\""));
    }

    #[test]
    fn a_nested_complete_does_not_hide_the_results_own_type() {
        let kind = read_result_kind(&raw(
            r#"{"structuredContent":{"resultType":"complete"},"resultType":"input_required",
                "inputRequests":{}}"#,
        ))
        .unwrap();
        assert!(matches!(kind, ResultKind::InputRequired(_)), "{kind:?}");
    }

    #[test]
    fn other_kinds_are_named_and_malformed_ones_refused() {
        assert_eq!(
            read_result_kind(&raw(r#"{"resultType":"task","task":{}}"#)).unwrap(),
            ResultKind::Other("task".into())
        );
        assert!(read_result_kind(&raw(r#"{"resultType":7}"#)).is_err());
        assert!(
            read_result_kind(&raw(
                r#"{"resultType":"input_required","inputRequests":[]}"#
            ))
            .is_err()
        );
    }
}
