//! The files a tool names in its answer.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::mcp::{ContentBlock, EmbeddedResource};

/// A file a tool wrote, named in its answer's `files` list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    /// The path, as the server knows it.
    pub path: String,
    /// Its size, when stated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Its sha256 in lowercase hex, when stated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// The files an answer names in its `files` member; entries that are not `{path, …}` are
/// left out.
///
/// ```
/// use maljan_mcp_proto::maljan::files_in;
/// let answer = serde_json::json!({"files": [{"path": "out/a.bin", "size": 3}, 7]});
/// let files = files_in(&answer);
/// assert_eq!(files.len(), 1);
/// assert_eq!(files[0].path, "out/a.bin");
/// ```
pub fn files_in(answer: &Value) -> Vec<FileRef> {
    answer
        .get("files")
        .and_then(Value::as_array)
        .map(|files| {
            files
                .iter()
                .filter_map(|f| serde_json::from_value(f.clone()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// A resource a tool's answer names: a `resource_link` block (read with `resources/read`)
/// or an embedded `resource` block (its bytes in the answer).
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceRef {
    /// The resource's URI.
    pub uri: String,
    /// The name to keep it under: the link's name, else the URI's last segment.
    pub name: String,
    /// Its size, when the link states it.
    pub size: Option<u64>,
    /// Its contents, when the answer embeds them.
    pub embedded: Option<EmbeddedResource>,
}

/// The resources an answer names: the `resource_link` and `resource` blocks of an answer
/// that is a list of content blocks (an answer with structured content names files in
/// `files` instead).
///
/// ```
/// use maljan_mcp_proto::maljan::resources_in;
/// let answer = serde_json::json!([
///     {"type": "text", "text": "two files"},
///     {"type": "resource_link", "uri": "file:///out/a.bin", "name": "a.bin", "size": 3},
///     {"type": "resource", "resource": {"uri": "demo://notes/b.txt", "text": "hi"}}
/// ]);
/// let named = resources_in(&answer);
/// assert_eq!(named[0].name, "a.bin");
/// assert_eq!(named[1].name, "b.txt");
/// assert!(named[1].embedded.is_some());
/// ```
pub fn resources_in(answer: &Value) -> Vec<ResourceRef> {
    let Some(blocks) = answer.as_array() else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter_map(|block| match ContentBlock::deserialize(block).ok()? {
            ContentBlock::ResourceLink {
                uri, name, size, ..
            } => Some(ResourceRef {
                name: if name.trim().is_empty() {
                    last_segment(&uri)
                } else {
                    name
                },
                uri,
                size,
                embedded: None,
            }),
            ContentBlock::Resource { resource } => Some(ResourceRef {
                uri: resource.uri.clone(),
                name: last_segment(&resource.uri),
                size: None,
                embedded: Some(resource),
            }),
            _ => None,
        })
        .collect()
}

/// The last non-empty segment of a URI's path, without its query or fragment.
fn last_segment(uri: &str) -> String {
    let path = uri.split(['?', '#']).next().unwrap_or(uri);
    path.rsplit('/')
        .find(|segment| !segment.is_empty())
        .unwrap_or("resource")
        .to_owned()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn only_resource_blocks_of_a_content_list_are_named() {
        assert!(resources_in(&json!({"files": []})).is_empty());
        assert!(resources_in(&json!("text")).is_empty());
        let named = resources_in(&json!([
            {"type": "resource_link", "uri": "demo://x/y/?q=1#f", "name": " "},
            {"type": "resource_link", "uri": "demo://"},
            {"type": "image", "data": "", "mimeType": "image/png"}
        ]));
        assert_eq!(
            named.len(),
            1,
            "a link without a name field is not a link: {named:?}"
        );
        assert_eq!(named[0].name, "y");
    }

    proptest! {
        /// Whatever blocks a server sends, reading them ends, and every name is non-empty.
        #[test]
        fn any_answer_is_read_without_panic(
            uri in ".{0,40}",
            name in ".{0,20}",
        ) {
            let answer = json!([
                {"type": "resource_link", "uri": uri, "name": name},
                {"type": "resource", "resource": {"uri": uri}}
            ]);
            for named in resources_in(&answer) {
                prop_assert!(!named.name.is_empty());
            }
        }
    }
}
