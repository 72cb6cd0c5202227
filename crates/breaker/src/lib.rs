#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]

mod breaker;
#[cfg(feature = "guard")]
mod guard;
mod settings;

pub use breaker::{Admission, Breaker, BreakerState, Verdict};
#[cfg(feature = "guard")]
pub use guard::{CallGuard, Guarded, Refused};
pub use settings::{BreakerSettings, SettingError};
