//! The files a tool names in its answer.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
