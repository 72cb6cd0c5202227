//! A JSON value kept unparsed in the text it was read from.

use std::fmt;
use std::ops::Range;

use serde::ser::{Error as _, Serialize, Serializer};
use serde_json::value::RawValue;

/// A JSON value kept unparsed, in the text it was read from: a result decoded by
/// [`decode_line_buffer`](super::decode_line_buffer) keeps the line's own buffer, so a
/// multi-megabyte result (a file chunk's base64) is neither copied nor allocated again.
///
/// Its text is always valid JSON: it is made only from a [`RawValue`] or by the decoder.
///
/// ```
/// use maljan_mcp_proto::jsonrpc::RawJson;
/// let raw = RawJson::from(serde_json::value::RawValue::from_string("[1, 2]".into()).unwrap());
/// assert_eq!(raw.get(), "[1, 2]");
/// assert_eq!(raw.into_string(), "[1, 2]");
/// ```
#[derive(Clone)]
pub struct RawJson {
    /// The text the value was read from (a whole line, say).
    text: String,
    /// Where the value is in `text`.
    range: Range<usize>,
}

impl RawJson {
    /// The value's JSON text.
    ///
    /// ```
    /// use maljan_mcp_proto::jsonrpc::RawJson;
    /// let raw = RawJson::from(serde_json::value::RawValue::from_string("{}".into()).unwrap());
    /// assert_eq!(raw.get(), "{}");
    /// ```
    pub fn get(&self) -> &str {
        &self.text[self.range.clone()]
    }

    /// The value's JSON text as a string of its own: the buffer it was read in, cut to it
    /// (its capacity stays the buffer's).
    ///
    /// ```
    /// use maljan_mcp_proto::jsonrpc::RawJson;
    /// let raw = RawJson::from(serde_json::value::RawValue::from_string("true".into()).unwrap());
    /// assert_eq!(raw.into_string(), "true");
    /// ```
    pub fn into_string(self) -> String {
        let (mut text, range) = self.into_parts();
        text.truncate(range.end);
        text.drain(..range.start);
        text
    }

    /// The value as a [`RawValue`] of its own (a copy).
    ///
    /// ```
    /// use maljan_mcp_proto::jsonrpc::RawJson;
    /// let raw = RawJson::from(serde_json::value::RawValue::from_string("1".into()).unwrap());
    /// assert_eq!(raw.to_raw_value().get(), "1");
    /// ```
    pub fn to_raw_value(&self) -> Box<RawValue> {
        // Cannot fail: the text is valid JSON (see the type's invariant).
        RawValue::from_string(self.get().to_owned()).unwrap_or_else(|_| RawValue::NULL.to_owned())
    }

    /// The value `range` of `text`, which the decoder has read as one JSON value.
    pub(crate) fn within(text: String, range: Range<usize>) -> Self {
        RawJson { text, range }
    }

    /// A copy of a value borrowed from a line that stays its reader's.
    pub(crate) fn copied(raw: &RawValue) -> Self {
        let text = raw.get().to_owned();
        let range = 0..text.len();
        RawJson { text, range }
    }

    /// The text the value is in, and where it is.
    pub(crate) fn into_parts(self) -> (String, Range<usize>) {
        (self.text, self.range)
    }
}

impl From<Box<RawValue>> for RawJson {
    fn from(raw: Box<RawValue>) -> Self {
        let text = String::from(Box::<str>::from(raw));
        let range = 0..text.len();
        RawJson { text, range }
    }
}

impl fmt::Debug for RawJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("RawJson").field(&self.get()).finish()
    }
}

impl Serialize for RawJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // Read again as a borrowed RawValue, the only way serde_json writes text as it is.
        let raw: &RawValue = serde_json::from_str(self.get()).map_err(S::Error::custom)?;
        raw.serialize(serializer)
    }
}
