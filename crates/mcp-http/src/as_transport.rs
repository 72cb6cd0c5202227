//! The Streamable HTTP transport behind the neutral [`Transport`] trait.

use std::sync::Arc;

use maljan_mcp_proto::jsonrpc::Notification;
use maljan_mcp_proto::mcp::ProtocolVersion;
use maljan_mcp_transport::{
    BoxFuture, CloseReport, OutgoingRequest, PendingReply, Transport, TransportFailure,
    TransportInfo, TransportKind,
};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::{HttpError, HttpTransport};

impl From<HttpError> for TransportFailure {
    fn from(error: HttpError) -> Self {
        match &error {
            HttpError::InvalidAnswer { reason, .. } => {
                TransportFailure::invalid_answer(reason.clone(), error)
            }
            HttpError::Status { .. } => TransportFailure::refused(error),
            // The server did not know the session, so it did not carry out the request.
            HttpError::SessionExpired { .. } => TransportFailure::unsent(error),
            _ => TransportFailure::lost(error),
        }
    }
}

impl Transport for HttpTransport {
    fn server(&self) -> &str {
        HttpTransport::server(self)
    }

    fn kind(&self) -> TransportKind {
        TransportKind::StreamableHttp
    }

    /// The request goes out when its reply is first awaited: over HTTP the request and its
    /// reply are one exchange.
    fn send_request(
        &self,
        request: OutgoingRequest,
    ) -> BoxFuture<'_, Result<PendingReply, TransportFailure>> {
        let id = self.next_id();
        let transport = self.clone();
        let version = request.stateless_version();
        let headers = request.headers().to_vec();
        let (method, params, _) = request.into_parts();
        let request_id = id.clone();
        let reply = async move {
            match params {
                Some(params) => {
                    transport
                        .request_json_with_headers(request_id, &method, params, version, headers)
                        .await
                }
                None => transport.request(request_id, &method, None).await,
            }
            .map_err(TransportFailure::from)
        };
        Box::pin(async move { Ok(PendingReply::new(id, reply)) })
    }

    fn notify(
        &self,
        method: &str,
        params: Option<Value>,
    ) -> BoxFuture<'_, Result<(), TransportFailure>> {
        let method = method.to_owned();
        let params = params.and_then(|p| serde_json::value::to_raw_value(&p).ok());
        Box::pin(async move {
            HttpTransport::notify(self, &method, params)
                .await
                .map_err(TransportFailure::from)
        })
    }

    fn take_incoming(&mut self) -> Option<mpsc::Receiver<Notification>> {
        self.take_notifications()
    }

    fn set_protocol(&self, version: ProtocolVersion) {
        self.set_protocol_version(version.as_str());
    }

    /// Nothing: the GET stream for the messages the server sends on its own opened when
    /// `notifications/initialized` was accepted.
    fn end_setup(&self) {}

    fn info(&self) -> Arc<dyn TransportInfo> {
        self.session_info()
    }

    fn close(self: Box<Self>) -> BoxFuture<'static, CloseReport> {
        Box::pin(async move {
            HttpTransport::close(&self).await;
            CloseReport::without_process(HttpTransport::counts(&self))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_the_server_forgot_is_unsent_and_a_refusal_is_not_lost() {
        let expired = TransportFailure::from(HttpError::SessionExpired {
            server: "remote".to_owned(),
            session: "abc".to_owned(),
        });
        assert!(
            expired.is_lost() && expired.is_unsent(),
            "the server did not carry out a request under a session it does not know: a run \
             sends it again under a new session"
        );
        let refused = TransportFailure::from(HttpError::Status {
            server: "remote".to_owned(),
            status: 503,
            body: "busy".to_owned(),
        });
        assert!(refused.is_refused() && !refused.is_lost());
    }
}
