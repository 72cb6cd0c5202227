//! The failure summary: each distinct failure once, with its count, numbers folded so that
//! failures that differ only in a changing figure are one.

use std::collections::HashMap;

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

/// A text with every run of digits (a decimal point inside one included) as `#`: two
/// messages that differ only in a changing number (a resting server's seconds left, a
/// process id) have the same shape, and count as one failure.
///
/// ```
/// use maljan_ledger::message_shape;
/// assert_eq!(
///     message_shape("server slow is resting for 60 s more after 3 unanswered calls"),
///     message_shape("server slow is resting for 59 s more after 3 unanswered calls"),
/// );
/// assert_ne!(message_shape("no such file a.txt"), message_shape("no such file b.txt"));
/// assert_eq!(message_shape("waited 1.5 s"), "waited # s");
/// ```
pub fn message_shape(text: &str) -> String {
    let mut shape = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if !c.is_ascii_digit() {
            shape.push(c);
            continue;
        }
        while let Some(&next) = chars.peek() {
            let decimal_point = next == '.' && {
                let mut ahead = chars.clone();
                ahead.next();
                ahead.peek().is_some_and(char::is_ascii_digit)
            };
            if next.is_ascii_digit() || decimal_point {
                chars.next();
            } else {
                break;
            }
        }
        shape.push('#');
    }
    shape
}

/// Each distinct failure (server, tool, code, message, remediation) once, with its count,
/// in the order each first happened. Messages and remediations that differ only in a
/// changing number are one failure (see [`message_shape`]); the first one's words are kept.
///
/// ```
/// use maljan_ledger::failure_summary;
/// assert!(failure_summary(&[]).is_empty());
/// ```
pub fn failure_summary(entries: &[LedgerEntry]) -> Vec<FailureGroup> {
    let mut groups: Vec<FailureGroup> = Vec::new();
    let mut index: HashMap<(String, String, ErrorCode, String, Option<String>), usize> =
        HashMap::new();
    for entry in entries {
        let Some(failure) = entry.failure() else {
            continue;
        };
        let key = (
            entry.call.server.clone(),
            entry.call.tool.clone(),
            failure.code.clone(),
            message_shape(&failure.message),
            failure.remediation.as_deref().map(message_shape),
        );
        match index.get(&key) {
            Some(&at) => groups[at].count += 1,
            None => {
                index.insert(key, groups.len());
                groups.push(FailureGroup {
                    server: entry.call.server.clone(),
                    tool: entry.call.tool.clone(),
                    code: failure.code.clone(),
                    message: failure.message.clone(),
                    remediation: failure.remediation.clone(),
                    count: 1,
                });
            }
        }
    }
    groups
}
