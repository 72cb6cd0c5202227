//! Method names.

/// What a modern-era server speaks (2026-07-28); a dual-era client asks it first.
pub const SERVER_DISCOVER: &str = "server/discover";
/// The first request of a legacy-era connection.
pub const INITIALIZE: &str = "initialize";
/// The notification that ends a client's setup.
pub const INITIALIZED: &str = "notifications/initialized";
/// Lists tools, a page at a time.
pub const TOOLS_LIST: &str = "tools/list";
/// Calls a tool.
pub const TOOLS_CALL: &str = "tools/call";
/// A liveness check either side may send.
pub const PING: &str = "ping";
/// Cancels an in-flight request.
pub const CANCELLED: &str = "notifications/cancelled";
/// Progress of a long-running request.
pub const PROGRESS: &str = "notifications/progress";
/// A log message from the server.
pub const MESSAGE: &str = "notifications/message";
/// The server's tool list changed.
pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
/// A server asks the client's user for input.
pub const ELICITATION_CREATE: &str = "elicitation/create";
/// A server asks the client's model for a completion.
pub const SAMPLING_CREATE_MESSAGE: &str = "sampling/createMessage";
/// A server asks which directories the client shows it.
pub const ROOTS_LIST: &str = "roots/list";
/// Reading a resource by its URI.
pub const RESOURCES_READ: &str = "resources/read";
