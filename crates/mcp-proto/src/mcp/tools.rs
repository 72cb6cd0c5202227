//! Tools: listing them, calling one, and the blocks of its result.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A tool a server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// The tool's name, unique per server.
    pub name: String,
    /// A name for display.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of its arguments (an object schema).
    pub input_schema: Value,
    /// The JSON Schema of its structured output.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Untrusted hints about the tool's behaviour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Value>,
}

impl Tool {
    /// The name to show: `title`, then `annotations.title`, then `name`.
    pub fn display_name(&self) -> &str {
        self.title
            .as_deref()
            .or_else(|| {
                self.annotations
                    .as_ref()
                    .and_then(|a| a.get("title"))
                    .and_then(Value::as_str)
            })
            .unwrap_or(&self.name)
    }
}

/// `tools/list` parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListToolsParams {
    /// The cursor of the page to read; `None` for the first page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// `tools/list` result: one page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListToolsResult {
    /// The tools on this page.
    pub tools: Vec<Tool>,
    /// The cursor of the next page; `None` on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// `tools/call` parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallToolParams {
    /// The tool to call.
    pub name: String,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Map<String, Value>>,
    /// Request metadata, such as `progressToken` to be sent progress notifications.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
}

impl CallToolParams {
    /// The params as a JSON value, as serde would write them, the arguments moved rather
    /// than copied (a file chunk's base64 is not copied once more).
    ///
    /// ```
    /// use maljan_mcp_proto::mcp::CallToolParams;
    /// let params = CallToolParams {
    ///     name: "get_file".into(),
    ///     arguments: serde_json::json!({"path": "a.bin"}).as_object().cloned(),
    ///     meta: serde_json::json!({"progressToken": 1}).as_object().cloned(),
    /// };
    /// assert_eq!(serde_json::to_value(&params).unwrap(), params.clone().into_value());
    /// let bare = CallToolParams { name: "t".into(), arguments: None, meta: None };
    /// assert_eq!(serde_json::to_value(&bare).unwrap(), bare.into_value());
    /// ```
    pub fn into_value(self) -> Value {
        let mut params = Map::new();
        params.insert("name".to_owned(), Value::String(self.name));
        if let Some(arguments) = self.arguments {
            params.insert("arguments".to_owned(), Value::Object(arguments));
        }
        if let Some(meta) = self.meta {
            params.insert("_meta".to_owned(), Value::Object(meta));
        }
        Value::Object(params)
    }
}

/// `tools/call` result.
///
/// ```
/// use maljan_mcp_proto::mcp::{CallToolResult, ContentBlock};
/// let r: CallToolResult = serde_json::from_str(
///     r#"{"content":[{"type":"text","text":"{\"size\":3}"}]}"#).unwrap();
/// assert!(matches!(&r.content[0], ContentBlock::Text { text } if text == "{\"size\":3}"));
/// assert!(!r.is_error());
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// The answer as content blocks. Required by the protocol; read as empty when absent.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// The answer as JSON.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// Whether the tool failed; absent means `false`.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "isError")]
    pub is_error: Option<bool>,
}

impl CallToolResult {
    /// Whether the server marked the result as an error.
    pub fn is_error(&self) -> bool {
        self.is_error.unwrap_or(false)
    }
}

/// A block of a tool's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentBlock {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image, base64-encoded.
    #[serde(rename_all = "camelCase")]
    Image {
        /// The base64 data.
        data: String,
        /// Its MIME type.
        mime_type: String,
    },
    /// Audio, base64-encoded.
    #[serde(rename_all = "camelCase")]
    Audio {
        /// The base64 data.
        data: String,
        /// Its MIME type.
        mime_type: String,
    },
    /// A link to a resource.
    #[serde(rename_all = "camelCase")]
    ResourceLink {
        /// The resource's URI.
        uri: String,
        /// Its name.
        name: String,
        /// A name for display.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// What it is.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// Its MIME type.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// Its size in bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        size: Option<u64>,
    },
    /// A resource embedded in the answer.
    Resource {
        /// The resource.
        resource: EmbeddedResource,
    },
    /// A block type this crate does not know; kept so the rest of the answer is read.
    #[serde(other)]
    Unknown,
}

/// A resource embedded in a tool's answer: text or a base64 blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmbeddedResource {
    /// The resource's URI.
    pub uri: String,
    /// Its MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its text, for a text resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Its bytes in base64, for a binary resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}
