//! What a run learns, as it learns it: each step started and finished, each server lost,
//! told to the run's recorders in the order it happens. Terminal progress is a recorder;
//! so can a database be.

use std::fmt;

use super::outcome::StepOutcome;
use super::servers::ServerLoss;

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
    StepFinished(&'a StepOutcome),
    /// A server's connection was lost; the next call connects it again while restarts are
    /// left.
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
/// let finished = Arc::new(Mutex::new(0));
/// let counter = finished.clone();
/// let recorder = move |event: &RunEvent<'_>| {
///     if let RunEvent::StepFinished(_) = event {
///         *counter.lock().unwrap() += 1;
///     }
/// };
/// recorder.record(&RunEvent::StepStarted { step: "s", instance: None, server: "x", tool: "t" });
/// assert_eq!(*finished.lock().unwrap(), 0);
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

/// The recorders of a run.
#[derive(Default)]
pub(crate) struct Recorders(Vec<Box<dyn Recorder>>);

impl Recorders {
    pub(crate) fn push(&mut self, recorder: impl Recorder + 'static) {
        self.0.push(Box::new(recorder));
    }

    pub(crate) fn record(&self, event: &RunEvent<'_>) {
        for recorder in &self.0 {
            recorder.record(event);
        }
    }
}

impl fmt::Debug for Recorders {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} recorders", self.0.len())
    }
}
