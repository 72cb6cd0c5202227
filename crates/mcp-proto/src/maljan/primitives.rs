//! The platform primitives: tools the platform calls itself and never shows a model.

/// Tools the platform calls itself and never shows to the model.
pub const PLATFORM_PRIMITIVES: [&str; 6] = [
    "capabilities",
    "put_sample",
    "put_sample_begin",
    "put_sample_chunk",
    "put_sample_finish",
    "get_file",
];

/// Whether a tool is a platform primitive.
///
/// ```
/// assert!(maljan_mcp_proto::maljan::is_platform_primitive("get_file"));
/// assert!(!maljan_mcp_proto::maljan::is_platform_primitive("file_info"));
/// ```
pub fn is_platform_primitive(name: &str) -> bool {
    PLATFORM_PRIMITIVES.contains(&name)
}
