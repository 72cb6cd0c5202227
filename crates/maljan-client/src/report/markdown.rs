//! The report as Markdown: the header (verdict, each distinct failure once), the servers,
//! the steps, the disclosure block and the degradation reasons.

use std::fmt::Write;

use serde_json::Value;

use std::path::Path;

use super::v1::Taken;
use super::wording::AnswerView;
use super::{RunReport, wording};
use maljan_mcp_proto::untrusted_text::is_active_control;

/// Text for a table cell or a line of the report, inert whatever it holds: a server's
/// words, a tool's answer and a file's name are a sample author's text. On one line; pipes
/// escaped so it stays in its column; `<`, `>` and `&` as entities (many viewers render raw
/// HTML); every character that opens a link, an image, code or emphasis backslash-escaped,
/// `:` too (no `javascript:` or `http:` autolink) and the dot of `www.`; active control
/// characters shown as `\u{…}`.
pub(crate) fn cell(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    let mut previous: [char; 3] = [' '; 3];
    for c in text.chars() {
        match c {
            '\n' | '\r' => out.push(' '),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '(' | ')' | '!' | '|' | '~' | ':' => {
                out.push('\\');
                out.push(c);
            }
            '.' if previous.iter().all(|p| p.eq_ignore_ascii_case(&'w')) => out.push_str("\\."),
            c if is_active_control(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
        previous = [previous[1], previous[2], c];
    }
    out
}

/// A JSON value on one line of a cell, paths under `job` relative to it.
fn json(value: Option<&Value>, job: &Path) -> String {
    value.map_or_else(
        || "—".to_owned(),
        |v| cell(&wording::relative(&v.to_string(), job)),
    )
}

/// `text` as an indented code block (taken literally by every Markdown reader), its active
/// control characters shown as `\u{…}`.
fn code_block(out: &mut String, text: &str) {
    // A lone CR ends a line for a Markdown reader too: every line is indented, or one
    // could leave the block.
    for line in text.split(['\n', '\r']) {
        out.push_str("    ");
        for c in line.chars() {
            if is_active_control(c) {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            } else {
                out.push(c);
            }
        }
        out.push('\n');
    }
    out.push('\n');
}

/// Each step's answer: text as text, an object as a table of its fields, anything else as
/// JSON; a long one folded, and cut with where the whole is.
fn answers(out: &mut String, report: &RunReport) {
    let answered = wording::answered_steps(report);
    if answered.is_empty() {
        return;
    }
    let _ = writeln!(out, "\n## Answers\n");
    for (index, step, answer) in answered.iter().take(wording::MAX_ROWS) {
        let (view, cut) = wording::answer_view(answer, &report.job);
        let title = format!(
            "{} — {}/{}",
            cell(&wording::step_name(step)),
            cell(&step.server),
            cell(&step.tool)
        );
        let folded = wording::folded(&view);
        if folded {
            let _ = writeln!(out, "<details><summary>{title}</summary>\n");
        } else {
            let _ = writeln!(out, "### {title}\n");
        }
        match &view {
            AnswerView::Text(text) | AnswerView::Json(text) => code_block(out, text),
            AnswerView::Fields(fields) => {
                // One-line values in a table; a value of several lines (a list, a nested
                // object, a text) under its name, as a block.
                let (lines, blocks): (Vec<_>, Vec<_>) =
                    fields.iter().partition(|(_, value)| !value.contains('\n'));
                if !lines.is_empty() {
                    let _ = writeln!(out, "| field | value |");
                    let _ = writeln!(out, "| --- | --- |");
                    for (name, value) in lines {
                        let _ = writeln!(out, "| {} | {} |", cell(name), cell(value));
                    }
                    out.push('\n');
                }
                for (name, value) in blocks {
                    let _ = writeln!(out, "{}:\n", cell(name));
                    code_block(out, value);
                }
            }
        }
        if cut {
            let _ = writeln!(out, "{}\n", cell(&wording::answer_cut_note(*index)));
        }
        if folded {
            let _ = writeln!(out, "</details>\n");
        }
    }
    if let Some(more) = wording::rows_left_out(answered.len(), "answers") {
        let _ = writeln!(out, "{more}\n");
    }
}

pub(super) fn render(report: &RunReport) -> String {
    let mut out = String::new();
    let pack = report.pack.name.as_deref().unwrap_or(&report.pack.origin);
    let _ = writeln!(out, "# Run {} — {}\n", report.run, cell(pack));
    let _ = writeln!(out, "**RunVerdict: {}**\n", report.verdict.as_str());
    if let Some(attempts) = report.attempts {
        let _ = writeln!(out, "{}\n", wording::attempts(attempts));
    }
    if let Some(sample) = &report.sample {
        let _ = writeln!(
            out,
            "Sample: {} ({} bytes, sha256 `{}`). Job: {}.\n",
            cell(&sample.name),
            sample.size,
            sample.sha256,
            cell(&report.job.display().to_string())
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
                    cell(&card.protocol_version),
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
                    "  - unavailable: {}: {}{}",
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
        for (i, loss) in server.losses.iter().enumerate() {
            let _ = writeln!(
                out,
                "  - lost {}: {}{}",
                i + 1,
                loss.exit
                    .as_deref()
                    .map(|exit| format!("ended with {}: ", cell(exit)))
                    .unwrap_or_default(),
                cell(&loss.failure)
            );
            if let Some(line) = loss.stderr_tail.lines().last() {
                let _ = writeln!(out, "    - last stderr line: {}", cell(line));
            }
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
    for step in report.steps.iter().take(wording::MAX_ROWS) {
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
            json(
                step.resolved.as_ref().or(Some(&step.arguments)),
                &report.job
            ),
            json(step.sent_arguments.as_ref(), &report.job)
        );
    }
    if let Some(more) = wording::rows_left_out(report.steps.len(), "steps") {
        let _ = writeln!(out, "\n{more}");
    }
    let taken: Vec<_> = report
        .steps
        .iter()
        .flat_map(|s| s.taken.iter().map(move |t| (s, t)))
        .collect();
    if !taken.is_empty() {
        let _ = writeln!(out, "\n### Files the tools named\n");
        let total = taken.len();
        for (step, file) in taken.into_iter().take(wording::MAX_ROWS) {
            match file {
                Taken::Taken {
                    path, size, sha256, ..
                } => {
                    let _ = writeln!(
                        out,
                        "- {}: taken {} ({size} bytes, sha256 {})",
                        cell(&step.step),
                        cell(&wording::relative(path, &report.job)),
                        cell(sha256)
                    );
                }
                Taken::NotTaken { path, words, .. } => {
                    let _ = writeln!(
                        out,
                        "- {}: **not taken** {}: {}",
                        cell(&step.step),
                        cell(path),
                        cell(words)
                    );
                }
            }
        }
        if let Some(more) = wording::rows_left_out(total, "files") {
            let _ = writeln!(out, "\n{more}");
        }
    }
    answers(&mut out, report);
    let _ = writeln!(out, "\n## Disclosure: every upload\n");
    if report.disclosures.is_empty() {
        let _ = writeln!(out, "Nothing was uploaded.");
    } else {
        let _ = writeln!(
            out,
            "| server | file | what | size | sha256 | how | outcome |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- | --- |");
        for d in report.disclosures.iter().take(wording::MAX_ROWS) {
            let (what, how, outcome) = wording::upload(d);
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {how} | {} |",
                cell(&d.server),
                cell(&d.name),
                cell(&what),
                d.size,
                cell(&d.sha256),
                cell(&outcome)
            );
        }
        if let Some(more) = wording::rows_left_out(report.disclosures.len(), "uploads") {
            let _ = writeln!(out, "\n{more}");
        }
    }
    if !report.degradations.is_empty() {
        let _ = writeln!(out, "\n## Degradations\n");
        for d in &report.degradations {
            let _ = writeln!(
                out,
                "- {}: {}: {}",
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
    use maljan_mcp_proto::untrusted_text::is_active_control;
    use proptest::prelude::*;

    #[test]
    fn a_cell_holds_no_markup_and_stays_in_its_column() {
        assert_eq!(
            cell("<img src=x onerror=alert(1)> a|b\nc"),
            "&lt;img src=x onerror=alert\\(1\\)&gt; a\\|b c"
        );
        assert_eq!(
            cell("[x](javascript:alert(1)) ![](http://t/p.png) www.evil.example"),
            "\\[x\\]\\(javascript\\:alert\\(1\\)\\) \\!\\[\\]\\(http\\://t/p.png\\) www\\.evil.example"
        );
    }

    /// Whether the character at `at` (a byte index) follows an odd run of backslashes.
    fn escaped(text: &str, at: usize) -> bool {
        text[..at].chars().rev().take_while(|c| *c == '\\').count() % 2 == 1
    }

    proptest! {
        /// A tool's answer, whatever it holds, stays inside its code block: every line it
        /// makes is indented (literal to a Markdown reader) and carries no control character.
        #[test]
        fn an_answer_stays_inside_its_code_block(text in any::<String>()) {
            let mut out = String::new();
            super::code_block(&mut out, &text);
            // Lines as a Markdown reader sees them: a lone CR ends one too.
            for line in out.split(['\n', '\r']) {
                prop_assert!(line.is_empty() || line.starts_with("    "), "{line:?}");
                prop_assert!(!line.chars().any(is_active_control), "{line:?}");
            }
        }

        #[test]
        fn no_markup_and_no_control_character_comes_out(text in any::<String>()) {
            let shown = cell(&text);
            prop_assert!(!shown.chars().any(is_active_control), "{shown:?}");
            prop_assert!(!shown.contains(['<', '>', '\n']), "{shown:?}");
            for (at, c) in shown.char_indices() {
                if "`*_[]()!|~:".contains(c) {
                    prop_assert!(escaped(&shown, at), "{c} at {at} in {shown:?}");
                }
            }
            prop_assert!(!shown.to_ascii_lowercase().contains("www."), "{shown:?}");
        }

        #[test]
        fn markup_characters_mixed_into_text_are_all_escaped(
            text in "[a-zA-Z0-9 \\[\\]()!:`*_|~<>&.wW\\\\-]{0,60}",
        ) {
            let shown = cell(&text);
            for (at, c) in shown.char_indices() {
                if "`*_[]()!|~:".contains(c) {
                    prop_assert!(escaped(&shown, at), "{c} at {at} in {shown:?}");
                }
            }
            prop_assert!(!shown.to_ascii_lowercase().contains("www."), "{shown:?}");
        }
    }
}
