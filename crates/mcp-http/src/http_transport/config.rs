//! What a Streamable HTTP connection is set up with.

use std::time::Duration;

use maljan_mcp_proto::mcp::ServerRequestPolicy;

use super::BearerToken;
use crate::DEFAULT_MAX_EVENT_BYTES;

/// Settings of a Streamable HTTP connection.
///
/// ```
/// use maljan_mcp_http::HttpConfig;
/// let config = HttpConfig::new("remote", "http://127.0.0.1:8080/mcp");
/// assert_eq!(config.max_event_bytes, 32 * 1024 * 1024);
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpConfig {
    /// The server's name, for logs and errors.
    pub name: String,
    /// The MCP endpoint.
    pub url: String,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// The bearer token sent as `Authorization: Bearer …` with every request, read from
    /// where it comes from each time (never logged).
    pub bearer_token: Option<BearerToken>,
    /// Where access tokens come from when the server asks for authorization (OAuth 2.1
    /// with the `oauth` feature, or the caller's own): its token is sent instead of
    /// `bearer_token`, and a refusal (401, or 403 for more scope) is handed to it before the
    /// request is sent again.
    pub authorizer: Option<std::sync::Arc<dyn crate::Authorizer>>,
    /// The bound on one reply (JSON body or SSE event), in bytes.
    pub max_event_bytes: usize,
    /// How long connecting may take (10 s).
    pub connect_timeout: Duration,
    /// How long one read of a response may wait for bytes; `None` (the default) waits as
    /// long as a call's own deadline, since a tool may work for minutes before its answer.
    pub read_timeout: Option<Duration>,
    /// The caller's own HTTP client (its roots, proxies, TLS back-end, timeouts), used as it
    /// is: `connect_timeout` and `read_timeout` are then the client's business, and so are
    /// redirects (the transport's own client follows them within the server's origin only).
    /// The headers and the token are added to each request either way.
    pub client: Option<reqwest::Client>,
    /// How the server's own requests (`ping`, `elicitation/create`, `roots/list`…) are
    /// answered.
    pub server_requests: ServerRequestPolicy,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpConfig")
            .field("name", &self.name)
            .field("url", &crate::redact_credentials(&self.url))
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("bearer_token", &self.bearer_token)
            .field("authorizer", &self.authorizer)
            .field("max_event_bytes", &self.max_event_bytes)
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("own_client", &self.client.is_some())
            .finish()
    }
}

impl HttpConfig {
    /// Defaults for an endpoint.
    pub fn new(name: impl Into<String>, url: impl Into<String>) -> Self {
        HttpConfig {
            name: name.into(),
            url: url.into(),
            headers: Vec::new(),
            bearer_token: None,
            authorizer: None,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            connect_timeout: Duration::from_secs(10),
            read_timeout: None,
            client: None,
            server_requests: ServerRequestPolicy::default(),
        }
    }
}
