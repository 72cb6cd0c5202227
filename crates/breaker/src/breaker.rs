//! The circuit breaker, sans-IO: what a call came to (its verdict), whether the next may be
//! made (its admission), the clock passed in.

use std::time::{Duration, Instant};

use crate::BreakerSettings;

/// Whether a call got an answer. Any answer counts, a tool's error included; no answer
/// within the wait does not. A connection lost under the call says nothing of how a live
/// server answers (a server that died is started again, not rested), so it counts neither
/// way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Verdict {
    /// The server answered.
    Answered,
    /// The server did not answer.
    Unanswered,
    /// The connection was lost before the answer: the count of unanswered calls stands, and
    /// a probe that ends so is void (the next call probes).
    Lost,
}

/// What the breaker says of a call about to be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Make the call.
    Call,
    /// Make the call: it is the probe after a rest, and decides what comes next.
    Probe,
    /// Do not make the call: the server rests for `remaining` more.
    Rest {
        /// How long the rest still lasts.
        remaining: Duration,
    },
    /// Do not make the call: the probe after a rest is still in flight.
    ProbeInFlight,
}

/// The breaker's state, for display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls go out; `unanswered` is the count of unanswered calls in a row.
    Closed {
        /// Unanswered calls in a row.
        unanswered: u32,
    },
    /// Calls are refused until `until`.
    Resting {
        /// When the rest ends.
        until: Instant,
    },
    /// One call is probing the server.
    Probing,
}

/// The circuit breaker of one server, sans-IO: the clock is passed in.
///
/// Closed → (after `unanswered_threshold` unanswered calls in a row) resting for `rest_s`
/// → one probe → answered: closed; unanswered: resting again. Any answer, a tool's error
/// included, resets the count, and an answer that arrives while resting (from a call made
/// before the rest began) closes the breaker: the server is answering.
///
/// Call order: [`Breaker::poll_admission`] before a call; [`Breaker::handle_verdict`] with its verdict after
/// every call admitted.
///
/// ```
/// use std::time::{Duration, Instant};
/// use maljan_breaker::{Admission, Breaker, BreakerSettings, Verdict};
///
/// let mut breaker = Breaker::new(BreakerSettings::default());
/// let start = Instant::now();
/// for _ in 0..3 {
///     assert_eq!(breaker.poll_admission(start), Admission::Call);
///     breaker.handle_verdict(Verdict::Unanswered, start);
/// }
/// let later = start + Duration::from_secs(20);
/// assert_eq!(breaker.poll_admission(later), Admission::Rest { remaining: Duration::from_secs(40) });
/// let after_rest = start + Duration::from_secs(60);
/// assert_eq!(breaker.poll_admission(after_rest), Admission::Probe);
/// breaker.handle_verdict(Verdict::Answered, after_rest);
/// assert_eq!(breaker.poll_admission(after_rest), Admission::Call);
/// ```
#[derive(Debug, Clone)]
pub struct Breaker {
    threshold: u32,
    rest: Duration,
    state: BreakerState,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(settings: BreakerSettings) -> Self {
        Breaker {
            threshold: settings.unanswered_threshold.max(1),
            rest: settings.rest(),
            state: BreakerState::Closed { unanswered: 0 },
        }
    }

    /// The current state.
    pub fn state(&self) -> BreakerState {
        self.state
    }

    /// Decides whether a call may be made now.
    pub fn poll_admission(&mut self, now: Instant) -> Admission {
        match self.state {
            BreakerState::Closed { .. } => Admission::Call,
            BreakerState::Resting { until } if now < until => Admission::Rest {
                remaining: until - now,
            },
            BreakerState::Resting { .. } => {
                self.state = BreakerState::Probing;
                Admission::Probe
            }
            BreakerState::Probing => Admission::ProbeInFlight,
        }
    }

    /// The probe was dropped before it ended (its caller gave up): the next call probes.
    pub fn handle_probe_abandoned(&mut self, now: Instant) {
        if self.state == BreakerState::Probing {
            self.state = BreakerState::Resting { until: now };
        }
    }

    /// Records how an admitted call ended.
    pub fn handle_verdict(&mut self, verdict: Verdict, now: Instant) {
        self.state = match (verdict, self.state) {
            (Verdict::Answered, _) => BreakerState::Closed { unanswered: 0 },
            (Verdict::Lost, BreakerState::Probing) => BreakerState::Resting { until: now },
            (Verdict::Lost, state) => state,
            (Verdict::Unanswered, BreakerState::Closed { unanswered }) => {
                let unanswered = unanswered.saturating_add(1);
                if unanswered >= self.threshold {
                    BreakerState::Resting {
                        until: now + self.rest,
                    }
                } else {
                    BreakerState::Closed { unanswered }
                }
            }
            (Verdict::Unanswered, BreakerState::Probing) => BreakerState::Resting {
                until: now + self.rest,
            },
            (Verdict::Unanswered, resting @ BreakerState::Resting { .. }) => resting,
        };
    }
}
