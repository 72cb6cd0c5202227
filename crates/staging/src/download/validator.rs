//! A download's protocol, sans-IO: which chunk to ask for, and whether the server's answers
//! (sizes, offsets, digests) hold.

use base64::engine::general_purpose::STANDARD;
use base64::{DecodeError, DecodeSliceError, Engine};
use maljan_direct_write::pad_to_aligned;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::DownloadError;
use super::error::MalformedChunk;

/// One `get_file` call to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkRequest {
    /// The file, as the server named it.
    pub path: String,
    /// Where to start.
    pub offset: u64,
    /// How many bytes to ask for.
    pub length: u64,
}

impl ChunkRequest {
    /// The `get_file` arguments.
    pub fn arguments(&self) -> Value {
        json!({"path": self.path, "offset": self.offset, "length": self.length})
    }
}

/// A download that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedDownload {
    /// Its size.
    pub size: u64,
    /// Its sha256, lowercase hex.
    pub sha256: String,
}

/// Checks a `get_file` answer sequence, sans-IO: it says what to ask for next, checks each
/// answer against every refusal, hashes the bytes, and checks the final digest.
///
/// The first answer fixes `size` and `sha256`; later answers must state the same ones, at
/// the offset asked for, with a chunk no longer than asked, not past `size`, and not empty
/// before `size`.
///
/// ```
/// use maljan_staging::{ChunkRequest, DownloadValidator};
/// let mut v = DownloadValidator::new("out/a.txt", 4);
/// assert_eq!(v.poll_request(), Some(ChunkRequest { path: "out/a.txt".into(), offset: 0, length: 4 }));
/// let sha = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"; // "hello world"
/// let bytes = v.handle_answer(&serde_json::json!({
///     "size": 11, "sha256": sha, "offset": 0, "content_base64": "aGVsbA=="})).unwrap();
/// assert_eq!(bytes, b"hell");
/// assert_eq!(v.poll_request().unwrap().offset, 4);
/// ```
#[derive(Debug, Clone)]
pub struct DownloadValidator {
    path: String,
    chunk_len: u64,
    next_offset: u64,
    size: Option<u64>,
    sha256: Option<String>,
    hasher: Sha256,
    /// The largest size accepted: room on the local disk, or the run's cap.
    most: u64,
}

/// Where the bytes of accepted chunks are hashed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hashing {
    Here,
    ByCaller,
}

/// Where in its buffer a chunk is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Placement {
    /// At the buffer's start: the buffer holds the chunk and nothing else.
    AtStart,
    /// At the buffer's first address aligned to [`ALIGN`](maljan_direct_write::ALIGN), so
    /// that the chunk can be written past the page cache straight from there rather than
    /// copied block by block.
    Aligned,
}

fn number(answer: &Value, member: &'static str) -> Option<Result<u64, MalformedChunk>> {
    let v = answer.get(member).filter(|v| !v.is_null())?;
    Some(v.as_u64().ok_or_else(|| MalformedChunk::NotACount {
        member,
        value: v.to_string(),
    }))
}

impl DownloadValidator {
    /// A download of `path`, asking `chunk_len` bytes at a time (at least 1).
    pub fn new(path: impl Into<String>, chunk_len: u64) -> Self {
        DownloadValidator {
            path: path.into(),
            chunk_len: chunk_len.max(1),
            next_offset: 0,
            size: None,
            sha256: None,
            hasher: Sha256::new(),
            most: u64::MAX,
        }
    }

    /// Refuses, at the first answer, a file that states a size over `most` bytes: a file
    /// that cannot be kept is not read to its end first.
    ///
    /// ```
    /// use maljan_staging::{DownloadError, DownloadValidator};
    /// use serde_json::json;
    /// let mut v = DownloadValidator::new("big.bin", 4).with_most_bytes(1000);
    /// let claim = json!({"size": 2_000_000_000u64, "sha256": "0".repeat(64), "offset": 0,
    ///     "content_base64": "AAAA"});
    /// let refused = v.handle_answer(&claim).unwrap_err();
    /// assert!(matches!(refused, DownloadError::NoRoom { size: 2_000_000_000, room: 1000, .. }));
    /// ```
    pub fn with_most_bytes(mut self, most: u64) -> Self {
        self.most = most;
        self
    }

    /// The next call to make, or `None` once `size` bytes are in.
    pub fn poll_request(&self) -> Option<ChunkRequest> {
        if self.size.is_some_and(|size| self.next_offset >= size) {
            return None;
        }
        let length = match self.size {
            Some(size) => self.chunk_len.min(size - self.next_offset),
            None => self.chunk_len,
        };
        Some(ChunkRequest {
            path: self.path.clone(),
            offset: self.next_offset,
            length,
        })
    }

    /// The call that would follow once everything before `offset` is in: for asking ahead.
    /// `None` before the size is known (except at the next offset) or at the end.
    pub fn request_at(&self, offset: u64) -> Option<ChunkRequest> {
        if offset == self.next_offset {
            return self.poll_request();
        }
        let size = self.size?;
        (offset < size).then(|| ChunkRequest {
            path: self.path.clone(),
            offset,
            length: self.chunk_len.min(size - offset),
        })
    }

    /// Bytes received so far, and the size once stated.
    pub fn progress(&self) -> (u64, Option<u64>) {
        (self.next_offset, self.size)
    }

    fn malformed(&self, problem: MalformedChunk) -> DownloadError {
        DownloadError::Malformed {
            path: self.path.clone(),
            problem,
        }
    }

    /// Checks the answer to [`poll_request`](Self::poll_request) and returns its bytes,
    /// hashed and ready to be written.
    pub fn handle_answer(&mut self, answer: &Value) -> Result<Vec<u8>, DownloadError> {
        let mut bytes = Vec::new();
        self.handle_answer_into(answer, &mut bytes)?;
        Ok(bytes)
    }

    /// As [`handle_answer`](Self::handle_answer), with the bytes decoded into `bytes`
    /// (replacing what it held; emptied when the answer is refused), so one buffer serves
    /// every chunk of a download.
    ///
    /// ```
    /// use maljan_staging::DownloadValidator;
    /// let mut v = DownloadValidator::new("a.txt", 4);
    /// let sha = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"; // "hello world"
    /// let answer = |offset: u64, b64: &str| serde_json::json!({
    ///     "size": 11, "sha256": sha, "offset": offset, "content_base64": b64});
    /// let mut bytes = Vec::new();
    /// v.handle_answer_into(&answer(0, "aGVsbA=="), &mut bytes).unwrap();
    /// assert_eq!(bytes, b"hell");
    /// v.handle_answer_into(&answer(4, "byB3"), &mut bytes).unwrap();
    /// assert_eq!(bytes, b"o w", "the buffer holds only the latest chunk");
    /// ```
    pub fn handle_answer_into(
        &mut self,
        answer: &Value,
        bytes: &mut Vec<u8>,
    ) -> Result<(), DownloadError> {
        self.handle_answer_hashed_by(answer, bytes, Hashing::Here)
            .map(|_| ())
    }

    /// As [`handle_answer_into`](Self::handle_answer_into), the bytes not hashed here:
    /// the caller hashes every chunk accepted, in order (on another thread, say, while the
    /// next answer is decoded), and gives the digest to
    /// [`finish_with_digest`](Self::finish_with_digest).
    ///
    /// ```
    /// use maljan_staging::DownloadValidator;
    /// use sha2::{Digest, Sha256};
    /// let mut v = DownloadValidator::new("a.txt", 11);
    /// let sha = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"; // "hello world"
    /// let answer = serde_json::json!({
    ///     "size": 11, "sha256": sha, "offset": 0, "content_base64": "aGVsbG8gd29ybGQ="});
    /// let mut bytes = Vec::new();
    /// v.handle_answer_unhashed_into(&answer, &mut bytes).unwrap();
    /// let digest = format!("{:x}", Sha256::digest(&bytes));
    /// assert_eq!(v.finish_with_digest(digest).unwrap().size, 11);
    /// ```
    pub fn handle_answer_unhashed_into(
        &mut self,
        answer: &Value,
        bytes: &mut Vec<u8>,
    ) -> Result<(), DownloadError> {
        self.handle_answer_hashed_by(answer, bytes, Hashing::ByCaller)
            .map(|_| ())
    }

    /// As [`handle_answer_unhashed_into`](Self::handle_answer_unhashed_into), the chunk
    /// decoded at the first address in `bytes` aligned to
    /// [`ALIGN`](maljan_direct_write::ALIGN) (unaligned, in the rare case the address cannot
    /// be worked out); returns where the chunk starts in `bytes`, the bytes before it being
    /// padding.
    pub(crate) fn handle_answer_unhashed_aligned(
        &mut self,
        answer: &Value,
        bytes: &mut Vec<u8>,
    ) -> Result<usize, DownloadError> {
        let handled = self.check_and_decode(answer, bytes, Placement::Aligned);
        if handled.is_err() {
            bytes.clear();
        }
        handled
    }

    fn handle_answer_hashed_by(
        &mut self,
        answer: &Value,
        bytes: &mut Vec<u8>,
        hashing: Hashing,
    ) -> Result<usize, DownloadError> {
        let handled = self.check_and_decode(answer, bytes, Placement::AtStart);
        match handled {
            Ok(_) if hashing == Hashing::Here => self.hasher.update(&bytes[..]),
            Ok(_) => {}
            Err(_) => bytes.clear(),
        }
        handled
    }

    /// [`DownloadValidator::handle_answer_into`] without the hashing, the buffer left as
    /// it is on an error; returns where the chunk starts in `bytes`.
    fn check_and_decode(
        &mut self,
        answer: &Value,
        bytes: &mut Vec<u8>,
        placement: Placement,
    ) -> Result<usize, DownloadError> {
        let asked = self
            .poll_request()
            .ok_or_else(|| self.malformed(MalformedChunk::AfterTheEnd))?;
        if !answer.is_object() {
            return Err(self.malformed(MalformedChunk::NotAnObject(answer.to_string())));
        }
        if let Some(error) = answer.get("error") {
            let words = match error {
                Value::String(s) => s.clone(),
                other => other
                    .get("message")
                    .and_then(Value::as_str)
                    .map_or_else(|| other.to_string(), str::to_owned),
            };
            return Err(DownloadError::NotServed {
                path: self.path.clone(),
                words,
            });
        }
        let size = match number(answer, "size") {
            None => {
                return Err(DownloadError::MissingSize {
                    path: self.path.clone(),
                    offset: asked.offset,
                });
            }
            Some(n) => n.map_err(|e| self.malformed(e))?,
        };
        if self.size.is_none() && size > self.most {
            return Err(DownloadError::NoRoom {
                path: self.path.clone(),
                size,
                room: self.most,
            });
        }
        match self.size {
            Some(first) if first != size => {
                return Err(DownloadError::SizeChanged {
                    path: self.path.clone(),
                    first,
                    now: size,
                });
            }
            _ => {}
        }
        let sha256 = match answer.get("sha256") {
            None | Some(Value::Null) => {
                return Err(DownloadError::MissingDigest {
                    path: self.path.clone(),
                });
            }
            Some(Value::String(s)) if s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()) => {
                s.to_ascii_lowercase()
            }
            Some(other) => {
                return Err(self.malformed(MalformedChunk::NotADigest(other.to_string())));
            }
        };
        match &self.sha256 {
            Some(first) if *first != sha256 => {
                return Err(DownloadError::DigestChanged {
                    path: self.path.clone(),
                    first: first.clone(),
                    now: sha256,
                });
            }
            _ => {}
        }
        let offset = match number(answer, "offset") {
            None => return Err(self.malformed(MalformedChunk::NoOffset)),
            Some(n) => n.map_err(|e| self.malformed(e))?,
        };
        if offset != asked.offset {
            return Err(DownloadError::WrongOffset {
                path: self.path.clone(),
                asked: asked.offset,
                answered: offset,
            });
        }
        let encoded = answer
            .get("content_base64")
            .and_then(Value::as_str)
            .ok_or_else(|| self.malformed(MalformedChunk::NoContent))?;
        // Refuse an oversized chunk before decoding it: memory stays O(chunk).
        let implied = (encoded.len() as u64 / 4) * 3;
        let asked_length = asked.length;
        if implied > asked_length + 2 {
            return Err(self.too_long(offset, implied, asked_length, size));
        }
        // Sized, not cleared, before decoding into it: a buffer reused for chunks of one
        // size is then not zeroed again for each.
        let start = decode_into(encoded, bytes, placement)
            .map_err(|e| self.malformed(MalformedChunk::NotBase64(e)))?;
        let len = (bytes.len() - start) as u64;
        if offset + len > size {
            return Err(DownloadError::ChunkPastSize {
                path: self.path.clone(),
                offset,
                len,
                size,
            });
        }
        if len > asked_length {
            return Err(self.too_long(offset, len, asked_length, size));
        }
        if len == 0 && offset < size {
            return Err(DownloadError::EmptyChunkBeforeSize {
                path: self.path.clone(),
                offset,
                size,
            });
        }
        self.size = Some(size);
        self.sha256 = Some(sha256);
        self.next_offset = offset + len;
        Ok(start)
    }

    fn too_long(&self, offset: u64, len: u64, asked: u64, size: u64) -> DownloadError {
        if offset + len > size {
            DownloadError::ChunkPastSize {
                path: self.path.clone(),
                offset,
                len,
                size,
            }
        } else {
            DownloadError::ChunkLongerThanAsked {
                path: self.path.clone(),
                offset,
                len,
                asked,
            }
        }
    }

    /// Checks that the whole file was read and that its digest is the one stated.
    pub fn finish(mut self) -> Result<VerifiedDownload, DownloadError> {
        let computed = format!("{:x}", self.hasher.finalize_reset());
        self.finish_with_digest(computed)
    }

    /// As [`finish`](Self::finish), for bytes the caller hashed: `computed` is the
    /// lowercase hex sha256 of every chunk accepted by
    /// [`handle_answer_unhashed_into`](Self::handle_answer_unhashed_into), in order.
    pub fn finish_with_digest(self, computed: String) -> Result<VerifiedDownload, DownloadError> {
        let (Some(size), Some(stated)) = (self.size, self.sha256) else {
            return Err(DownloadError::Incomplete {
                path: self.path,
                received: self.next_offset,
                size: 0,
            });
        };
        if self.next_offset < size {
            return Err(DownloadError::Incomplete {
                path: self.path,
                received: self.next_offset,
                size,
            });
        }
        if computed != stated {
            return Err(DownloadError::DigestMismatch {
                path: self.path,
                stated,
                computed,
            });
        }
        Ok(VerifiedDownload {
            size,
            sha256: computed,
        })
    }
}

/// Decodes `encoded` into `bytes` where `placement` says (emptied when it is not base64),
/// with the vectorised decoder; the scalar one, which refuses the same texts
/// (property-tested), says why not. Returns where the decoded bytes start.
fn decode_into(
    encoded: &str,
    bytes: &mut Vec<u8>,
    placement: Placement,
) -> Result<usize, DecodeSliceError> {
    bytes.clear();
    let start = match placement {
        Placement::AtStart => 0,
        // Room for the scalar decoder's estimate, never under the exact length: the
        // decoding does not move the buffer, and the start stays aligned.
        Placement::Aligned => pad_to_aligned(bytes, base64::decoded_len_estimate(encoded.len())),
    };
    // Decoded into the buffer's room as it is, not zeroed first: a chunk's buffer goes
    // round, and zeroing it for each chunk would cost a good part of the decoding.
    match base64_simd::STANDARD.decode_append(encoded, bytes) {
        Ok(()) => Ok(start),
        Err(_) => {
            bytes.clear();
            // Never `None`: both refuse the same texts.
            let why = STANDARD
                .decode(encoded)
                .err()
                .map(DecodeSliceError::DecodeError);
            Err(why.unwrap_or(DecodeSliceError::DecodeError(DecodeError::InvalidPadding)))
        }
    }
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::STANDARD;
    use proptest::prelude::*;

    use maljan_direct_write::ALIGN;

    use super::{Placement, decode_into};

    proptest! {
        #[test]
        fn an_answer_decodes_as_the_scalar_decoder_reads_it(
            encoded in "[A-Za-z0-9+/]{0,64}={0,3}[A-Za-z0-9+/=_ -]{0,2}",
            held in prop::collection::vec(any::<u8>(), 0..80),
            aligned in any::<bool>(),
        ) {
            let mut bytes = held;
            let placement = if aligned { Placement::Aligned } else { Placement::AtStart };
            let decoded = decode_into(&encoded, &mut bytes, placement);
            match STANDARD.decode(&encoded) {
                Ok(expected) => {
                    let start = decoded.expect("decoded");
                    if aligned {
                        prop_assert_eq!(bytes[start..].as_ptr().align_offset(ALIGN), 0);
                    } else {
                        prop_assert_eq!(start, 0);
                    }
                    prop_assert_eq!(&bytes[start..], &expected[..]);
                }
                Err(_) => {
                    prop_assert_eq!(decoded.err(), STANDARD.decode_slice(&encoded, &mut [0; 64][..]).err());
                    prop_assert!(bytes.is_empty());
                }
            }
        }
    }
}
