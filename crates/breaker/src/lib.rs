//! A per-server circuit breaker and concurrency cap for tool calls.
//!
//! Why a breaker: a server that stops answering makes every call wait its full timeout. After
//! `unanswered_threshold` (3) unanswered calls in a row, the server rests `rest_s` (60 s):
//! calls are answered at once with a refusal and never sent. Then one call probes: answered
//! closes the breaker, unanswered rests again. Any answer, a tool's error included, resets
//! the count. Why a cap: a server handles a few calls at once; at most
//! `max_concurrent_calls` (4) are in flight, the rest wait in FIFO order.
//!
//! [`Breaker`] is the sans-IO state machine (the clock is passed in); [`CallGuard`] wraps it
//! and the cap for tokio.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
//! use maljan_breaker::{BreakerSettings, CallGuard, Refused, Verdict};
//! let guard = CallGuard::new(BreakerSettings::default());
//! for _ in 0..3 {
//!     guard.run(|| async { ((), Verdict::Unanswered) }).await.unwrap();
//! }
//! let refused = guard.run(|| async { ((), Verdict::Answered) }).await.unwrap_err();
//! assert!(matches!(refused, Refused::Resting { .. }));
//! # }
//! ```
//!
//! # Settings
//!
//! Read from the keys `core.mcp.breaker.max_concurrent_calls`,
//! `core.mcp.breaker.unanswered_threshold` and `core.mcp.breaker.rest_s`
//! ([`BreakerSettings`]).

#![forbid(unsafe_code)]

mod breaker;
mod guard;
mod settings;

pub use breaker::{Admission, Breaker, BreakerState, Verdict};
pub use guard::{CallGuard, Guarded, Refused};
pub use settings::{BreakerSettings, SettingError};
