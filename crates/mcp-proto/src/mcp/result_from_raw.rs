//! Reading a `tools/call` result that holds a large string (a file chunk's base64) without
//! copying that string: it is moved out of the raw JSON's own buffer.

use std::fmt;
use std::ops::Range;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::tools::{CallToolResult, ContentBlock};
use crate::jsonrpc::RawJson;

/// A member of the structured content at least this long, with nothing escaped in it, is
/// moved rather than copied.
const MOVED_STRING_BYTES: usize = 64 * 1024;

impl CallToolResult {
    /// Reads a result the way `serde_json::from_str` does, except that the longest string
    /// member of its structured content (a file chunk's base64, say), when long and with
    /// nothing escaped in it, is moved out of `raw`'s buffer rather than copied: no
    /// allocation of its size, no second copy of it in memory (a result decoded by
    /// [`decode_line_buffer`](crate::jsonrpc::decode_line_buffer) keeps the line's buffer,
    /// which thus becomes the string). The same JSON always gives
    /// the same result (and the same error) as `serde_json::from_str` (property-tested).
    ///
    /// ```
    /// use maljan_mcp_proto::mcp::CallToolResult;
    /// let chunk = "QUJD".repeat(32 * 1024);
    /// let raw = serde_json::value::RawValue::from_string(format!(
    ///     r#"{{"content":[],"structuredContent":{{"offset":0,"content_base64":"{chunk}"}}}}"#
    /// )).unwrap();
    /// let raw = maljan_mcp_proto::jsonrpc::RawJson::from(raw);
    /// let result = CallToolResult::from_raw(raw).unwrap();
    /// let structured = result.structured_content.unwrap();
    /// assert_eq!(structured["content_base64"], chunk.as_str());
    /// assert_eq!(structured["offset"], 0);
    /// ```
    pub fn from_raw(raw: RawJson) -> serde_json::Result<CallToolResult> {
        let text = raw.get();
        if text.len() < MOVED_STRING_BYTES {
            return serde_json::from_str(text);
        }
        let read = match read_borrowing(text) {
            Ok(read) => read,
            // Whatever the one pass refuses is read as before, for the same answer.
            Err(_) => return serde_json::from_str(text),
        };
        let Borrowed {
            content,
            structured,
            is_error,
            moved,
        } = read;
        let structured_content = match (structured, moved) {
            (Some(mut members), Some((key, range))) => {
                let (mut whole, at) = raw.into_parts();
                whole.truncate(at.start + range.end);
                whole.drain(..at.start + range.start);
                members.insert(key, Value::String(whole));
                Some(Value::Object(members))
            }
            (Some(members), None) => Some(Value::Object(members)),
            (None, _) => None,
        };
        Ok(CallToolResult {
            content,
            structured_content,
            is_error,
        })
    }
}

/// A result read in one pass: the structured content's members but the moved one, which
/// is named with its bytes' place in the raw text.
struct Borrowed {
    content: Vec<ContentBlock>,
    structured: Option<Map<String, Value>>,
    is_error: Option<bool>,
    moved: Option<(String, Range<usize>)>,
}

/// Reads `text` as a result whose structured content is an object (or absent, or null);
/// anything else is an error, and read again by serde.
///
/// The longest string of the text, when long and with nothing escaped in it, is first left
/// out of what serde reads: its end is found by looking for its closing quote alone (the
/// text is valid JSON), not by checking each of its characters. When it turns out to be a
/// member of the structured content, it is the one moved; anywhere else, the whole text is
/// read.
fn read_borrowing(text: &str) -> serde_json::Result<Borrowed> {
    if let Some(long) = longest_unescaped_string(text).filter(|r| r.len() >= MOVED_STRING_BYTES) {
        let mut rest = String::with_capacity(text.len() - long.len());
        rest.push_str(&text[..long.start]);
        rest.push_str(&text[long.end..]);
        if let Ok(read) = read_text(&rest, Some(&long))
            && read.moved.as_ref().is_some_and(|(_, moved)| *moved == long)
        {
            return Ok(read);
        }
    }
    read_text(text, None)
}

/// Reads `text`; `left_out`, when given, is where a string's characters were in the text
/// this one was made from by leaving them out (its quotes kept).
fn read_text(text: &str, left_out: Option<&Range<usize>>) -> serde_json::Result<Borrowed> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let read = deserializer.deserialize_map(ResultVisitor { text, left_out })?;
    deserializer.end()?;
    Ok(read)
}

/// Where the characters of the longest string with nothing escaped in it are, in `text`,
/// valid JSON: outside strings it holds no quote or backslash, so each quote found opens
/// a string, which ends at the next quote not escaped.
fn longest_unescaped_string(text: &str) -> Option<Range<usize>> {
    let bytes = text.as_bytes();
    let mut longest: Option<Range<usize>> = None;
    let mut at = 0;
    while let Some(open) = memchr::memchr(b'"', &bytes[at..]) {
        let start = at + open + 1;
        let mut escaped = false;
        let mut next = start;
        let end = loop {
            let found = memchr::memchr2(b'"', b'\\', bytes.get(next..)?)?;
            if bytes[next + found] == b'\\' {
                escaped = true;
                next += found + 2;
            } else {
                break next + found;
            }
        };
        if !escaped && longest.as_ref().is_none_or(|l| end - start > l.len()) {
            longest = Some(start..end);
        }
        at = end + 1;
    }
    longest
}

struct ResultVisitor<'t> {
    text: &'t str,
    left_out: Option<&'t Range<usize>>,
}

impl<'de> Visitor<'de> for ResultVisitor<'_> {
    type Value = Borrowed;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a tool result")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Borrowed, A::Error> {
        let mut content = None;
        let mut structured = None;
        let mut is_error = None;
        let mut moved = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "content" if content.is_none() => content = Some(map.next_value()?),
                "structuredContent" if structured.is_none() => {
                    let read = map.next_value_seed(StructuredSeed {
                        text: self.text,
                        left_out: self.left_out,
                    })?;
                    structured = Some(read.map(|(members, m)| {
                        moved = m;
                        members
                    }));
                }
                "isError" if is_error.is_none() => is_error = Some(map.next_value()?),
                "content" | "structuredContent" | "isError" => {
                    return Err(de::Error::custom("duplicate field"));
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(Borrowed {
            content: content.unwrap_or_default(),
            structured: structured.flatten(),
            is_error: is_error.flatten(),
            moved,
        })
    }
}

/// The structured content: `None` for null, its members for an object (the longest
/// unescaped string among them set aside, by its place in the text).
struct StructuredSeed<'t> {
    text: &'t str,
    /// See [`read_text`]: when given, only the string left out is set aside.
    left_out: Option<&'t Range<usize>>,
}

type Members = (Map<String, Value>, Option<(String, Range<usize>)>);

impl<'de> DeserializeSeed<'de> for StructuredSeed<'_> {
    type Value = Option<Members>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StructuredSeed<'_> {
    type Value = Option<Members>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object or null")
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut members = Map::new();
        let mut moved: Option<(String, Range<usize>)> = None;
        while let Some(key) = map.next_key::<String>()? {
            let member: &'de RawValue = map.next_value()?;
            if members.contains_key(&key) || moved.as_ref().is_some_and(|(k, _)| *k == key) {
                // A repeated name: the last one wins in a `Value`, read again by serde.
                return Err(de::Error::custom("duplicate member"));
            }
            match self.movable(member.get()) {
                Some(range) if moved.as_ref().is_none_or(|(_, r)| range.len() > r.len()) => {
                    if let Some((key, range)) = moved.replace((key, range)) {
                        members.insert(key, Value::String(self.text[range].to_owned()));
                    }
                }
                _ => {
                    let value = serde_json::from_str(member.get()).map_err(de::Error::custom)?;
                    members.insert(key, value);
                }
            }
        }
        Ok(Some((members, moved)))
    }
}

impl StructuredSeed<'_> {
    /// Where the characters of `member` (a slice of the text) are in the text, when it is
    /// a long string with nothing escaped.
    fn movable(&self, member: &str) -> Option<Range<usize>> {
        if let Some(left_out) = self.left_out {
            // Its quotes were kept: `""`, where the string began.
            let at = member.as_ptr() as usize - self.text.as_ptr() as usize;
            return (member == "\"\"" && at + 1 == left_out.start).then(|| left_out.clone());
        }
        let inner = member.strip_prefix('"')?.strip_suffix('"')?;
        if inner.len() < MOVED_STRING_BYTES || memchr::memchr(b'\\', inner.as_bytes()).is_some() {
            return None;
        }
        let start = inner.as_ptr() as usize - self.text.as_ptr() as usize;
        Some(start..start + inner.len())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::jsonrpc::{DecodedLine, Message, decode_line_buffer};

    fn raw(text: String) -> RawJson {
        RawJson::from(RawValue::from_string(text).expect("valid JSON"))
    }

    fn long(seed: char) -> String {
        std::iter::repeat_n(seed, MOVED_STRING_BYTES + 3).collect()
    }

    #[test]
    fn the_long_string_keeps_the_raw_texts_buffer() {
        let text = json!({
            "content": [{"type": "text", "text": "see structuredContent"}],
            "structuredContent": {"size": 9, "content_base64": long('A'), "sha256": "ab"},
        })
        .to_string();
        let raw = raw(text);
        let start = raw.get().as_ptr();
        let result = CallToolResult::from_raw(raw).expect("a result");
        let structured = result.structured_content.expect("structured");
        let moved = structured["content_base64"].as_str().expect("a string");
        assert_eq!(moved, long('A'));
        assert_eq!(moved.as_ptr(), start, "moved, not copied");
        assert_eq!(structured["size"], 9);
        assert_eq!(structured["sha256"], "ab");
    }

    #[test]
    fn the_long_string_keeps_the_lines_buffer_when_decoded_from_it() {
        let line = json!({
            "jsonrpc": "2.0",
            "id": 7,
            "result": {"structuredContent": {"content_base64": long('K'), "offset": 0}},
        })
        .to_string()
        .into_bytes();
        let line_start = line.as_ptr() as usize;
        let DecodedLine::Message(Message::Response(response)) = decode_line_buffer(line, false)
        else {
            panic!("a response");
        };
        let result = CallToolResult::from_raw(response.result).expect("a result");
        let structured = result.structured_content.expect("structured");
        let moved = structured["content_base64"].as_str().expect("a string");
        assert_eq!(moved, long('K'));
        assert_eq!(
            moved.as_ptr() as usize,
            line_start,
            "the line's buffer, not a copy"
        );
    }

    #[test]
    fn an_escaped_or_nested_long_string_is_copied_as_serde_reads_it() {
        let escaped = format!("{}\\n", long('B'));
        let text = format!(
            r#"{{"structuredContent":{{"a":"{escaped}","b":{{"c":"{}"}}}}}}"#,
            long('C')
        );
        assert_eq!(
            CallToolResult::from_raw(raw(text.clone())).expect("a result"),
            serde_json::from_str::<CallToolResult>(&text).expect("a result")
        );
    }

    #[test]
    fn the_longest_string_is_found_past_escaped_quotes_and_backslashes() {
        let text = r#"{"a":"x\"yyyyyyyyyy","b\\":"zzz","c":["wwwww"]}"#;
        let longest = longest_unescaped_string(text).expect("a string");
        assert_eq!(&text[longest], "wwwww");
        assert_eq!(longest_unescaped_string(r#"{"a":"unterminated}"#), None);
        assert_eq!(longest_unescaped_string("[1,2]"), None);
    }

    #[test]
    fn a_long_string_outside_the_structured_content_stays_where_it_is() {
        let text = json!({
            "content": [{"type": "text", "text": long('J')}],
            "structuredContent": {"size": 1},
        })
        .to_string();
        assert_eq!(
            CallToolResult::from_raw(raw(text.clone())).expect("a result"),
            serde_json::from_str::<CallToolResult>(&text).expect("a result")
        );
    }

    #[test]
    fn of_two_long_strings_the_longer_is_moved_and_both_are_kept() {
        let longer = format!("{}DD", long('D'));
        let text = json!({"structuredContent": {"x": long('E'), "y": longer}}).to_string();
        let result = CallToolResult::from_raw(raw(text.clone())).expect("a result");
        assert_eq!(
            result,
            serde_json::from_str::<CallToolResult>(&text).expect("a result")
        );
    }

    /// Results with a long member somewhere, and the odd shapes a hostile server sends:
    /// repeated names, a structured content that is not an object, wrong types.
    fn any_result_text() -> impl Strategy<Value = String> {
        let member = prop_oneof![
            Just("1".to_owned()),
            Just("null".to_owned()),
            Just("\"short\"".to_owned()),
            Just("[1, {\"k\": 2}]".to_owned()),
            Just(format!("\"{}\"", long('F'))),
            Just(format!("\"{}\\\"\"", long('G'))),
            Just("true".to_owned()),
        ];
        let key = prop_oneof![
            Just("content_base64"),
            Just("size"),
            Just("k"),
            Just("x\\u0041"),
        ];
        let structured = prop_oneof![
            prop::collection::vec((key, member), 0..5).prop_map(|members| {
                let inner: Vec<String> = members
                    .iter()
                    .map(|(k, v)| format!("\"{k}\":{v}"))
                    .collect();
                format!("{{{}}}", inner.join(","))
            }),
            Just("null".to_owned()),
            Just("[]".to_owned()),
            Just(format!("\"{}\"", long('H'))),
        ];
        let field = prop_oneof![
            structured.prop_map(|s| format!("\"structuredContent\":{s}")),
            Just("\"content\":[{\"type\":\"text\",\"text\":\"t\"}]".to_owned()),
            Just("\"content\":null".to_owned()),
            Just("\"isError\":true".to_owned()),
            Just("\"isError\":null".to_owned()),
            Just("\"isError\":\"yes\"".to_owned()),
            Just(format!("\"other\":\"{}\"", long('I'))),
        ];
        prop::collection::vec(field, 0..5).prop_map(|fields| format!("{{{}}}", fields.join(",")))
    }

    proptest! {
        #[test]
        fn reads_as_serde_reads(text in any_result_text()) {
            let moved = CallToolResult::from_raw(raw(text.clone()));
            let read = serde_json::from_str::<CallToolResult>(&text);
            match (moved, read) {
                (Ok(moved), Ok(read)) => prop_assert_eq!(moved, read),
                (Err(moved), Err(read)) => prop_assert_eq!(moved.to_string(), read.to_string()),
                (moved, read) => prop_assert!(false, "{:?} against {:?}", moved, read),
            }
        }
    }
}
