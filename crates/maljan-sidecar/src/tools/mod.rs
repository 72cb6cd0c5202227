//! The reference sidecar's tools.

mod archive_list;
mod file_info;
mod strings;
mod unpack;

pub(crate) use archive_list::{archive_list, archive_list_spec};
pub(crate) use file_info::{file_info, file_info_spec};
pub(crate) use strings::{strings, strings_spec};
pub(crate) use unpack::{unpack, unpack_spec};

use std::fs::File;
use std::io;
use std::path::Path;

use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};

/// Bytes read from a sample at a time.
pub(crate) const READ_CHUNK: usize = 1024 * 1024;

/// Opens a sample for reading, failing as the envelope says: `no_such_file`, `bad_argument`.
pub(crate) fn open_sample(path: &str) -> Result<File, ToolFailure> {
    let meta = std::fs::metadata(Path::new(path)).map_err(|e| io_failure(path, &e))?;
    if !meta.is_file() {
        return Err(ToolFailure::new(
            ErrorCode::BadArgument,
            format!("{path} is not a regular file"),
            Some("pass the path of a file".to_owned()),
        ));
    }
    File::open(path).map_err(|e| io_failure(path, &e))
}

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
