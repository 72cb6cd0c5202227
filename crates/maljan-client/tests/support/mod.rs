//! What the client's tests share.
// Each test crate that includes the support uses a part of it.
#![allow(dead_code)]

pub(crate) mod memory_run;
pub(crate) mod memory_servers;
