//! Model Context Protocol messages a tool client needs: the lifecycle, tools, cancellation,
//! progress and logging.

mod lifecycle;
pub mod methods;
mod notifications;
mod server_requests;
mod tools;
mod version;

pub use lifecycle::{Implementation, InitializeParams, InitializeResult};
pub use notifications::{CancelledParams, LoggingMessageParams, ProgressParams};
pub use server_requests::{ClientRoot, ElicitationPolicy, ServerRequestPolicy};
pub use tools::{
    CallToolParams, CallToolResult, ContentBlock, EmbeddedResource, ListToolsParams,
    ListToolsResult, Tool,
};
pub use version::{ProtocolVersion, UnsupportedVersion};
