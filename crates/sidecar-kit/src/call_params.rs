//! `tools/call` parameters read in one pass, a file chunk's base64 borrowed from the request
//! rather than copied into a `Value`.
//!
//! A `put_sample_chunk` call carries several MiB of base64. Parsed into a `Value`, it is
//! copied into a fresh string (whose pages the allocator then faults in and zeroes) only
//! to be decoded once and dropped. Here the arguments of the tool that takes a [`Chunk`]
//! are read straight into one, its base64 borrowed, in the one pass over the parameters;
//! arguments that come before the name are read as a chunk when they fit one. Anything
//! else — another tool, a chunk whose arguments are not exactly right — is read again as
//! [`CallToolParams`], so the answer is the same as it would be without this path.
//!
//! The parameters are a [`RawValue`]'s, valid JSON already: the base64 is taken as the
//! bytes between its quotes, its end found by looking for the closing quote alone rather
//! than checking every character again (the base64 decoder refuses anything but base64).

use std::fmt;

use maljan_mcp_proto::mcp::CallToolParams;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

/// A file chunk's arguments, as `put_sample_chunk` takes them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub(crate) struct Chunk<'a> {
    /// The upload, as `put_sample_begin` answered.
    pub(crate) upload_id: u64,
    /// Where the chunk goes.
    pub(crate) offset: u64,
    /// The chunk, base64: the bytes of a JSON string with nothing escaped in it, borrowed
    /// from the request (a string with an escape is read as a whole, by the other path).
    #[serde(borrow, deserialize_with = "unescaped_string")]
    pub(crate) content_base64: &'a [u8],
}

/// A JSON string with nothing escaped in it, as the bytes between its quotes; anything
/// else (an escape, another type) is an error. In valid JSON such a string ends at the
/// next quote: serde_json finds it by looking for that quote alone when bytes are asked for.
fn unescaped_string<'de, D: Deserializer<'de>>(deserializer: D) -> Result<&'de [u8], D::Error> {
    struct UnescapedString;
    impl<'de> Visitor<'de> for UnescapedString {
        type Value = &'de [u8];

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string with nothing escaped")
        }

        fn visit_borrowed_bytes<E: de::Error>(self, bytes: &'de [u8]) -> Result<&'de [u8], E> {
            Ok(bytes)
        }
    }
    deserializer.deserialize_bytes(UnescapedString)
}

/// A `tools/call` request's parameters.
#[derive(Debug, PartialEq)]
pub(crate) enum ToolCall<'a> {
    /// A call of the tool that takes a chunk, read into one.
    Chunk {
        name: String,
        chunk: Chunk<'a>,
        meta: Option<Map<String, Value>>,
    },
    /// Any other call, as [`CallToolParams`] reads it.
    Parsed(CallToolParams),
}

impl<'a> ToolCall<'a> {
    /// Reads `params`, the arguments of `chunk_tool` (when the server has such a tool) into a
    /// [`Chunk`] when they fit one. `None` when `params` are not valid `tools/call`
    /// parameters.
    pub(crate) fn read(params: &'a RawValue, chunk_tool: Option<&str>) -> Option<ToolCall<'a>> {
        let params = params.get();
        let mut deserializer = serde_json::Deserializer::from_str(params);
        let one_pass = deserializer
            .deserialize_map(CallVisitor { chunk_tool })
            .and_then(|call| deserializer.end().map(|()| call));
        match one_pass {
            Ok(call) => Some(call),
            // Whatever the one pass could not read is read as before, for the same answer.
            Err(_) => serde_json::from_str::<CallToolParams>(params)
                .ok()
                .map(ToolCall::Parsed),
        }
    }

    /// The call's `_meta`.
    pub(crate) fn meta(&self) -> Option<&Map<String, Value>> {
        match self {
            ToolCall::Chunk { meta, .. } => meta.as_ref(),
            ToolCall::Parsed(params) => params.meta.as_ref(),
        }
    }

    /// The tool called.
    pub(crate) fn name(&self) -> &str {
        match self {
            ToolCall::Chunk { name, .. } => name,
            ToolCall::Parsed(params) => &params.name,
        }
    }
}

/// The arguments as they were read.
enum ReadArguments<'a> {
    Chunk(Chunk<'a>),
    Map(Option<Map<String, Value>>),
}

struct CallVisitor<'t> {
    chunk_tool: Option<&'t str>,
}

impl<'de> Visitor<'de> for CallVisitor<'_> {
    type Value = ToolCall<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("tools/call parameters")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ToolCall<'de>, A::Error> {
        let mut name: Option<String> = None;
        let mut arguments: Option<ReadArguments<'de>> = None;
        let mut meta: Option<Option<Map<String, Value>>> = None;
        while let Some(key) = map.next_key::<&'de str>()? {
            match key {
                "name" if name.is_none() => name = Some(map.next_value()?),
                "arguments" if arguments.is_none() => {
                    // Before the name, arguments that fit a chunk are read as one: when the
                    // name turns out to be another tool's, the call is read again.
                    let may_be_chunk = self.chunk_tool.is_some()
                        && (name.is_none() || name.as_deref() == self.chunk_tool);
                    arguments = Some(if may_be_chunk {
                        ReadArguments::Chunk(map.next_value()?)
                    } else {
                        ReadArguments::Map(map.next_value()?)
                    });
                }
                "_meta" if meta.is_none() => meta = Some(map.next_value()?),
                "name" | "arguments" | "_meta" => {
                    return Err(de::Error::custom(format_args!("duplicate field {key}")));
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        let name = name.ok_or_else(|| de::Error::missing_field("name"))?;
        let arguments = match arguments {
            Some(ReadArguments::Chunk(chunk)) if Some(name.as_str()) == self.chunk_tool => {
                return Ok(ToolCall::Chunk {
                    name,
                    chunk,
                    meta: meta.flatten(),
                });
            }
            Some(ReadArguments::Chunk(_)) => {
                return Err(de::Error::custom(
                    "arguments read as a chunk for another tool",
                ));
            }
            Some(ReadArguments::Map(arguments)) => arguments,
            None => None,
        };
        Ok(ToolCall::Parsed(CallToolParams {
            name,
            arguments,
            meta: meta.flatten(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const CHUNK_TOOL: &str = "put_sample_chunk";

    /// JSON text for a member's value: right for a chunk, or wrong in one of the ways a
    /// client could get it wrong.
    fn any_number_text() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => any::<u64>().prop_map(|n| n.to_string()),
            1 => Just("-1".to_owned()),
            1 => Just("1.5".to_owned()),
            1 => Just("\"7\"".to_owned()),
            1 => Just("null".to_owned()),
        ]
    }

    fn any_content_text() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => "[A-Za-z0-9+/]{0,40}={0,2}".prop_map(|s| format!("\"{s}\"")),
            1 => Just("\"QUJD\\/\"".to_owned()),
            1 => Just("5".to_owned()),
            1 => Just("null".to_owned()),
        ]
    }

    /// An object from members, in the order given (so also with a key twice).
    fn object(members: &[(String, String)]) -> String {
        let members: Vec<String> = members
            .iter()
            .map(|(key, value)| format!("\"{key}\":{value}"))
            .collect();
        format!("{{{}}}", members.join(","))
    }

    fn any_arguments_text() -> impl Strategy<Value = String> {
        let member = prop_oneof![
            any_number_text().prop_map(|v| ("upload_id".to_owned(), v)),
            any_number_text().prop_map(|v| ("offset".to_owned(), v)),
            any_content_text().prop_map(|v| ("content_base64".to_owned(), v)),
            Just(("path".to_owned(), "\"out/a.txt\"".to_owned())),
        ];
        let chunk = (any_number_text(), any_number_text(), any_content_text()).prop_map(
            |(id, offset, content)| {
                vec![
                    ("upload_id".to_owned(), id),
                    ("offset".to_owned(), offset),
                    ("content_base64".to_owned(), content),
                ]
            },
        );
        prop_oneof![
            3 => (chunk, Just(()).prop_perturb(|(), mut rng| rng.random::<u64>()))
                .prop_map(|(mut members, seed)| {
                    members.rotate_left((seed % 3) as usize);
                    object(&members)
                }),
            2 => prop::collection::vec(member, 0..5).prop_map(|members| object(&members)),
            1 => Just("null".to_owned()),
            1 => Just("[1]".to_owned()),
        ]
    }

    fn any_params_text() -> impl Strategy<Value = String> {
        let name = prop_oneof![
            3 => Just(format!("\"{CHUNK_TOOL}\"")),
            1 => Just("\"get_file\"".to_owned()),
            1 => Just("7".to_owned()),
        ];
        let member = prop_oneof![
            3 => name.prop_map(|v| ("name".to_owned(), v)),
            3 => any_arguments_text().prop_map(|v| ("arguments".to_owned(), v)),
            1 => Just(("_meta".to_owned(), "{\"progressToken\":1}".to_owned())),
            1 => Just(("other".to_owned(), "[true]".to_owned())),
        ];
        prop::collection::vec(member, 0..5).prop_map(|members| object(&members))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn a_call_is_read_as_the_whole_parameters_would_be(params in any_params_text()) {
            let generic = serde_json::from_str::<CallToolParams>(&params).ok();
            let params = RawValue::from_string(params).expect("valid JSON");
            let one_pass = ToolCall::read(&params, Some(CHUNK_TOOL));
            match (generic, one_pass) {
                (None, None) => {}
                (Some(generic), Some(ToolCall::Parsed(read))) => prop_assert_eq!(read, generic),
                (Some(generic), Some(ToolCall::Chunk { name, chunk, meta })) => {
                    prop_assert_eq!(&name, CHUNK_TOOL);
                    prop_assert_eq!(meta, generic.meta);
                    prop_assert_eq!(&generic.name, CHUNK_TOOL);
                    let arguments = generic.arguments.expect("a chunk's arguments");
                    prop_assert_eq!(arguments["upload_id"].as_u64(), Some(chunk.upload_id));
                    prop_assert_eq!(arguments["offset"].as_u64(), Some(chunk.offset));
                    prop_assert_eq!(
                        arguments["content_base64"].as_str().map(str::as_bytes),
                        Some(chunk.content_base64)
                    );
                }
                (generic, one_pass) => {
                    prop_assert!(false, "{}: read as {:?}, as a whole {:?}", params, one_pass, generic);
                }
            }
            let without_chunk_tool = ToolCall::read(&params, None);
            let read_as_chunk = matches!(without_chunk_tool, Some(ToolCall::Chunk { .. }));
            prop_assert!(!read_as_chunk, "a server without a chunk tool read {}", params);
        }
    }

    #[test]
    fn a_chunk_is_read_with_its_base64_borrowed_whichever_member_comes_first() {
        for params in [
            r#"{"name":"put_sample_chunk","arguments":{"upload_id":1,"offset":4,"content_base64":"QUJD"}}"#,
            r#"{"arguments":{"content_base64":"QUJD","offset":4,"upload_id":1},"name":"put_sample_chunk"}"#,
        ] {
            let raw = RawValue::from_string(params.to_owned()).expect("valid JSON");
            match ToolCall::read(&raw, Some(CHUNK_TOOL)) {
                Some(ToolCall::Chunk { chunk, .. }) => {
                    assert_eq!((chunk.upload_id, chunk.offset), (1, 4));
                    assert_eq!(chunk.content_base64, b"QUJD");
                    let at = chunk.content_base64.as_ptr() as usize - raw.get().as_ptr() as usize;
                    assert_eq!(&params[at..at + 4], "QUJD", "borrowed from the request");
                }
                other => panic!("{params}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_chunk_whose_base64_holds_an_escape_is_read_as_a_whole_unescaped() {
        let params = r#"{"name":"put_sample_chunk","arguments":{"upload_id":1,"offset":0,"content_base64":"QUJD\/w=="}}"#;
        let raw = RawValue::from_string(params.to_owned()).expect("valid JSON");
        match ToolCall::read(&raw, Some(CHUNK_TOOL)) {
            Some(ToolCall::Parsed(call)) => {
                assert_eq!(
                    call.arguments.expect("arguments")["content_base64"],
                    "QUJD/w=="
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn arguments_that_fit_a_chunk_are_another_tools_when_it_is_named() {
        let params =
            r#"{"arguments":{"content_base64":"QUJD","offset":4,"upload_id":1},"name":"get_file"}"#;
        let params = RawValue::from_string(params.to_owned()).expect("valid JSON");
        match ToolCall::read(&params, Some(CHUNK_TOOL)) {
            Some(ToolCall::Parsed(call)) => {
                assert_eq!(call.name, "get_file");
                assert_eq!(call.arguments.expect("arguments")["content_base64"], "QUJD");
            }
            other => panic!("{other:?}"),
        }
    }
}
