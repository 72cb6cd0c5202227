//! The live things a connection is given, apart from its settings.

use std::sync::Arc;

use maljan_ledger::Ledger;

use crate::{Job, ProgressReporter, TransferProgress};

/// What a connection works with besides its settings: the ledger its calls go to, the job
/// they belong to, and where transfer progress is shown. Several connections share them.
///
/// ```
/// use std::sync::Arc;
/// use maljan_client::{ConnectionContext, Job, Ledger};
/// let dir = tempfile::tempdir().unwrap();
/// let job = Arc::new(Job::create(dir.path()).unwrap());
/// let context = ConnectionContext::default()
///     .with_ledger(Arc::new(Ledger::new()))
///     .with_job(job.clone());
/// assert!(context.job().is_some());
/// ```
#[derive(Debug, Clone, Default)]
pub struct ConnectionContext {
    ledger: Arc<Ledger>,
    job: Option<Arc<Job>>,
    progress: Option<ProgressReporter>,
}

impl ConnectionContext {
    /// Calls recorded in `ledger`.
    pub fn with_ledger(mut self, ledger: Arc<Ledger>) -> Self {
        self.ledger = ledger;
        self
    }

    /// Calls belonging to `job`: staging and taking files need one.
    pub fn with_job(mut self, job: Arc<Job>) -> Self {
        self.job = Some(job);
        self
    }

    /// Transfer progress shown by `progress`.
    pub fn with_progress(mut self, progress: ProgressReporter) -> Self {
        self.progress = Some(progress);
        self
    }

    /// The ledger.
    pub fn ledger(&self) -> &Arc<Ledger> {
        &self.ledger
    }

    /// The job, when there is one.
    pub fn job(&self) -> Option<&Arc<Job>> {
        self.job.as_ref()
    }

    /// Where progress goes, when anywhere.
    pub fn progress(&self) -> Option<&ProgressReporter> {
        self.progress.as_ref()
    }

    /// Reports transfer progress, when somewhere to report it.
    pub(crate) fn report_progress(
        &self,
        direction: &'static str,
        name: &str,
        done: u64,
        total: Option<u64>,
    ) {
        if let Some(reporter) = &self.progress {
            reporter.report(TransferProgress {
                direction,
                name,
                done,
                total,
            });
        }
    }
}
