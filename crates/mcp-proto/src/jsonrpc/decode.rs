//! Decoding one line of traffic into a message, or saying why it is not one.

use std::fmt;

use crate::large_buffers::LARGE_BUFFERS;
use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use super::{
    ErrorObject, ErrorResponse, InvalidMessage, InvalidReason, JsonKind, Message, Notification,
    RawJson, Request, RequestId, Response,
};

/// What one line of JSON-RPC traffic turned out to be.
#[derive(Debug)]
pub enum DecodedLine {
    /// A valid message.
    Message(Message),
    /// A valid batch (only when batches are allowed).
    Batch(Vec<Message>),
    /// A line that claims to be a protocol message and is not a valid one.
    Invalid(InvalidMessage),
    /// Not a protocol message at all: text, a number, a JSON log record without `jsonrpc`.
    NotProtocol,
}

/// Decodes and validates one line (without its line ending).
///
/// A line is a protocol claim when it is a JSON object with a `jsonrpc` member, an array of
/// such objects, or a line beginning with `{` that mentions `"jsonrpc"` and is not valid JSON.
/// Anything else is [`DecodedLine::NotProtocol`]. Batches are valid only when `allow_batch`
/// (protocol 2025-03-26).
///
/// The line is parsed once: `params` and `result` are kept as raw JSON.
///
/// ```
/// use maljan_mcp_proto::jsonrpc::{decode_line, DecodedLine};
/// let line = br#"{"jsonrpc":"2.0","id":null,"result":{}}"#;
/// match decode_line(line, false) {
///     DecodedLine::Invalid(invalid) => assert_eq!(invalid.reason.to_string(), "id is null"),
///     other => panic!("{other:?}"),
/// }
/// assert!(matches!(decode_line(b"Downloading 50%", false), DecodedLine::NotProtocol));
/// assert!(matches!(decode_line(br#"{"level":"info"}"#, false), DecodedLine::NotProtocol));
/// ```
pub fn decode_line(line: &[u8], allow_batch: bool) -> DecodedLine {
    let start = line.iter().position(|b| !b.is_ascii_whitespace());
    match start.map(|i| line[i]) {
        Some(b'{') => decode_object_line(line),
        Some(b'[') => decode_batch_line(line, allow_batch),
        _ => DecodedLine::NotProtocol,
    }
}

fn mentions_jsonrpc(line: &[u8]) -> bool {
    memchr::memmem::find(line, b"\"jsonrpc\"").is_some()
}

/// Decodes and validates one line (without its line ending) as [`decode_line`] does, to
/// the same outcome, but a response's result is kept in `line`'s own buffer instead of a
/// copy of it (see [`RawJson`]): a file chunk's answer of several MiB is not copied, nor
/// allocated again; a decoded line that nothing keeps (a request's, say) goes back to
/// [`LARGE_BUFFERS`] for the next one. A batch's results, and a line that is not UTF-8,
/// are copied as by [`decode_line`].
///
/// ```
/// use maljan_mcp_proto::jsonrpc::{decode_line_buffer, DecodedLine, Message};
/// let line = br#"{"jsonrpc":"2.0","id":1,"result":{"ok":true}}"#.to_vec();
/// let DecodedLine::Message(Message::Response(response)) = decode_line_buffer(line, false)
/// else { panic!() };
/// assert_eq!(response.result.get(), r#"{"ok":true}"#);
/// ```
pub fn decode_line_buffer(line: Vec<u8>, allow_batch: bool) -> DecodedLine {
    let text = match String::from_utf8(line) {
        Ok(text) => text,
        Err(not_utf8) => return decode_line(not_utf8.as_bytes(), allow_batch),
    };
    let start = text.bytes().position(|b| !b.is_ascii_whitespace());
    if start.map(|i| text.as_bytes()[i]) != Some(b'{') {
        return decode_line(text.as_bytes(), allow_batch);
    }
    let mut result_at = None;
    let mut decoded = decode_object(serde_json::from_str(&text), text.as_bytes(), |result| {
        // The result is a slice of `text`: its place there, from the two addresses (checked,
        // and copied should it ever not be).
        let len = result.get().len();
        let start = (result.get().as_ptr() as usize)
            .checked_sub(text.as_ptr() as usize)
            .filter(|start| start + len <= text.len());
        match start {
            Some(start) => {
                result_at = Some(start..start + len);
                RawJson::within(String::new(), 0..0)
            }
            None => RawJson::copied(result),
        }
    });
    match (&mut decoded, result_at) {
        (DecodedLine::Message(Message::Response(response)), Some(range)) => {
            response.result = RawJson::within(text, range);
        }
        // Nothing keeps the line (a request's params are copied out of it): its buffer can
        // take the next long line.
        _ => LARGE_BUFFERS.give(text.into_bytes()),
    }
    decoded
}

fn decode_object_line(line: &[u8]) -> DecodedLine {
    decode_object(serde_json::from_slice(line), line, RawJson::copied)
}

/// Validates an object line parsed into `parsed`; `keep_result` keeps a response's result.
fn decode_object<'a>(
    parsed: serde_json::Result<RawFields<'a>>,
    line: &[u8],
    keep_result: impl FnOnce(&'a RawValue) -> RawJson,
) -> DecodedLine {
    match parsed {
        Ok(fields) => match fields.into_message(keep_result) {
            Some(Ok(message)) => DecodedLine::Message(message),
            Some(Err(invalid)) => DecodedLine::Invalid(invalid),
            None => DecodedLine::NotProtocol,
        },
        Err(error) if mentions_jsonrpc(line) => DecodedLine::Invalid(InvalidMessage {
            reason: InvalidReason::NotJson(error.to_string()),
            id: None,
            request: false,
        }),
        Err(_) => DecodedLine::NotProtocol,
    }
}

fn decode_batch_line(line: &[u8], allow_batch: bool) -> DecodedLine {
    let Ok(elements) = serde_json::from_slice::<Vec<&RawValue>>(line) else {
        return DecodedLine::NotProtocol;
    };
    let mut fields = Vec::with_capacity(elements.len());
    for element in &elements {
        match serde_json::from_str::<RawFields<'_>>(element.get()) {
            Ok(f) if f.jsonrpc.is_some() => fields.push(f),
            // An array of things that are not protocol objects is not a protocol claim.
            _ => return DecodedLine::NotProtocol,
        }
    }
    if fields.is_empty() {
        return DecodedLine::NotProtocol;
    }
    if !allow_batch {
        return DecodedLine::Invalid(InvalidMessage {
            reason: InvalidReason::BatchNotAllowed,
            id: None,
            request: false,
        });
    }
    let mut messages = Vec::with_capacity(fields.len());
    for (index, f) in fields.into_iter().enumerate() {
        match f.into_message(RawJson::copied) {
            Some(Ok(m)) => messages.push(m),
            Some(Err(invalid)) => {
                return DecodedLine::Invalid(InvalidMessage {
                    reason: InvalidReason::InBatch {
                        index,
                        reason: Box::new(invalid.reason),
                    },
                    id: invalid.id,
                    request: invalid.request,
                });
            }
            None => unreachable!("batch elements were checked for a jsonrpc member"),
        }
    }
    DecodedLine::Batch(messages)
}

/// The members of a JSON object that matter to JSON-RPC, borrowed from the line.
#[derive(Default)]
struct RawFields<'a> {
    jsonrpc: Option<&'a RawValue>,
    id: Option<&'a RawValue>,
    method: Option<&'a RawValue>,
    params: Option<&'a RawValue>,
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
    duplicate: Option<&'static str>,
}

enum Field {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    Other,
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldVisitor;
        impl Visitor<'_> for FieldVisitor {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Field, E> {
                Ok(match v {
                    "jsonrpc" => Field::Jsonrpc,
                    "id" => Field::Id,
                    "method" => Field::Method,
                    "params" => Field::Params,
                    "result" => Field::Result,
                    "error" => Field::Error,
                    _ => Field::Other,
                })
            }
        }
        deserializer.deserialize_identifier(FieldVisitor)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for RawFields<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct FieldsVisitor;
        impl<'de> Visitor<'de> for FieldsVisitor {
            type Value = RawFields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RawFields<'de>, A::Error> {
                let mut fields = RawFields::default();
                while let Some(key) = map.next_key::<Field>()? {
                    let (slot, name) = match key {
                        Field::Jsonrpc => (&mut fields.jsonrpc, "jsonrpc"),
                        Field::Id => (&mut fields.id, "id"),
                        Field::Method => (&mut fields.method, "method"),
                        Field::Params => (&mut fields.params, "params"),
                        Field::Result => (&mut fields.result, "result"),
                        Field::Error => (&mut fields.error, "error"),
                        Field::Other => {
                            map.next_value::<IgnoredAny>()?;
                            continue;
                        }
                    };
                    let value = map.next_value::<&'de RawValue>()?;
                    if slot.replace(value).is_some() && fields.duplicate.is_none() {
                        fields.duplicate = Some(name);
                    }
                }
                Ok(fields)
            }
        }
        deserializer.deserialize_map(FieldsVisitor)
    }
}

fn read_id(raw: &RawValue) -> Result<RequestId, InvalidReason> {
    let text = raw.get();
    match JsonKind::of_raw(text) {
        JsonKind::Null => Err(InvalidReason::NullId),
        JsonKind::String => serde_json::from_str::<String>(text)
            .map(RequestId::String)
            .map_err(|_| InvalidReason::IdKind(JsonKind::String)),
        JsonKind::Integer => text
            .parse::<i64>()
            .map(RequestId::Integer)
            .map_err(|_| InvalidReason::IdOutOfRange),
        kind => Err(InvalidReason::IdKind(kind)),
    }
}

fn read_string(raw: &RawValue) -> Option<String> {
    serde_json::from_str::<String>(raw.get()).ok()
}

fn read_error_object(raw: &RawValue) -> Result<ErrorObject, InvalidReason> {
    /// Keeps a present `null` as `Some`, unlike `Option`'s own reading.
    fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
        <&RawValue>::deserialize(d).map(Some)
    }
    #[derive(Deserialize)]
    struct ErrorFields<'a> {
        #[serde(borrow, default, deserialize_with = "present")]
        code: Option<&'a RawValue>,
        #[serde(borrow, default, deserialize_with = "present")]
        message: Option<&'a RawValue>,
        #[serde(borrow, default, deserialize_with = "present")]
        data: Option<&'a RawValue>,
    }
    let kind = JsonKind::of_raw(raw.get());
    if kind != JsonKind::Object {
        return Err(InvalidReason::ErrorKind(kind));
    }
    let fields: ErrorFields<'_> =
        serde_json::from_str(raw.get()).map_err(|_| InvalidReason::ErrorKind(JsonKind::Object))?;
    let code = match fields.code {
        None => return Err(InvalidReason::ErrorCodeKind("missing".into())),
        Some(c) => c
            .get()
            .parse::<i64>()
            .map_err(|_| InvalidReason::ErrorCodeKind(JsonKind::of_raw(c.get()).to_string()))?,
    };
    let message = match fields.message {
        None => return Err(InvalidReason::ErrorMessageKind("missing".into())),
        Some(m) => read_string(m).ok_or_else(|| {
            InvalidReason::ErrorMessageKind(JsonKind::of_raw(m.get()).to_string())
        })?,
    };
    Ok(ErrorObject {
        code,
        message,
        data: fields.data.map(RawValue::to_owned),
    })
}

impl<'a> RawFields<'a> {
    /// `None` when the object has no `jsonrpc` member (not a protocol claim).
    fn into_message(
        self,
        keep_result: impl FnOnce(&'a RawValue) -> RawJson,
    ) -> Option<Result<Message, InvalidMessage>> {
        let jsonrpc = self.jsonrpc?;
        let readable_id = self.id.and_then(|raw| read_id(raw).ok());
        let request = self.method.is_some() && self.result.is_none() && self.error.is_none();
        Some(
            self.validate(jsonrpc, keep_result)
                .map_err(|reason| InvalidMessage {
                    reason,
                    id: readable_id,
                    request,
                }),
        )
    }

    fn validate(
        self,
        jsonrpc: &RawValue,
        keep_result: impl FnOnce(&'a RawValue) -> RawJson,
    ) -> Result<Message, InvalidReason> {
        if jsonrpc.get() != "\"2.0\"" && read_string(jsonrpc).as_deref() != Some("2.0") {
            return Err(InvalidReason::WrongVersion(jsonrpc.get().to_owned()));
        }
        if let Some(name) = self.duplicate {
            return Err(InvalidReason::DuplicateMember(name));
        }
        let id = self.id.map(read_id).transpose()?;
        if let Some(method) = self.method {
            let method = read_string(method)
                .ok_or_else(|| InvalidReason::MethodKind(JsonKind::of_raw(method.get())))?;
            if self.result.is_some() {
                return Err(InvalidReason::MethodAndResponse("result"));
            }
            if self.error.is_some() {
                return Err(InvalidReason::MethodAndResponse("error"));
            }
            let params = match self.params {
                None => None,
                Some(p) => match JsonKind::of_raw(p.get()) {
                    JsonKind::Object | JsonKind::Array => Some(p.to_owned()),
                    kind => return Err(InvalidReason::ParamsKind(kind)),
                },
            };
            return Ok(match id {
                Some(id) => Message::Request(Request { id, method, params }),
                None => Message::Notification(Notification { method, params }),
            });
        }
        match (self.result, self.error) {
            (Some(_), Some(_)) => Err(InvalidReason::ResultAndError),
            (Some(result), None) => {
                let id = id.ok_or(InvalidReason::ResultWithoutId)?;
                Ok(Message::Response(Response {
                    id,
                    result: keep_result(result),
                }))
            }
            (None, Some(error)) => Ok(Message::Error(ErrorResponse {
                id,
                error: read_error_object(error)?,
            })),
            (None, None) => Err(InvalidReason::NoMethodResultOrError),
        }
    }
}
