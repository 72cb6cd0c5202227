//! Every public error of the workspace can cross threads and tasks and be boxed as a cause
//! (`std::error::Error + Send + Sync + 'static`), and keeps its cause as a `source()`.

fn portable<E: std::error::Error + Send + Sync + 'static>() {}

#[test]
fn every_public_error_is_send_sync_and_static() {
    portable::<maljan_breaker::Refused>();
    portable::<maljan_breaker::SettingError>();
    portable::<maljan_confine::Refusal>();
    portable::<maljan_ledger::SinkError>();
    portable::<maljan_client::ClientError>();
    portable::<maljan_mcp_transport::session::SessionError>();
    portable::<maljan_mcp_transport::TransportFailure>();
    portable::<maljan_mcp_transport::memory::MemoryError>();
    portable::<maljan_mcp_http::HttpError>();
    portable::<maljan_mcp_proto::jsonrpc::InvalidReason>();
    portable::<maljan_mcp_proto::jsonrpc::InvalidMessage>();
    portable::<maljan_mcp_proto::mcp::UnsupportedVersion>();
    portable::<maljan_mcp_stdio::StdioError>();
    portable::<maljan_mcp_stdio::SpawnError>();
    portable::<maljan_staging::UploadError>();
    portable::<maljan_staging::DownloadError>();
}

#[test]
fn errors_chain_their_causes() {
    use std::error::Error;
    let refusal = maljan_confine::Refusal::Io {
        path: "x".to_owned(),
        source: std::io::Error::other("the disk is gone"),
    };
    assert_eq!(
        refusal.source().map(ToString::to_string).as_deref(),
        Some("the disk is gone"),
        "the cause is a source, not only text"
    );
}

#[test]
fn a_transport_failure_keeps_its_transports_error() {
    let cause = maljan_mcp_http::HttpError::SessionExpired {
        server: "remote".to_owned(),
        session: "s-1".to_owned(),
    };
    let failure = maljan_mcp_transport::TransportFailure::from(cause.clone());
    assert!(failure.is_lost());
    assert_eq!(failure.to_string(), cause.to_string());
    assert!(
        matches!(
            failure.cause().downcast_ref::<maljan_mcp_http::HttpError>(),
            Some(maljan_mcp_http::HttpError::SessionExpired { session, .. }) if session == "s-1"
        ),
        "the transport's own error is there to branch on"
    );
}

#[test]
fn io_causes_are_sources() {
    use std::error::Error;
    let error = maljan_staging::UploadError::Read {
        path: "a.bin".to_owned(),
        source: std::sync::Arc::new(std::io::Error::other("the disk is gone")),
    };
    assert_eq!(
        error.source().map(ToString::to_string).as_deref(),
        Some("the disk is gone")
    );
    let lost = maljan_mcp_stdio::StdioError::ConnectionLost {
        server: "s".to_owned(),
        cause: maljan_mcp_stdio::LostBecause::ReadFailed(std::sync::Arc::new(
            std::io::Error::other("the pipe broke"),
        )),
    };
    assert_eq!(
        lost.to_string(),
        "server s: connection lost: reading the server's stdout failed: the pipe broke"
    );
    let io = lost.source().and_then(Error::source);
    assert_eq!(
        io.map(ToString::to_string).as_deref(),
        Some("the pipe broke")
    );
}

#[test]
fn a_failed_setup_keeps_why_as_its_source() {
    use std::error::Error;
    let error = maljan_client::ClientError::SetupFailed {
        server: "slow".to_owned(),
        step: "initialize",
        cause: Box::new(maljan_mcp_transport::session::SessionError::NoAnswer {
            method: "initialize",
            waited: std::time::Duration::from_secs(3),
        }),
        exit: None,
        stderr_tail: String::new(),
    };
    let source = error.source().map(ToString::to_string).unwrap_or_default();
    assert!(
        source.starts_with("no answer to initialize within 3 s"),
        "{source}"
    );
    assert!(!source.contains("cancelled"), "{source}");
    let text = error.to_string();
    assert!(
        text.contains("could not be set up: no answer to initialize within 3 s")
            && text.contains("it wrote nothing on stderr"),
        "{text}"
    );
}
