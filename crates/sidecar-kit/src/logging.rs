//! A kit server's logs: to stderr, never stdout, coloured only on a terminal.

/// Sends `tracing` output to stderr, filtered by `RUST_LOG` (default `info`).
///
/// Call it after [`stdio_safe`](crate::stdio_safe). Calling it twice is harmless.
pub fn log_to_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour only on a terminal, and never with NO_COLOR.
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none(),
        )
        .try_init();
}
