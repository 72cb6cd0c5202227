//! Entry points for fuzzing and for replaying fuzz corpora in tests: each takes raw bytes
//! and panics when an invariant of the classifier breaks.

use maljan_mcp_proto::jsonrpc::{DecodedLine, decode_line};

use crate::{ClassifierConfig, Event, LineClassifier, LineCounts, SetupWindow};

/// The longest chunk [`classify_stream`] feeds at once.
const MAX_CHUNK: usize = 64;

/// How [`classify_stream`] reads its input.
#[derive(Debug, Clone, Copy)]
struct Script {
    window_open: bool,
    close_window_after: Option<usize>,
    batches_allowed: bool,
    end_with_eof: bool,
    max_line_bytes: usize,
}

impl Script {
    /// The first four bytes: flags, the line cap (two bytes), the chunk after which the
    /// setup window closes.
    fn read(data: &[u8]) -> Option<(Script, &[u8])> {
        let (&[flags, cap_hi, cap_lo, close_at], rest) = data.split_first_chunk::<4>()?;
        let script = Script {
            window_open: flags & 1 != 0,
            close_window_after: (flags & 2 != 0).then_some(usize::from(close_at)),
            batches_allowed: flags & 4 != 0,
            end_with_eof: flags & 8 != 0,
            max_line_bytes: usize::from(u16::from_be_bytes([cap_hi, cap_lo])).max(1),
        };
        Some((script, rest))
    }
}

/// Splits the rest into chunks: a length byte (1 to 64), then that many bytes.
fn chunks(mut data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while let Some((&len, rest)) = data.split_first() {
        let len = (usize::from(len) % MAX_CHUNK + 1).min(rest.len());
        out.push(&rest[..len]);
        data = &rest[len..];
    }
    out
}

/// Classifies a stream described by `data` (flags, a line cap, a close point, then chunks)
/// and checks the classifier's invariants: memory bounded by the cap, counts that only
/// grow, nothing salvaged once the window is closed, nothing after a UTF-8 error, every
/// delivered message valid on its own, and the same counts whatever the chunking.
///
/// ```
/// maljan_mcp_stdio::fuzzing::classify_stream(b"\x09\x00\x40\x00\x10hello\r{\"jsonrpc\":\"2.0\"");
/// ```
pub fn classify_stream(data: &[u8]) {
    let Some((script, rest)) = Script::read(data) else {
        return;
    };
    let pieces = chunks(rest);
    let chunked = run(script, &pieces);
    if script.close_window_after.is_none() {
        let joined: Vec<u8> = pieces.concat();
        let whole = run(script, &[&joined]);
        assert_eq!(chunked, whole, "the chunking changed what was found");
    }
}

fn run(script: Script, pieces: &[&[u8]]) -> LineCounts {
    let config = ClassifierConfig {
        max_line_bytes: script.max_line_bytes,
        ..ClassifierConfig::default()
    };
    let mut classifier = if script.window_open {
        LineClassifier::in_setup(config)
    } else {
        LineClassifier::new(config)
    };
    classifier.set_batches_allowed(script.batches_allowed);
    let mut finished = false;
    let mut last = LineCounts::default();
    let longest = pieces.iter().map(|p| p.len()).max().unwrap_or(0);
    for (index, piece) in pieces.iter().enumerate() {
        classifier.handle_bytes(piece);
        drain(&mut classifier, &mut finished, &mut last);
        assert!(
            classifier.buffered() <= script.max_line_bytes + longest,
            "{} bytes held with a cap of {}",
            classifier.buffered(),
            script.max_line_bytes
        );
        if script.close_window_after == Some(index) {
            classifier.close_setup_window();
        }
    }
    if script.end_with_eof {
        classifier.handle_eof();
        drain(&mut classifier, &mut finished, &mut last);
        assert!(classifier.is_finished());
    }
    classifier.counts()
}

fn drain(classifier: &mut LineClassifier, finished: &mut bool, last: &mut LineCounts) {
    while let Some(event) = classifier.poll_event() {
        assert!(!*finished, "an event after the stream ended: {event:?}");
        let window = classifier.setup_window();
        match event {
            Event::Message(message) => {
                let line = message.to_json();
                assert!(
                    matches!(decode_line(line.as_bytes(), false), DecodedLine::Message(_)),
                    "delivered a message that is not valid on its own: {line}"
                );
            }
            Event::Salvaged { .. } => {
                assert_eq!(window, SetupWindow::Open, "salvaged after setup");
            }
            Event::NotUtf8 { .. } => *finished = true,
            _ => {}
        }
        let now = classifier.counts();
        for (before, after) in [
            (last.messages, now.messages),
            (last.stray, now.stray),
            (last.invalid, now.invalid),
            (last.oversized, now.oversized),
            (last.salvaged, now.salvaged),
            (last.blank, now.blank),
        ] {
            assert!(after >= before, "a count went down");
        }
        if window == SetupWindow::Closed {
            assert_eq!(now.salvaged, last.salvaged, "salvaged after setup");
        }
        *last = now;
    }
}
