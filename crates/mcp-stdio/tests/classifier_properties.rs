//! Properties of the classifier over generated streams.

use maljan_mcp_stdio::{ClassifierConfig, Event, LineClassifier, LineCounts};
use proptest::prelude::*;
use serde_json::json;

#[derive(Debug, Clone)]
enum Line {
    /// A valid message, as a JSON line.
    Message(String),
    /// Text that is not a protocol message.
    Text(String),
    /// Only whitespace.
    Blank(String),
}

fn message() -> impl Strategy<Value = String> {
    prop_oneof![
        (any::<i64>(), "[ -~]{0,30}").prop_map(|(id, s)| {
            json!({"jsonrpc": "2.0", "id": id, "result": {"s": s}}).to_string()
        }),
        ("[a-z/]{1,20}", any::<u32>()).prop_map(|(m, n)| {
            json!({"jsonrpc": "2.0", "method": m, "params": {"n": n}}).to_string()
        }),
        ("[a-z0-9-]{1,12}", any::<i32>()).prop_map(|(id, code)| {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": "m"}}).to_string()
        }),
    ]
}

fn text() -> impl Strategy<Value = String> {
    // Non-blank text that does not begin like JSON; it may hold CRs, quotes, braces, anything.
    "[^\n\\{\\[\\s][^\n]{0,80}"
}

fn line() -> impl Strategy<Value = Line> {
    prop_oneof![
        3 => message().prop_map(Line::Message),
        3 => text().prop_map(Line::Text),
        1 => "[ \t\r]{0,4}".prop_map(Line::Blank),
    ]
}

/// A JSON text with its members in one order, to compare messages.
fn normal(json: &str) -> String {
    serde_json::from_str::<serde_json::Value>(json)
        .expect("JSON")
        .to_string()
}

fn render(lines: &[Line]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for line in lines {
        let text = match line {
            Line::Message(s) | Line::Text(s) | Line::Blank(s) => s,
        };
        bytes.extend_from_slice(text.as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

/// Feeds `bytes` cut at `cuts`, returns every event (as text) and the counts.
fn classify(
    bytes: &[u8],
    cuts: &[usize],
    window_open: bool,
) -> (Vec<String>, Vec<String>, LineCounts) {
    let mut classifier = if window_open {
        LineClassifier::in_setup(ClassifierConfig::default())
    } else {
        LineClassifier::new(ClassifierConfig::default())
    };
    let mut events = Vec::new();
    let mut messages = Vec::new();
    let mut drain = |c: &mut LineClassifier| {
        while let Some(event) = c.poll_event() {
            if let Event::Message(m) = &event {
                messages.push(normal(&m.to_json()));
            }
            events.push(format!("{event:?}"));
        }
    };
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut start = 0;
    for cut in cuts.into_iter().chain([bytes.len()]) {
        classifier.handle_bytes(&bytes[start..cut]);
        drain(&mut classifier);
        start = cut;
    }
    classifier.handle_eof();
    drain(&mut classifier);
    (events, messages, classifier.counts())
}

/// Reads `bytes` straight into the classifier, at most `sizes[i]` at a time in turn (as
/// [`classify`] returns).
fn classify_read_in_place(
    bytes: &[u8],
    sizes: &[usize],
    window_open: bool,
) -> (Vec<String>, LineCounts) {
    classify_reading(bytes, sizes.iter().map(|s| 1 + s % 64).cycle(), window_open)
}

/// Reads `bytes` into the classifier in reads of the sizes given, in turn, until the end.
fn classify_reading(
    bytes: &[u8],
    sizes: impl Iterator<Item = usize>,
    window_open: bool,
) -> (Vec<String>, LineCounts) {
    use tokio::io::AsyncReadExt;
    let mut classifier = if window_open {
        LineClassifier::in_setup(ClassifierConfig::default())
    } else {
        LineClassifier::new(ClassifierConfig::default())
    };
    let mut events = Vec::new();
    let mut stdout = bytes;
    for size in sizes {
        let read =
            futures::executor::block_on(stdout.read_buf(&mut classifier.read_target(size).buf()))
                .expect("reading from memory");
        if read == 0 {
            classifier.handle_eof();
        }
        while let Some(event) = classifier.poll_event() {
            events.push(format!("{event:?}"));
        }
        if read == 0 {
            break;
        }
    }
    (events, classifier.counts())
}

proptest! {
    #[test]
    fn reading_into_the_classifier_gives_the_events_handing_it_bytes_does(
        bytes in prop::collection::vec(any::<u8>(), 0..400),
        lines in prop::collection::vec(line(), 0..20),
        sizes in prop::collection::vec(any::<usize>(), 1..30),
        window_open in any::<bool>(),
    ) {
        // Arbitrary bytes (often not UTF-8) after well-formed lines, and lines after them:
        // read after the stream ended at invalid UTF-8, they are dropped.
        let mut stream = render(&lines);
        stream.extend_from_slice(&bytes);
        stream.extend_from_slice(&render(&lines));
        let handed = classify(&stream, &[], window_open);
        let read = classify_read_in_place(&stream, &sizes, window_open);
        prop_assert_eq!(handed.0, read.0);
        prop_assert_eq!(handed.2, read.1);
    }

    #[test]
    fn messages_among_text_are_delivered_exactly_and_in_order(
        lines in prop::collection::vec(line(), 0..60),
        window_open in any::<bool>(),
    ) {
        let bytes = render(&lines);
        let (_, delivered, counts) = classify(&bytes, &[], window_open);
        let expected: Vec<String> = lines
            .iter()
            .filter_map(|l| match l {
                Line::Message(m) => Some(normal(m)),
                _ => None,
            })
            .collect();
        prop_assert_eq!(&delivered, &expected);
        let texts = lines.iter().filter(|l| matches!(l, Line::Text(_))).count() as u64;
        let blanks = lines.iter().filter(|l| matches!(l, Line::Blank(_))).count() as u64;
        prop_assert_eq!(counts.messages, expected.len() as u64);
        prop_assert_eq!(counts.stray, texts);
        prop_assert_eq!(counts.blank, blanks);
        prop_assert_eq!(counts.invalid + counts.oversized + counts.salvaged, 0);
    }

    #[test]
    fn any_chunking_gives_the_same_events(
        bytes in prop::collection::vec(any::<u8>(), 0..400),
        lines in prop::collection::vec(line(), 0..20),
        cuts in prop::collection::vec(any::<usize>(), 0..30),
        window_open in any::<bool>(),
    ) {
        // Arbitrary bytes (often not UTF-8) after well-formed lines.
        let mut stream = render(&lines);
        stream.extend_from_slice(&bytes);
        let whole = classify(&stream, &[], window_open);
        let chunked = classify(&stream, &cuts, window_open);
        prop_assert_eq!(whole.0, chunked.0);
        prop_assert_eq!(whole.2, chunked.2);
        let bytewise: Vec<usize> = (0..stream.len()).collect();
        let single = classify(&stream, &bytewise, window_open);
        prop_assert_eq!(whole.2, single.2);
    }

    #[test]
    fn after_setup_nothing_glued_to_other_text_is_delivered(
        glued in prop::collection::vec((text(), prop_oneof![Just("\r"), Just("\u{FEFF}"), Just(" "), Just("")], message()), 1..20),
        clean in prop::collection::vec(message(), 0..5),
    ) {
        let mut stream = Vec::new();
        for (prefix, joint, message) in &glued {
            stream.extend_from_slice(format!("{prefix}{joint}{message}\n").as_bytes());
        }
        for message in &clean {
            stream.extend_from_slice(format!("{message}\n").as_bytes());
        }
        let (_, delivered, counts) = classify(&stream, &[], false);
        prop_assert_eq!(delivered, clean.iter().map(|m| normal(m)).collect::<Vec<_>>());
        prop_assert_eq!(counts.salvaged, 0);
        prop_assert_eq!(counts.stray, glued.len() as u64);
    }

    #[test]
    fn during_setup_an_answer_after_a_carriage_return_is_salvaged(
        prefix in text(),
        message in message(),
    ) {
        let stream = format!("{prefix}\r{message}\n");
        let (_, delivered, counts) = classify(stream.as_bytes(), &[], true);
        prop_assert_eq!(delivered, vec![normal(&message)]);
        prop_assert_eq!(counts.salvaged, 1);
        // The prefix is a stray line unless it is only byte-order marks and whitespace.
        let filler = prefix.trim_matches(|c: char| c == '\u{FEFF}' || c.is_ascii_whitespace()).is_empty();
        prop_assert_eq!(counts.stray, u64::from(!filler));
    }
}

/// A line of over 1 MiB, as a file chunk's request or answer is (or a broken, stray or
/// blank one as long), with its line ending.
fn long_line() -> impl Strategy<Value = Vec<u8>> {
    let body = (0usize..5, 0usize..4096, any::<u32>());
    (body, any::<bool>()).prop_map(|((kind, extra, id), crlf)| {
        let data = "A".repeat((1 << 20) + extra);
        let mut line = match kind {
            0 => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"data":"{data}"}}}}"#),
            1 => format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"d":"{data}"}}}}"#
            ),
            // Cut short: it mentions "jsonrpc", so it is stated as invalid.
            2 => format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"data":"{data}"#),
            3 => format!("progress {id}: {data}"),
            _ => " ".repeat(data.len()),
        }
        .into_bytes();
        if crlf {
            line.push(b'\r');
        }
        line.push(b'\n');
        line
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// After setup a long line is decoded in the buffer it was read into; during setup it is
    /// copied (its text may be salvaged). Without a CR or BOM inside a line, both give the
    /// same events, quotes and counts, in any reads.
    #[test]
    fn a_long_line_handed_over_gives_the_events_a_copied_one_does(
        long in prop::collection::vec(long_line(), 1..4),
        short in prop::collection::vec(message(), 0..4),
        read_kib in 1usize..2048,
    ) {
        let mut stream = Vec::new();
        for (i, line) in long.iter().enumerate() {
            stream.extend_from_slice(line);
            if let Some(message) = short.get(i) {
                stream.extend_from_slice(format!("{message}\n").as_bytes());
            }
        }
        let copied = classify_reading(&stream, std::iter::repeat(read_kib * 1024), true);
        let handed_over = classify_reading(&stream, std::iter::repeat(read_kib * 1024), false);
        prop_assert_eq!(&copied.0, &handed_over.0);
        prop_assert_eq!(copied.1, handed_over.1);
        let whole = classify(&stream, &[], false);
        prop_assert_eq!(&whole.0, &handed_over.0);
        prop_assert_eq!(copied.1.messages + copied.1.invalid + copied.1.stray + copied.1.blank,
            (long.len() + short.len().min(long.len())) as u64);
    }
}
