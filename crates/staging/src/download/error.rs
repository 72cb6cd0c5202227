//! Why a download was refused or failed; none leaves a file behind.

/// Why a download was refused or failed. A refused or failed download leaves no file behind.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum DownloadError {
    /// The server would not serve the file: its own words.
    #[error("the server did not serve {path}: {words}")]
    NotServed {
        /// The file asked for.
        path: String,
        /// What the server said.
        words: String,
    },
    /// An answer without `size`.
    #[error("an answer for {path} at offset {offset} states no size")]
    MissingSize {
        /// The file.
        path: String,
        /// The offset asked for.
        offset: u64,
    },
    /// A stated size that cannot be kept: over the local disk's free space (less a
    /// reserve) or the run's cap on the bytes it takes.
    #[error(
        "{path} states {size} bytes, more than the {room} this client can keep (free disk \
         space less a reserve, or the run's core.run.max_taken_bytes); free space or raise \
         the cap if the file is wanted"
    )]
    NoRoom {
        /// The file.
        path: String,
        /// The size it stated.
        size: u64,
        /// The bytes there was room for.
        room: u64,
    },
    /// A `size` other than the first answer's.
    #[error("the size of {path} changed from {first} to {now} between answers")]
    SizeChanged {
        /// The file.
        path: String,
        /// The size first stated.
        first: u64,
        /// The size stated now.
        now: u64,
    },
    /// A chunk that would pass the stated size.
    #[error("a chunk of {len} bytes at offset {offset} of {path} would pass its size {size}")]
    ChunkPastSize {
        /// The file.
        path: String,
        /// The chunk's offset.
        offset: u64,
        /// The chunk's length.
        len: u64,
        /// The stated size.
        size: u64,
    },
    /// A chunk longer than asked for.
    #[error(
        "a chunk of {len} bytes at offset {offset} of {path} is longer than the {asked} asked for"
    )]
    ChunkLongerThanAsked {
        /// The file.
        path: String,
        /// The chunk's offset.
        offset: u64,
        /// Its length (or the length its base64 implies).
        len: u64,
        /// The length asked for.
        asked: u64,
    },
    /// An empty chunk before the stated size was reached.
    #[error("an empty chunk at offset {offset} of {path}, before its size {size}")]
    EmptyChunkBeforeSize {
        /// The file.
        path: String,
        /// The offset.
        offset: u64,
        /// The stated size.
        size: u64,
    },
    /// An `offset` other than asked for.
    #[error("asked for {path} at offset {asked}, the answer is at offset {answered}")]
    WrongOffset {
        /// The file.
        path: String,
        /// The offset asked for.
        asked: u64,
        /// The offset in the answer.
        answered: u64,
    },
    /// An answer without `sha256`.
    #[error("an answer for {path} states no sha256")]
    MissingDigest {
        /// The file.
        path: String,
    },
    /// A `sha256` other than the first answer's.
    #[error("the sha256 of {path} changed from {first} to {now} between answers")]
    DigestChanged {
        /// The file.
        path: String,
        /// The digest first stated.
        first: String,
        /// The digest stated now.
        now: String,
    },
    /// The bytes' digest is not the one stated.
    #[error("the bytes of {path} have sha256 {computed}, not the {stated} the server stated")]
    DigestMismatch {
        /// The file.
        path: String,
        /// The digest stated.
        stated: String,
        /// The digest of the bytes received.
        computed: String,
    },
    /// An answer that is not `{size, sha256, offset, content_base64}`.
    #[error("an answer for {path} is malformed: {problem}")]
    Malformed {
        /// The file.
        path: String,
        /// What is wrong.
        #[source]
        problem: MalformedChunk,
    },
    /// The download ended before `size` bytes were read.
    #[error("the download of {path} ended after {received} of {size} bytes")]
    Incomplete {
        /// The file.
        path: String,
        /// Bytes received.
        received: u64,
        /// The stated size.
        size: u64,
    },
    /// Writing the file locally failed.
    #[error("writing {path} into the artefact store failed: {source}")]
    Local {
        /// The file.
        path: String,
        /// The system's error.
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
}

/// What is wrong with an answer to `get_file`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MalformedChunk {
    /// An answer came after the whole file was read.
    #[error("an answer after the whole file was read")]
    AfterTheEnd,
    /// The answer is not a JSON object (the answer, as JSON).
    #[error("the answer is {0}, not an object")]
    NotAnObject(String),
    /// A member that must be a non-negative integer is not one.
    #[error("{member} is {value}, not a non-negative integer")]
    NotACount {
        /// The member.
        member: &'static str,
        /// Its value, as JSON.
        value: String,
    },
    /// `sha256` is not 64 hex digits (its value, as JSON).
    #[error("sha256 is {0}, not 64 hex digits")]
    NotADigest(String),
    /// The answer states no offset.
    #[error("the answer states no offset")]
    NoOffset,
    /// `content_base64` is missing or not a string.
    #[error("content_base64 is missing or not a string")]
    NoContent,
    /// `content_base64` is not base64.
    #[error("content_base64 is not base64: {0}")]
    NotBase64(#[source] base64::DecodeSliceError),
}
