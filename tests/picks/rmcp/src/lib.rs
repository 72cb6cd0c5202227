//! Nothing of its own: rmcp as a downstream crate picks it, for its crate counts.
