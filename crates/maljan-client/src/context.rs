//! The live things a connection is given, apart from its settings.

use std::sync::Arc;

use maljan_breaker::CallGuard;
use maljan_ledger::{CallScope, Ledger};

use crate::events::{Recorder, Recorders, RunEvent};
use crate::job::Job;
use crate::known_eras::KnownEras;
use crate::progress::{ProgressReporter, TransferProgress};
use crate::trace::TraceParent;

/// What a connection works with besides its settings: who hears what its calls do (the
/// ledger among them), the job they belong to, and where transfer progress is shown.
/// Several connections share them.
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
    recorders: Recorders,
    job: Option<Arc<Job>>,
    run: Option<String>,
    progress: Option<ProgressReporter>,
    call_guard: Option<Arc<CallGuard>>,
    trace: Option<TraceParent>,
    known_eras: Arc<KnownEras>,
}

impl ConnectionContext {
    /// Connections that share what they learn of each HTTP origin's era (clones of one
    /// context already do).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use maljan_client::{ConnectionContext, KnownEras};
    /// let known = Arc::new(KnownEras::default());
    /// let context = ConnectionContext::default().with_known_eras(known.clone());
    /// assert!(Arc::ptr_eq(context.known_eras(), &known));
    /// ```
    pub fn with_known_eras(mut self, known: Arc<KnownEras>) -> Self {
        self.known_eras = known;
        self
    }

    /// The era each HTTP origin was found to speak.
    pub fn known_eras(&self) -> &Arc<KnownEras> {
        &self.known_eras
    }

    /// Calls recorded in `ledger`. Each call's record is given to it after the context's
    /// recorders heard of it ([`RunEvent::CallMade`]): the record is not copied for it, as
    /// it would be for a ledger added with [`recording_to`](Self::recording_to).
    pub fn with_ledger(mut self, ledger: Arc<Ledger>) -> Self {
        self.recorders.push_ledger(ledger);
        self
    }

    /// `recorder` hears what the connections do ([`RunEvent`]): each call made, each file
    /// taken or not, each upload and degradation; a run adds its steps and its servers'
    /// losses. Recorders hear in the order they were added.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use maljan_client::{ConnectionContext, RunEvent};
    /// let heard = Arc::new(Mutex::new(Vec::new()));
    /// let ear = heard.clone();
    /// let context = ConnectionContext::default().recording_to(Arc::new(
    ///     move |event: &RunEvent<'_>| ear.lock().unwrap().push(format!("{event:?}")),
    /// ));
    /// # let _ = context;
    /// assert!(heard.lock().unwrap().is_empty());
    /// ```
    pub fn recording_to(mut self, recorder: Arc<dyn Recorder>) -> Self {
        self.recorders.push(recorder);
        self
    }

    /// Tells every recorder `event`.
    pub(crate) fn record(&self, event: &RunEvent<'_>) {
        self.recorders.record(event);
    }

    /// Who hears what the connections do.
    pub(crate) fn recorders(&self) -> &Recorders {
        &self.recorders
    }

    /// Calls belonging to `job`: staging and taking files need one.
    pub fn with_job(mut self, job: Arc<Job>) -> Self {
        self.job = Some(job);
        self
    }

    /// Calls belonging to the run `id` (of the job): the ledger names it in each entry.
    pub fn with_run(mut self, id: impl Into<String>) -> Self {
        self.run = Some(id.into());
        self
    }

    /// Calls admitted under `guard`, the cap and breaker of one server, rather than the
    /// connection's own: a connection started again for the same server keeps its state (a
    /// resting server stays resting). Give each server its own.
    pub fn with_call_guard(mut self, guard: Arc<CallGuard>) -> Self {
        self.call_guard = Some(guard);
        self
    }

    /// Calls made within the trace `parent` (a run's, or the caller's): each goes out with
    /// its own span of it in `_meta.traceparent`. Without one, each call starts a trace.
    pub fn with_trace(mut self, parent: TraceParent) -> Self {
        self.trace = Some(parent);
        self
    }

    /// The trace calls are made within, when there is one.
    pub fn trace(&self) -> Option<&TraceParent> {
        self.trace.as_ref()
    }

    /// Transfer progress shown by `progress`.
    pub fn with_progress(mut self, progress: ProgressReporter) -> Self {
        self.progress = Some(progress);
        self
    }

    /// The job, when there is one.
    pub fn job(&self) -> Option<&Arc<Job>> {
        self.job.as_ref()
    }

    /// The run's id, when there is one.
    pub fn run(&self) -> Option<&str> {
        self.run.as_deref()
    }

    /// The cap and breaker given, when one was.
    pub fn call_guard(&self) -> Option<&Arc<CallGuard>> {
        self.call_guard.as_ref()
    }

    /// What the connection's calls belong to, for the ledger.
    pub(crate) fn scope(&self) -> CallScope {
        let mut scope = CallScope::default();
        scope.job = self.job.as_ref().map(|j| j.dir().display().to_string());
        scope.run = self.run.clone();
        scope
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
