//! The bottom layer: a request on the wire, waited for up to its wait, and cancelled on
//! the server (`notifications/cancelled`) when it is given up. The layers above it speak
//! [`RequestService`] too, down to the transport.

use std::future::Future;
use std::time::Duration;

use maljan_mcp_proto::jsonrpc::Reply;
use maljan_mcp_proto::maljan::ToolFailure;
use maljan_mcp_transport::{
    OutgoingRequest, Transport, TransportFailure, cancelled_by_notice, reply_within,
};

/// Why a request got no reply to read.
#[derive(Debug)]
pub(crate) enum Unanswered {
    /// Nothing within the wait; the request was cancelled on the server if it could be.
    TimedOut(Duration),
    /// The transport failed it.
    Failed(TransportFailure),
    /// A layer ended the exchange with this failure: the server asked for input this
    /// client does not give, say.
    Ended(ToolFailure),
}

impl Unanswered {
    /// Whether the request never reached the server (the connection was gone before it was
    /// written).
    pub(crate) fn unsent(&self) -> bool {
        matches!(self, Unanswered::Failed(failure) if failure.is_unsent())
    }
}

/// A layer of the request path: takes a request and the longest it may wait, gives its
/// reply.
pub(crate) trait RequestService: Send + Sync {
    /// Sends `request` and waits up to `wait` for its reply; on giving up, the request is
    /// cancelled on the server when `cancellable`.
    fn request(
        &self,
        request: OutgoingRequest,
        wait: Duration,
        cancellable: bool,
    ) -> impl Future<Output = Result<Reply, Unanswered>> + Send;

    /// The transport at the bottom.
    fn transport(&self) -> &dyn Transport;
}

/// Sends requests on a transport and waits for their replies.
#[derive(Debug)]
pub(crate) struct Timeout {
    transport: Box<dyn Transport>,
}

impl Timeout {
    /// Requests over `transport`.
    pub(crate) fn new(transport: Box<dyn Transport>) -> Self {
        Timeout { transport }
    }

    /// The transport, to close it.
    pub(crate) fn into_inner(self) -> Box<dyn Transport> {
        self.transport
    }
}

impl RequestService for Timeout {
    async fn request(
        &self,
        request: OutgoingRequest,
        wait: Duration,
        cancellable: bool,
    ) -> Result<Reply, Unanswered> {
        let notify = cancellable && cancelled_by_notice(&request, self.transport.kind());
        // A request the transport did not take never reached the server, whatever the
        // transport calls its failure.
        let pending = self.transport.send_request(request).await.map_err(|f| {
            Unanswered::Failed(if f.is_lost() && !f.is_unsent() {
                TransportFailure::unsent(f)
            } else {
                f
            })
        })?;
        match reply_within(&*self.transport, pending, wait, notify).await {
            Some(reply) => reply.map_err(Unanswered::Failed),
            None => Err(Unanswered::TimedOut(wait)),
        }
    }

    fn transport(&self) -> &dyn Transport {
        &*self.transport
    }
}
