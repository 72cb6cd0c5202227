//! The breaker and the concurrency cap around real calls: a slot first (FIFO), then the
//! breaker's admission, then the call, and its verdict back.

use std::future::Future;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

use crate::{Admission, Breaker, BreakerSettings, BreakerState, Verdict};

/// A call the guard did not make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// The server rests after unanswered calls.
    #[error("the server is resting for {:.1} s more after unanswered calls", remaining.as_secs_f64())]
    Resting {
        /// How long the rest still lasts.
        remaining: Duration,
        /// How long the call waited for a slot first.
        queued: Duration,
    },
    /// The probe after a rest is still in flight.
    #[error("the server is being probed after a rest; try again when the probe ends")]
    ProbeInFlight {
        /// How long the call waited for a slot first.
        queued: Duration,
    },
}

impl Refused {
    /// How long the call waited for a slot before it was refused.
    pub fn queued(&self) -> Duration {
        match self {
            Refused::Resting { queued, .. } | Refused::ProbeInFlight { queued } => *queued,
        }
    }
}

/// What a guarded call returned, and how long it waited for a slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guarded<T> {
    /// The call's output.
    pub value: T,
    /// Time spent waiting for a slot under the concurrency cap.
    pub queued: Duration,
}

/// The cap and the breaker of one server, around every call: a call first waits for a
/// slot (at most `max_concurrent_calls` in flight, FIFO beyond), then asks the breaker, then
/// runs, and its verdict goes back to the breaker.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use maljan_breaker::{BreakerSettings, CallGuard, Verdict};
/// let guard = CallGuard::new(BreakerSettings::default());
/// let answer = guard.run(|| async { ("pong", Verdict::Answered) }).await.unwrap();
/// assert_eq!(answer.value, "pong");
/// # }
/// ```
///
/// # Cancel safety
///
/// Dropping [`CallGuard::run`]'s future while it waits leaves the queue; dropping it while
/// the call runs records nothing, except that an abandoned probe lets the next call probe.
#[derive(Debug)]
pub struct CallGuard {
    settings: BreakerSettings,
    breaker: Mutex<Breaker>,
    slots: Semaphore,
}

fn lock(m: &Mutex<Breaker>) -> MutexGuard<'_, Breaker> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Lets the next call probe if a probe is dropped before its verdict.
struct ProbeGuard<'a> {
    breaker: &'a Mutex<Breaker>,
    armed: bool,
}

impl Drop for ProbeGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            lock(self.breaker).handle_probe_abandoned(Instant::now().into_std());
        }
    }
}

impl CallGuard {
    /// A guard with a closed breaker and every slot free.
    pub fn new(settings: BreakerSettings) -> Self {
        CallGuard {
            settings,
            breaker: Mutex::new(Breaker::new(settings)),
            slots: Semaphore::new(settings.max_concurrent_calls.max(1) as usize),
        }
    }

    /// The settings in force.
    pub fn settings(&self) -> &BreakerSettings {
        &self.settings
    }

    /// The breaker's state.
    pub fn state(&self) -> BreakerState {
        lock(&self.breaker).state()
    }

    /// Calls in flight now.
    pub fn in_flight(&self) -> usize {
        self.settings.max_concurrent_calls.max(1) as usize - self.slots.available_permits()
    }

    /// Runs `call` under the cap and the breaker; `call` returns its output and whether the
    /// server answered.
    pub async fn run<T, F, Fut>(&self, call: F) -> Result<Guarded<T>, Refused>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = (T, Verdict)>,
    {
        let queued_since = Instant::now();
        // The semaphore is never closed, so acquiring fails only if it were.
        let _slot = self.slots.acquire().await.ok();
        let queued = queued_since.elapsed();
        let admission = lock(&self.breaker).poll_admission(Instant::now().into_std());
        let mut probe = ProbeGuard {
            breaker: &self.breaker,
            armed: false,
        };
        match admission {
            Admission::Call => {}
            Admission::Probe => probe.armed = true,
            Admission::Rest { remaining } => return Err(Refused::Resting { remaining, queued }),
            Admission::ProbeInFlight => return Err(Refused::ProbeInFlight { queued }),
        }
        let (value, verdict) = call().await;
        probe.armed = false;
        lock(&self.breaker).handle_verdict(verdict, Instant::now().into_std());
        Ok(Guarded { value, queued })
    }
}
