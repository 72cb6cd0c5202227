//! The transport under a server connection, as one trait.
//!
//! A [`Transport`] carries JSON-RPC between this client and one MCP server: it sends a
//! request and hands back its [`PendingReply`], sends notifications, gives the server's own
//! messages to whoever takes them and closes ([`CloseReport`]); what it knows of its server
//! (what it received, [`TransportCounts`], its process, its stderr) is a [`TransportInfo`]
//! handle apart from the channel. Why a request got no usable reply is a [`TransportFailure`], which
//! keeps the transport's own error as its cause. The stdio and Streamable HTTP transports
//! implement it in their own crates; [`memory::pair`] implements it in memory for tests.
//!
//! The trait is object safe: a connection holds a `Box<dyn Transport>` and never asks which
//! one it is, beyond [`Transport::kind`] for display.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use maljan_mcp_proto::jsonrpc::{Message, Reply};
//! use maljan_mcp_transport::{OutgoingRequest, Transport, memory};
//!
//! let (client, mut server) = memory::pair("echo");
//! let transport: Box<dyn Transport> = Box::new(client);
//! let pending = transport
//!     .send_request(OutgoingRequest::new("ping", None))
//!     .await
//!     .expect("sent");
//! let Some(Message::Request(request)) = server.next_message().await else {
//!     panic!("the peer gets the request");
//! };
//! server.answer(&request.id, Reply::Result(serde_json::value::to_raw_value(&()).unwrap()));
//! assert!(matches!(pending.await, Ok(Reply::Result(_))));
//! assert_eq!(transport.info().counts().messages, 1);
//! # }
//! ```

mod failure;
pub mod memory;
mod report;
pub mod session;
mod transport;

pub use failure::TransportFailure;
pub use report::{CloseReport, StoppedBy, TransportCounts};
pub use transport::{
    BoxFuture, EndsSetup, OutgoingRequest, PendingReply, Transport, TransportInfo, TransportKind,
};
