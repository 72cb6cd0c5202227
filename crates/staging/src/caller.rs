use std::future::Future;

use maljan_mcp_proto::maljan::ToolFailure;
use serde_json::Value;

/// Calls a tool on one server: how staging reaches `get_file` and `put_sample*`.
///
/// The client implements it with its whole call pipeline (cap, breaker, ledger), so every
/// transfer call is ledgered. The answer is the tool's value read by Maljan's rules; a
/// failed call (the server's `{error}` included) is the failure.
pub trait ToolCaller {
    /// Calls `tool` with `arguments`.
    fn call_tool(
        &self,
        tool: &str,
        arguments: Value,
    ) -> impl Future<Output = Result<Value, ToolFailure>> + Send;
}
