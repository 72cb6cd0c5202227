#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
mod deadline;
mod failure;
pub mod memory;
mod report;
pub mod session;
mod transport;

pub use deadline::{cancelled_by_notice, reply_within};
pub use failure::TransportFailure;
pub use report::{CloseReport, StoppedBy, TransportCounts};
pub use transport::{
    BoxFuture, EndsSetup, OutgoingRequest, PendingReply, Transport, TransportInfo, TransportKind,
};
