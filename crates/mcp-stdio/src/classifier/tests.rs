//! The classifier's tests: every kind of line, alone and mixed.

use maljan_mcp_proto::jsonrpc::{InvalidReason, Message, RequestId};

use super::*;

const ANSWER: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#;

#[derive(Debug, Default)]
struct Seen {
    messages: Vec<Message>,
    salvaged: Vec<String>,
    first_stray: Vec<String>,
    invalid: Vec<(InvalidReason, Option<RequestId>, bool)>,
    oversized: Vec<(u64, String)>,
    not_utf8: Vec<u64>,
}

fn drain(c: &mut LineClassifier, seen: &mut Seen) {
    while let Some(event) = c.poll_event() {
        match event {
            Event::Message(m) => seen.messages.push(m),
            Event::Salvaged { prefix } => seen.salvaged.push(prefix.to_string()),
            Event::FirstStray { excerpt } => seen.first_stray.push(excerpt.to_string()),
            Event::Invalid {
                invalid, stated, ..
            } => seen.invalid.push((invalid.reason, invalid.id, stated)),
            Event::Oversized { length, excerpt } => {
                seen.oversized.push((length, excerpt.to_string()))
            }
            Event::NotUtf8 { offset } => seen.not_utf8.push(offset),
        }
    }
}

fn run_with(config: ClassifierConfig, window: SetupWindow, chunks: &[&[u8]]) -> (Seen, LineCounts) {
    let mut c = match window {
        SetupWindow::Open => LineClassifier::in_setup(config),
        SetupWindow::Closed => LineClassifier::new(config),
    };
    let mut seen = Seen::default();
    for chunk in chunks {
        c.handle_bytes(chunk);
        drain(&mut c, &mut seen);
    }
    c.handle_eof();
    drain(&mut c, &mut seen);
    assert!(c.is_finished());
    (seen, c.counts())
}

fn run(window: SetupWindow, text: &[u8]) -> (Seen, LineCounts) {
    run_with(ClassifierConfig::default(), window, &[text])
}

fn line(s: &str) -> Vec<u8> {
    format!("{s}\n").into_bytes()
}

#[test]
fn a_valid_message_is_delivered() {
    let (seen, counts) = run(SetupWindow::Closed, &line(ANSWER));
    assert_eq!(seen.messages.len(), 1);
    assert_eq!(counts.messages, 1);
}

#[test]
fn blank_lines_are_ignored_and_counted() {
    let (seen, counts) = run(SetupWindow::Closed, b"\n   \n\t\r\n");
    assert!(seen.messages.is_empty() && seen.first_stray.is_empty());
    assert_eq!(counts.blank, 3);
}

#[test]
fn crlf_line_endings_are_read() {
    let (seen, counts) = run(
        SetupWindow::Closed,
        format!("{ANSWER}\r\n{ANSWER}\r\n").as_bytes(),
    );
    assert_eq!(seen.messages.len(), 2);
    assert_eq!(counts.stray, 0);
}

#[test]
fn a_bom_before_the_initialize_answer_is_delivered_during_setup() {
    let (seen, counts) = run(SetupWindow::Open, &line(&format!("\u{FEFF}{ANSWER}")));
    assert_eq!(seen.messages.len(), 1);
    assert_eq!(counts.salvaged, 1);
    assert_eq!(
        counts.stray, 0,
        "a byte-order mark alone is not a stray line"
    );
}

#[test]
fn a_progress_bar_glued_to_an_answer_is_salvaged_during_setup() {
    let (seen, counts) = run(
        SetupWindow::Open,
        &line(&format!("Downloading 50%\r{ANSWER}")),
    );
    assert_eq!(seen.messages.len(), 1);
    assert_eq!(seen.salvaged, vec!["Downloading 50%".to_owned()]);
    assert_eq!(counts.salvaged, 1);
    assert_eq!(counts.stray, 1);
}

#[test]
fn the_same_glued_answer_after_setup_is_not_delivered() {
    let (seen, counts) = run(
        SetupWindow::Closed,
        &line(&format!("Downloading 50%\r{ANSWER}")),
    );
    assert!(seen.messages.is_empty());
    assert_eq!(counts.salvaged, 0);
    assert_eq!(counts.stray, 1);
}

#[test]
fn a_json_log_record_is_stray() {
    let (seen, counts) = run(SetupWindow::Closed, &line(r#"{"level":"info","msg":"x"}"#));
    assert!(seen.messages.is_empty() && seen.invalid.is_empty());
    assert_eq!(counts.stray, 1);
    assert_eq!(
        seen.first_stray,
        vec![r#"{"level":"info","msg":"x"}"#.to_owned()]
    );
}

#[test]
fn a_null_id_is_stated_with_its_reason() {
    let (seen, counts) = run(
        SetupWindow::Closed,
        &line(r#"{"jsonrpc":"2.0","id":null,"result":{}}"#),
    );
    assert_eq!(seen.invalid, vec![(InvalidReason::NullId, None, true)]);
    assert_eq!(counts.invalid, 1);
    assert!(seen.messages.is_empty());
}

#[test]
fn an_invalid_answer_carries_its_readable_id() {
    let (seen, _) = run(
        SetupWindow::Closed,
        &line(r#"{"jsonrpc":"2.0","id":7,"result":{},"error":{"code":1,"message":"x"}}"#),
    );
    assert_eq!(
        seen.invalid,
        vec![(
            InvalidReason::ResultAndError,
            Some(RequestId::Integer(7)),
            true
        )]
    );
}

#[test]
fn a_broken_line_mentioning_jsonrpc_is_stated_not_counted_as_stray() {
    let (seen, counts) = run(
        SetupWindow::Closed,
        &line(r#"{"jsonrpc":"2.0","id":1,"result":"#),
    );
    assert!(matches!(seen.invalid[0].0, InvalidReason::NotJson(_)));
    assert_eq!(counts.stray, 0);
}

#[test]
fn a_thousand_banner_lines_then_an_answer() {
    let mut text = Vec::new();
    for i in 0..1000 {
        text.extend_from_slice(format!("banner line {i}\n").as_bytes());
    }
    text.extend_from_slice(&line(ANSWER));
    let (seen, counts) = run(SetupWindow::Closed, &text);
    assert_eq!(seen.messages.len(), 1);
    assert_eq!(counts.stray, 1000);
    assert_eq!(seen.first_stray, vec!["banner line 0".to_owned()]);
}

#[test]
fn statements_stop_after_the_budget_but_counting_goes_on() {
    let config = ClassifierConfig {
        max_statements: 2,
        ..ClassifierConfig::default()
    };
    let bad = line(r#"{"jsonrpc":"1.0","id":1,"result":{}}"#).repeat(3);
    let (seen, counts) = run_with(config, SetupWindow::Closed, &[&bad]);
    let stated: Vec<bool> = seen.invalid.iter().map(|i| i.2).collect();
    assert_eq!(stated, vec![true, true, false]);
    assert_eq!(counts.invalid, 3);
}

fn capped(cap: usize) -> ClassifierConfig {
    ClassifierConfig {
        max_line_bytes: cap,
        ..ClassifierConfig::default()
    }
}

#[test]
fn a_line_at_the_cap_is_read_and_one_byte_over_is_discarded() {
    let cap = ANSWER.len();
    let (seen, counts) = run_with(capped(cap), SetupWindow::Closed, &[&line(ANSWER)]);
    assert_eq!((seen.messages.len(), counts.oversized), (1, 0));
    let (seen, counts) = run_with(capped(cap - 1), SetupWindow::Closed, &[&line(ANSWER)]);
    assert_eq!((seen.messages.len(), counts.oversized), (0, 1));
    assert_eq!(seen.oversized[0].0, cap as u64);
}

#[test]
fn an_oversized_line_is_discarded_in_pieces_and_the_next_line_read() {
    let cap = 1024;
    let mut c = LineClassifier::new(capped(cap));
    let mut seen = Seen::default();
    let piece = vec![b'x'; 4096];
    for _ in 0..256 {
        c.handle_bytes(&piece);
        drain(&mut c, &mut seen);
        assert!(
            c.buffered() <= cap + piece.len(),
            "memory bounded by the cap"
        );
    }
    c.handle_bytes(format!("\n{ANSWER}\n").as_bytes());
    drain(&mut c, &mut seen);
    assert_eq!(seen.oversized.len(), 1);
    assert_eq!(seen.oversized[0].0, 256 * 4096);
    assert!(seen.oversized[0].1.starts_with("xxxx"));
    assert_eq!(seen.messages.len(), 1);
}

#[test]
fn invalid_utf8_split_across_two_reads_ends_the_stream_at_its_offset() {
    let mut first = line(ANSWER);
    first.extend_from_slice(b"ab\xE2");
    let (seen, counts) = run_with(
        ClassifierConfig::default(),
        SetupWindow::Closed,
        &[&first, b"\x28rest\n", ANSWER.as_bytes()],
    );
    assert_eq!(
        seen.messages.len(),
        1,
        "the line before the bad byte is read"
    );
    assert_eq!(seen.not_utf8, vec![ANSWER.len() as u64 + 3]);
    assert_eq!(counts.stray, 0, "nothing after the bad byte is read");
    assert_eq!(counts.messages, 1);
}

#[test]
fn a_valid_sequence_split_across_reads_is_fine() {
    let text = line(r#"{"jsonrpc":"2.0","id":1,"result":{"s":"€"}}"#);
    let split = text.iter().position(|&b| b == 0xE2).unwrap() + 1;
    let (seen, _) = run_with(
        ClassifierConfig::default(),
        SetupWindow::Closed,
        &[&text[..split], &text[split..]],
    );
    assert_eq!(seen.messages.len(), 1);
    assert!(seen.not_utf8.is_empty());
}

#[test]
fn a_last_line_without_newline_is_read_at_end_of_stream() {
    let (seen, _) = run(SetupWindow::Closed, ANSWER.as_bytes());
    assert_eq!(seen.messages.len(), 1);
}

#[test]
fn batches_are_refused_unless_allowed() {
    let batch = line(&format!("[{ANSWER},{ANSWER}]"));
    let (seen, counts) = run(SetupWindow::Closed, &batch);
    assert_eq!(seen.invalid[0].0, InvalidReason::BatchNotAllowed);
    assert_eq!(counts.messages, 0);

    let mut c = LineClassifier::default();
    c.set_batches_allowed(true);
    c.handle_bytes(&batch);
    let mut seen = Seen::default();
    drain(&mut c, &mut seen);
    assert_eq!(seen.messages.len(), 2);
}

#[test]
fn control_characters_in_the_stray_excerpt_are_escaped() {
    let (seen, _) = run(SetupWindow::Closed, b"\x1b[2Kprogress\x07\n");
    assert_eq!(
        seen.first_stray,
        vec!["\\u{1b}[2Kprogress\\u{7}".to_owned()]
    );
}

#[test]
fn the_window_closes_for_good() {
    assert_eq!(
        LineClassifier::default().setup_window(),
        SetupWindow::Closed,
        "a classifier salvages nothing unless it is made for a client's setup"
    );
    let mut c = LineClassifier::in_setup(ClassifierConfig::default());
    assert_eq!(c.setup_window(), SetupWindow::Open);
    c.close_setup_window();
    assert_eq!(c.setup_window(), SetupWindow::Closed);
}

#[test]
fn a_long_answer_is_decoded_in_the_buffer_it_was_read_into() {
    let answer = |id: u32| {
        let data = "A".repeat(2 * MIN_KEPT_BYTES);
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"data":"{data}"}}}}"#).into_bytes()
    };
    let (first, second) = (answer(1), answer(2));
    let mut c = LineClassifier::new(ClassifierConfig::default());
    // The first answer, then the head of the second: the head is read into a buffer of
    // its own, with room for all of the second answer.
    c.handle_bytes(&first);
    c.handle_bytes(b"\n");
    c.handle_bytes(&second[..100]);
    assert!(matches!(c.poll_event(), Some(Event::Message(_))));
    let buffer = c.buf.as_ptr() as usize;
    c.handle_bytes(&second[100..]);
    c.handle_bytes(b"\n");
    let Some(Event::Message(Message::Response(response))) = c.poll_event() else {
        panic!("the second answer is delivered");
    };
    let result = response.result.get();
    assert!(result.starts_with(r#"{"data":"AAA"#));
    let in_line = r#"{"jsonrpc":"2.0","id":2,"result":"#.len();
    assert_eq!(
        (result.as_ptr() as usize).wrapping_sub(buffer),
        in_line,
        "the result lies in the buffer the answer was read into, where it was in the line"
    );
}

#[test]
fn a_long_broken_line_is_quoted_from_its_head() {
    let broken = format!(
        r#"{{"jsonrpc":"2.0","id":3,"result":"{}"#,
        "é".repeat(MIN_KEPT_BYTES)
    );
    let mut c = LineClassifier::new(ClassifierConfig::default());
    c.handle_bytes(broken.as_bytes());
    c.handle_bytes(b"\n");
    let Some(Event::Invalid { excerpt, .. }) = c.poll_event() else {
        panic!("a broken line mentioning jsonrpc is stated");
    };
    assert_eq!(excerpt, Excerpt::of(broken.as_bytes(), EXCERPT_CHARS));
    assert!(excerpt.is_truncated());
}
