//! Properties of the SSE parser.

use maljan_mcp_http::{SseEvent, SseItem, SseParser};
use proptest::prelude::*;

fn parse(bytes: &[u8], cuts: &[usize], bound: usize) -> (Vec<SseItem>, Option<String>) {
    let mut parser = SseParser::new(bound);
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    let mut items = Vec::new();
    let mut start = 0;
    for cut in cuts.into_iter().chain([bytes.len()]) {
        parser.handle_bytes(&bytes[start..cut]);
        start = cut;
        while let Some(item) = parser.poll_item() {
            items.push(item);
        }
    }
    (items, parser.last_event_id().map(str::to_owned))
}

fn event() -> impl Strategy<Value = SseEvent> {
    (
        "[a-z]{0,8}",
        prop::collection::vec("[^\r\n]{0,20}", 1..4),
        prop::option::of("[a-z0-9]{1,6}"),
    )
        .prop_map(|(event, lines, id)| SseEvent {
            event,
            data: lines.join("\n"),
            id,
        })
}

fn render(events: &[SseEvent], line_end: &str) -> String {
    let mut out = String::new();
    for e in events {
        if let Some(id) = &e.id {
            out.push_str(&format!("id: {id}{line_end}"));
        }
        if !e.event.is_empty() {
            out.push_str(&format!("event: {}{line_end}", e.event));
        }
        for line in e.data.split('\n') {
            out.push_str(&format!("data: {line}{line_end}"));
        }
        out.push_str(line_end);
    }
    out
}

proptest! {
    #[test]
    fn events_round_trip_with_any_line_ending(
        events in prop::collection::vec(event(), 0..8),
        line_end in prop_oneof![Just("\n"), Just("\r\n"), Just("\r")],
    ) {
        let text = render(&events, line_end);
        let (items, last_id) = parse(text.as_bytes(), &[], 1 << 20);
        let expected: Vec<SseItem> = events.iter().cloned().map(SseItem::Event).collect();
        prop_assert_eq!(items, expected);
        prop_assert_eq!(last_id, events.iter().rev().find_map(|e| e.id.clone()));
    }

    #[test]
    fn any_chunking_gives_the_same_items(
        bytes in prop::collection::vec(any::<u8>(), 0..400),
        cuts in prop::collection::vec(any::<usize>(), 0..20),
        bound in 1usize..64,
    ) {
        prop_assert_eq!(parse(&bytes, &[], bound), parse(&bytes, &cuts, bound));
    }

    #[test]
    fn no_event_over_the_bound_is_ever_delivered(
        bytes in prop::collection::vec(any::<u8>(), 0..600),
        bound in 1usize..64,
    ) {
        for item in parse(&bytes, &[], bound).0 {
            if let SseItem::Event(e) = item {
                prop_assert!(e.data.len() <= bound);
            }
        }
    }
}
