//! What a connection received, and what closing it found.

use std::fmt;
use std::process::ExitStatus;

use serde::Serialize;

/// What a connection received so far: valid messages and what was not one.
///
/// A transport fills the counts it has: stdio all but `unmatched`, Streamable HTTP
/// `messages`, `invalid`, `oversized` and `unmatched` (its replies have no stray or blank
/// lines).
///
/// ```
/// let counts = maljan_mcp_transport::TransportCounts { messages: 3, stray: 1, ..Default::default() };
/// assert_eq!(counts.to_string(), "3 messages, 1 stray, 0 invalid, 0 oversized, 0 salvaged, 0 blank, 0 unmatched");
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TransportCounts {
    /// Valid protocol messages received.
    pub messages: u64,
    /// Lines that were not protocol messages, left out.
    pub stray: u64,
    /// Protocol claims that failed validation.
    pub invalid: u64,
    /// Lines or events over the size bound, discarded.
    pub oversized: u64,
    /// Messages read out of a line during the setup window.
    pub salvaged: u64,
    /// Lines holding only whitespace.
    pub blank: u64,
    /// Answers to no request waiting (late, or an id never sent), dropped: never given to
    /// another request.
    pub unmatched: u64,
}

impl fmt::Display for TransportCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} messages, {} stray, {} invalid, {} oversized, {} salvaged, {} blank, {} unmatched",
            self.messages,
            self.stray,
            self.invalid,
            self.oversized,
            self.salvaged,
            self.blank,
            self.unmatched
        )
    }
}

/// How a server process was brought to exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoppedBy {
    /// It had exited already, or exited when its stdin closed.
    StdinClosed,
    /// It exited on SIGTERM.
    Terminated,
    /// It had to be killed.
    Killed,
    /// There was no process (a server elsewhere, or a pipe pair).
    NoChild,
}

/// What closing a connection found.
///
/// ```
/// let report = maljan_mcp_transport::CloseReport::without_process(Default::default());
/// assert!(report.status.is_none());
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct CloseReport {
    /// The server process's exit status (`None` without a process).
    pub status: Option<ExitStatus>,
    /// How the process was stopped.
    pub stopped_by: StoppedBy,
    /// What the connection received.
    pub counts: TransportCounts,
    /// The last lines the server wrote on stderr.
    pub stderr_tail: String,
}

impl CloseReport {
    /// The report of a connection without a process of its own.
    pub fn without_process(counts: TransportCounts) -> Self {
        CloseReport {
            status: None,
            stopped_by: StoppedBy::NoChild,
            counts,
            stderr_tail: String::new(),
        }
    }

    /// The report of a connection that started a process.
    pub fn of_process(
        status: Option<ExitStatus>,
        stopped_by: StoppedBy,
        counts: TransportCounts,
        stderr_tail: String,
    ) -> Self {
        CloseReport {
            status,
            stopped_by,
            counts,
            stderr_tail,
        }
    }
}
