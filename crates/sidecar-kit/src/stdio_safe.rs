//! Stdout kept for the protocol alone: whatever else writes to it goes to stderr.

use std::fs::File;
use std::io;

/// Makes stdout safe for the protocol, first of all.
///
/// Returns a private duplicate of stdout for protocol output only, then points fd 1 at
/// stderr, so nothing else in the process (a dependency's `println!`, a progress bar, a
/// child process that inherits stdout) can write into the protocol stream. The duplicate
/// is close-on-exec, so child processes never inherit it.
///
/// Call it before anything else runs, and log to stderr.
///
/// ```no_run
/// let protocol_out = maljan_sidecar_kit::stdio_safe().expect("stdout can be duplicated");
/// println!("this goes to stderr now");
/// # drop(protocol_out);
/// ```
pub fn stdio_safe() -> io::Result<File> {
    let protocol = rustix::io::fcntl_dupfd_cloexec(io::stdout(), 0)?;
    rustix::stdio::dup2_stdout(io::stderr())?;
    Ok(File::from(protocol))
}
