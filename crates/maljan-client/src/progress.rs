//! Transfer progress, as shown to a person.

use std::fmt;
use std::sync::Arc;

/// A transfer in progress, as shown to a person.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferProgress<'a> {
    /// `upload` or `download`.
    pub direction: &'static str,
    /// The file.
    pub name: &'a str,
    /// Bytes moved so far.
    pub done: u64,
    /// The total, when known.
    pub total: Option<u64>,
}

/// Where transfer progress goes (a progress bar, a log).
///
/// ```
/// use maljan_client::ProgressReporter;
/// let reporter = ProgressReporter::new(|p| eprintln!("{} {}: {} bytes", p.direction, p.name, p.done));
/// # drop(reporter);
/// ```
#[derive(Clone)]
pub struct ProgressReporter(Arc<dyn Fn(TransferProgress<'_>) + Send + Sync>);

impl ProgressReporter {
    /// Reports to `f`.
    pub fn new(f: impl Fn(TransferProgress<'_>) + Send + Sync + 'static) -> Self {
        ProgressReporter(Arc::new(f))
    }

    pub(crate) fn report(&self, progress: TransferProgress<'_>) {
        (self.0)(progress);
    }
}

impl fmt::Debug for ProgressReporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ProgressReporter")
    }
}
