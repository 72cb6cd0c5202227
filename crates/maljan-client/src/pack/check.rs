//! What a pack must be before anything runs: values that make sense, references to declared
//! steps and outputs, no cycle.

use std::collections::HashMap;
use std::time::Duration;

use maljan_mcp_proto::maljan::is_platform_primitive;

use super::reference;
use super::{Findings, MAX_STEP_TIMEOUT_S, Step, StepLines};

/// A per-step timeout: a number of seconds, more than 0 and at most a day.
pub(super) fn timeout(
    findings: &mut Findings<'_>,
    line: usize,
    value: &toml::Value,
) -> Option<Duration> {
    let seconds = match value {
        toml::Value::Integer(n) => *n as f64,
        toml::Value::Float(x) => *x,
        _ => f64::NAN,
    };
    if seconds.is_finite() && seconds > 0.0 && seconds <= MAX_STEP_TIMEOUT_S {
        return Some(Duration::from_secs_f64(seconds));
    }
    findings.at_line(
        line,
        format!("timeout_s = {value} is not a number of seconds above 0 and at most a day"),
        "write timeout_s = 30, say, or leave it out for the tool's own timeout",
    );
    None
}

/// Checks every step's values and references, fills in each step's dependencies, and
/// refuses cycles.
pub(super) fn steps(findings: &mut Findings<'_>, steps: &mut [Step], lines: &[StepLines]) {
    let mut first_line: HashMap<String, usize> = HashMap::new();
    for (step, lines) in steps.iter().zip(lines) {
        if !reference::is_step_id(&step.id) {
            findings.at_line(
                lines.id,
                format!("the step id {:?} is not usable", step.id),
                "use ASCII letters, digits, - and _ (other steps refer to it as $ID/NAME)",
            );
        } else if let Some(first) = first_line.get(&step.id) {
            findings.at_line(
                lines.id,
                format!(
                    "the step id {} is used twice (first at line {first})",
                    step.id
                ),
                "give every step its own id",
            );
        } else {
            first_line.insert(step.id.clone(), lines.id);
        }
        if step.server.trim().is_empty() {
            findings.at_line(
                lines.server,
                "the server is empty".to_owned(),
                "name a configured server",
            );
        }
        if step.tool.trim().is_empty() {
            findings.at_line(
                lines.tool,
                "the tool is empty".to_owned(),
                "name a tool of the server",
            );
        } else if is_platform_primitive(&step.tool) {
            findings.at_line(
                lines.tool,
                format!("step {} calls {}, a platform primitive", step.id, step.tool),
                "a pack calls analysis tools; files move between servers by themselves",
            );
        }
        if !step.arguments.is_object() {
            findings.at_line(
                lines.arguments,
                "the arguments are not a table".to_owned(),
                "write arguments = { name = value }",
            );
        }
        for pattern in &step.outputs {
            if let Err(message) = reference::name_matcher(pattern) {
                findings.at_line(
                    lines.outputs,
                    format!("output {message}"),
                    "declare outputs by file name or glob, such as \"payload.js\" or \"*.js\"",
                );
            }
        }
    }
    let declared: HashMap<String, Vec<String>> = steps
        .iter()
        .map(|s| (s.id.clone(), s.outputs.clone()))
        .collect();
    for (step, lines) in steps.iter_mut().zip(lines) {
        step.dependencies = references(findings, step, lines.arguments, &declared);
    }
    refuse_cycles(findings, steps);
}

/// Checks one step's references; returns the steps it depends on.
fn references(
    findings: &mut Findings<'_>,
    step: &Step,
    line: usize,
    declared: &HashMap<String, Vec<String>>,
) -> Vec<String> {
    let mut dependencies: Vec<String> = Vec::new();
    let mut fan_out = 0;
    for (output, fans_out) in step.compiled.outputs() {
        let text = &output.written;
        if fans_out {
            fan_out += 1;
        }
        let Some(outputs) = declared.get(&output.step) else {
            findings.at_line(
                line,
                format!(
                    "step {} refers to {text}, but no step has the id {}",
                    step.id, output.step
                ),
                "refer to the id of a step of this pack",
            );
            continue;
        };
        let covered = outputs.iter().any(|pattern| {
            pattern == "*"
                || pattern == &output.pattern
                || (!output.is_glob
                    && reference::name_matcher(pattern).is_ok_and(|m| m.is_match(&output.pattern)))
        });
        if !covered {
            findings.at_line(
                line,
                format!(
                    "step {} refers to {text}, which step {} does not declare among its outputs ({})",
                    step.id,
                    output.step,
                    if outputs.is_empty() { "none".to_owned() } else { outputs.join(", ") }
                ),
                format!("add {:?} to step {}'s outputs", output.pattern, output.step),
            );
        }
        if !dependencies.contains(&output.step) {
            dependencies.push(output.step.clone());
        }
    }
    if fan_out > 1 {
        findings.at_line(
            line,
            format!("step {} runs once per file of {fan_out} globs", step.id),
            "a step runs once per file of one glob; put the others inside a list, [\"$STEP/*\"], \
             to pass all their files at once",
        );
    }
    dependencies
}

/// Refuses every cycle of references, naming its steps.
fn refuse_cycles(findings: &mut Findings<'_>, steps: &[Step]) {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let index: HashMap<&str, usize> = steps
        .iter()
        .enumerate()
        .map(|(i, s)| (s.id.as_str(), i))
        .collect();
    let mut marks = vec![Mark::New; steps.len()];
    for start in 0..steps.len() {
        if marks[start] != Mark::New {
            continue;
        }
        // Depth first, without recursion: (step, next dependency to look at).
        let mut path: Vec<(usize, usize)> = vec![(start, 0)];
        marks[start] = Mark::Open;
        while let Some(&mut (at, ref mut next)) = path.last_mut() {
            let Some(dependency) = steps[at].dependencies.get(*next) else {
                marks[at] = Mark::Done;
                path.pop();
                continue;
            };
            *next += 1;
            let Some(&to) = index.get(dependency.as_str()) else {
                continue;
            };
            match marks[to] {
                Mark::New => {
                    marks[to] = Mark::Open;
                    path.push((to, 0));
                }
                Mark::Open => {
                    let from = path.iter().position(|&(s, _)| s == to).unwrap_or(0);
                    let mut cycle: Vec<&str> = path[from..]
                        .iter()
                        .map(|&(s, _)| steps[s].id.as_str())
                        .collect();
                    cycle.push(&steps[to].id);
                    findings.at_line(
                        steps[to].line,
                        format!(
                            "the steps refer to each other in a cycle: {}",
                            cycle.join(" -> ")
                        ),
                        "a step can refer only to files of steps that do not need its own",
                    );
                }
                Mark::Done => {}
            }
        }
    }
}
