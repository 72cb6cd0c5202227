//! The stdout line classifier: bytes in, events out, no I/O and no clock.
//!
//! It applies the rules of a stdio server's stdout in order: UTF-8 as a stream, blank lines,
//! the line cap, protocol claims (validated, invalid ones stated), and stray lines; and,
//! while the setup window is open, salvages a message glued behind a carriage return or a
//! byte-order mark.
//!
//! Call order: [`LineClassifier::handle_bytes`] with what was read (or read straight into
//! its buffer through [`LineClassifier::read_target`]), then [`LineClassifier::poll_event`]
//! until it returns `None`, then read again. At the end of the stream call
//! [`LineClassifier::handle_eof`] and poll again. Control calls
//! ([`LineClassifier::close_setup_window`]) take effect from the next line polled.

mod counts;
mod excerpt;
mod utf8_stream;

use std::collections::VecDeque;

use bytes::buf::Limit;
use bytes::{BufMut, Bytes, BytesMut};
use maljan_mcp_proto::jsonrpc::{
    DecodedLine, InvalidMessage, Message, decode_line, decode_line_buffer,
};
use maljan_mcp_proto::large_buffers::{LARGE_BUFFERS, MIN_KEPT_BYTES};

pub use counts::LineCounts;
pub use excerpt::Excerpt;
use utf8_stream::Utf8Stream;

/// The default line cap: 32 MiB.
pub const DEFAULT_MAX_LINE_BYTES: usize = 32 * 1024 * 1024;
/// How many invalid messages are stated one by one on a connection; the rest are counted.
pub const DEFAULT_MAX_STATEMENTS: u64 = 100;
/// Characters kept of a line in an excerpt.
pub const EXCERPT_CHARS: usize = 200;

const BOM: &[u8] = "\u{FEFF}".as_bytes();

/// Limits of a [`LineClassifier`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClassifierConfig {
    /// The longest line read, in bytes before the LF; longer lines are discarded unread.
    pub max_line_bytes: usize,
    /// How many invalid messages are stated individually.
    pub max_statements: u64,
}

impl Default for ClassifierConfig {
    fn default() -> Self {
        ClassifierConfig {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_statements: DEFAULT_MAX_STATEMENTS,
        }
    }
}

/// Whether lines that are not messages may still have one salvaged from them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SetupWindow {
    /// From spawn until the client holds the full tool list.
    Open,
    /// For good.
    Closed,
}

/// What the classifier found.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event {
    /// A valid protocol message (a batch arrives as its messages, in order).
    Message(Message),
    /// A message read out of a line during the setup window; its message follows as
    /// [`Event::Message`]. `prefix` is what came before it.
    Salvaged {
        /// The text before the message.
        prefix: Excerpt,
    },
    /// The first stray line of the connection (later ones are only counted).
    FirstStray {
        /// The line.
        excerpt: Excerpt,
    },
    /// A protocol claim that failed validation, stated when it comes.
    Invalid {
        /// What failed, and the id when it could be read.
        invalid: InvalidMessage,
        /// The line.
        excerpt: Excerpt,
        /// `false` once more than `max_statements` have been stated: count it, don't log it.
        stated: bool,
    },
    /// A line over the cap, discarded unread.
    Oversized {
        /// Its length in bytes, without the LF.
        length: u64,
        /// Its first characters.
        excerpt: Excerpt,
    },
    /// Bytes that are not UTF-8: the stream is over and nothing after it is read.
    NotUtf8 {
        /// The stream offset of the invalid sequence.
        offset: u64,
    },
}

#[derive(Debug)]
struct Discard {
    length: u64,
    head: Vec<u8>,
}

/// The sans-IO classifier of a stdio server's stdout.
///
/// ```
/// use maljan_mcp_stdio::{Event, LineClassifier};
/// let mut classifier = LineClassifier::default();
/// classifier.handle_bytes(b"Server starting...\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
/// let mut messages = 0;
/// while let Some(event) = classifier.poll_event() {
///     if let Event::Message(_) = event {
///         messages += 1;
///     }
/// }
/// assert_eq!(messages, 1);
/// assert_eq!(classifier.counts().stray, 1);
/// ```
#[derive(Debug)]
pub struct LineClassifier {
    config: ClassifierConfig,
    utf8: Utf8Stream,
    /// Bytes received and not yet classified; holds at most one partial line past `scanned`.
    buf: BytesMut,
    /// How far `buf` has been searched for an LF.
    scanned: usize,
    /// The most bytes last asked for by [`LineClassifier::read_target`]: room kept past a
    /// long line's length when its buffer is handed over.
    read_max: usize,
    discard: Option<Discard>,
    not_utf8_at: Option<u64>,
    eof: bool,
    finished: bool,
    window: SetupWindow,
    batches_allowed: bool,
    counts: LineCounts,
    events: VecDeque<Event>,
}

/// Room to read stdout into, straight into a [`LineClassifier`]'s buffer: see
/// [`LineClassifier::read_target`]. Only bytes can be put in it; dropped, it hands them to the
/// classifier.
#[derive(Debug)]
pub struct ReadTarget<'a> {
    classifier: &'a mut LineClassifier,
    held: usize,
    max: usize,
}

impl ReadTarget<'_> {
    /// The room, to read into (`AsyncReadExt::read_buf`, say): up to the `max` bytes asked.
    pub fn buf(&mut self) -> Limit<&mut BytesMut> {
        let room = self
            .max
            .saturating_sub(self.classifier.buf.len() - self.held);
        (&mut self.classifier.buf).limit(room)
    }
}

impl Drop for ReadTarget<'_> {
    fn drop(&mut self) {
        self.classifier.take_appended(self.held);
    }
}

impl Default for LineClassifier {
    fn default() -> Self {
        LineClassifier::new(ClassifierConfig::default())
    }
}

impl LineClassifier {
    /// A classifier with its setup window closed: nothing is ever salvaged. For any reader
    /// of a peer's lines but a client setting a server up (a server reading its stdin, say).
    pub fn new(config: ClassifierConfig) -> Self {
        let mut classifier = Self::in_setup(config);
        classifier.window = SetupWindow::Closed;
        classifier
    }

    /// A classifier for a client setting a server up: its setup window open until
    /// [`close_setup_window`](Self::close_setup_window) (SPEC §2).
    pub fn in_setup(config: ClassifierConfig) -> Self {
        LineClassifier {
            config,
            utf8: Utf8Stream::default(),
            buf: BytesMut::new(),
            scanned: 0,
            read_max: 0,
            discard: None,
            not_utf8_at: None,
            eof: false,
            finished: false,
            window: SetupWindow::Open,
            batches_allowed: false,
            counts: LineCounts::default(),
            events: VecDeque::new(),
        }
    }

    /// Takes bytes read from stdout, in any chunking.
    pub fn handle_bytes(&mut self, bytes: &[u8]) {
        let held = self.buf.len();
        if self.takes_bytes() {
            self.buf.extend_from_slice(bytes);
            self.take_appended(held);
        }
    }

    /// Room for up to `max` bytes straight after those held, to read stdout into without
    /// copying it from a buffer of the caller's (a file chunk's line is several MiB). What
    /// was put in it is taken, as by [`handle_bytes`](Self::handle_bytes), when the room is
    /// dropped.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> std::io::Result<()> {
    /// use maljan_mcp_stdio::{Event, LineClassifier};
    /// use tokio::io::AsyncReadExt;
    /// let mut stdout: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
    /// let mut classifier = LineClassifier::default();
    /// let read = stdout.read_buf(&mut classifier.read_target(1 << 20).buf()).await?;
    /// assert_eq!(read, 37);
    /// assert!(matches!(classifier.poll_event(), Some(Event::Message(_))));
    /// # Ok(()) }
    /// ```
    pub fn read_target(&mut self, max: usize) -> ReadTarget<'_> {
        self.read_max = max;
        self.buf.reserve(max);
        ReadTarget {
            held: self.buf.len(),
            max,
            classifier: self,
        }
    }

    /// Whether bytes read are still taken: not after the end of the stream or invalid UTF-8.
    fn takes_bytes(&self) -> bool {
        !(self.finished || self.eof || self.not_utf8_at.is_some())
    }

    /// Takes the bytes appended to the buffer past `held`: checked as UTF-8, and only those
    /// before the first invalid byte kept.
    fn take_appended(&mut self, held: usize) {
        if !self.takes_bytes() {
            self.buf.truncate(held);
            return;
        }
        let chunk_start = self.utf8.offset_fed();
        let appended = &self.buf[held..];
        if let Err(e) = self.utf8.feed(appended) {
            let valid = e
                .offset
                .saturating_sub(chunk_start)
                .min(appended.len() as u64);
            self.buf.truncate(held + valid as usize);
            self.not_utf8_at = Some(e.offset);
        }
    }

    /// The stream ended; a last line without an LF is still classified.
    pub fn handle_eof(&mut self) {
        if self.eof {
            return;
        }
        self.eof = true;
        if self.not_utf8_at.is_none()
            && let Err(e) = self.utf8.finish()
        {
            self.not_utf8_at = Some(e.offset);
        }
    }

    /// The next event, or `None` when more bytes are needed.
    pub fn poll_event(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.events.pop_front() {
                return Some(event);
            }
            if self.finished {
                return None;
            }
            if let Some(lf) = memchr::memchr(b'\n', &self.buf[self.scanned..]) {
                let end = self.scanned + lf;
                self.scanned = 0;
                if self.hands_over(end) {
                    let line = self.split_long_line(end);
                    self.classify_owned(line);
                } else {
                    let line = self.buf.split_to(end + 1).freeze();
                    self.finish_line(&line[..end]);
                }
                continue;
            }
            self.scanned = self.buf.len();
            self.bound_partial_line();
            if let Some(offset) = self.not_utf8_at {
                self.finish_stream();
                self.events.push_back(Event::NotUtf8 { offset });
                continue;
            }
            if self.eof {
                let rest = self.buf.split().freeze();
                if self.discard.is_some() || !rest.is_empty() {
                    self.finish_line(&rest);
                }
                self.finish_stream();
                continue;
            }
            return None;
        }
    }

    /// Closes the setup window for good: nothing is salvaged from the next line on.
    pub fn close_setup_window(&mut self) {
        self.window = SetupWindow::Closed;
    }

    /// Whether the setup window is open.
    pub fn setup_window(&self) -> SetupWindow {
        self.window
    }

    /// Allows batches (protocol 2025-03-26) or refuses them (every other version).
    pub fn set_batches_allowed(&mut self, allowed: bool) {
        self.batches_allowed = allowed;
    }

    /// The counts so far.
    pub fn counts(&self) -> LineCounts {
        self.counts
    }

    /// Whether the stream is over (end of stream or invalid UTF-8) and every event was polled.
    pub fn is_finished(&self) -> bool {
        self.finished && self.events.is_empty()
    }

    /// Bytes held for the partial line (bounded by the line cap).
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    fn finish_stream(&mut self) {
        self.finished = true;
        self.buf = BytesMut::new();
        self.scanned = 0;
        self.discard = None;
    }

    /// Keeps the partial line within the cap: past it, the line is discarded as it comes.
    fn bound_partial_line(&mut self) {
        match &mut self.discard {
            Some(discard) => {
                take_head(&mut discard.head, &self.buf);
                discard.length += self.buf.len() as u64;
                self.buf.clear();
                self.scanned = 0;
            }
            None if self.buf.len() > self.config.max_line_bytes => {
                let mut head = Vec::new();
                take_head(&mut head, &self.buf);
                self.discard = Some(Discard {
                    length: self.buf.len() as u64,
                    head,
                });
                self.buf.clear();
                self.scanned = 0;
            }
            None => {}
        }
    }

    fn finish_line(&mut self, line: &[u8]) {
        if let Some(mut discard) = self.discard.take() {
            take_head(&mut discard.head, line);
            self.oversized(discard.length + line.len() as u64, &discard.head);
            return;
        }
        if line.len() > self.config.max_line_bytes {
            self.oversized(line.len() as u64, line);
            return;
        }
        self.classify(line.strip_suffix(b"\r").unwrap_or(line));
    }

    fn oversized(&mut self, length: u64, head: &[u8]) {
        self.counts.oversized += 1;
        self.events.push_back(Event::Oversized {
            length,
            excerpt: Excerpt::of(head, EXCERPT_CHARS),
        });
    }

    /// Whether the line ending at `end` is decoded in the buffer it was read into, handed
    /// over whole (a file chunk's line, whose result then keeps it) rather than copied: a
    /// long line, within the cap, with nothing to salvage from it.
    fn hands_over(&self, end: usize) -> bool {
        end >= MIN_KEPT_BYTES
            && end <= self.config.max_line_bytes
            && self.discard.is_none()
            && self.window == SetupWindow::Closed
    }

    /// Takes the line ending at `end` (its LF) out of the buffer without copying it: the
    /// bytes after it move to a kept buffer with room for another line as long, which
    /// becomes the buffer read into.
    fn split_long_line(&mut self, end: usize) -> Vec<u8> {
        let mut next = LARGE_BUFFERS.take(end + 1 + self.read_max);
        next.extend_from_slice(&self.buf[end + 1..]);
        let next = BytesMut::from(Bytes::from(next));
        let mut line = Vec::from(std::mem::replace(&mut self.buf, next));
        line.truncate(end);
        line
    }

    fn classify(&mut self, line: &[u8]) {
        if is_blank(line) {
            self.counts.blank += 1;
            return;
        }
        let decoded = decode_line(line, self.batches_allowed);
        if !matches!(decoded, DecodedLine::Message(_) | DecodedLine::Batch(_))
            && self.window == SetupWindow::Open
            && self.salvage(line)
        {
            return;
        }
        self.take_decoded(decoded, line);
    }

    /// [`classify`](Self::classify) for a line in a buffer of its own (see
    /// [`hands_over`](Self::hands_over)), decoded in that buffer.
    fn classify_owned(&mut self, mut line: Vec<u8>) {
        if line.ends_with(b"\r") {
            line.pop();
        }
        if is_blank(&line) {
            self.counts.blank += 1;
            LARGE_BUFFERS.give(line);
            return;
        }
        // An excerpt of a line never reads past its first EXCERPT_CHARS characters, which
        // fit in this many bytes; the line itself goes to the decoder.
        let head = line[..line.len().min(EXCERPT_CHARS * 4)].to_vec();
        let decoded = decode_line_buffer(line, self.batches_allowed);
        self.take_decoded(decoded, &head);
    }

    /// Delivers what a line decoded to; `line` (or its head) is quoted when it is not a
    /// message.
    fn take_decoded(&mut self, decoded: DecodedLine, line: &[u8]) {
        match decoded {
            DecodedLine::Message(message) => self.deliver(message),
            DecodedLine::Batch(messages) => messages.into_iter().for_each(|m| self.deliver(m)),
            DecodedLine::Invalid(invalid) => {
                self.counts.invalid += 1;
                self.events.push_back(Event::Invalid {
                    invalid,
                    excerpt: Excerpt::of(line, EXCERPT_CHARS),
                    stated: self.counts.invalid <= self.config.max_statements,
                });
            }
            DecodedLine::NotProtocol => self.stray(line),
        }
    }

    fn deliver(&mut self, message: Message) {
        self.counts.messages += 1;
        self.events.push_back(Event::Message(message));
    }

    fn stray(&mut self, line: &[u8]) {
        self.counts.stray += 1;
        if self.counts.stray == 1 {
            self.events.push_back(Event::FirstStray {
                excerpt: Excerpt::of(line, EXCERPT_CHARS),
            });
        }
    }

    /// Reads a message from after the line's last CR or byte-order mark, whichever is later.
    fn salvage(&mut self, line: &[u8]) -> bool {
        let after_cr = memchr::memrchr(b'\r', line).map(|i| (i, i + 1));
        let after_bom = memchr::memmem::rfind(line, BOM).map(|i| (i, i + BOM.len()));
        let Some((prefix_end, start)) = after_cr.max(after_bom) else {
            return false;
        };
        let DecodedLine::Message(message) = decode_line(&line[start..], false) else {
            return false;
        };
        let prefix = &line[..prefix_end];
        self.counts.salvaged += 1;
        self.events.push_back(Event::Salvaged {
            prefix: Excerpt::of(prefix, EXCERPT_CHARS),
        });
        if !is_filler(prefix) {
            self.stray(prefix);
        }
        self.deliver(message);
        true
    }
}

/// Whitespace only: a blank line, skipped.
fn is_blank(line: &[u8]) -> bool {
    line.iter().all(u8::is_ascii_whitespace)
}

/// Whitespace and byte-order marks only: nothing a server meant to say.
fn is_filler(bytes: &[u8]) -> bool {
    let mut rest = bytes;
    loop {
        if let Some(after) = rest.strip_prefix(BOM) {
            rest = after;
        } else if let Some((first, after)) = rest.split_first() {
            if !first.is_ascii_whitespace() {
                return false;
            }
            rest = after;
        } else {
            return true;
        }
    }
}

/// Keeps the first bytes of a discarded line, enough for an excerpt.
fn take_head(head: &mut Vec<u8>, more: &[u8]) {
    const HEAD_BYTES: usize = EXCERPT_CHARS * 4;
    let room = HEAD_BYTES.saturating_sub(head.len());
    head.extend_from_slice(&more[..room.min(more.len())]);
}

#[cfg(test)]
mod tests;
