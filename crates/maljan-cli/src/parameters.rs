//! A tool's parameters as its input schema declares them: names, the JSON types each takes,
//! whether it is required, its default and its description. The schema is the server's,
//! untrusted: anything it does not say plainly reads as "any type".

use serde_json::Value;

/// One parameter of a tool.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Parameter {
    pub(crate) name: String,
    /// The JSON types it takes (`string`, `integer`, `number`, `boolean`, `array`,
    /// `object`, `null`); empty when the schema does not say.
    pub(crate) types: Vec<String>,
    /// For an array, the types of its items; empty when the schema does not say.
    pub(crate) item_types: Vec<String>,
    pub(crate) required: bool,
    pub(crate) default: Option<Value>,
    pub(crate) description: Option<String>,
}

impl Parameter {
    /// Its types as written for a person: `integer`, `string | null`, `array of number`,
    /// `any`.
    pub(crate) fn type_words(&self) -> String {
        if self.types.is_empty() {
            return "any".to_owned();
        }
        self.types
            .iter()
            .map(|t| {
                if t == "array" && !self.item_types.is_empty() {
                    format!("array of {}", self.item_types.join(" | "))
                } else {
                    t.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(" | ")
    }
}

/// The parameters `schema` (a tool's `inputSchema`) declares, in its order, and whether it
/// refuses parameters it does not name (`additionalProperties: false`).
pub(crate) fn of(schema: &Value) -> (Vec<Parameter>, bool) {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let parameters = schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .map(|(name, property)| Parameter {
                    name: name.clone(),
                    types: types_of(property),
                    item_types: property.get("items").map(types_of).unwrap_or_default(),
                    required: required.contains(&name.as_str()),
                    default: property.get("default").cloned(),
                    description: property
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                })
                .collect()
        })
        .unwrap_or_default();
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    (parameters, closed)
}

/// The JSON types a property's schema takes: its `type` (one or a list), else the types of
/// its `anyOf` / `oneOf` alternatives, else those of its `enum` or `const` values.
fn types_of(property: &Value) -> Vec<String> {
    let mut types: Vec<String> = Vec::new();
    let mut add = |t: &str| {
        if !types.iter().any(|known| known == t) {
            types.push(t.to_owned());
        }
    };
    match property.get("type") {
        Some(Value::String(t)) => add(t),
        Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).for_each(&mut add),
        _ => {
            let alternatives = property
                .get("anyOf")
                .or_else(|| property.get("oneOf"))
                .and_then(Value::as_array);
            if let Some(alternatives) = alternatives {
                for alternative in alternatives {
                    if let Some(Value::String(t)) = alternative.get("type") {
                        add(t);
                    }
                }
            }
            let values = property
                .get("enum")
                .and_then(Value::as_array)
                .cloned()
                .or_else(|| property.get("const").map(|c| vec![c.clone()]));
            for value in values.unwrap_or_default() {
                add(json_type(&value));
            }
        }
    }
    types
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn types_come_from_type_lists_alternatives_and_enums() {
        let schema = json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "First"},
                "b": {"type": ["number", "null"], "default": 1.5},
                "c": {"anyOf": [{"type": "boolean"}, {"type": "string"}]},
                "d": {"enum": ["x", "y"]},
                "e": {"type": "array", "items": {"type": "number"}},
                "f": {}
            },
            "required": ["a"],
            "additionalProperties": false
        });
        let (parameters, closed) = of(&schema);
        assert!(closed);
        let words: Vec<String> = parameters.iter().map(Parameter::type_words).collect();
        assert_eq!(
            words,
            [
                "integer",
                "number | null",
                "boolean | string",
                "string",
                "array of number",
                "any"
            ]
        );
        assert!(parameters[0].required && !parameters[1].required);
        assert_eq!(parameters[1].default, Some(json!(1.5)));
        assert_eq!(parameters[0].description.as_deref(), Some("First"));
    }

    #[test]
    fn a_schema_that_says_nothing_plainly_has_no_parameters() {
        for schema in [json!(null), json!([]), json!({"properties": 3})] {
            assert_eq!(of(&schema), (Vec::new(), false));
        }
    }
}
