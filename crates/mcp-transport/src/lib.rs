#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
mod failure;
pub mod memory;
mod report;
pub mod session;
mod transport;

pub use failure::TransportFailure;
pub use report::{CloseReport, StoppedBy, TransportCounts};
pub use transport::{
    BoxFuture, EndsSetup, OutgoingRequest, PendingReply, Transport, TransportInfo, TransportKind,
};
