//! The request path of one server, as set-up found it must be: the bare [`Timeout`] for a
//! server with sessions; for a stateless (2026-07-28) server, every request stamped with
//! the era's `_meta` and its `input_required` results answered. The era's layers exist
//! only for a server of that era.

use std::sync::Arc;
use std::time::Duration;

use maljan_mcp_proto::jsonrpc::Reply;
use maljan_mcp_transport::{OutgoingRequest, Transport};

use crate::input_required::AnsweringInput;
use crate::stateless::{Stamped, StatelessRequests};
use crate::timeout::{RequestService, Timeout, Unanswered};

/// The request path of one server.
#[derive(Debug)]
pub(crate) enum Wire {
    /// A server with sessions: requests go out as they are.
    Session(Timeout),
    /// A stateless server: stamped, and asked again when it needs input.
    Stateless(AnsweringInput<Stamped<Timeout>>),
}

impl Wire {
    /// The path over `timeout` for a server of the era `stateless` says: its rules when
    /// there are some.
    pub(crate) fn of(timeout: Timeout, stateless: Option<StatelessRequests>) -> Wire {
        match stateless {
            None => Wire::Session(timeout),
            Some(requests) => {
                let requests = Arc::new(requests);
                Wire::Stateless(AnsweringInput::new(
                    Stamped::new(timeout, requests.clone()),
                    requests,
                ))
            }
        }
    }

    /// The transport, to close it.
    pub(crate) fn into_transport(self) -> Box<dyn Transport> {
        match self {
            Wire::Session(timeout) => timeout.into_inner(),
            Wire::Stateless(layers) => layers.into_inner().into_inner().into_inner(),
        }
    }
}

impl RequestService for Wire {
    async fn request(
        &self,
        request: OutgoingRequest,
        wait: Duration,
        cancellable: bool,
    ) -> Result<Reply, Unanswered> {
        match self {
            Wire::Session(timeout) => timeout.request(request, wait, cancellable).await,
            Wire::Stateless(layers) => layers.request(request, wait, cancellable).await,
        }
    }

    fn transport(&self) -> &dyn Transport {
        match self {
            Wire::Session(timeout) => timeout.transport(),
            Wire::Stateless(layers) => layers.transport(),
        }
    }
}
