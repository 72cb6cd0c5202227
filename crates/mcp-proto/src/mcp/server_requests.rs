//! What a tool client answers the requests a server sends it: a defined answer for each,
//! never a hang.
//!
//! `ping` is answered `{}`. `elicitation/create` is answered by the client's
//! [`ElicitationPolicy`]: declined, or accepted with the defaults the requested schema
//! gives. `sampling/createMessage` is refused: an unattended client has no model to ask.
//! `roots/list` lists the [`ClientRoot`]s the client declared, and is refused when it
//! declared none. Anything else is "method not found".

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use crate::jsonrpc::{
    ErrorObject, ErrorResponse, Message, RawJson, Request, Response, error_codes,
};

use super::methods;

/// How a client answers `elicitation/create`, a server asking its user for input.
///
/// ```
/// use maljan_mcp_proto::mcp::ElicitationPolicy;
/// assert_eq!(ElicitationPolicy::default(), ElicitationPolicy::Decline);
/// assert_eq!("defaults".parse::<ElicitationPolicy>(), Ok(ElicitationPolicy::Defaults));
/// assert!("ask".parse::<ElicitationPolicy>().unwrap_err().contains("decline"));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ElicitationPolicy {
    /// Decline every request: nobody is there to answer (an unattended run).
    #[default]
    Decline,
    /// Accept a form request with the default value of each field its schema gives;
    /// decline one that needs a field without a default, and every URL request.
    Defaults,
}

impl ElicitationPolicy {
    /// `decline` or `defaults`.
    pub fn as_str(self) -> &'static str {
        match self {
            ElicitationPolicy::Decline => "decline",
            ElicitationPolicy::Defaults => "defaults",
        }
    }
}

impl std::str::FromStr for ElicitationPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "decline" => Ok(ElicitationPolicy::Decline),
            "defaults" => Ok(ElicitationPolicy::Defaults),
            other => Err(format!(
                "unknown elicitation policy {other:?}: use \"decline\" (answer no to every \
                 request) or \"defaults\" (accept with the schema's default values)"
            )),
        }
    }
}

/// A root the client shows a server through `roots/list`: a directory the server may work
/// in.
///
/// ```
/// use maljan_mcp_proto::mcp::ClientRoot;
/// let root = ClientRoot::directory(std::path::Path::new("/jobs/j1"), "job");
/// assert_eq!(root.uri, "file:///jobs/j1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRoot {
    /// A `file://` URI.
    pub uri: String,
    /// A name for display.
    pub name: String,
}

impl ClientRoot {
    /// The root of a local directory. Characters a URI path cannot hold as they are are
    /// percent-encoded.
    pub fn directory(path: &std::path::Path, name: impl Into<String>) -> Self {
        let mut uri = String::from("file://");
        for byte in path.to_string_lossy().bytes() {
            if byte.is_ascii_alphanumeric() || b"/-._~".contains(&byte) {
                uri.push(char::from(byte));
            } else {
                uri.push_str(&format!("%{byte:02X}"));
            }
        }
        ClientRoot {
            uri,
            name: name.into(),
        }
    }
}

/// What a client does with the requests a server sends it.
///
/// ```
/// use maljan_mcp_proto::jsonrpc::{Request, RequestId};
/// use maljan_mcp_proto::mcp::{ElicitationPolicy, ServerRequestPolicy};
/// let policy = ServerRequestPolicy::default().elicitation(ElicitationPolicy::Defaults);
/// assert!(policy.capabilities().contains_key("elicitation"));
/// assert!(!policy.capabilities().contains_key("roots"));
/// let ping = Request { id: RequestId::Integer(9), method: "ping".into(), params: None };
/// assert_eq!(policy.answer(ping).to_json(), r#"{"jsonrpc":"2.0","id":9,"result":{}}"#);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServerRequestPolicy {
    elicitation: ElicitationPolicy,
    roots: Option<Vec<ClientRoot>>,
}

impl ServerRequestPolicy {
    /// Answers `elicitation/create` by `policy`.
    pub fn elicitation(mut self, policy: ElicitationPolicy) -> Self {
        self.elicitation = policy;
        self
    }

    /// Declares the `roots` capability and answers `roots/list` with `roots`.
    pub fn roots(mut self, roots: Vec<ClientRoot>) -> Self {
        self.roots = Some(roots);
        self
    }

    /// The elicitation policy.
    pub fn elicitation_policy(&self) -> ElicitationPolicy {
        self.elicitation
    }

    /// The roots declared, if any.
    pub fn declared_roots(&self) -> Option<&[ClientRoot]> {
        self.roots.as_deref()
    }

    /// The client capabilities this policy declares: `elicitation` (form mode; a server
    /// that asks is answered, if only with a refusal) and `roots` when roots are set.
    /// Sampling is never declared.
    pub fn capabilities(&self) -> Map<String, Value> {
        let mut capabilities = Map::new();
        capabilities.insert("elicitation".to_owned(), json!({"form": {}}));
        if self.roots.is_some() {
            capabilities.insert("roots".to_owned(), json!({"listChanged": false}));
        }
        capabilities
    }

    /// The answer to a request from the server.
    pub fn answer(&self, request: Request) -> Message {
        let params = request
            .params
            .as_ref()
            .and_then(|p| serde_json::from_str::<Value>(p.get()).ok());
        match self.answer_input(&request.method, params.as_ref()) {
            Ok(result) => Message::Response(Response {
                id: request.id,
                result: RawJson::from(
                    serde_json::value::to_raw_value(&result)
                        .unwrap_or_else(|_| RawValue::from_string("{}".to_owned()).expect("JSON")),
                ),
            }),
            Err(error) => Message::Error(ErrorResponse {
                id: Some(request.id),
                error,
            }),
        }
    }

    /// The result this client gives for `method` with `params`, or why it gives none: the
    /// answer to a server's request in the legacy era, and to one of the `inputRequests` of
    /// a modern `input_required` result.
    ///
    /// ```
    /// use maljan_mcp_proto::mcp::ServerRequestPolicy;
    /// let policy = ServerRequestPolicy::default();
    /// let declined = policy.answer_input("elicitation/create", None).unwrap();
    /// assert_eq!(declined["action"], "decline");
    /// assert!(policy.answer_input("sampling/createMessage", None).is_err());
    /// ```
    pub fn answer_input(&self, method: &str, params: Option<&Value>) -> Result<Value, ErrorObject> {
        match method {
            methods::PING => Ok(json!({})),
            methods::ELICITATION_CREATE => Ok(self.elicit(params)),
            methods::ROOTS_LIST => match &self.roots {
                Some(roots) => Ok(json!({ "roots": roots })),
                None => Err(ErrorObject::new(
                    error_codes::METHOD_NOT_FOUND,
                    "this client declared no roots (roots/list)",
                )),
            },
            methods::SAMPLING_CREATE_MESSAGE => Err(ErrorObject::new(
                error_codes::METHOD_NOT_FOUND,
                "this client does not offer sampling (sampling/createMessage): it runs \
                 unattended, with no model to ask; do the work in the tool",
            )),
            other => Err(ErrorObject::new(
                error_codes::METHOD_NOT_FOUND,
                format!("this client does not serve {other}"),
            )),
        }
    }

    fn elicit(&self, params: Option<&Value>) -> Value {
        let decline = json!({"action": "decline"});
        if self.elicitation == ElicitationPolicy::Decline {
            return decline;
        }
        let Some(params) = params else {
            return decline;
        };
        if params.get("mode").and_then(Value::as_str).unwrap_or("form") != "form" {
            return decline;
        }
        match defaults_of(params.get("requestedSchema")) {
            Some(content) => json!({"action": "accept", "content": content}),
            None => decline,
        }
    }
}

/// The default value of every field of a requested schema; `None` when a required field
/// has none (or the schema is not an object of fields).
fn defaults_of(schema: Option<&Value>) -> Option<Map<String, Value>> {
    let schema = schema?.as_object()?;
    let properties = match schema.get("properties") {
        None => return Some(Map::new()),
        Some(p) => p.as_object()?,
    };
    let mut content = Map::new();
    for (name, field) in properties {
        if let Some(default) = field.get("default").filter(|d| is_field_value(d)) {
            content.insert(name.clone(), default.clone());
        }
    }
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    required
        .iter()
        .all(|name| name.as_str().is_some_and(|n| content.contains_key(n)))
        .then_some(content)
}

/// An elicitation field holds a string, a number, a boolean, or a list of strings.
fn is_field_value(value: &Value) -> bool {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => true,
        Value::Array(items) => items.iter().all(Value::is_string),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::RequestId;

    fn request(method: &str, params: Value) -> Request {
        Request {
            id: RequestId::Integer(4),
            method: method.to_owned(),
            params: Some(serde_json::value::to_raw_value(&params).unwrap()),
        }
    }

    fn result(message: Message) -> Value {
        match message {
            Message::Response(r) => serde_json::from_str(r.result.get()).unwrap(),
            other => panic!("not a result: {other:?}"),
        }
    }

    fn error_message(message: Message) -> String {
        match message {
            Message::Error(e) => e.error.message,
            other => panic!("not an error: {other:?}"),
        }
    }

    fn form(required: &[&str]) -> Value {
        json!({
            "message": "fill in",
            "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "default": "John Doe"},
                    "age": {"type": "integer", "default": 30},
                    "score": {"type": "number", "default": 95.5},
                    "verified": {"type": "boolean", "default": true},
                    "tags": {"type": "array", "default": ["a"]},
                    "note": {"type": "string"},
                    "odd": {"type": "object", "default": {"x": 1}}
                },
                "required": required
            }
        })
    }

    #[test]
    fn elicitation_is_declined_by_default() {
        let answer =
            ServerRequestPolicy::default().answer(request("elicitation/create", form(&[])));
        assert_eq!(result(answer), json!({"action": "decline"}));
    }

    #[test]
    fn the_defaults_policy_accepts_with_each_fields_default() {
        let policy = ServerRequestPolicy::default().elicitation(ElicitationPolicy::Defaults);
        let answer = policy.answer(request("elicitation/create", form(&["name"])));
        assert_eq!(
            result(answer),
            json!({"action": "accept", "content": {
                "name": "John Doe", "age": 30, "score": 95.5, "verified": true, "tags": ["a"]
            }})
        );
    }

    #[test]
    fn the_defaults_policy_declines_a_required_field_without_default_and_url_mode() {
        let policy = ServerRequestPolicy::default().elicitation(ElicitationPolicy::Defaults);
        let answer = policy.answer(request("elicitation/create", form(&["note"])));
        assert_eq!(result(answer), json!({"action": "decline"}));
        let url = json!({"mode": "url", "url": "https://example.invalid", "message": "go"});
        let answer = policy.answer(request("elicitation/create", url));
        assert_eq!(result(answer), json!({"action": "decline"}));
    }

    #[test]
    fn sampling_is_refused_with_why() {
        let answer = ServerRequestPolicy::default()
            .answer(request("sampling/createMessage", json!({"messages": []})));
        assert!(error_message(answer).contains("no model to ask"));
    }

    #[test]
    fn roots_are_listed_only_when_declared() {
        let none = ServerRequestPolicy::default();
        assert!(error_message(none.answer(request("roots/list", json!({})))).contains("no roots"));
        let root = ClientRoot::directory(std::path::Path::new("/jobs/a b"), "job");
        let policy = ServerRequestPolicy::default().roots(vec![root]);
        assert!(policy.capabilities().contains_key("roots"));
        assert_eq!(
            result(policy.answer(request("roots/list", json!({})))),
            json!({"roots": [{"uri": "file:///jobs/a%20b", "name": "job"}]})
        );
    }

    #[test]
    fn other_methods_are_not_found() {
        let answer = ServerRequestPolicy::default().answer(request("tasks/list", json!({})));
        assert!(error_message(answer).contains("tasks/list"));
    }

    proptest::proptest! {
        #[test]
        fn any_elicitation_gets_an_answer_to_its_id_with_only_asked_fields(
            names in proptest::collection::vec("[a-z]{1,4}", 0..6),
            defaults in proptest::collection::vec(
                proptest::prop_oneof![
                    proptest::strategy::Just(json!(1)),
                    proptest::strategy::Just(json!("x")),
                    proptest::strategy::Just(json!({"nested": true})),
                    proptest::strategy::Just(Value::Null),
                ],
                0..6,
            ),
            required in proptest::collection::vec("[a-z]{1,4}", 0..3),
            mode in proptest::prop_oneof![
                proptest::strategy::Just(json!("form")),
                proptest::strategy::Just(json!("url")),
                proptest::strategy::Just(json!(7)),
            ],
        ) {
            let properties: Map<String, Value> = names
                .iter()
                .zip(defaults.iter().chain(std::iter::repeat(&Value::Null)))
                .map(|(n, d)| (n.clone(), json!({"type": "string", "default": d})))
                .collect();
            let params = json!({"mode": mode, "message": "?",
                "requestedSchema": {"type": "object", "properties": properties, "required": required}});
            let policy = ServerRequestPolicy::default().elicitation(ElicitationPolicy::Defaults);
            let Message::Response(response) = policy.answer(request("elicitation/create", params)) else {
                panic!("elicitation is always answered with a result");
            };
            proptest::prop_assert_eq!(response.id, RequestId::Integer(4));
            let answer: Value = serde_json::from_str(response.result.get()).unwrap();
            if answer["action"] == "accept" {
                let content = answer["content"].as_object().unwrap();
                for (key, value) in content {
                    proptest::prop_assert!(properties.contains_key(key));
                    proptest::prop_assert!(is_field_value(value));
                }
                for name in &required {
                    proptest::prop_assert!(content.contains_key(name));
                }
            }
        }
    }
}
