//! Picks the breaker's sans-IO core alone.

use std::time::Instant;

use maljan_breaker::{Admission, Breaker, BreakerSettings, Verdict};

/// Whether a server that left `unanswered` calls in a row unanswered may be called now.
pub fn may_call_after(unanswered: u32) -> bool {
    let mut breaker = Breaker::new(BreakerSettings::default());
    let now = Instant::now();
    for _ in 0..unanswered {
        if breaker.poll_admission(now) == Admission::Call {
            breaker.handle_verdict(Verdict::Unanswered, now);
        }
    }
    matches!(
        breaker.poll_admission(now),
        Admission::Call | Admission::Probe
    )
}
