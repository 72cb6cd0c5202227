//! placeholder
mod classifier;
pub use classifier::*;
