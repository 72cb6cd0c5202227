//! What a run learns, as it learns it: each step started and finished, each call made, each
//! file taken or not, each upload, each degradation, each server lost; told to the
//! recorders of the run (or of a lone connection) in the order it happens. The ledger is a
//! recorder, so is the report's [`ReportBuilder`](crate::report::ReportBuilder), terminal
//! progress, and later a database.

use std::fmt;
use std::sync::Arc;

use maljan_ledger::{CallRecord, Ledger};
use maljan_staging::{Degradation, Disclosure};

use crate::job::TakenFile;
#[cfg(feature = "runs")]
use crate::outcome::{ServerLoss, StepOutcome};

/// Something a run learned.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum RunEvent<'a> {
    /// A step (one of its runs, for a step run once per file) is about to call its server.
    StepStarted {
        /// The step's id.
        step: &'a str,
        /// The file this run is for, when the step runs once per matching file.
        instance: Option<&'a str>,
        /// The server.
        server: &'a str,
        /// The tool.
        tool: &'a str,
    },
    /// A step (or one of its runs) ended: completed, failed or skipped.
    #[cfg(feature = "runs")]
    StepFinished(&'a StepOutcome),
    /// A call was made (or refused before it went out), as the ledger keeps it.
    CallMade(&'a CallRecord),
    /// A file a tool named in its answer was taken into the job's artefact store, or not.
    FileTaken(&'a TakenFile),
    /// An upload of a file of the job to a server began: `disclosure` says what is being
    /// sent where, its outcome still in progress. Told before the first byte is sent, so
    /// that a run stopped during the upload still says what went where.
    UploadStarted {
        /// The upload, among the process's: its [`UploadEnded`](Self::UploadEnded) names it.
        upload: u64,
        /// What is being sent where.
        disclosure: &'a Disclosure,
    },
    /// An upload ended, sent or failed: `disclosure` is its final entry.
    UploadEnded {
        /// The upload [`UploadStarted`](Self::UploadStarted) named.
        upload: u64,
        /// What was sent where, and how it ended.
        disclosure: &'a Disclosure,
    },
    /// Something was done with less than wanted (a file not staged, say), and why.
    Degraded(&'a Degradation),
    /// A server's connection was lost; the next call connects it again while restarts are
    /// left.
    #[cfg(feature = "runs")]
    ServerLost {
        /// The server.
        server: &'a str,
        /// How it was lost.
        loss: &'a ServerLoss,
    },
}

/// Hears a run's events, in order, as they happen. Any `Fn(&RunEvent)` is one.
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use maljan_client::{Recorder, RunEvent};
///
/// let started = Arc::new(Mutex::new(0));
/// let counter = started.clone();
/// let recorder = move |event: &RunEvent<'_>| {
///     if let RunEvent::StepStarted { .. } = event {
///         *counter.lock().unwrap() += 1;
///     }
/// };
/// recorder.record(&RunEvent::StepStarted { step: "s", instance: None, server: "x", tool: "t" });
/// assert_eq!(*started.lock().unwrap(), 1);
/// ```
pub trait Recorder: Send + Sync {
    /// Hears one event. It is called on the run's task: it should not block.
    fn record(&self, event: &RunEvent<'_>);
}

impl<F: Fn(&RunEvent<'_>) + Send + Sync> Recorder for F {
    fn record(&self, event: &RunEvent<'_>) {
        self(event)
    }
}

impl<R: Recorder + ?Sized> Recorder for Arc<R> {
    fn record(&self, event: &RunEvent<'_>) {
        (**self).record(event)
    }
}

/// The ledger keeps each call made; a call the ledger cannot write is logged, never lost
/// silently, and never fails the call.
impl Recorder for Ledger {
    fn record(&self, event: &RunEvent<'_>) {
        if let RunEvent::CallMade(call) = event {
            keep(self, (*call).clone());
        }
    }
}

/// Writes `call` into `ledger`, logging a failure.
fn keep(ledger: &Ledger, call: CallRecord) {
    let (server, tool) = (call.server.clone(), call.tool.clone());
    if let Err(e) = ledger.record(call) {
        tracing::error!(server, tool, "the call was made but not ledgered: {e}");
    }
}

/// The recorders of a run or a connection: shared by the clones of its context.
///
/// Ledgers given as ledgers ([`ConnectionContext::with_ledger`]) are kept apart: a call's
/// record is lent to the other recorders, then given to the ledger, not copied for it.
///
/// [`ConnectionContext::with_ledger`]: crate::ConnectionContext::with_ledger
#[derive(Clone, Default)]
pub(crate) struct Recorders {
    recorders: Vec<Arc<dyn Recorder>>,
    ledgers: Vec<Arc<Ledger>>,
}

impl Recorders {
    pub(crate) fn push(&mut self, recorder: Arc<dyn Recorder>) {
        self.recorders.push(recorder);
    }

    pub(crate) fn push_ledger(&mut self, ledger: Arc<Ledger>) {
        self.ledgers.push(ledger);
    }

    /// Whether anyone listens: a layer that would build an event for no one does not.
    pub(crate) fn is_empty(&self) -> bool {
        self.recorders.is_empty() && self.ledgers.is_empty()
    }

    pub(crate) fn record(&self, event: &RunEvent<'_>) {
        for recorder in &self.recorders {
            recorder.record(event);
        }
    }

    /// Tells the recorders that `call` was made, then gives it to the ledgers.
    pub(crate) fn record_call(&self, call: CallRecord) {
        self.record(&RunEvent::CallMade(&call));
        if let Some((last, others)) = self.ledgers.split_last() {
            for ledger in others {
                keep(ledger, call.clone());
            }
            keep(last, call);
        }
    }
}

impl fmt::Debug for Recorders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} recorders, {} ledgers",
            self.recorders.len(),
            self.ledgers.len()
        )
    }
}
