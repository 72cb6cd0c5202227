//! An upload's protocol, sans-IO: what to send next, and whether the server's answers hold.

use std::collections::VecDeque;

use serde_json::{Value, json};

use super::{UploadError, UploadMode, WrongAnswer};

/// The most chunks sent ahead of the server's answers, when the server allows more than
/// one (`chunks_in_flight` in its `put_sample_begin` answer: it stores them in offset order
/// whatever order their calls run in). A server that does not say gets one at a time.
const MAX_CHUNKS_IN_FLIGHT: u64 = 3;

/// One `put_sample_chunk` call to make.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkCall {
    /// Its arguments but the content: the driver adds `content_base64` (it encodes the bytes
    /// where it holds them).
    pub arguments: Value,
    /// The bytes the server holds once it stored this chunk: `received` in its answer.
    pub end: u64,
}

/// Checks an upload's sequence of calls and answers, sans-IO: it says what each call
/// carries, checks each answer, and completes the upload only when the bytes read while
/// sending are the bytes announced and the server's receipt states the same size and digest.
///
/// Its verbs are the workspace's: `handle_*` takes what happened (an answer, bytes read,
/// the end of the file), the answer is what to send next; [`finish`](Self::finish) takes
/// the last answer and gives the server's path.
///
/// ```
/// use maljan_staging::{UploadMode, UploadValidator};
/// use serde_json::json;
/// let sha = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"; // "hello world"
/// let mut v = UploadValidator::new("sample.txt", "sample.txt", 11, sha, UploadMode::Chunked);
/// assert_eq!(v.begin_arguments()["size"], 11);
/// v.handle_begin_answer(&json!({"upload_id": "u1", "chunks_in_flight": 4})).unwrap();
/// let first = v.handle_chunk_read(8);
/// assert_eq!(first.arguments, json!({"upload_id": "u1", "offset": 0}));
/// let second = v.handle_chunk_read(3);
/// assert_eq!(v.handle_chunk_answer(&json!({"received": 8})).unwrap(), 8);
/// assert_eq!(v.handle_chunk_answer(&json!({"received": 11})).unwrap(), 11);
/// let finish = v.handle_eof(11, sha).unwrap();
/// assert_eq!(finish, json!({"upload_id": "u1"}));
/// let path = v.finish(&json!({"path": "samples/sample.txt", "size": 11, "sha256": sha})).unwrap();
/// assert_eq!(path, "samples/sample.txt");
/// # let _ = second;
/// ```
#[derive(Debug)]
pub struct UploadValidator {
    local: String,
    name: String,
    size: u64,
    sha256: String,
    /// Whether `sha256` goes to `put_sample_begin`; when not, it is the digest of the bytes
    /// read, given to `put_sample_finish`.
    announced: bool,
    mode: UploadMode,
    upload_id: Option<Value>,
    chunks_in_flight: usize,
    sent: u64,
    unanswered: VecDeque<u64>,
}

impl UploadValidator {
    /// An upload of the `size` bytes of digest `sha256` read from `local` (named in errors),
    /// stored by the server as `name`.
    pub fn new(
        local: impl Into<String>,
        name: impl Into<String>,
        size: u64,
        sha256: impl Into<String>,
        mode: UploadMode,
    ) -> Self {
        UploadValidator {
            local: local.into(),
            name: name.into(),
            size,
            sha256: sha256.into(),
            announced: true,
            mode,
            upload_id: None,
            chunks_in_flight: 1,
            sent: 0,
            unanswered: VecDeque::new(),
        }
    }

    /// A chunked upload of the `size` bytes read from `local` whose digest is not known
    /// when it begins: the bytes are hashed as they are read and their digest given to
    /// `put_sample_finish` (which a server offering it checks, as the kit's does), so the
    /// file is read once. The server's receipt must state that digest.
    ///
    /// ```
    /// use maljan_staging::UploadValidator;
    /// use serde_json::json;
    /// let sha = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"; // "hello world"
    /// let mut v = UploadValidator::digest_at_finish("sample.txt", "sample.txt", 11);
    /// assert_eq!(v.begin_arguments(), json!({"name": "sample.txt", "size": 11}));
    /// v.handle_begin_answer(&json!({"upload_id": "u1"})).unwrap();
    /// v.handle_chunk_read(11);
    /// v.handle_chunk_answer(&json!({"received": 11})).unwrap();
    /// let finish = v.handle_eof(11, sha).unwrap();
    /// assert_eq!(finish, json!({"upload_id": "u1", "sha256": sha}));
    /// ```
    pub fn digest_at_finish(local: impl Into<String>, name: impl Into<String>, size: u64) -> Self {
        UploadValidator {
            announced: false,
            ..UploadValidator::new(local, name, size, String::new(), UploadMode::Chunked)
        }
    }

    /// The size announced.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// How the file goes.
    ///
    /// ```
    /// use maljan_staging::{UploadMode, UploadValidator};
    /// let v = UploadValidator::digest_at_finish("sample.txt", "sample.txt", 11);
    /// assert_eq!(v.mode(), UploadMode::Chunked);
    /// ```
    pub fn mode(&self) -> UploadMode {
        self.mode
    }

    /// The digest announced; given at the finish, the digest of the bytes read once the
    /// reading is over ([`handle_eof`](Self::handle_eof)), empty before.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The arguments of `put_sample_begin`.
    pub fn begin_arguments(&self) -> Value {
        if self.announced {
            json!({"name": self.name, "size": self.size, "sha256": self.sha256})
        } else {
            json!({"name": self.name, "size": self.size})
        }
    }

    /// Takes `put_sample_begin`'s answer: its `upload_id` (required) and how many chunks it
    /// allows ahead of its answers (`chunks_in_flight`, one when absent, at most three).
    pub fn handle_begin_answer(&mut self, answer: &Value) -> Result<(), UploadError> {
        let upload_id = answer
            .get("upload_id")
            .filter(|v| !v.is_null())
            .ok_or_else(|| wrong("put_sample_begin", answer, WrongAnswer::NoUploadId))?;
        self.upload_id = Some(upload_id.clone());
        self.chunks_in_flight = answer
            .get("chunks_in_flight")
            .and_then(Value::as_u64)
            .unwrap_or(1)
            .clamp(1, MAX_CHUNKS_IN_FLIGHT) as usize;
        Ok(())
    }

    /// Whether another chunk may be sent before an answer comes back.
    pub fn has_room(&self) -> bool {
        self.unanswered.len() < self.chunks_in_flight
    }

    /// Takes the next `len` bytes read and gives the call that sends them.
    pub fn handle_chunk_read(&mut self, len: usize) -> ChunkCall {
        let arguments = json!({"upload_id": self.upload_id, "offset": self.sent});
        self.sent += len as u64;
        self.unanswered.push_back(self.sent);
        ChunkCall {
            arguments,
            end: self.sent,
        }
    }

    /// Takes the answer to the oldest chunk call unanswered: the bytes the server holds,
    /// when it says, must be those sent up to that chunk. Returns them.
    pub fn handle_chunk_answer(&mut self, answer: &Value) -> Result<u64, UploadError> {
        let Some(end) = self.unanswered.pop_front() else {
            return Err(wrong(
                "put_sample_chunk",
                answer,
                WrongAnswer::NoChunkWaiting,
            ));
        };
        match answer.get("received").and_then(Value::as_u64) {
            Some(received) if received != end => Err(wrong(
                "put_sample_chunk",
                answer,
                WrongAnswer::ReceivedNot(end),
            )),
            _ => Ok(end),
        }
    }

    /// Takes the end of the reading: `read` bytes (one more than announced when the file
    /// grew) of digest `read_sha256`. Gives the arguments of `put_sample_finish`, when those
    /// bytes are the ones announced (the size announced, when the digest is given at the
    /// finish), all of them were sent and every chunk was answered.
    pub fn handle_eof(&mut self, read: u64, read_sha256: &str) -> Result<Value, UploadError> {
        if !self.announced && (read != self.size || self.sent != self.size) {
            return Err(self.modified(format!("{} bytes when it began, {read} read", self.size)));
        }
        if !self.announced {
            self.sha256 = read_sha256.to_owned();
        }
        if read_sha256 != self.sha256 || read != self.size || self.sent != self.size {
            return Err(self.changed(read_sha256));
        }
        if !self.unanswered.is_empty() {
            return Err(UploadError::Answer {
                tool: "put_sample_chunk",
                answer: String::new(),
                problem: WrongAnswer::ChunksUnanswered(self.unanswered.len()),
            });
        }
        if self.announced {
            Ok(json!({"upload_id": self.upload_id}))
        } else {
            Ok(json!({"upload_id": self.upload_id, "sha256": self.sha256}))
        }
    }

    /// Takes word that the file's size or times changed while it was read: an upload whose
    /// digest goes to the finish is not finished (the bytes sent may be part one version of
    /// the file, part another); one announced is checked against its digest, as ever.
    ///
    /// ```
    /// use maljan_staging::{UploadError, UploadValidator};
    /// let v = UploadValidator::digest_at_finish("sample.txt", "sample.txt", 11);
    /// assert!(matches!(v.handle_modified(), Err(UploadError::ModifiedDuringUpload { .. })));
    /// ```
    pub fn handle_modified(&self) -> Result<(), UploadError> {
        if self.announced {
            Ok(())
        } else {
            Err(self.modified("it was written to while it was read".to_owned()))
        }
    }

    /// Takes the digest of the whole file read for one `put_sample` call and gives the
    /// call's arguments but the content.
    pub fn handle_single_read(&mut self, read_sha256: &str) -> Result<Value, UploadError> {
        if read_sha256 != self.sha256 {
            return Err(self.changed(read_sha256));
        }
        self.sent = self.size;
        Ok(json!({"name": self.name, "sha256": self.sha256}))
    }

    /// Takes the server's receipt (`put_sample_finish`'s or `put_sample`'s answer): it must
    /// state a path, the size and the digest announced. Gives the path.
    pub fn finish(self, answer: &Value) -> Result<String, UploadError> {
        let tool = match self.mode {
            UploadMode::Chunked => "put_sample_finish",
            UploadMode::Single => "put_sample",
        };
        let path = answer
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| wrong(tool, answer, WrongAnswer::NoPath))?;
        if answer.get("size").and_then(Value::as_u64) != Some(self.size) {
            return Err(wrong(tool, answer, WrongAnswer::SizeNot(self.size)));
        }
        let sha256 = answer
            .get("sha256")
            .and_then(Value::as_str)
            .map(str::to_ascii_lowercase);
        if sha256.as_deref() != Some(self.sha256.as_str()) {
            return Err(wrong(
                tool,
                answer,
                WrongAnswer::DigestNot(self.sha256.clone()),
            ));
        }
        Ok(path.to_owned())
    }

    fn modified(&self, what: String) -> UploadError {
        UploadError::ModifiedDuringUpload {
            path: self.local.clone(),
            what,
        }
    }

    fn changed(&self, read_sha256: &str) -> UploadError {
        UploadError::ChangedDuringUpload {
            path: self.local.clone(),
            expected: self.sha256.clone(),
            read: read_sha256.to_owned(),
        }
    }
}

fn wrong(tool: &'static str, answer: &Value, problem: WrongAnswer) -> UploadError {
    UploadError::Answer {
        tool,
        answer: answer.to_string(),
        problem,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHA: &str = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9";

    fn begun(chunks_in_flight: Value) -> UploadValidator {
        let mut v = UploadValidator::new("l", "n", 11, SHA, UploadMode::Chunked);
        v.handle_begin_answer(&json!({"upload_id": 7, "chunks_in_flight": chunks_in_flight}))
            .expect("begun");
        v
    }

    #[test]
    fn a_begin_answer_without_upload_id_is_refused() {
        let mut v = UploadValidator::new("l", "n", 11, SHA, UploadMode::Chunked);
        for answer in [json!({}), json!({"upload_id": null}), json!([1])] {
            let err = v.handle_begin_answer(&answer).expect_err("no id");
            assert!(err.to_string().contains("no upload_id"), "{err}");
        }
    }

    #[test]
    fn the_window_is_the_servers_within_one_and_three() {
        for (asked, room) in [
            (json!(null), 1),
            (json!(0), 1),
            (json!(2), 2),
            (json!(99), 3),
        ] {
            let mut v = begun(asked.clone());
            let mut sent = 0;
            while v.has_room() {
                v.handle_chunk_read(1);
                sent += 1;
            }
            assert_eq!(sent, room, "chunks_in_flight {asked}");
        }
    }

    #[test]
    fn a_chunk_answer_must_state_the_bytes_sent_up_to_it() {
        let mut v = begun(json!(3));
        v.handle_chunk_read(4);
        v.handle_chunk_read(7);
        assert_eq!(v.handle_chunk_answer(&json!({})).expect("silent"), 4);
        let err = v
            .handle_chunk_answer(&json!({"received": 4}))
            .expect_err("lie");
        assert!(err.to_string().contains("received is not 11"), "{err}");
        assert!(v.handle_chunk_answer(&json!({"received": 11})).is_err());
    }

    #[test]
    fn the_finish_is_refused_when_the_bytes_read_are_not_those_announced() {
        let mut v = begun(json!(1));
        v.handle_chunk_read(11);
        v.handle_chunk_answer(&json!({"received": 11})).expect("ok");
        let other = "00".repeat(32);
        assert!(matches!(
            v.handle_eof(11, &other),
            Err(UploadError::ChangedDuringUpload { .. })
        ));
        assert!(matches!(
            v.handle_eof(12, SHA),
            Err(UploadError::ChangedDuringUpload { .. })
        ));
        assert!(v.handle_eof(11, SHA).is_ok());
    }

    #[test]
    fn the_finish_waits_for_every_chunk_answer() {
        let mut v = begun(json!(2));
        v.handle_chunk_read(5);
        v.handle_chunk_read(6);
        v.handle_chunk_answer(&json!({"received": 5})).expect("ok");
        let err = v.handle_eof(11, SHA).expect_err("one unanswered");
        assert!(
            err.to_string().contains("1 chunks were not answered"),
            "{err}"
        );
    }

    #[test]
    fn a_receipt_must_state_the_path_size_and_digest_announced() {
        let receipt = |answer: Value| begun(json!(1)).finish(&answer);
        assert!(receipt(json!({"path": "p", "size": 11, "sha256": SHA.to_uppercase()})).is_ok());
        assert!(receipt(json!({"size": 11, "sha256": SHA})).is_err());
        assert!(receipt(json!({"path": "p", "size": 10, "sha256": SHA})).is_err());
        assert!(receipt(json!({"path": "p", "size": 11, "sha256": "0"})).is_err());
    }

    #[test]
    fn a_single_upload_names_its_tool_in_errors() {
        let mut v = UploadValidator::new("l", "n", 11, SHA, UploadMode::Single);
        assert_eq!(
            v.handle_single_read(SHA).expect("same bytes"),
            json!({"name": "n", "sha256": SHA})
        );
        let err = v.finish(&json!({})).expect_err("no path");
        assert!(err.to_string().starts_with("put_sample answered"), "{err}");
    }
}
