//! A tool's parameters that an HTTP request repeats in headers (2026-07-28): a property of
//! its input schema annotated `"x-mcp-header": "Name"` is sent as `Mcp-Param-Name` beside
//! the body, so that a gateway can route on it without reading the body.

use std::fmt;

use serde_json::Value;

/// The annotation naming a parameter's header.
const ANNOTATION: &str = "x-mcp-header";
/// What each parameter header's name starts with.
const PREFIX: &str = "mcp-param-";

/// Why a tool's annotations are not usable: the tool is not to be called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidParamHeader {
    /// The annotated property.
    pub property: String,
    /// What is wrong with its annotation.
    pub why: &'static str,
}

impl fmt::Display for InvalidParamHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the {ANNOTATION} of parameter {:?} {}",
            crate::untrusted_text::escape_controls(&self.property),
            self.why
        )
    }
}

impl std::error::Error for InvalidParamHeader {}

/// The parameters of one tool that go in headers, each with its header's name.
///
/// ```
/// use maljan_mcp_proto::mcp::ParamHeaders;
/// use serde_json::json;
/// let schema = json!({"type": "object", "properties": {
///     "region": {"type": "string", "x-mcp-header": "Region"},
///     "query": {"type": "string"}}});
/// let headers = ParamHeaders::of_schema(&schema).unwrap();
/// assert!(!headers.is_empty());
/// let doubled = json!({"type": "object", "properties": {
///     "a": {"type": "string", "x-mcp-header": "Region"},
///     "b": {"type": "string", "x-mcp-header": "REGION"}}});
/// assert!(ParamHeaders::of_schema(&doubled).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParamHeaders {
    /// (property, header name in lower case), in the schema's order.
    params: Vec<(String, String)>,
}

/// Whether `byte` may be in a header's name (RFC 9110's `tchar`).
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

impl ParamHeaders {
    /// The annotated parameters of a tool's `input_schema`; an annotation that is not a
    /// non-empty header name, that names a header another parameter names too (in any
    /// case), or that is on a parameter which is not a string, an integer or a boolean (a
    /// number's text is not one value across languages) makes the whole tool unusable.
    pub fn of_schema(input_schema: &Value) -> Result<ParamHeaders, InvalidParamHeader> {
        let mut params: Vec<(String, String)> = Vec::new();
        let Some(properties) = input_schema.get("properties").and_then(Value::as_object) else {
            return Ok(ParamHeaders::default());
        };
        for (property, schema) in properties {
            let Some(annotation) = schema.get(ANNOTATION) else {
                continue;
            };
            let invalid = |why| InvalidParamHeader {
                property: property.clone(),
                why,
            };
            let name = annotation
                .as_str()
                .ok_or_else(|| invalid("is not a string"))?;
            if name.is_empty() {
                return Err(invalid("is empty"));
            }
            if !name.bytes().all(is_token_byte) {
                return Err(invalid(
                    "holds a character a header's name may not (a space, a colon, a control or non-ASCII character)",
                ));
            }
            let primitive = schema
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| matches!(t, "string" | "integer" | "boolean"));
            if !primitive {
                return Err(invalid(
                    "is on a parameter that is not a string, an integer or a boolean",
                ));
            }
            let header = format!("{PREFIX}{}", name.to_ascii_lowercase());
            if params.iter().any(|(_, h)| *h == header) {
                return Err(invalid("names a header another parameter names too"));
            }
            params.push((property.clone(), header));
        }
        Ok(ParamHeaders { params })
    }

    /// Whether no parameter goes in a header.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// The headers of a call with `arguments`: each annotated parameter given a string,
    /// integer or boolean, as the header carries it (a string wrapped in `=?base64?…?=`
    /// when it is not visible ASCII); one given `null`, or not given, is left out.
    ///
    /// ```
    /// use maljan_mcp_proto::mcp::ParamHeaders;
    /// use serde_json::json;
    /// let schema = json!({"type": "object", "properties": {
    ///     "region": {"type": "string", "x-mcp-header": "Region"},
    ///     "verbose": {"type": "boolean", "x-mcp-header": "Verbose"}}});
    /// let headers = ParamHeaders::of_schema(&schema).unwrap();
    /// let arguments = json!({"region": "eu west", "verbose": null});
    /// let sent = headers.for_arguments(arguments.as_object().unwrap());
    /// assert_eq!(sent, [("mcp-param-region".to_owned(), "eu west".to_owned())]);
    /// ```
    #[cfg(feature = "http-headers")]
    pub fn for_arguments(
        &self,
        arguments: &serde_json::Map<String, Value>,
    ) -> Vec<(String, String)> {
        self.params
            .iter()
            .filter_map(|(property, header)| {
                let value = match arguments.get(property)? {
                    Value::String(text) => super::encode_header_value(text),
                    Value::Bool(flag) => flag.to_string(),
                    Value::Number(number) => number.to_string(),
                    Value::Null | Value::Array(_) | Value::Object(_) => return None,
                };
                Some((header.clone(), value))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema_with(annotation: Value, kind: &str) -> Value {
        json!({"type": "object", "properties": {"p": {"type": kind, "x-mcp-header": annotation}}})
    }

    #[test]
    fn each_broken_annotation_makes_the_tool_unusable() {
        for (annotation, kind) in [
            (json!(""), "string"),
            (json!("Has Space"), "string"),
            (json!("Has:Colon"), "string"),
            (json!("Größe"), "string"),
            (json!("Ctl\u{1}"), "string"),
            (json!(7), "string"),
            (json!("Obj"), "object"),
            (json!("Arr"), "array"),
            (json!("Nul"), "null"),
            (json!("Num"), "number"),
        ] {
            let schema = schema_with(annotation.clone(), kind);
            assert!(
                ParamHeaders::of_schema(&schema).is_err(),
                "{annotation} on a {kind}"
            );
        }
        let fine = schema_with(json!("Region-1_x"), "integer");
        assert!(!ParamHeaders::of_schema(&fine).unwrap().is_empty());
        assert!(
            ParamHeaders::of_schema(&json!({"type": "object"}))
                .unwrap()
                .is_empty()
        );
    }

    #[cfg(feature = "http-headers")]
    #[test]
    fn values_are_written_as_a_header_carries_them() {
        let schema = json!({"type": "object", "properties": {
            "n": {"type": "integer", "x-mcp-header": "N"},
            "b": {"type": "boolean", "x-mcp-header": "B"},
            "s": {"type": "string", "x-mcp-header": "S"},
            "e": {"type": "string", "x-mcp-header": "E"},
            "plain": {"type": "string"}}});
        let headers = ParamHeaders::of_schema(&schema).unwrap();
        let arguments = json!({"n": 42, "b": false, "s": "line1\nline2", "e": "", "plain": "x"});
        let sent = headers.for_arguments(arguments.as_object().unwrap());
        let get = |name: &str| {
            sent.iter()
                .find(|(h, _)| h == name)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("mcp-param-n"), Some("42"));
        assert_eq!(get("mcp-param-b"), Some("false"));
        assert!(get("mcp-param-s").is_some_and(|v| v.starts_with("=?base64?")));
        assert_eq!(get("mcp-param-e"), Some(""));
        assert_eq!(sent.len(), 4, "the unannotated parameter stays in the body");
    }
}
