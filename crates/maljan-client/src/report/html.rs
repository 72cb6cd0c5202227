//! The report as one self-contained HTML page: styles inline, no script, no external asset,
//! every text escaped (a tool's answer and a server's words are a sample author's text).

use std::fmt::Write;

use super::v1::Taken;
use super::wording::AnswerView;
use super::{RunReport, RunVerdict, wording};

const STYLE: &str = "body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:72rem;\
padding:0 1rem;color:#1d2330}h1{font-size:1.5rem}h2{margin-top:2rem;border-bottom:1px solid #ccd}\
table{border-collapse:collapse;width:100%;font-size:.9rem}th,td{border:1px solid #ccd;\
padding:.3rem .5rem;text-align:left;vertical-align:top}th{background:#eef}\
code{font-size:.85rem;word-break:break-all}.verdict{display:inline-block;padding:.2rem .6rem;\
border-radius:.3rem;font-weight:bold}.completed{background:#d8f5d8}.degraded{background:#fde9c4}\
.failed,.interrupted{background:#f9d0d0}.muted{color:#667}\
pre{white-space:pre-wrap;word-break:break-all;font-size:.85rem;margin:.2rem 0}\
details{margin:.5rem 0}summary{cursor:pointer;font-weight:bold}";

/// `text` with `&`, `<`, `>`, `"` and `'` escaped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn row(out: &mut String, cells: &[String]) {
    out.push_str("<tr>");
    for c in cells {
        let _ = write!(out, "<td>{c}</td>");
    }
    out.push_str("</tr>\n");
}

fn head(out: &mut String, names: &[&str]) {
    out.push_str("<table><thead><tr>");
    for n in names {
        let _ = write!(out, "<th>{n}</th>");
    }
    out.push_str("</tr></thead><tbody>\n");
}

/// Each step's answer, in a `<details>` of its own (open unless long): text as text, an
/// object as a table of its fields, anything else as JSON; cut with where the whole is.
fn answers(out: &mut String, report: &RunReport) {
    let answered = wording::answered_steps(report);
    if answered.is_empty() {
        return;
    }
    out.push_str("<section id=\"answers\"><h2>Answers</h2>\n");
    for (index, step, answer) in answered.iter().take(wording::MAX_ROWS) {
        let (view, cut) = wording::answer_view(answer, &report.job);
        let open = if wording::folded(&view) { "" } else { " open" };
        let _ = writeln!(
            out,
            "<details class=\"answer\"{open}><summary>{} — {}/{}</summary>",
            escape(&wording::step_name(step)),
            escape(&step.server),
            escape(&step.tool)
        );
        match &view {
            AnswerView::Text(text) | AnswerView::Json(text) => {
                let _ = writeln!(out, "<pre>{}</pre>", escape(text));
            }
            AnswerView::Fields(fields) => {
                out.push_str("<table><tbody>\n");
                for (name, value) in fields {
                    let _ = writeln!(
                        out,
                        "<tr><th>{}</th><td><pre>{}</pre></td></tr>",
                        escape(name),
                        escape(value)
                    );
                }
                out.push_str("</tbody></table>\n");
            }
        }
        if cut {
            let _ = writeln!(
                out,
                "<p class=\"muted\">{}</p>",
                escape(&wording::answer_cut_note(*index))
            );
        }
        out.push_str("</details>\n");
    }
    if let Some(more) = wording::rows_left_out(answered.len(), "answers") {
        let _ = writeln!(out, "<p>{}</p>", escape(&more));
    }
    out.push_str("</section>\n");
}

pub(super) fn render(report: &RunReport) -> String {
    let mut out = String::new();
    let pack = escape(report.pack.name.as_deref().unwrap_or(&report.pack.origin));
    let verdict = report.verdict.as_str();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>Run {} — {pack}</title><style>{STYLE}</style></head><body>\n",
        escape(&report.run)
    );
    let _ = writeln!(
        out,
        "<header><h1>Run <code>{}</code> — {pack}</h1>\
         <p>RunVerdict: <span class=\"verdict {verdict}\" id=\"verdict\">{verdict}</span></p>",
        escape(&report.run)
    );
    if let Some(attempts) = report.attempts {
        let _ = writeln!(
            out,
            "<p id=\"attempts\">{}</p>",
            escape(&wording::attempts(attempts))
        );
    }
    if let Some(sample) = &report.sample {
        let _ = writeln!(
            out,
            "<p class=\"muted\">Sample <code>{}</code>, {} bytes, sha256 <code>{}</code>; job \
             <code>{}</code></p>",
            escape(&sample.name),
            sample.size,
            escape(&sample.sha256),
            escape(&report.job.display().to_string())
        );
    }
    out.push_str("<section id=\"failures\"><h2>Failures</h2>\n");
    if report.failures.is_empty() {
        let none = if report.verdict == RunVerdict::Interrupted {
            "None before the run was stopped."
        } else {
            "None."
        };
        let _ = writeln!(out, "<p>{none}</p>");
    } else {
        head(
            &mut out,
            &["count", "server", "code", "message", "remedy", "steps"],
        );
        for f in &report.failures {
            row(
                &mut out,
                &[
                    f.count.to_string(),
                    escape(&f.server),
                    format!("<code>{}</code>", escape(f.failure.code.as_str())),
                    escape(&f.failure.message),
                    escape(f.failure.remediation.as_deref().unwrap_or("")),
                    escape(&f.steps.join(", ")),
                ],
            );
        }
        out.push_str("</tbody></table>\n");
    }
    out.push_str("</section></header>\n<main>\n<section><h2>Servers</h2>\n");
    head(
        &mut out,
        &[
            "server",
            "card",
            "unavailable tools",
            "connections",
            "restarts and losses",
        ],
    );
    for server in &report.servers {
        let card = server.card.as_ref().map_or_else(
            || "never set up".to_owned(),
            |c| {
                escape(&format!(
                    "{} {}, protocol {} ({}), over {}, {} tools",
                    c.server_info.name,
                    c.server_info.version,
                    c.protocol_version,
                    c.era,
                    c.transport,
                    c.tools.len()
                ))
            },
        );
        let unavailable = server.card.as_ref().map_or_else(String::new, |c| {
            c.unavailable
                .iter()
                .map(|t| {
                    escape(&format!(
                        "{}: {}{}",
                        t.name,
                        t.reason,
                        t.remediation
                            .as_deref()
                            .map(|r| format!(" (remedy: {r})"))
                            .unwrap_or_default()
                    ))
                })
                .collect::<Vec<_>>()
                .join("<br>")
        });
        let connections = server
            .connections
            .iter()
            .map(|c| {
                format!(
                    "{} messages, {} stray, {} invalid, {} salvaged, {} oversized",
                    c.messages, c.stray, c.invalid, c.salvaged, c.oversized
                )
            })
            .collect::<Vec<_>>()
            .join("<br>");
        let mut restarts = server.restarts.to_string();
        for loss in &server.losses {
            restarts.push_str("<br>");
            if let Some(exit) = &loss.exit {
                restarts.push_str(&escape(&format!("ended with {exit}: ")));
            }
            restarts.push_str(&escape(&loss.failure));
            if let Some(line) = loss.stderr_tail.lines().last() {
                restarts.push_str(&escape(&format!(" (last stderr line: {line})")));
            }
        }
        row(
            &mut out,
            &[
                escape(&server.server),
                card,
                unavailable,
                connections,
                restarts,
            ],
        );
    }
    out.push_str("</tbody></table></section>\n<section><h2>Steps</h2>\n");
    head(
        &mut out,
        &[
            "step",
            "server/tool",
            "outcome",
            "duration",
            "queued",
            "arguments",
            "sent",
            "files",
        ],
    );
    for step in report.steps.iter().take(wording::MAX_ROWS) {
        let arguments = step.resolved.as_ref().unwrap_or(&step.arguments);
        let files = step
            .taken
            .iter()
            .map(|t| match t {
                Taken::Taken { path, size, .. } => format!(
                    "taken <code>{}</code> ({size} bytes)",
                    escape(&wording::relative(path, &report.job))
                ),
                Taken::NotTaken { path, words, .. } => format!(
                    "<strong>not taken</strong> <code>{}</code>: {}",
                    escape(path),
                    escape(words)
                ),
            })
            .collect::<Vec<_>>()
            .join("<br>");
        row(
            &mut out,
            &[
                escape(&wording::step_name(step)),
                escape(&format!("{}/{}", step.server, step.tool)),
                escape(&wording::outcome(&step.status)),
                format!("{} ms", step.duration_ms),
                format!("{} ms", step.queued_ms),
                format!(
                    "<code>{}</code>",
                    escape(&wording::relative(&arguments.to_string(), &report.job))
                ),
                step.sent_arguments.as_ref().map_or_else(String::new, |s| {
                    format!(
                        "<code>{}</code>",
                        escape(&wording::relative(&s.to_string(), &report.job))
                    )
                }),
                files,
            ],
        );
    }
    out.push_str("</tbody></table>\n");
    if let Some(more) = wording::rows_left_out(report.steps.len(), "steps") {
        out.push_str(&format!("<p>{}</p>\n", escape(&more)));
    }
    out.push_str("</section>\n");
    answers(&mut out, report);
    out.push_str("<section id=\"disclosure\"><h2>Disclosure: every upload</h2>\n");
    if report.disclosures.is_empty() {
        out.push_str("<p>Nothing was uploaded.</p>\n");
    } else {
        head(
            &mut out,
            &["server", "file", "what", "size", "sha256", "how", "outcome"],
        );
        for d in report.disclosures.iter().take(wording::MAX_ROWS) {
            let (what, how, outcome) = wording::upload(d);
            row(
                &mut out,
                &[
                    escape(&d.server),
                    escape(&d.name),
                    escape(&what),
                    d.size.to_string(),
                    format!("<code>{}</code>", escape(&d.sha256)),
                    how.to_owned(),
                    escape(&outcome),
                ],
            );
        }
        out.push_str("</tbody></table>\n");
        if let Some(more) = wording::rows_left_out(report.disclosures.len(), "uploads") {
            out.push_str(&format!("<p>{}</p>\n", escape(&more)));
        }
    }
    out.push_str("</section>\n");
    if !report.degradations.is_empty() {
        out.push_str("<section><h2>Degradations</h2><ul>\n");
        for d in &report.degradations {
            let _ = writeln!(
                out,
                "<li>{}: <code>{}</code>: {}</li>",
                escape(&d.server),
                escape(&d.subject),
                escape(&d.reason)
            );
        }
        out.push_str("</ul></section>\n");
    }
    out.push_str("</main></body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::escape;

    #[test]
    fn every_character_that_could_open_markup_is_escaped() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }
}
