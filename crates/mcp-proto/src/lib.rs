#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
// Not public API: the fuzz targets' and corpus replays' entry points, behind a feature of
// their own so that a user never sees them.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod json_writer;
pub mod jsonrpc;
pub mod large_buffers;
pub mod maljan;
pub mod mcp;
pub mod untrusted_text;
