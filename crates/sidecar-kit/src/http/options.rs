//! What the operator sets for serving over HTTP: who may call, and every bound on what
//! callers may hold (connections, time, sessions, stateless jobs).

use std::time::Duration;

use sha2::{Digest, Sha256};

/// The largest request body accepted: a 4 MiB file chunk in base64 fits many times over.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;
/// How many sessions may be open at once, unless the operator says otherwise; the same
/// number bounds the stateless era's jobs.
pub const MAX_SESSIONS: usize = 64;
/// How many sessions (and, apart, stateless jobs) one peer address may hold at once,
/// unless the operator says otherwise.
pub const MAX_SESSIONS_PER_PEER: usize = 16;
/// How long a session or a stateless job may go without a request before it ends, unless
/// the operator says otherwise.
pub const SESSION_IDLE: Duration = Duration::from_secs(15 * 60);
/// How many connections may be open at once, unless the operator says otherwise: well
/// under the usual 1024 open files, which the server's job directories and files share.
pub const MAX_CONNECTIONS: usize = 256;
/// How many connections one peer address may hold at once, unless the operator says
/// otherwise.
pub const MAX_CONNECTIONS_PER_PEER: usize = 32;
/// How long a client has to send a request's headers, unless the operator says otherwise;
/// a connection idle between requests is closed after as long.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(15);
/// How many bytes of request bodies the server holds at once, unless the operator says
/// otherwise: a request waits for room before its body is read, and is answered 503 when
/// none comes within the body timeout.
pub const MAX_BODY_BYTES_HELD: usize = 1024 * 1024 * 1024;
/// How long a client has to send a request's body once its headers are in, unless the
/// operator says otherwise: a 64 MiB body at half a MiB a second.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(120);

/// Who may call a server over HTTP, and what each caller may hold.
///
/// ```
/// use std::time::Duration;
/// use maljan_sidecar_kit::HttpOptions;
/// let options = HttpOptions::default()
///     .bearer_token("a long random secret")
///     .allowed_host("analysis.internal:8080")
///     .max_sessions(16)
///     .session_idle(Duration::from_secs(300))
///     .max_connections(128)
///     .header_timeout(Duration::from_secs(5));
/// assert!(format!("{options:?}").contains("redacted"));
/// ```
#[derive(Clone)]
pub struct HttpOptions {
    /// The sha256 of the token: compared in constant time, never kept in clear.
    pub(super) token_digest: Option<[u8; 32]>,
    pub(super) allowed_hosts: Vec<String>,
    /// OAuth 2.1: the tokens of an authorization server, instead of one bearer token.
    pub(super) protected: Option<super::ProtectedResource>,
    pub(super) max_sessions: usize,
    pub(super) max_sessions_per_peer: usize,
    pub(super) session_idle: Duration,
    pub(super) max_connections: usize,
    pub(super) max_connections_per_peer: usize,
    pub(super) header_timeout: Duration,
    pub(super) body_timeout: Duration,
    pub(super) max_body_bytes_held: usize,
}

impl std::fmt::Debug for HttpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpOptions")
            .field("bearer_token", &self.token_digest.map(|_| "(redacted)"))
            .field("protected_resource", &self.protected)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("max_sessions", &self.max_sessions)
            .field("max_sessions_per_peer", &self.max_sessions_per_peer)
            .field("session_idle", &self.session_idle)
            .field("max_connections", &self.max_connections)
            .field("max_connections_per_peer", &self.max_connections_per_peer)
            .field("header_timeout", &self.header_timeout)
            .field("body_timeout", &self.body_timeout)
            .field("max_body_bytes_held", &self.max_body_bytes_held)
            .finish()
    }
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            token_digest: None,
            protected: None,
            allowed_hosts: Vec::new(),
            max_sessions: MAX_SESSIONS,
            max_sessions_per_peer: MAX_SESSIONS_PER_PEER,
            session_idle: SESSION_IDLE,
            max_connections: MAX_CONNECTIONS,
            max_connections_per_peer: MAX_CONNECTIONS_PER_PEER,
            header_timeout: HEADER_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
            max_body_bytes_held: MAX_BODY_BYTES_HELD,
        }
    }
}

impl HttpOptions {
    /// Requires `Authorization: Bearer TOKEN` on every request. Needed to bind anything but
    /// loopback.
    pub fn bearer_token(mut self, token: impl AsRef<[u8]>) -> Self {
        self.token_digest = Some(Sha256::digest(token.as_ref()).into());
        self
    }

    /// Lets in only callers with an access token `resource`'s authorization server issued
    /// for it (OAuth 2.1), and publishes the resource's metadata; the single bearer token
    /// is then not used.
    pub fn protected_resource(mut self, resource: super::ProtectedResource) -> Self {
        self.protected = Some(resource);
        self
    }

    /// Whether callers need an access token of an authorization server (OAuth 2.1).
    pub fn is_protected_resource(&self) -> bool {
        self.protected.is_some()
    }

    /// Whether a bearer token is required.
    pub fn has_bearer_token(&self) -> bool {
        self.token_digest.is_some()
    }

    /// Accepts requests whose `Host` header is `host` (`name` or `name:port`), besides
    /// loopback names when bound to loopback. Once any is named, no other host is accepted.
    pub fn allowed_host(mut self, host: impl Into<String>) -> Self {
        self.allowed_hosts.push(host.into().to_ascii_lowercase());
        self
    }

    /// How many sessions may be open at once, and how many stateless jobs ([`MAX_SESSIONS`]).
    pub fn max_sessions(mut self, sessions: usize) -> Self {
        self.max_sessions = sessions;
        self
    }

    /// How many sessions, and how many stateless jobs, one peer address may hold
    /// ([`MAX_SESSIONS_PER_PEER`]).
    pub fn max_sessions_per_peer(mut self, sessions: usize) -> Self {
        self.max_sessions_per_peer = sessions;
        self
    }

    /// How long a session or a stateless job may go without a request before it ends
    /// ([`SESSION_IDLE`]).
    pub fn session_idle(mut self, idle: Duration) -> Self {
        self.session_idle = idle;
        self
    }

    /// How many connections may be open at once ([`MAX_CONNECTIONS`], at least 1).
    pub fn max_connections(mut self, connections: usize) -> Self {
        self.max_connections = connections.max(1);
        self
    }

    /// How many connections one peer address may hold ([`MAX_CONNECTIONS_PER_PEER`], at
    /// least 1).
    pub fn max_connections_per_peer(mut self, connections: usize) -> Self {
        self.max_connections_per_peer = connections.max(1);
        self
    }

    /// How long a client has to send a request's headers, and how long a connection may
    /// stay idle between requests ([`HEADER_TIMEOUT`]).
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
        self
    }

    /// How long a client has to send a request's body once its headers are in
    /// ([`BODY_TIMEOUT`]).
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// How many bytes of request bodies the server holds at once, each from before it is
    /// read until its request is answered ([`MAX_BODY_BYTES_HELD`], at least
    /// [`MAX_REQUEST_BYTES`]).
    pub fn max_body_bytes_held(mut self, bytes: usize) -> Self {
        self.max_body_bytes_held = bytes.max(MAX_REQUEST_BYTES);
        self
    }
}
