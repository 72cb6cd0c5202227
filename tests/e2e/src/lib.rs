//! End-to-end tests of the Maljan client against real server processes that misbehave on
//! purpose. The server is the `misbehaving-server` binary of this crate; the tests are in
//! `tests/`.
