//! Maljan's failure codes, kept as written when unknown.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A failure's code. Codes this crate does not know are kept as written.
///
/// ```
/// use maljan_mcp_proto::maljan::ErrorCode;
/// assert_eq!(ErrorCode::from("missing_dependency"), ErrorCode::MissingDependency);
/// assert_eq!(ErrorCode::from("quota_exceeded").as_str(), "quota_exceeded");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ErrorCode {
    /// A program or library the tool needs is missing.
    MissingDependency,
    /// The tool ran out of time on the server.
    Timeout,
    /// An argument is wrong.
    BadArgument,
    /// A named file does not exist.
    NoSuchFile,
    /// The input's format is not one the tool reads.
    UnsupportedFormat,
    /// The tool needs configuration it does not have.
    NotConfigured,
    /// The tool failed.
    ToolFailed,
    /// The server runs as many calls as it may and its queue is full: try again later.
    ServerBusy,
    /// A limit would be exceeded: a job's disk budget on the server, or a run's cap on its
    /// calls or on a step's runs. The message names the limit and its setting.
    OverLimit,
    /// The client's own: the server is resting after calls went unanswered.
    ServerResting,
    /// The client's own: no answer within the wait.
    Unanswered,
    /// The client's own: the connection was lost before the answer.
    ConnectionLost,
    /// The client's own: the answer was not a valid protocol message or tool result.
    InvalidAnswer,
    /// The client's own: the server answered with a JSON-RPC error.
    RpcError,
    /// The client's own: the server asked for input (a modern `input_required` result) that
    /// this client does not give, or kept asking.
    InputRequired,
    /// Any other code, as written.
    Other(String),
}

impl ErrorCode {
    /// The code as written on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            ErrorCode::MissingDependency => "missing_dependency",
            ErrorCode::Timeout => "timeout",
            ErrorCode::BadArgument => "bad_argument",
            ErrorCode::NoSuchFile => "no_such_file",
            ErrorCode::UnsupportedFormat => "unsupported_format",
            ErrorCode::NotConfigured => "not_configured",
            ErrorCode::ToolFailed => "tool_failed",
            ErrorCode::ServerBusy => "server_busy",
            ErrorCode::OverLimit => "over_limit",
            ErrorCode::ServerResting => "server_resting",
            ErrorCode::Unanswered => "unanswered",
            ErrorCode::ConnectionLost => "connection_lost",
            ErrorCode::InvalidAnswer => "invalid_answer",
            ErrorCode::RpcError => "rpc_error",
            ErrorCode::InputRequired => "input_required",
            ErrorCode::Other(s) => s,
        }
    }
}

impl From<&str> for ErrorCode {
    fn from(s: &str) -> Self {
        match s {
            "missing_dependency" => ErrorCode::MissingDependency,
            "timeout" => ErrorCode::Timeout,
            "bad_argument" => ErrorCode::BadArgument,
            "no_such_file" => ErrorCode::NoSuchFile,
            "unsupported_format" => ErrorCode::UnsupportedFormat,
            "not_configured" => ErrorCode::NotConfigured,
            "tool_failed" => ErrorCode::ToolFailed,
            "server_busy" => ErrorCode::ServerBusy,
            "over_limit" => ErrorCode::OverLimit,
            "server_resting" => ErrorCode::ServerResting,
            "unanswered" => ErrorCode::Unanswered,
            "connection_lost" => ErrorCode::ConnectionLost,
            "invalid_answer" => ErrorCode::InvalidAnswer,
            "rpc_error" => ErrorCode::RpcError,
            "input_required" => ErrorCode::InputRequired,
            other => ErrorCode::Other(other.to_owned()),
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ErrorCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let s = String::deserialize(deserializer)?;
        Ok(ErrorCode::from(s.as_str()))
    }
}
