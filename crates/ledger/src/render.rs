//! The failure summary as text, for a report's header.

use std::fmt::Write;

use serde::Serialize;

use crate::{FailureGroup, LedgerEntry, failure_summary};

/// The failure summary as text: the report header.
pub fn render_summary(groups: &[FailureGroup]) -> String {
    if groups.is_empty() {
        return "no failures\n".to_owned();
    }
    let mut out = String::from("failures:\n");
    for g in groups {
        let _ = writeln!(
            out,
            "  {}× {}/{}: {}: {}",
            g.count, g.server, g.tool, g.code, g.message
        );
        if let Some(remediation) = &g.remediation {
            let _ = writeln!(out, "      remediation: {remediation}");
        }
    }
    out
}

/// The entries as a table for people.
pub fn render_table(entries: &[LedgerEntry]) -> String {
    let rows: Vec<[String; 7]> = entries
        .iter()
        .map(|e| {
            [
                e.seq.to_string(),
                humantime::format_rfc3339_millis(e.call.started_at).to_string(),
                e.call.server.clone(),
                e.call.tool.clone(),
                e.failure()
                    .map_or_else(|| "ok".to_owned(), |f| f.code.to_string()),
                format!("{:.1}", e.call.duration.as_secs_f64() * 1000.0),
                format!("{:.1}", e.call.queued.as_secs_f64() * 1000.0),
            ]
        })
        .collect();
    let header = [
        "seq",
        "started",
        "server",
        "tool",
        "outcome",
        "ms",
        "queued ms",
    ];
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[&str]| {
        let text: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        let _ = writeln!(out, "{}", text.join("  ").trim_end());
    };
    line(&header);
    for row in &rows {
        line(&row.each_ref().map(String::as_str));
    }
    out
}

/// The ledger for machines: the failure summary and every entry.
#[derive(Debug, Serialize)]
pub struct LedgerReport<'a> {
    /// Each distinct failure with its count.
    pub failures: Vec<FailureGroup>,
    /// Every entry.
    pub entries: &'a [LedgerEntry],
}

impl<'a> LedgerReport<'a> {
    /// The report of these entries.
    pub fn of(entries: &'a [LedgerEntry]) -> Self {
        LedgerReport {
            failures: failure_summary(entries),
            entries,
        }
    }
}
