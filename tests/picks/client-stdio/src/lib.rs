//! Picks maljan-client with some of its transports: a server connected and its tools named.

use maljan_client::{
    ClientError, ClientSettings, ConnectionContext, ServerConfig, ServerConnection,
};

/// The tools the server `config` names offers to a model.
pub async fn tools_of(config: &ServerConfig) -> Result<Vec<String>, ClientError> {
    let settings = ClientSettings::default();
    let server = ServerConnection::connect(config, settings, ConnectionContext::default()).await?;
    let names = server
        .model_tools()
        .iter()
        .map(|t| t.name.clone())
        .collect();
    server.close().await;
    Ok(names)
}
