//! Writing to standard output and standard error, the only ways `maljan` shows anything.
//!
//! Everything shown passes here, so nothing a server, a sample or a file name carries
//! reaches the terminal raw: control characters are shown escaped (`\u{1b}`), and JSON
//! documents have theirs written as JSON escapes. A reader that went away (`maljan ledger
//! | head`) ends the program quietly, with the shell's status for a broken pipe, instead of
//! a panic.

use std::io::{self, Write};

use maljan_client::{escape_controls, escape_json_controls};

/// The status a program killed by SIGPIPE has in a shell (128 + 13): what `maljan` exits
/// with when its reader went away.
pub(crate) const EXIT_BROKEN_PIPE: i32 = 141;

/// Shows `text` on standard output, its control characters escaped.
pub(crate) fn write_out(text: &str) {
    write_bytes(escape_controls(text).as_bytes());
}

/// Shows a JSON document on standard output, the control characters JSON leaves raw
/// written as JSON escapes.
pub(crate) fn write_json(json: &str) {
    write_bytes(escape_json_controls(json).as_bytes());
}

/// Shows `text` on standard error, its control characters escaped.
pub(crate) fn write_err(text: &str) {
    let shown = escape_controls(text);
    // Nothing can be told of a standard error that is gone.
    let _ = io::stderr().lock().write_all(shown.as_bytes());
}

/// Writes `bytes` to standard output as they are (what maljan generated itself: a
/// completion script, a manual page) and flushes them.
pub(crate) fn write_bytes(bytes: &[u8]) {
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(EXIT_BROKEN_PIPE);
        }
        let _ = writeln!(
            io::stderr(),
            "error: writing to standard output failed: {e}"
        );
        std::process::exit(1);
    }
}

/// `print!` through [`write_out`].
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdout::write_out(&format!($($arg)*)) };
}

/// `println!` through [`write_out`].
macro_rules! outln {
    ($($arg:tt)*) => {{
        let mut line = format!($($arg)*);
        line.push('\n');
        $crate::stdout::write_out(&line)
    }};
}

/// `eprintln!` through [`write_err`].
macro_rules! errln {
    ($($arg:tt)*) => {{
        let mut line = format!($($arg)*);
        line.push('\n');
        $crate::stdout::write_err(&line)
    }};
}

pub(crate) use {errln, out, outln};
