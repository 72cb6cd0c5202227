//! The breaker and the cap on a paused clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use maljan_breaker::{
    Admission, Breaker, BreakerSettings, BreakerState, CallGuard, Refused, Verdict,
};
use proptest::prelude::*;

const REST: Duration = Duration::from_secs(60);

#[test]
fn three_unanswered_rest_then_a_probe_decides() {
    let mut b = Breaker::new(BreakerSettings::default());
    let t0 = Instant::now();
    for _ in 0..3 {
        assert_eq!(b.poll_admission(t0), Admission::Call);
        b.handle_verdict(Verdict::Unanswered, t0);
    }
    assert_eq!(b.state(), BreakerState::Resting { until: t0 + REST });
    assert_eq!(
        b.poll_admission(t0 + Duration::from_secs(59)),
        Admission::Rest {
            remaining: Duration::from_secs(1)
        }
    );
    assert_eq!(b.poll_admission(t0 + REST), Admission::Probe);
    assert_eq!(
        b.poll_admission(t0 + REST),
        Admission::ProbeInFlight,
        "one probe at a time"
    );
    b.handle_verdict(Verdict::Unanswered, t0 + REST);
    assert_eq!(
        b.state(),
        BreakerState::Resting {
            until: t0 + 2 * REST
        },
        "unanswered probe rests again"
    );
    assert_eq!(b.poll_admission(t0 + 2 * REST), Admission::Probe);
    b.handle_verdict(Verdict::Answered, t0 + 2 * REST);
    assert_eq!(b.state(), BreakerState::Closed { unanswered: 0 });
}

#[test]
fn an_answer_between_timeouts_resets_the_count() {
    let mut b = Breaker::new(BreakerSettings::default());
    let t0 = Instant::now();
    for verdict in [
        Verdict::Unanswered,
        Verdict::Unanswered,
        Verdict::Answered,
        Verdict::Unanswered,
        Verdict::Unanswered,
    ] {
        assert_eq!(b.poll_admission(t0), Admission::Call);
        b.handle_verdict(verdict, t0);
    }
    assert_eq!(b.state(), BreakerState::Closed { unanswered: 2 });
}

#[test]
fn an_abandoned_probe_lets_the_next_call_probe() {
    let mut b = Breaker::new(BreakerSettings {
        unanswered_threshold: 1,
        ..BreakerSettings::default()
    });
    let t0 = Instant::now();
    b.poll_admission(t0);
    b.handle_verdict(Verdict::Unanswered, t0);
    assert_eq!(b.poll_admission(t0 + REST), Admission::Probe);
    b.handle_probe_abandoned(t0 + REST);
    assert_eq!(b.poll_admission(t0 + REST), Admission::Probe);
}

#[test]
fn lost_connections_neither_rest_the_server_nor_reset_the_count() {
    let mut b = Breaker::new(BreakerSettings::default());
    let t0 = Instant::now();
    for verdict in [
        Verdict::Unanswered,
        Verdict::Lost,
        Verdict::Lost,
        Verdict::Lost,
        Verdict::Unanswered,
    ] {
        assert_eq!(b.poll_admission(t0), Admission::Call);
        b.handle_verdict(verdict, t0);
    }
    assert_eq!(b.state(), BreakerState::Closed { unanswered: 2 });
}

#[test]
fn a_probe_whose_connection_is_lost_lets_the_next_call_probe() {
    let mut b = Breaker::new(BreakerSettings {
        unanswered_threshold: 1,
        ..BreakerSettings::default()
    });
    let t0 = Instant::now();
    b.poll_admission(t0);
    b.handle_verdict(Verdict::Unanswered, t0);
    assert_eq!(b.poll_admission(t0 + REST), Admission::Probe);
    b.handle_verdict(Verdict::Lost, t0 + REST);
    assert_eq!(b.poll_admission(t0 + REST), Admission::Probe);
}

fn verdict_of(kind: u8) -> Verdict {
    match kind {
        0 => Verdict::Answered,
        1 => Verdict::Unanswered,
        _ => Verdict::Lost,
    }
}

proptest! {
    /// Whatever happens, the breaker rests exactly when the last `threshold` verdicts since
    /// the last answer, lost connections left out, were all unanswered.
    #[test]
    fn the_breaker_rests_only_after_threshold_unanswered_in_a_row(
        verdicts in prop::collection::vec(0u8..3, 0..40),
        threshold in 1u32..5,
    ) {
        let mut b = Breaker::new(BreakerSettings { unanswered_threshold: threshold, ..BreakerSettings::default() });
        let t0 = Instant::now();
        let mut in_a_row = 0;
        for kind in verdicts {
            if b.poll_admission(t0) != Admission::Call {
                break;
            }
            let verdict = verdict_of(kind);
            b.handle_verdict(verdict, t0);
            in_a_row = match verdict {
                Verdict::Answered => 0,
                Verdict::Unanswered => in_a_row + 1,
                _ => in_a_row,
            };
            let resting = matches!(b.state(), BreakerState::Resting { .. });
            prop_assert_eq!(resting, in_a_row >= threshold);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_resting_server_is_refused_at_once_without_running_the_call() {
    let guard = CallGuard::new(BreakerSettings::default());
    let ran = AtomicUsize::new(0);
    for _ in 0..3 {
        guard
            .run(|| async {
                ran.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_secs(5)).await;
                ((), Verdict::Unanswered)
            })
            .await
            .expect("admitted");
    }
    let refused = guard
        .run(|| async {
            ran.fetch_add(1, Ordering::SeqCst);
            ((), Verdict::Answered)
        })
        .await
        .expect_err("resting");
    assert_eq!(ran.load(Ordering::SeqCst), 3, "the fourth call never ran");
    assert_eq!(
        refused,
        Refused::Resting {
            remaining: REST,
            queued: Duration::ZERO
        }
    );
    assert!(refused.to_string().contains("60.0 s"));

    tokio::time::advance(REST).await;
    let probe = guard
        .run(|| async { ("probe", Verdict::Answered) })
        .await
        .expect("probe");
    assert_eq!(probe.value, "probe");
    assert_eq!(guard.state(), BreakerState::Closed { unanswered: 0 });
}

#[tokio::test(start_paused = true)]
async fn calls_beyond_the_cap_wait_in_order_and_their_wait_is_measured() {
    let guard = Arc::new(CallGuard::new(BreakerSettings {
        max_concurrent_calls: 2,
        ..BreakerSettings::default()
    }));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let mut calls = Vec::new();
    for i in 0..6 {
        let (guard, in_flight, most, order) = (
            guard.clone(),
            in_flight.clone(),
            most.clone(),
            order.clone(),
        );
        calls.push(tokio::spawn(async move {
            guard
                .run(|| async {
                    order.lock().expect("lock").push(i);
                    let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    (i, Verdict::Answered)
                })
                .await
                .expect("admitted")
        }));
        tokio::task::yield_now().await;
    }
    let mut queued = Vec::new();
    for call in calls {
        queued.push(call.await.expect("joined").queued);
    }
    assert_eq!(most.load(Ordering::SeqCst), 2);
    assert_eq!(*order.lock().expect("lock"), [0, 1, 2, 3, 4, 5], "FIFO");
    assert_eq!(queued, [0, 0, 10, 10, 20, 20].map(Duration::from_secs));
}

#[tokio::test(start_paused = true)]
async fn a_waiting_call_can_be_cancelled() {
    let guard = CallGuard::new(BreakerSettings {
        max_concurrent_calls: 1,
        ..BreakerSettings::default()
    });
    let busy = guard.run(|| async {
        tokio::time::sleep(Duration::from_secs(10)).await;
        ((), Verdict::Answered)
    });
    tokio::pin!(busy);
    let waiting = guard.run(|| async { ((), Verdict::Answered) });
    let outcome = tokio::select! {
        // The busy call is polled first, so it holds the only slot before the other waits.
        biased;
        _ = &mut busy => "busy finished first",
        _ = tokio::time::timeout(Duration::from_secs(1), waiting) => "the waiting call gave up",
    };
    assert_eq!(outcome, "the waiting call gave up");
    assert_eq!(guard.in_flight(), 1, "the busy call still holds its slot");
    busy.await.expect("admitted");
    let next = guard
        .run(|| async { ("next", Verdict::Answered) })
        .await
        .expect("admitted");
    assert_eq!(next.value, "next", "the cancelled waiter left the queue");
}
