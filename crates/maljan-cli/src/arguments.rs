//! Tool arguments from the command line: `key=value` (a string), `key:=JSON`, or one JSON
//! object.

use serde_json::{Map, Value};

use crate::error::CliError;

/// Builds the argument object.
pub(crate) fn parse(pairs: &[String], json: Option<&str>) -> Result<Value, CliError> {
    let mut object = match json {
        None => Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(other) => {
                return Err(CliError::BadArgument {
                    argument: text.to_owned(),
                    detail: format!("--json takes a JSON object, not {other}"),
                });
            }
            Err(e) => {
                return Err(CliError::BadArgument {
                    argument: text.to_owned(),
                    detail: format!("--json is not valid JSON: {e}"),
                });
            }
        },
    };
    for pair in pairs {
        let (key, value) = if let Some((key, raw)) = pair.split_once(":=") {
            let value = serde_json::from_str(raw).map_err(|e| CliError::BadArgument {
                argument: pair.clone(),
                detail: format!("the value after := is not valid JSON: {e}"),
            })?;
            (key, value)
        } else if let Some((key, text)) = pair.split_once('=') {
            (key, Value::String(text.to_owned()))
        } else {
            return Err(CliError::BadArgument {
                argument: pair.clone(),
                detail: "write key=value for a string, or key:=JSON for any JSON value".to_owned(),
            });
        };
        if key.is_empty() {
            return Err(CliError::BadArgument {
                argument: pair.clone(),
                detail: "the key is empty".to_owned(),
            });
        }
        object.insert(key.to_owned(), value);
    }
    Ok(Value::Object(object))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pairs_and_json_combine() {
        let pairs = [
            "path=/tmp/a b".to_owned(),
            "limit:=5".to_owned(),
            "search=\"x\"".to_owned(),
        ];
        let value = parse(&pairs, Some(r#"{"min_length": 6}"#)).expect("parses");
        assert_eq!(
            value,
            json!({"path": "/tmp/a b", "limit": 5, "search": "\"x\"", "min_length": 6})
        );
    }

    #[test]
    fn a_pair_without_equals_is_refused_with_the_remedy() {
        let error = parse(&["path".to_owned()], None)
            .expect_err("refused")
            .to_string();
        assert!(error.contains("key=value"), "{error}");
        let error = parse(&[], Some("[1]")).expect_err("refused").to_string();
        assert!(error.contains("JSON object"), "{error}");
    }
}
