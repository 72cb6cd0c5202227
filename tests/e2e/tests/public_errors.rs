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
    portable::<maljan_mcp_http::HttpError>();
    portable::<maljan_mcp_proto::jsonrpc::InvalidReason>();
    portable::<maljan_mcp_proto::jsonrpc::InvalidMessage>();
    portable::<maljan_mcp_proto::mcp::UnsupportedVersion>();
    portable::<maljan_mcp_stdio::TransportError>();
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
