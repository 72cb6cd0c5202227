//! The reference sidecar's tools.

mod archive_list;
mod file_info;
mod strings;
mod unpack;

pub(crate) use archive_list::{archive_list, archive_list_spec};
pub(crate) use file_info::{file_info, file_info_spec};
pub(crate) use strings::{strings, strings_spec};
pub(crate) use unpack::{unpack, unpack_spec};

use std::io;

use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};

/// Bytes read from a sample at a time.
pub(crate) const READ_CHUNK: usize = 1024 * 1024;

pub(crate) fn io_failure(path: &str, error: &io::Error) -> ToolFailure {
    match error.kind() {
        io::ErrorKind::NotFound => ToolFailure::new(
            ErrorCode::NoSuchFile,
            format!("{path} does not exist"),
            Some("check the path; it is read on the server's host".to_owned()),
        ),
        io::ErrorKind::PermissionDenied => ToolFailure::new(
            ErrorCode::BadArgument,
            format!("{path} cannot be read: permission denied"),
            Some("make the file readable by the server's user".to_owned()),
        ),
        _ => ToolFailure::new(
            ErrorCode::ToolFailed,
            format!("reading {path} failed: {error}"),
            None,
        ),
    }
}
