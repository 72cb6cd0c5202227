//! A step's arguments compiled once, when the pack is loaded: every string read as plain
//! text (`$$` already `$`), `$sample`, `$job` or files of an earlier step, and the glob the
//! step runs once per file of found. A run only fills the template in.

use serde_json::Value;

use super::reference::{self, BadReference, OutputReference, Reference};

/// A step's arguments, their references read.
#[derive(Debug, Clone)]
pub(crate) enum Template {
    /// A value with no reference in it, sent as it is.
    Literal(Value),
    /// The job's sample.
    Sample,
    /// The job's directory.
    Job,
    /// One file of an earlier step: the one named, this run's file of the glob the step
    /// runs once per file of, or the first file of another glob.
    Output(OutputReference),
    /// An element of a list that is a glob: every matching file, in the list's place.
    EveryOutput(OutputReference),
    /// A list.
    List(Vec<Template>),
    /// A table, its members in the order of the JSON object.
    Table(Vec<(String, Template)>),
}

/// The compiled arguments of a step.
#[derive(Debug, Clone)]
pub(crate) struct Compiled {
    /// The template.
    pub(crate) template: Template,
    /// The glob, given directly as a member's value, that the step runs once per file of;
    /// [`check`](super::check) refuses a step with two.
    pub(crate) fan_out: Option<OutputReference>,
}

impl Compiled {
    /// Every reference to an earlier step's files, each with whether the step runs once
    /// per file it matches, in the order written.
    pub(crate) fn outputs(&self) -> Vec<(&OutputReference, bool)> {
        let mut out = Vec::new();
        outputs_of(&self.template, &mut out);
        out
    }
}

fn outputs_of<'a>(template: &'a Template, out: &mut Vec<(&'a OutputReference, bool)>) {
    match template {
        Template::Output(reference) => out.push((reference, reference.is_glob)),
        Template::EveryOutput(reference) => out.push((reference, false)),
        Template::List(items) => items.iter().for_each(|item| outputs_of(item, out)),
        Template::Table(members) => members.iter().for_each(|(_, item)| outputs_of(item, out)),
        Template::Literal(_) | Template::Sample | Template::Job => {}
    }
}

/// Compiles `arguments`; each string that looks like a reference and is not one goes to
/// `bad` (and is then sent as written).
pub(crate) fn compile(arguments: &Value, bad: &mut impl FnMut(BadReference)) -> Compiled {
    let template = compile_value(arguments, false, bad);
    let mut outputs = Vec::new();
    outputs_of(&template, &mut outputs);
    let fan_out = outputs
        .into_iter()
        .find(|(_, fans_out)| *fans_out)
        .map(|(reference, _)| reference.clone());
    Compiled { template, fan_out }
}

fn compile_value(value: &Value, in_list: bool, bad: &mut impl FnMut(BadReference)) -> Template {
    match value {
        Value::String(text) => match reference::parse(text) {
            Ok(None) => Template::Literal(Value::String(reference::unescape(text).to_owned())),
            Err(refused) => {
                bad(refused);
                Template::Literal(value.clone())
            }
            Ok(Some(Reference::Sample)) => Template::Sample,
            Ok(Some(Reference::Job)) => Template::Job,
            Ok(Some(Reference::Output(output))) if in_list && output.is_glob => {
                Template::EveryOutput(output)
            }
            Ok(Some(Reference::Output(output))) => Template::Output(output),
        },
        Value::Array(items) => {
            let items: Vec<Template> = items
                .iter()
                .map(|item| compile_value(item, true, bad))
                .collect();
            literal_or(items, Template::List, |items| {
                Value::Array(items.into_iter().map(into_literal).collect())
            })
        }
        Value::Object(map) => {
            let members: Vec<(String, Template)> = map
                .iter()
                .map(|(key, item)| (key.clone(), compile_value(item, false, bad)))
                .collect();
            literal_or(members, Template::Table, |members| {
                Value::Object(
                    members
                        .into_iter()
                        .map(|(key, item)| (key, into_literal(item)))
                        .collect(),
                )
            })
        }
        other => Template::Literal(other.clone()),
    }
}

/// A list or table whose every part is literal, as one literal; else as `build` makes it.
fn literal_or<T: HasTemplate>(
    parts: Vec<T>,
    build: impl FnOnce(Vec<T>) -> Template,
    literal: impl FnOnce(Vec<T>) -> Value,
) -> Template {
    if parts
        .iter()
        .all(|part| matches!(part.template(), Template::Literal(_)))
    {
        Template::Literal(literal(parts))
    } else {
        build(parts)
    }
}

/// The parts of lists and tables.
trait HasTemplate {
    fn template(&self) -> &Template;
}

impl HasTemplate for Template {
    fn template(&self) -> &Template {
        self
    }
}

impl HasTemplate for (String, Template) {
    fn template(&self) -> &Template {
        &self.1
    }
}

fn into_literal(template: Template) -> Value {
    match template {
        Template::Literal(value) => value,
        _ => unreachable!("only literal parts are folded into a literal"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn compiled(arguments: Value) -> (Compiled, Vec<String>) {
        let mut refused = Vec::new();
        let compiled = compile(&arguments, &mut |bad| refused.push(bad.message));
        (compiled, refused)
    }

    #[test]
    fn arguments_without_references_are_one_literal_with_dollars_read() {
        let (compiled, refused) = compiled(json!({"a": ["$$x", 1], "b": {"c": true}}));
        assert!(refused.is_empty());
        let Template::Literal(value) = compiled.template else {
            panic!("{:?}", compiled.template);
        };
        assert_eq!(value, json!({"a": ["$x", 1], "b": {"c": true}}));
        assert!(compiled.fan_out.is_none());
    }

    #[test]
    fn a_glob_as_a_value_fans_out_and_a_glob_in_a_list_stands_for_every_file() {
        let (compiled, refused) = compiled(
            json!({"all": ["$u/*.txt"], "one": "$u/*.js", "named": "$u/a.bin", "s": "$sample"}),
        );
        assert!(refused.is_empty());
        assert_eq!(
            compiled.fan_out.as_ref().map(|f| f.written.as_str()),
            Some("$u/*.js")
        );
        let mut outputs: Vec<_> = compiled
            .outputs()
            .into_iter()
            .map(|(reference, fans)| (reference.written.clone(), fans))
            .collect();
        outputs.sort();
        assert_eq!(
            outputs,
            [
                ("$u/*.js".to_owned(), true),
                ("$u/*.txt".to_owned(), false),
                ("$u/a.bin".to_owned(), false),
            ]
        );
    }

    #[test]
    fn a_bad_reference_is_told_and_kept_as_written() {
        let (compiled, refused) = compiled(json!({"p": "$samples"}));
        assert_eq!(refused.len(), 1, "{refused:?}");
        let Template::Literal(value) = compiled.template else {
            panic!("{:?}", compiled.template);
        };
        assert_eq!(value, json!({"p": "$samples"}));
    }
}
