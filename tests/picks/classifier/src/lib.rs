//! Picks the stdout line classifier alone: the protocol messages in a server's output.

use maljan_mcp_stdio::{Event, LineClassifier};

/// How many protocol messages `stdout` holds, whatever else the server printed.
pub fn messages_in(stdout: &[u8]) -> usize {
    let mut classifier = LineClassifier::default();
    classifier.handle_bytes(stdout);
    classifier.handle_eof();
    std::iter::from_fn(|| classifier.poll_event())
        .filter(|event| matches!(event, Event::Message(_)))
        .count()
}
