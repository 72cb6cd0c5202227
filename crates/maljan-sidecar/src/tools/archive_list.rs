//! `archive_list`: an archive's member names through `zipinfo`, a tool the host may lack
//! (then unavailable, with how to install it).

use std::process::Command;

use maljan_mcp_proto::maljan::{ErrorCode, ToolFailure};
use maljan_sidecar_kit::{Arguments, Probe, ToolContext, ToolResult, ToolSpec};
use serde_json::json;

/// The program this tool needs, from Debian's `unzip` package.
pub(crate) const ZIPINFO: &str = "zipinfo";

pub(crate) fn archive_list_spec() -> ToolSpec {
    ToolSpec::new(
        "archive_list",
        "The members of a ZIP archive, listed by zipinfo",
    )
    .required_string("path", "the archive")
    .depends_on(
        Probe::Program(ZIPINFO.to_owned()),
        "install zipinfo on the server's host (Debian: apt-get install unzip)",
        Some("listing ZIP archive members"),
    )
    .timeout_s(60.0)
}

pub(crate) fn archive_list(args: &Arguments, ctx: &ToolContext) -> ToolResult {
    let path = args.string("path")?;
    // zipinfo reads the file opened beneath the job's directory, as its stdin: it is never
    // handed the name, which could be swapped for a link once checked.
    let archive = ctx.open(path)?.file;
    let program = ctx.dependency.as_deref().unwrap_or(ZIPINFO);
    let output = Command::new(program)
        .arg("-1")
        .arg("--")
        .arg("/dev/stdin")
        .stdin(archive)
        .output()
        .map_err(|e| {
            ToolFailure::new(
                ErrorCode::MissingDependency,
                format!("{program} could not be run: {e}"),
                Some(
                    "install zipinfo on the server's host (Debian: apt-get install unzip)"
                        .to_owned(),
                ),
            )
        })?;
    if !output.status.success() {
        return Err(ToolFailure::new(
            ErrorCode::UnsupportedFormat,
            format!(
                "{path} is not a ZIP archive zipinfo can read ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
            Some("pass a ZIP archive".to_owned()),
        ));
    }
    let listing = String::from_utf8_lossy(&output.stdout);
    let members: Vec<&str> = listing.lines().filter(|l| !l.is_empty()).collect();
    Ok(json!({"path": path, "count": members.len(), "members": members}))
}
