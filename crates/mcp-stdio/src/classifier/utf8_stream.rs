//! UTF-8 validation of a byte stream that arrives in arbitrary pieces.

/// Validates a stream as UTF-8 across arbitrary chunk boundaries.
#[derive(Debug, Default)]
pub(crate) struct Utf8Stream {
    /// Bytes of a sequence begun at the end of an earlier chunk.
    partial: [u8; 4],
    partial_len: usize,
    /// Bytes validated so far (the stream offset of the next chunk).
    offset: u64,
}

/// The stream is not UTF-8: the invalid sequence begins at `offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NotUtf8 {
    pub(crate) offset: u64,
}

fn sequence_width(lead: u8) -> usize {
    match lead {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => 1,
    }
}

impl Utf8Stream {
    /// Validates the next chunk. On error, the bytes before the invalid sequence's start
    /// within this chunk are `chunk[..valid]` where `valid = offset - chunk_start` (clamped).
    pub(crate) fn feed(&mut self, chunk: &[u8]) -> Result<(), NotUtf8> {
        let chunk_start = self.offset;
        let mut rest = chunk;
        if self.partial_len > 0 {
            let start = chunk_start - self.partial_len as u64;
            let need = sequence_width(self.partial[0]) - self.partial_len;
            let take = need.min(rest.len());
            self.partial[self.partial_len..self.partial_len + take].copy_from_slice(&rest[..take]);
            self.partial_len += take;
            rest = &rest[take..];
            match std::str::from_utf8(&self.partial[..self.partial_len]) {
                Ok(_) => self.partial_len = 0,
                Err(e) if e.error_len().is_none() => {
                    self.offset += take as u64;
                    return Ok(());
                }
                Err(_) => return Err(NotUtf8 { offset: start }),
            }
        }
        let rest_start = chunk_start + (chunk.len() - rest.len()) as u64;
        match std::str::from_utf8(rest) {
            Ok(_) => {}
            Err(e) if e.error_len().is_none() => {
                let tail = &rest[e.valid_up_to()..];
                self.partial[..tail.len()].copy_from_slice(tail);
                self.partial_len = tail.len();
            }
            Err(e) => {
                return Err(NotUtf8 {
                    offset: rest_start + e.valid_up_to() as u64,
                });
            }
        }
        self.offset += chunk.len() as u64;
        Ok(())
    }

    /// The number of bytes fed so far (including a partial sequence's).
    pub(crate) fn offset_fed(&self) -> u64 {
        self.offset
    }

    /// The stream ended: a sequence left incomplete is an error.
    pub(crate) fn finish(&self) -> Result<(), NotUtf8> {
        if self.partial_len > 0 {
            Err(NotUtf8 {
                offset: self.offset - self.partial_len as u64,
            })
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(chunks: &[&[u8]]) -> Result<(), NotUtf8> {
        let mut s = Utf8Stream::default();
        for c in chunks {
            s.feed(c)?;
        }
        s.finish()
    }

    #[test]
    fn a_sequence_split_across_chunks_is_valid() {
        let euro = "€".as_bytes();
        assert_eq!(feed_all(&[&euro[..1], &euro[1..2], &euro[2..]]), Ok(()));
        assert_eq!(feed_all(&[b"ab", &euro[..2], &euro[2..], b"c"]), Ok(()));
    }

    #[test]
    fn an_invalid_byte_is_reported_at_its_stream_offset() {
        assert_eq!(feed_all(&[b"abc", b"de\xFFf"]), Err(NotUtf8 { offset: 5 }));
    }

    #[test]
    fn a_split_sequence_that_goes_wrong_is_reported_at_its_start() {
        assert_eq!(feed_all(&[b"ab\xE2\x82", b"x"]), Err(NotUtf8 { offset: 2 }));
    }

    #[test]
    fn a_sequence_cut_by_the_end_of_the_stream_is_invalid() {
        assert_eq!(feed_all(&[b"ab\xE2\x82"]), Err(NotUtf8 { offset: 2 }));
    }
}
