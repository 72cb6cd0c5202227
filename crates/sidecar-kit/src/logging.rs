/// Sends `tracing` output to stderr, filtered by `RUST_LOG` (default `info`).
///
/// Call it after [`stdio_safe`](crate::stdio_safe). Calling it twice is harmless.
pub fn log_to_stderr() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
