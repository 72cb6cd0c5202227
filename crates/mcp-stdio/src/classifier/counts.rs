//! What a connection's stdout held, line by line.

use std::fmt;

/// What a connection's stdout held, line by line. Every line falls in exactly one count,
/// except a salvaged line, which counts once as `salvaged` and a message, and whose prefix
/// counts as `stray` when it holds more than whitespace and byte-order marks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LineCounts {
    /// Valid protocol messages delivered (a batch counts each of its messages).
    pub messages: u64,
    /// Lines that are not protocol messages, left out.
    pub stray: u64,
    /// Protocol claims that failed validation.
    pub invalid: u64,
    /// Lines over the line cap, discarded unread.
    pub oversized: u64,
    /// Messages read out of a line during the setup window.
    pub salvaged: u64,
    /// Lines holding only whitespace.
    pub blank: u64,
}

impl fmt::Display for LineCounts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} messages, {} stray, {} invalid, {} oversized, {} salvaged, {} blank",
            self.messages, self.stray, self.invalid, self.oversized, self.salvaged, self.blank
        )
    }
}
