use maljan_mcp_proto::maljan::ErrorCode;
use serde::Serialize;

use crate::LedgerEntry;

/// One distinct failure and how often it happened: a line of the report header.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FailureGroup {
    /// The server.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// The code.
    pub code: ErrorCode,
    /// The message.
    pub message: String,
    /// The remediation.
    pub remediation: Option<String>,
    /// How many calls failed so.
    pub count: u64,
}

/// Each distinct failure (server, tool, code, message, remediation) once, with its count,
/// in the order each first happened.
///
/// ```
/// use maljan_ledger::failure_summary;
/// assert!(failure_summary(&[]).is_empty());
/// ```
pub fn failure_summary(entries: &[LedgerEntry]) -> Vec<FailureGroup> {
    let mut groups: Vec<FailureGroup> = Vec::new();
    for entry in entries {
        let Some(failure) = entry.failure() else {
            continue;
        };
        let same = groups.iter_mut().find(|g| {
            g.server == entry.call.server
                && g.tool == entry.call.tool
                && g.code == failure.code
                && g.message == failure.message
                && g.remediation == failure.remediation
        });
        match same {
            Some(group) => group.count += 1,
            None => groups.push(FailureGroup {
                server: entry.call.server.clone(),
                tool: entry.call.tool.clone(),
                code: failure.code.clone(),
                message: failure.message.clone(),
                remediation: failure.remediation.clone(),
                count: 1,
            }),
        }
    }
    groups
}
