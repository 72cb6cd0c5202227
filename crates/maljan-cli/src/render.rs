//! Human text for the server card, the tool list, an answer and a run.

use std::fmt::Write;

use maljan_client::{
    DistinctFailure, Job, ReportBuilder, ServerCard, ServerRecord, StepOutcome, StepStatus,
    TakenFile,
};
use maljan_mcp_proto::maljan::{Outcome, ToolAnswer};
use maljan_mcp_proto::mcp::Tool;
use maljan_staging::{Disclosed, DisclosureOutcome, UploadMode};

use serde_json::Value;

use crate::parameters::{self, Parameter};

pub(crate) fn card(card: &ServerCard) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "server {}: {} {} (protocol {}, {} era, over {})",
        card.server,
        card.server_info.name,
        card.server_info.version,
        card.protocol_version,
        card.era,
        card.transport
    );
    let width = card.tools.iter().map(|t| t.name.len()).max().unwrap_or(0);
    let _ = writeln!(out, "tools ({}):", card.tools.len());
    for tool in &card.tools {
        let marker = if tool.available { "" } else { " [unavailable]" };
        let description = tool.description.as_deref().unwrap_or("");
        let _ = writeln!(out, "  {:width$}  {description}{marker}", tool.name);
    }
    if !card.unavailable.is_empty() {
        let _ = writeln!(out, "unavailable here ({}):", card.unavailable.len());
        for tool in &card.unavailable {
            let _ = writeln!(out, "  {}: {}", tool.name, tool.reason);
            if let Some(remediation) = &tool.remediation {
                let _ = writeln!(out, "    remediation: {remediation}");
            }
            if let Some(without) = &tool.without {
                let _ = writeln!(out, "    without it: no {without}");
            }
        }
    }
    if let Some(error) = &card.manifest_error {
        let _ = writeln!(out, "manifest: could not be read: {error}");
    }
    if !card.primitives.is_empty() {
        let _ = writeln!(out, "platform primitives: {}", card.primitives.join(", "));
    }
    match card.transport {
        "stdio" => {
            let _ = writeln!(out, "stdout: {}", card.stdout);
        }
        other => {
            let c = &card.stdout;
            let _ = writeln!(
                out,
                "{other} replies: {} messages, {} invalid, {} oversized",
                c.messages, c.invalid, c.oversized
            );
        }
    }
    out
}

/// Each tool with its description, then each parameter: its type, whether it is
/// required, its default and its description.
pub(crate) fn tools(tools: &[&Tool]) -> String {
    let mut out = String::new();
    for tool in tools {
        match tool.description.as_deref().map(str::trim) {
            Some(description) if !description.is_empty() => {
                let _ = writeln!(out, "{}  {}", tool.name, first_line(description));
            }
            _ => {
                let _ = writeln!(out, "{}", tool.name);
            }
        }
        let (declared, _) = parameters::of(&tool.input_schema);
        let width = declared.iter().map(|p| p.name.len()).max().unwrap_or(0);
        let types: Vec<String> = declared.iter().map(parameter_words).collect();
        let type_width = types.iter().map(String::len).max().unwrap_or(0);
        for (parameter, types) in declared.iter().zip(&types) {
            let description = parameter.description.as_deref().map(first_line);
            let _ = writeln!(
                out,
                "    {:width$}  {:type_width$}  {}",
                parameter.name,
                types,
                description.unwrap_or("")
            );
        }
    }
    out
}

/// A parameter's type, `required` and default, as one phrase.
fn parameter_words(parameter: &Parameter) -> String {
    let mut words = parameter.type_words();
    if parameter.required {
        words.push_str(", required");
    }
    if let Some(default) = &parameter.default {
        let default = default.to_string();
        match default.char_indices().nth(MAX_DEFAULT_CHARS) {
            Some((cut, _)) => {
                let _ = write!(words, ", default {}…", &default[..cut]);
            }
            None => {
                let _ = write!(words, ", default {default}");
            }
        }
    }
    words
}

/// The most characters of a default value shown in the tool list (a server's defaults may
/// be whole URLs or documents).
const MAX_DEFAULT_CHARS: usize = 32;

fn first_line(text: &str) -> &str {
    text.trim().lines().next().unwrap_or("")
}

/// An answer: its text as text, content blocks one by one (images, audio and resources
/// named with their type and size, not their bytes), anything structured as readable JSON.
pub(crate) fn answer(answer: &ToolAnswer) -> String {
    let value = match &answer.value {
        Value::String(text) => text.trim_end().to_owned(),
        Value::Array(blocks) if blocks.iter().all(is_content_block) => blocks
            .iter()
            .map(content_block)
            .collect::<Vec<_>>()
            .join("\n"),
        structured => serde_json::to_string_pretty(structured).unwrap_or_default(),
    };
    match &answer.outcome {
        Outcome::Ok => format!("ok\n{value}\n"),
        Outcome::Failed(f) => {
            let mut out = format!("failed: {}: {}\n", f.code, f.message);
            if let Some(remediation) = &f.remediation {
                let _ = writeln!(out, "remediation: {remediation}");
            }
            out
        }
    }
}

fn is_content_block(value: &Value) -> bool {
    value.get("type").and_then(Value::as_str).is_some()
}

/// One content block as a person reads it.
fn content_block(block: &Value) -> String {
    let field = |name: &str| block.get(name).and_then(Value::as_str).unwrap_or("");
    match field("type") {
        "text" => field("text").trim_end().to_owned(),
        kind @ ("image" | "audio") => format!(
            "[{kind} {}, {} bytes]",
            field("mimeType"),
            decoded_len(field("data"))
        ),
        "resource_link" => format!("[resource link {} {}]", field("name"), field("uri")),
        "resource" => {
            let resource = block.get("resource").cloned().unwrap_or_default();
            let part = |name: &str| resource.get(name).and_then(Value::as_str).unwrap_or("");
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {} {}]\n{}", part("uri"), part("mimeType"), text),
                None => format!(
                    "[resource {} {}, {} bytes]",
                    part("uri"),
                    part("mimeType"),
                    decoded_len(part("blob"))
                ),
            }
        }
        _ => serde_json::to_string_pretty(block).unwrap_or_default(),
    }
}

/// The length of the bytes base64 `data` holds.
fn decoded_len(data: &str) -> usize {
    let padding = data.bytes().rev().take_while(|b| *b == b'=').count();
    (data.len() / 4 * 3).saturating_sub(padding)
}

/// The disclosure block, the degradations and the files taken, as `heard` them.
pub(crate) fn job(job: &Job, heard: &ReportBuilder, taken: &[TakenFile]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "job: {}", job.dir().display());
    let disclosures = heard.disclosures();
    if disclosures.is_empty() {
        let _ = writeln!(out, "disclosure: no file was sent to a server");
    } else {
        let _ = writeln!(out, "disclosure (files sent to servers):");
        for d in &disclosures {
            let what = match &d.what {
                Disclosed::Sample => "the sample".to_owned(),
                Disclosed::ToolOutput { step, tool } => match step {
                    Some(step) => format!("a file {tool} wrote (step {step})"),
                    None => format!("a file {tool} wrote"),
                },
                Disclosed::JobFile => "a job file".to_owned(),
            };
            let mode = match d.mode {
                UploadMode::Chunked => "chunked",
                UploadMode::Single => "single",
            };
            let outcome = match &d.outcome {
                DisclosureOutcome::Sent { remote_path } => format!("sent as {remote_path}"),
                DisclosureOutcome::Failed { reason } => format!("failed: {reason}"),
                DisclosureOutcome::InProgress => "under way".to_owned(),
                DisclosureOutcome::Interrupted => {
                    "interrupted: the run stopped while it was sent".to_owned()
                }
                _ => "ended in a way this version does not know".to_owned(),
            };
            let _ = writeln!(
                out,
                "  {}: {what} {}, {} bytes, sha256 {}, {mode}, {outcome}, {} ms",
                d.server, d.name, d.size, d.sha256, d.duration_ms
            );
        }
    }
    for d in heard.degradations() {
        let _ = writeln!(out, "degraded: {}: {}: {}", d.server, d.subject, d.reason);
    }
    for t in taken {
        match t {
            TakenFile::Taken {
                path, sha256, size, ..
            } => {
                let _ = writeln!(out, "taken: {path} ({size} bytes, sha256 {sha256})");
            }
            TakenFile::NotTaken { path, reason, .. } => {
                let _ = writeln!(out, "not taken: {path}: {reason}");
            }
        }
    }
    out
}

/// One step's outcome on one line.
pub(crate) fn step_line(outcome: &StepOutcome) -> String {
    let name = match &outcome.instance {
        Some(file) => format!("{} ({file})", outcome.step),
        None => outcome.step.clone(),
    };
    let at = format!("{}/{}", outcome.server, outcome.tool);
    match &outcome.status {
        StepStatus::Completed => {
            let taken = outcome
                .taken
                .iter()
                .filter(|t| matches!(t, TakenFile::Taken { .. }))
                .count();
            let files = match taken {
                0 => String::new(),
                1 => ", 1 file taken".to_owned(),
                n => format!(", {n} files taken"),
            };
            format!("ok       {name} [{at}] {} ms{files}", outcome.duration_ms)
        }
        StepStatus::Failed { failure } => {
            format!(
                "failed   {name} [{at}] {}: {}",
                failure.code.as_str(),
                failure.message
            )
        }
        StepStatus::Skipped { reason } => format!("skipped  {name} [{at}]: {reason}"),
        other => format!("{other:?} {name} [{at}]"),
    }
}

/// What a run came to: each step, each distinct failure once, each server's restarts and
/// stray stdout.
pub(crate) fn run_summary(
    outcomes: &[StepOutcome],
    failures: &[DistinctFailure],
    servers: &[ServerRecord],
    steps: usize,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "steps ({} runs of the pack's {steps} steps):",
        outcomes.len()
    );
    for outcome in outcomes {
        let _ = writeln!(out, "  {}", step_line(outcome));
        for file in &outcome.taken {
            if let TakenFile::NotTaken { path, reason, .. } = file {
                let _ = writeln!(out, "      not taken: {path}: {reason}");
            }
        }
    }
    if !failures.is_empty() {
        let _ = writeln!(out, "failures (each once):");
        for f in failures {
            let _ = writeln!(
                out,
                "  {}× {}: {}: {} (steps: {})",
                f.count,
                f.server,
                f.failure.code.as_str(),
                f.failure.message,
                f.steps.join(", ")
            );
            if let Some(remedy) = &f.failure.remediation {
                let _ = writeln!(out, "      remedy: {remedy}");
            }
        }
    }
    for server in servers {
        let counts = server.counts();
        let restarts = match server.restarts {
            0 => String::new(),
            n => format!(", started again {n}×"),
        };
        let _ = writeln!(
            out,
            "server {}: {} messages, {} stray lines, {} invalid{restarts}",
            server.server, counts.messages, counts.stray, counts.invalid
        );
        for loss in &server.losses {
            let _ = writeln!(out, "  lost: {loss}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn ok(value: Value) -> ToolAnswer {
        ToolAnswer {
            value,
            outcome: Outcome::Ok,
        }
    }

    #[test]
    fn text_is_shown_as_text_and_binary_content_by_type_and_size() {
        let shown = answer(&ok(json!("Repository status:\nOn branch main\n")));
        assert_eq!(shown, "ok\nRepository status:\nOn branch main\n");
        let shown = answer(&ok(json!([
            {"type": "text", "text": "the logo:"},
            {"type": "image", "mimeType": "image/png", "data": "aGVsbG8="},
            {"type": "resource_link", "name": "notes", "uri": "file:///notes.txt"},
            {"type": "resource", "resource": {"uri": "demo://a", "mimeType": "text/plain",
                                              "text": "inside"}}
        ])));
        assert_eq!(
            shown,
            "ok\nthe logo:\n[image image/png, 5 bytes]\n[resource link notes file:///notes.txt]\n\
             [resource demo://a text/plain]\ninside\n"
        );
        let shown = answer(&ok(json!({"entropy": 7.9})));
        assert!(shown.contains("\"entropy\": 7.9"), "{shown}");
    }
}
