//! Schema validation for the tests: the library's own
//! ([`mcp_tasks_shim::testing::schema`], schemas bundled in the crate), so
//! the tests check what a user's `cargo test` would. `schema_support.rs`
//! checks that the bundled copies equal the official files in
//! `../shared/schemas`.

pub use mcp_tasks_shim::testing::schema::*;
