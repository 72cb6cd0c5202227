//! A sans-IO parser of Server-Sent Events with a bound on each event's size.

use std::collections::VecDeque;

/// The default bound on one event's data: 32 MiB, as the stdio line cap.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 32 * 1024 * 1024;

/// One event of the stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event` field; empty means `message`.
    pub event: String,
    /// The `data` lines, joined with `\n`.
    pub data: String,
    /// The `id` field of this event, if it had one.
    pub id: Option<String>,
}

/// What the parser found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    /// A complete event.
    Event(SseEvent),
    /// The server set the reconnection delay, in milliseconds.
    Retry(u64),
    /// An event over the bound was discarded as it came; memory stayed bounded.
    Oversized {
        /// How many bytes of data it had when it was dropped (at least the bound).
        length: usize,
    },
    /// The stream is not UTF-8 at this offset: nothing after it is read.
    NotUtf8 {
        /// The offset of the first byte of the line that is not UTF-8.
        offset: u64,
    },
}

/// Parses an SSE stream (`text/event-stream`), sans-IO: bytes in any chunking, items out.
///
/// Lines end at LF, CR or CRLF; a leading byte-order mark is skipped; `:` lines are
/// comments. An event's data is bounded: past the bound, the event is discarded up to its
/// end and reported as [`SseItem::Oversized`]. The last event id is kept for resumption.
///
/// ```
/// use maljan_mcp_http::{SseItem, SseParser};
/// let mut parser = SseParser::new(1024);
/// parser.handle_bytes(b"id: 7\nretry: 500\ndata: {\"jsonrpc\":\"2.0\",\n");
/// parser.handle_bytes(b"data: \"method\":\"n\"}\n\n");
/// assert_eq!(parser.poll_item(), Some(SseItem::Retry(500)));
/// let Some(SseItem::Event(event)) = parser.poll_item() else { panic!() };
/// assert_eq!(event.data, "{\"jsonrpc\":\"2.0\",\n\"method\":\"n\"}");
/// assert_eq!(parser.last_event_id(), Some("7"));
/// ```
#[derive(Debug)]
pub struct SseParser {
    max_event_bytes: usize,
    /// The partial line.
    line: Vec<u8>,
    /// Bytes of the partial line dropped because the event is oversized.
    line_dropped: usize,
    /// The last byte fed was a CR (a following LF belongs to the same line end).
    after_cr: bool,
    started: bool,
    event: SseEvent,
    has_data: bool,
    oversized: Option<usize>,
    last_event_id: Option<String>,
    offset: u64,
    line_start: u64,
    failed: bool,
    items: VecDeque<SseItem>,
}

impl SseParser {
    /// A parser bounding each event's data to `max_event_bytes`.
    pub fn new(max_event_bytes: usize) -> Self {
        SseParser {
            max_event_bytes: max_event_bytes.max(1),
            line: Vec::new(),
            line_dropped: 0,
            after_cr: false,
            started: false,
            event: SseEvent::default(),
            has_data: false,
            oversized: None,
            last_event_id: None,
            offset: 0,
            line_start: 0,
            failed: false,
            items: VecDeque::new(),
        }
    }

    /// The id of the last event with one: `Last-Event-ID` when resuming.
    pub fn last_event_id(&self) -> Option<&str> {
        self.last_event_id.as_deref()
    }

    /// Bytes held for the partial line (bounded by the event bound).
    pub fn buffered(&self) -> usize {
        self.line.len()
    }

    /// Takes bytes of the stream.
    pub fn handle_bytes(&mut self, bytes: &[u8]) {
        let mut rest = bytes;
        while !rest.is_empty() && !self.failed {
            if self.after_cr {
                self.after_cr = false;
                if rest[0] == b'\n' {
                    rest = &rest[1..];
                    self.offset += 1;
                    self.line_start = self.offset;
                    continue;
                }
            }
            match memchr::memchr2(b'\n', b'\r', rest) {
                Some(i) => {
                    self.take(&rest[..i]);
                    self.after_cr = rest[i] == b'\r';
                    self.offset += i as u64 + 1;
                    self.end_line();
                    self.line_start = self.offset;
                    rest = &rest[i + 1..];
                }
                None => {
                    self.take(rest);
                    self.offset += rest.len() as u64;
                    rest = &[];
                }
            }
        }
    }

    /// The stream ended: a last event without its blank line is dropped, as the standard says.
    pub fn handle_eof(&mut self) {
        self.line.clear();
        self.event = SseEvent::default();
        self.has_data = false;
    }

    /// The next item, or `None` until more bytes come.
    pub fn poll_item(&mut self) -> Option<SseItem> {
        self.items.pop_front()
    }

    /// Adds bytes to the partial line, dropping them once the event is over its bound.
    fn take(&mut self, bytes: &[u8]) {
        let room = (self.max_event_bytes + 16).saturating_sub(self.line.len());
        let keep = room.min(bytes.len());
        self.line.extend_from_slice(&bytes[..keep]);
        self.line_dropped += bytes.len() - keep;
    }

    fn end_line(&mut self) {
        let mut line = std::mem::take(&mut self.line);
        let dropped = std::mem::take(&mut self.line_dropped);
        if !self.started {
            self.started = true;
            if line.starts_with("\u{FEFF}".as_bytes()) {
                line.drain(..3);
            }
        }
        if line.is_empty() && dropped == 0 {
            self.dispatch();
            return;
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            // A line cut by the bound may end inside a character: that line is dropped anyway.
            if dropped == 0 {
                self.failed = true;
                self.items.push_back(SseItem::NotUtf8 {
                    offset: self.line_start,
                });
                return;
            }
            self.grow_oversized(line.len() + dropped);
            return;
        };
        let (field, value) = match text.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (text, ""),
        };
        match field {
            "" => {}
            "data" => {
                let length =
                    self.event.data.len() + value.len() + usize::from(self.has_data) + dropped;
                if self.oversized.is_some() || length > self.max_event_bytes {
                    self.grow_oversized(length);
                } else {
                    if self.has_data {
                        self.event.data.push('\n');
                    }
                    self.event.data.push_str(value);
                    self.has_data = true;
                }
            }
            "event" => self.event.event = value.to_owned(),
            "id" if !value.contains('\0') => self.event.id = Some(value.to_owned()),
            "retry" => {
                if let Ok(ms) = value.parse::<u64>() {
                    self.items.push_back(SseItem::Retry(ms));
                }
            }
            _ => {}
        }
    }

    fn grow_oversized(&mut self, length: usize) {
        let total = self.oversized.unwrap_or(self.event.data.len()).max(length);
        self.oversized = Some(total);
        self.event.data = String::new();
    }

    fn dispatch(&mut self) {
        let event = std::mem::take(&mut self.event);
        if let Some(id) = &event.id {
            self.last_event_id = Some(id.clone());
        }
        let has_data = std::mem::take(&mut self.has_data);
        if let Some(length) = self.oversized.take() {
            self.items.push_back(SseItem::Oversized { length });
            return;
        }
        if has_data {
            self.items.push_back(SseItem::Event(event));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(chunks: &[&[u8]], max: usize) -> Vec<SseItem> {
        let mut p = SseParser::new(max);
        let mut out = Vec::new();
        for c in chunks {
            p.handle_bytes(c);
            while let Some(i) = p.poll_item() {
                out.push(i);
            }
        }
        out
    }

    fn event(data: &str) -> SseItem {
        SseItem::Event(SseEvent {
            data: data.to_owned(),
            ..SseEvent::default()
        })
    }

    #[test]
    fn line_endings_comments_and_a_bom() {
        let got = items(&[b"\xEF\xBB\xBF: hello\r\ndata: a\r\rdata:b\n\n"], 100);
        assert_eq!(got, [event("a"), event("b")]);
    }

    #[test]
    fn a_crlf_split_across_chunks_is_one_line_end() {
        assert_eq!(items(&[b"data: x\r", b"\n\r", b"\n"], 100), [event("x")]);
    }

    #[test]
    fn an_event_over_the_bound_is_dropped_and_the_next_one_read() {
        let big = [b"data: ".as_slice(), &[b'x'; 500], b"\n\ndata: ok\n\n"].concat();
        let mut p = SseParser::new(100);
        for piece in big.chunks(7) {
            p.handle_bytes(piece);
            assert!(p.buffered() <= 116, "memory bounded");
        }
        assert_eq!(p.poll_item(), Some(SseItem::Oversized { length: 500 }));
        assert_eq!(p.poll_item(), Some(event("ok")));
    }

    #[test]
    fn events_without_data_are_not_dispatched_but_their_id_counts() {
        let mut p = SseParser::new(100);
        p.handle_bytes(b"id: 1\ndata:\n\nid: 2\n\n");
        assert_eq!(
            p.poll_item(),
            Some(SseItem::Event(SseEvent {
                id: Some("1".into()),
                ..SseEvent::default()
            }))
        );
        assert_eq!(p.poll_item(), None);
        assert_eq!(p.last_event_id(), Some("2"));
    }
}
