//! Shared helpers for the integration tests (`mod support;` at the top of a
//! `tests/*.rs` file).
//!
//! Every integration test file is its own crate and uses only part of this
//! module, so unused items are expected: `dead_code` is allowed here rather
//! than in each test file. The items are `pub` so that test files can reach
//! them as `support::schema::…`; from the compiler's point of view they are
//! still crate-private, hence `unreachable_pub` is allowed too.
#![allow(dead_code, unreachable_pub)]

pub mod forwarder;
pub mod http;
pub mod peers;
pub mod redis;
pub mod schema;
pub mod wire;
