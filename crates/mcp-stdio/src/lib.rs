#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#[cfg(feature = "busy-poll")]
mod busy_poll;
mod classifier;
// Not public API: the fuzz targets' and corpus replays' entry points, behind a feature of
// their own so that a user never sees them.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(feature = "transport")]
mod transport;

#[cfg(feature = "busy-poll")]
pub use busy_poll::{BusyPoll, DEFAULT_BUSY_POLL};
pub use classifier::{
    ClassifierConfig, DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_STATEMENTS, EXCERPT_CHARS, Event,
    Excerpt, LineClassifier, LineCounts, ReadTarget, SetupWindow,
};
#[cfg(feature = "transport")]
pub use maljan_mcp_transport::session::{Session, SessionError, SessionSettings};
#[cfg(feature = "transport")]
pub use transport::{
    CloseReport, EndsSetup, LostBecause, PendingRequest, Reply, STDERR_TAIL_BYTES,
    STDERR_TAIL_LINES, ServerCommand, SpawnError, StdioConfig, StdioError, StdioTransport,
    StoppedBy,
};
