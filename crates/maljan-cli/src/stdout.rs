//! Writing to standard output. A reader that went away (`maljan ledger | head`) ends the
//! program quietly, with the shell's status for a broken pipe, instead of a panic.

use std::io::{self, Write};

/// The status a program killed by SIGPIPE has in a shell: what `maljan` exits with when
/// its reader went away.
pub(crate) const EXIT_BROKEN_PIPE: i32 = 128 + 13;

/// Writes `text` to standard output and flushes it.
pub(crate) fn write_out(text: &str) {
    write_bytes(text.as_bytes());
}

/// Writes `bytes` to standard output and flushes them.
pub(crate) fn write_bytes(bytes: &[u8]) {
    let mut out = io::stdout().lock();
    if let Err(e) = out.write_all(bytes).and_then(|()| out.flush()) {
        if e.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(EXIT_BROKEN_PIPE);
        }
        eprintln!("error: writing to standard output failed: {e}");
        std::process::exit(1);
    }
}

/// `print!` that ends quietly on a broken pipe.
macro_rules! out {
    ($($arg:tt)*) => { $crate::stdout::write_out(&format!($($arg)*)) };
}

/// `println!` that ends quietly on a broken pipe.
macro_rules! outln {
    ($($arg:tt)*) => {{
        let mut line = format!($($arg)*);
        line.push('\n');
        $crate::stdout::write_out(&line)
    }};
}

pub(crate) use {out, outln};
