//! The names the modern era (2026-07-28) puts on the wire beside its methods: the `_meta`
//! keys of every request and result, and the HTTP headers that repeat a request's body.

/// The `_meta` keys of the modern era.
pub mod meta_keys {
    /// The request's protocol version (required).
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    /// The client's capabilities (required; `{}` for none).
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    /// Who the client is.
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    /// Who the server is, on a result: for display only.
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
}

/// The HTTP headers a modern POST repeats its body in (lower case, as HTTP/2 sends them).
pub mod headers {
    /// The protocol version, equal to the one in `_meta`.
    pub const PROTOCOL_VERSION: &str = "mcp-protocol-version";
    /// The request's method.
    pub const METHOD: &str = "mcp-method";
    /// The tool, prompt or resource a `tools/call`, `prompts/get` or `resources/read`
    /// names.
    pub const NAME: &str = "mcp-name";
}
