//! What the client's tests share.

pub(crate) mod memory_servers;
