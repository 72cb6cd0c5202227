//! Picks the server kit to serve tools over stdio only.

use maljan_sidecar_kit::{Server, ToolSpec};

/// A server with one tool that answers its arguments.
pub fn echo_server() -> Server {
    Server::builder("echo", "1")
        .tool(
            ToolSpec::new("echo", "answers what it is told")
                .required_string("say", "what to answer"),
            |args, _| Ok(serde_json::json!({ "said": args.string("say")? })),
        )
        .build()
}
