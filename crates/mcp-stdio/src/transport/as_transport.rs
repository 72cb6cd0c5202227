//! The stdio transport behind the neutral [`Transport`] trait.

use std::process::ExitStatus;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use maljan_mcp_proto::json_writer::request_line;
use maljan_mcp_proto::jsonrpc::{Message, Notification, Request};
use maljan_mcp_proto::large_buffers::LARGE_BUFFERS;
use maljan_mcp_proto::mcp::ProtocolVersion;
use maljan_mcp_transport::{
    BoxFuture, CloseReport, OutgoingRequest, PendingReply, Transport, TransportCounts,
    TransportFailure, TransportInfo, TransportKind,
};
use serde_json::Value;
use tokio::sync::mpsc;

use super::connection_state::{ConnectionState, lock};
use super::{StdioError, StdioTransport};
use crate::LineCounts;

impl From<LineCounts> for TransportCounts {
    fn from(counts: LineCounts) -> Self {
        TransportCounts {
            messages: counts.messages,
            stray: counts.stray,
            invalid: counts.invalid,
            oversized: counts.oversized,
            salvaged: counts.salvaged,
            blank: counts.blank,
            unmatched: 0,
        }
    }
}

impl From<StdioError> for TransportFailure {
    fn from(error: StdioError) -> Self {
        match &error {
            StdioError::InvalidAnswer { reason, .. } => {
                TransportFailure::invalid_answer(reason.clone(), error)
            }
            StdioError::NotSent { .. } => TransportFailure::unsent(error),
            _ => TransportFailure::lost(error),
        }
    }
}

impl TransportInfo for ConnectionState {
    fn counts(&self) -> TransportCounts {
        TransportCounts {
            unmatched: self.unmatched.load(Ordering::Relaxed),
            ..(*lock(&self.counts)).into()
        }
    }

    fn server_pid(&self) -> Option<u32> {
        self.child_pid
    }

    fn stderr_tail(&self) -> String {
        lock(&self.stderr).text()
    }
}

impl Transport for StdioTransport {
    fn server(&self) -> &str {
        StdioTransport::server(self)
    }

    fn kind(&self) -> TransportKind {
        TransportKind::Stdio
    }

    fn send_request(
        &self,
        request: OutgoingRequest,
    ) -> BoxFuture<'_, Result<PendingReply, TransportFailure>> {
        let (method, params, ends_setup) = request.into_parts();
        Box::pin(async move {
            // The closure owns the params and drops them once the line is written, before
            // the line waits for the writer: a file chunk is not held twice.
            let pending = self
                .send_request_inner(ends_setup, move |id| match params {
                    Some(params) => {
                        let line = request_line(id, &method, &params);
                        LARGE_BUFFERS.give_strings(params);
                        line
                    }
                    None => Message::Request(Request {
                        id: id.clone(),
                        method: method.into_owned(),
                        params: None,
                    })
                    .to_line(),
                })
                .await
                // Refused before the line was queued: the server never saw it.
                .map_err(TransportFailure::unsent)?;
            let id = pending.id().clone();
            Ok(PendingReply::new(id, async move {
                pending.await.map_err(TransportFailure::from)
            }))
        })
    }

    fn notify(
        &self,
        method: &str,
        params: Option<Value>,
    ) -> BoxFuture<'_, Result<(), TransportFailure>> {
        let method = method.to_owned();
        let params = params.and_then(|p| serde_json::value::to_raw_value(&p).ok());
        Box::pin(async move {
            StdioTransport::notify(self, &method, params)
                .await
                .map_err(TransportFailure::from)
        })
    }

    fn take_incoming(&mut self) -> Option<mpsc::Receiver<Notification>> {
        self.take_notifications()
    }

    fn set_protocol(&self, version: ProtocolVersion) {
        self.set_batches_allowed(version.allows_batches());
    }

    fn end_setup(&self) {
        self.close_setup_window();
    }

    fn info(&self) -> Arc<dyn TransportInfo> {
        self.shared.clone()
    }

    fn wait_exit(&self, grace: Duration) -> BoxFuture<'_, Option<ExitStatus>> {
        Box::pin(StdioTransport::wait_exit(self, grace))
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, CloseReport> {
        Box::pin((*self).close())
    }
}
