use serde_json::value::RawValue;

use crate::jsonrpc::{ErrorObject, ErrorResponse, Message, Request, Response, error_codes};

use super::methods;

/// What a tool client answers a request from the server: `ping` with `{}`, anything else
/// (sampling, elicitation, roots) with "method not found", since this client offers none.
///
/// ```
/// use maljan_mcp_proto::jsonrpc::{Message, Request, RequestId};
/// use maljan_mcp_proto::mcp::answer_as_client;
/// let ping = Request { id: RequestId::Integer(9), method: "ping".into(), params: None };
/// assert_eq!(answer_as_client(ping).to_json(), r#"{"jsonrpc":"2.0","id":9,"result":{}}"#);
/// ```
pub fn answer_as_client(request: Request) -> Message {
    if request.method == methods::PING {
        Message::Response(Response {
            id: request.id,
            result: RawValue::from_string("{}".to_owned()).expect("{} is JSON"),
        })
    } else {
        Message::Error(ErrorResponse {
            id: Some(request.id),
            error: ErrorObject::new(
                error_codes::METHOD_NOT_FOUND,
                format!("this client does not serve {}", request.method),
            ),
        })
    }
}
