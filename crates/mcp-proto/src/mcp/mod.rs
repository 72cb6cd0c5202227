//! Model Context Protocol messages a tool client needs: the lifecycle, tools, cancellation,
//! progress and logging.

mod client_reply;
mod lifecycle;
pub mod methods;
mod notifications;
mod tools;
mod version;

pub use client_reply::answer_as_client;
pub use lifecycle::{Implementation, InitializeParams, InitializeResult};
pub use notifications::{CancelledParams, LoggingMessageParams, ProgressParams};
pub use tools::{
    CallToolParams, CallToolResult, ContentBlock, EmbeddedResource, ListToolsParams,
    ListToolsResult, Tool,
};
pub use version::{ProtocolVersion, UnsupportedVersion};
