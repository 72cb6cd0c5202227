//! The report as Markdown: the header (verdict, each distinct failure once), the servers,
//! the steps, the disclosure block and the degradation reasons.

use std::fmt::Write;

use serde_json::Value;

use super::{RunReport, wording};
use crate::TakenFile;

/// Text for a table cell: on one line, pipes escaped, and no markup: a server's words and a
/// tool's answer are a sample author's text, and many Markdown viewers render raw HTML.
fn cell(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

fn json(value: Option<&Value>) -> String {
    value.map_or_else(
        || "—".to_owned(),
        |v| format!("`{}`", cell(&v.to_string()).replace('`', "'")),
    )
}

pub(super) fn render(report: &RunReport) -> String {
    let mut out = String::new();
    let pack = report.pack.name.as_deref().unwrap_or(&report.pack.origin);
    let _ = writeln!(out, "# Run {} — {}\n", report.run, pack);
    let _ = writeln!(out, "**Verdict: {}**\n", report.verdict.as_str());
    if let Some(sample) = &report.sample {
        let _ = writeln!(
            out,
            "Sample: `{}` ({} bytes, sha256 `{}`). Job: `{}`.\n",
            cell(&sample.name),
            sample.size,
            sample.sha256,
            report.job.display()
        );
    }
    let _ = writeln!(out, "## Failures\n");
    if report.failures.is_empty() {
        let _ = writeln!(out, "None.\n");
    } else {
        let _ = writeln!(out, "| count | server | code | message | remedy | steps |");
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
        for f in &report.failures {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                f.count,
                cell(&f.server),
                cell(f.failure.code.as_str()),
                cell(&f.failure.message),
                cell(f.failure.remediation.as_deref().unwrap_or("")),
                cell(&f.steps.join(", "))
            );
        }
        out.push('\n');
    }
    let _ = writeln!(out, "## Servers\n");
    for server in &report.servers {
        let _ = write!(out, "- **{}**", cell(&server.server));
        match &server.card {
            Some(card) => {
                let _ = write!(
                    out,
                    ": {} {}, protocol {} ({}), over {}; {} tools",
                    cell(&card.server_info.name),
                    cell(&card.server_info.version),
                    card.protocol_version,
                    card.era,
                    card.transport,
                    card.tools.len()
                );
            }
            None => out.push_str(": never set up"),
        }
        if server.restarts > 0 {
            let _ = write!(out, "; started again {}×", server.restarts);
        }
        out.push('\n');
        if let Some(card) = &server.card {
            for tool in &card.unavailable {
                let _ = writeln!(
                    out,
                    "  - unavailable: `{}`: {}{}",
                    cell(&tool.name),
                    cell(&tool.reason),
                    tool.remediation
                        .as_deref()
                        .map(|r| format!(" (remedy: {})", cell(r)))
                        .unwrap_or_default()
                );
            }
        }
        for (i, c) in server.connections.iter().enumerate() {
            let _ = writeln!(
                out,
                "  - connection {}: {} messages, {} stray, {} invalid, {} salvaged, {} oversized",
                i + 1,
                c.messages,
                c.stray,
                c.invalid,
                c.salvaged,
                c.oversized
            );
        }
        if let Some(last) = &server.last_failure {
            let _ = writeln!(out, "  - last failure: {}", cell(last));
        }
    }
    let _ = writeln!(out, "\n## Steps\n");
    let _ = writeln!(
        out,
        "| step | server/tool | outcome | duration | queued | arguments | sent |"
    );
    let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- |");
    for step in &report.steps {
        let name = wording::step_name(step);
        let outcome = wording::outcome(&step.status);
        let _ = writeln!(
            out,
            "| {} | {}/{} | {} | {} ms | {} ms | {} | {} |",
            cell(&name),
            cell(&step.server),
            cell(&step.tool),
            cell(&outcome),
            step.duration_ms,
            step.queued_ms,
            json(step.resolved.as_ref().or(Some(&step.arguments))),
            json(step.sent_arguments.as_ref())
        );
    }
    let taken: Vec<_> = report
        .steps
        .iter()
        .flat_map(|s| s.taken.iter().map(move |t| (s, t)))
        .collect();
    if !taken.is_empty() {
        let _ = writeln!(out, "\n### Files the tools named\n");
        for (step, file) in taken {
            match file {
                TakenFile::Taken {
                    path, size, sha256, ..
                } => {
                    let _ = writeln!(
                        out,
                        "- {}: taken `{}` ({size} bytes, sha256 `{sha256}`)",
                        cell(&step.step),
                        cell(path)
                    );
                }
                TakenFile::NotTaken { path, words, .. } => {
                    let _ = writeln!(
                        out,
                        "- {}: **not taken** `{}`: {}",
                        cell(&step.step),
                        cell(path),
                        cell(words)
                    );
                }
            }
        }
    }
    let _ = writeln!(out, "\n## Disclosure: every upload\n");
    if report.disclosures.is_empty() {
        let _ = writeln!(out, "Nothing was uploaded.");
    } else {
        let _ = writeln!(
            out,
            "| server | file | what | size | sha256 | how | outcome |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- |");
        for d in &report.disclosures {
            let (what, how, outcome) = wording::upload(d);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | `{}` | {how} | {} |",
                cell(&d.server),
                cell(&d.name),
                cell(&what),
                d.size,
                d.sha256,
                cell(&outcome)
            );
        }
    }
    if !report.degradations.is_empty() {
        let _ = writeln!(out, "\n## Degradations\n");
        for d in &report.degradations {
            let _ = writeln!(
                out,
                "- {}: `{}`: {}",
                cell(&d.server),
                cell(&d.subject),
                cell(&d.reason)
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::cell;

    #[test]
    fn a_cell_holds_no_markup_and_stays_in_its_column() {
        assert_eq!(
            cell("<img src=x onerror=alert(1)> a|b\nc"),
            "&lt;img src=x onerror=alert(1)&gt; a\\|b c"
        );
    }
}
