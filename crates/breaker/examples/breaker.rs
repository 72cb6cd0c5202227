//! A server that stops answering, as the breaker's sans-IO core sees it: three unanswered
//! calls, a rest in which calls are refused unsent, one probe, and calls again once the
//! probe is answered. The clock is passed in, so the minute of rest takes no time.

use std::time::{Duration, Instant};

use maljan_breaker::{Admission, Breaker, BreakerSettings, BreakerState, Verdict};

fn main() {
    let settings = BreakerSettings::default();
    let mut breaker = Breaker::new(settings);
    let start = Instant::now();
    // The server answers the first two calls, then stops answering; after its rest it is
    // back.
    let answers = [true, true, false, false, false, false, false, true, true];
    for (call, answered) in answers.into_iter().enumerate() {
        let now = start + Duration::from_secs(20 * call as u64);
        let admission = breaker.poll_admission(now);
        let verdict = if answered {
            Verdict::Answered
        } else {
            Verdict::Unanswered
        };
        match admission {
            Admission::Call | Admission::Probe => breaker.handle_verdict(verdict, now),
            Admission::Rest { .. } | Admission::ProbeInFlight => {}
        }
        let state = match breaker.state() {
            BreakerState::Closed { unanswered } => format!("closed, {unanswered} unanswered"),
            BreakerState::Resting { until } => {
                format!("resting {} s more", until.duration_since(now).as_secs())
            }
            BreakerState::Probing => "probing".to_owned(),
        };
        println!(
            "t={:>3} s call {}: {admission:?}, then {state}",
            20 * call,
            call + 1
        );
    }
}
