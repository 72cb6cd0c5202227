//! Tool arguments from the command line: `key=value` (typed by the tool's input schema),
//! `key=@FILE` (the file's text), `key:=JSON` (any JSON value, as written), or one JSON
//! object (`--args`).

use std::io::Read;
use std::path::Path;

use serde_json::{Map, Number, Value};

use crate::error::CliError;
use crate::parameters::{self, Parameter};

/// The most bytes `key=@FILE` reads: an argument is a message to a server, not a transfer.
pub(crate) const MAX_FILE_ARGUMENT_BYTES: u64 = 1024 * 1024;

/// The arguments as written, before the tool's schema types them.
#[derive(Debug, Clone, Default)]
pub(crate) struct WrittenArguments {
    base: Map<String, Value>,
    pairs: Vec<Pair>,
}

#[derive(Debug, Clone)]
struct Pair {
    /// The pair as written, to name it in an error.
    written: String,
    key: String,
    value: Written,
}

#[derive(Debug, Clone)]
enum Written {
    /// `key=text`: typed by the schema.
    Text(String),
    /// `key:=JSON`: sent as written.
    Json(Value),
}

impl WrittenArguments {
    /// Reads the pairs and the `--args` object; a file named by `key=@FILE` is read here.
    pub(crate) fn parse(pairs: &[String], object: Option<&str>) -> Result<Self, CliError> {
        let base = match object {
            None => Map::new(),
            Some(text) => match serde_json::from_str::<Value>(text) {
                Ok(Value::Object(map)) => map,
                Ok(other) => {
                    return Err(bad(
                        text,
                        format!("--args takes a JSON object, not {other}"),
                    ));
                }
                Err(e) => return Err(bad(text, format!("--args is not valid JSON: {e}"))),
            },
        };
        let pairs = pairs
            .iter()
            .map(|pair| read_pair(pair))
            .collect::<Result<_, _>>()?;
        Ok(WrittenArguments { base, pairs })
    }

    /// The object with every `key=text` a string: what a server without a schema gets.
    pub(crate) fn untyped(&self) -> Value {
        let mut object = self.base.clone();
        for pair in &self.pairs {
            let value = match &pair.value {
                Written::Text(text) => Value::String(text.clone()),
                Written::Json(value) => value.clone(),
            };
            object.insert(pair.key.clone(), value);
        }
        Value::Object(object)
    }

    /// The object with each `key=text` typed as `schema` (the tool's input schema) says
    /// of `key`; refused, naming the type, when the text is not one of them.
    pub(crate) fn typed(&self, tool: &str, schema: &Value) -> Result<Value, CliError> {
        let (declared, closed) = parameters::of(schema);
        let mut object = self.base.clone();
        for pair in &self.pairs {
            let parameter = declared.iter().find(|p| p.name == pair.key);
            if parameter.is_none() && closed {
                let names: Vec<&str> = declared.iter().map(|p| p.name.as_str()).collect();
                return Err(bad(
                    &pair.written,
                    format!(
                        "{tool} has no parameter {:?}; its parameters are: {}; see `maljan tools \
                         SERVER {tool}`",
                        pair.key,
                        names.join(", ")
                    ),
                ));
            }
            let value = match (&pair.value, parameter) {
                (Written::Json(value), _) => value.clone(),
                (Written::Text(text), None) => Value::String(text.clone()),
                (Written::Text(text), Some(parameter)) => typed_text(text, parameter)
                    .ok_or_else(|| bad(&pair.written, refusal(&pair.key, parameter)))?,
            };
            object.insert(pair.key.clone(), value);
        }
        Ok(Value::Object(object))
    }
}

fn bad(argument: &str, detail: String) -> CliError {
    CliError::BadArgument {
        argument: argument.to_owned(),
        detail,
    }
}

fn read_pair(pair: &str) -> Result<Pair, CliError> {
    let (key, value) = if let Some((key, raw)) = pair.split_once(":=") {
        let value = serde_json::from_str(raw)
            .map_err(|e| bad(pair, format!("the value after := is not valid JSON: {e}")))?;
        (key, Written::Json(value))
    } else if let Some((key, text)) = pair.split_once('=') {
        match text.strip_prefix('@') {
            Some(file) => (key, Written::Text(read_file_text(pair, Path::new(file))?)),
            None => (key, Written::Text(text.to_owned())),
        }
    } else {
        return Err(bad(
            pair,
            "write key=value (typed by the tool's schema), key=@FILE for a file's text, or \
             key:=JSON for any JSON value"
                .to_owned(),
        ));
    };
    if key.is_empty() {
        return Err(bad(pair, "the key is empty".to_owned()));
    }
    Ok(Pair {
        written: pair.to_owned(),
        key: key.to_owned(),
        value,
    })
}

fn read_file_text(pair: &str, path: &Path) -> Result<String, CliError> {
    let file = std::fs::File::open(path)
        .map_err(|e| bad(pair, format!("{} cannot be read: {e}", path.display())))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_ARGUMENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(pair, format!("{} cannot be read: {e}", path.display())))?;
    if bytes.len() as u64 > MAX_FILE_ARGUMENT_BYTES {
        return Err(bad(
            pair,
            format!(
                "{} is larger than {MAX_FILE_ARGUMENT_BYTES} bytes; pass its path instead \
                 (key=PATH) and let the server read it",
                path.display()
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        bad(
            pair,
            format!(
                "{} is not UTF-8 text; pass its path instead (key=PATH)",
                path.display()
            ),
        )
    })
}

/// `text` as the first of the parameter's types it reads as; any string when the
/// parameter takes strings or says nothing.
fn typed_text(text: &str, parameter: &Parameter) -> Option<Value> {
    if parameter.types.is_empty() || parameter.types.iter().any(|t| t == "string") {
        return Some(Value::String(text.to_owned()));
    }
    parameter.types.iter().find_map(|t| match t.as_str() {
        "array" => text
            .split(',')
            .filter(|item| !text.is_empty() || !item.is_empty())
            .map(|item| scalar(item.trim(), &parameter.item_types))
            .collect::<Option<Vec<_>>>()
            .map(Value::Array),
        other => scalar(text, &[other.to_owned()]),
    })
}

/// `text` as the first of `types` it reads as (a scalar: no arrays or objects).
fn scalar(text: &str, types: &[String]) -> Option<Value> {
    if types.is_empty() || types.iter().any(|t| t == "string") {
        return Some(Value::String(text.to_owned()));
    }
    types.iter().find_map(|t| match t.as_str() {
        "integer" => text
            .parse::<i64>()
            .map(Value::from)
            .or_else(|_| text.parse::<u64>().map(Value::from))
            .ok(),
        "number" => text.parse::<i64>().map(Value::from).ok().or_else(|| {
            text.parse::<f64>()
                .ok()
                .and_then(Number::from_f64)
                .map(Value::Number)
        }),
        "boolean" => match text {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ => None,
        },
        "null" => (text == "null").then_some(Value::Null),
        _ => None,
    })
}

/// Why `key`'s text was refused, and how to write it.
fn refusal(key: &str, parameter: &Parameter) -> String {
    let example = match parameter.types.first().map(String::as_str) {
        Some("integer") => format!("{key}=2"),
        Some("number") => format!("{key}=2.5"),
        Some("boolean") => format!("{key}=true"),
        Some("array") => format!("{key}=1,2,3"),
        Some("null") => format!("{key}=null"),
        _ => format!("{key}:='{{\"field\": 1}}'"),
    };
    format!(
        "the tool's schema says {key} is {}; write it as such ({example}), or any JSON value \
         with {key}:=JSON",
        parameter.type_words()
    )
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "number"},
                "flag": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "integer"}},
                "name": {"type": "string"},
                "maybe": {"type": ["integer", "null"]}
            }
        })
    }

    fn typed(pairs: &[&str]) -> Result<Value, String> {
        let pairs: Vec<String> = pairs.iter().map(|p| (*p).to_owned()).collect();
        WrittenArguments::parse(&pairs, None)
            .and_then(|written| written.typed("t", &schema()))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn text_is_typed_by_the_schema() {
        assert_eq!(
            typed(&[
                "a=2",
                "b=3",
                "flag=true",
                "tags=1, 2,3",
                "name=42",
                "maybe=null",
                "x=7"
            ])
            .expect("typed"),
            json!({"a": 2, "b": 3, "flag": true, "tags": [1, 2, 3], "name": "42",
                   "maybe": null, "x": "7"})
        );
        assert_eq!(
            typed(&["b=2.5", "tags="]).expect("typed"),
            json!({"b": 2.5, "tags": []})
        );
    }

    #[test]
    fn text_of_the_wrong_type_is_refused_naming_the_type_and_the_remedy() {
        let error = typed(&["a=two"]).expect_err("refused");
        assert!(
            error.contains("a is integer") && error.contains("a:=JSON"),
            "{error}"
        );
        let error = typed(&["tags=1,x"]).expect_err("refused");
        assert!(error.contains("array of integer"), "{error}");
        assert!(typed(&["b=NaN"]).is_err(), "NaN is no JSON number");
    }

    #[test]
    fn json_pairs_and_the_object_are_sent_as_written() {
        let pairs = ["a:=\"two\"".to_owned(), "name:=5".to_owned()];
        let written = WrittenArguments::parse(&pairs, Some(r#"{"flag": "yes"}"#)).expect("parses");
        assert_eq!(
            written.typed("t", &schema()).expect("typed"),
            json!({"a": "two", "name": 5, "flag": "yes"})
        );
    }

    #[test]
    fn a_closed_schema_refuses_an_unknown_key_listing_the_known_ones() {
        let schema = json!({"properties": {"path": {"type": "string"}},
                            "additionalProperties": false});
        let written = WrittenArguments::parse(&["paht=/x".to_owned()], None).expect("parses");
        let error = written
            .typed("read", &schema)
            .expect_err("refused")
            .to_string();
        assert!(
            error.contains("no parameter \"paht\"") && error.contains("path"),
            "{error}"
        );
    }

    #[test]
    fn a_file_argument_is_its_text_and_bounded() {
        let dir = tempfile::tempdir().expect("dir");
        let small = dir.path().join("note.txt");
        std::fs::write(&small, "hello\n").expect("write");
        let pair = format!("name=@{}", small.display());
        let written = WrittenArguments::parse(&[pair], None).expect("parses");
        assert_eq!(written.untyped(), json!({"name": "hello\n"}));

        let large = dir.path().join("large.txt");
        std::fs::write(&large, vec![b'a'; MAX_FILE_ARGUMENT_BYTES as usize + 1]).expect("write");
        let error = WrittenArguments::parse(&[format!("name=@{}", large.display())], None)
            .expect_err("refused")
            .to_string();
        assert!(error.contains("pass its path instead"), "{error}");
        let missing = WrittenArguments::parse(&["name=@/no/such/file".to_owned()], None)
            .expect_err("refused")
            .to_string();
        assert!(missing.contains("/no/such/file"), "{missing}");
    }

    #[test]
    fn a_pair_without_equals_is_refused_with_the_remedy() {
        let error = WrittenArguments::parse(&["path".to_owned()], None)
            .expect_err("refused")
            .to_string();
        assert!(error.contains("key=value"), "{error}");
        let error = WrittenArguments::parse(&[], Some("[1]"))
            .expect_err("refused")
            .to_string();
        assert!(error.contains("JSON object"), "{error}");
    }

    proptest! {
        /// Whatever a server's schema and a user's text, typing ends with a value or a
        /// refusal, and a typed value is one of the declared types.
        #[test]
        fn typing_never_panics_and_keeps_to_the_declared_types(
            text in ".{0,40}",
            types in proptest::collection::vec(
                prop_oneof![Just("integer"), Just("number"), Just("boolean"), Just("null"),
                            Just("array"), Just("object"), Just("bogus")],
                0..3,
            ),
        ) {
            let parameter = Parameter {
                name: "k".to_owned(),
                types: types.iter().map(|t| (*t).to_owned()).collect(),
                item_types: vec!["integer".to_owned()],
                required: false,
                default: None,
                description: None,
            };
            if let Some(value) = typed_text(&text, &parameter) {
                let kind = match &value {
                    Value::Null => "null",
                    Value::Bool(_) => "boolean",
                    Value::Number(n) if n.is_f64() => "number",
                    Value::Number(_) => "integer",
                    Value::String(_) => "string",
                    Value::Array(_) => "array",
                    Value::Object(_) => "object",
                };
                let declared = parameter.types.is_empty()
                    || parameter.types.iter().any(|t| t == kind)
                    || (kind == "integer" && parameter.types.iter().any(|t| t == "number"));
                prop_assert!(declared, "{value} is not one of {types:?}");
            }
        }
    }
}
