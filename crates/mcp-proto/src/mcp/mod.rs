//! Model Context Protocol messages a tool client needs: the lifecycle, tools, cancellation,
//! progress and logging.

mod era;
#[cfg(feature = "http-headers")]
mod header_value;
mod input_required;
mod lifecycle;
pub mod methods;
mod modern_wire;
mod notifications;
mod param_headers;
mod request_meta;
mod result_from_raw;
mod server_requests;
mod setup_steps;
mod tools;
mod version;

pub use era::{
    DiscoverResult, EraVerdict, NoCommonGround, read_discover_answer, stateless_error_codes,
};
#[cfg(feature = "http-headers")]
pub use header_value::{decode_header_value, encode_header_value};
pub use input_required::{InputRequest, InputRequired, ResultKind, read_result_kind};
pub use lifecycle::{Implementation, InitializeParams, InitializeResult};
pub use modern_wire::{headers, meta_keys};
pub use notifications::{CancelledParams, LoggingMessageParams, ProgressParams};
pub use param_headers::{InvalidParamHeader, ParamHeaders};
pub use request_meta::{stateless_meta, with_request_meta};
pub use server_requests::{ClientRoot, ElicitationPolicy, ServerRequestPolicy};
pub use setup_steps::{EndlessToolList, EraProbe, ProbeStep, ToolPages};
pub use tools::{
    CallToolParams, CallToolResult, ContentBlock, EmbeddedResource, ListToolsParams,
    ListToolsResult, Tool,
};
pub use version::{Era, ProtocolVersion, UnsupportedVersion};
