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
pub mod poll;
pub mod redis;
pub mod schema;
pub mod wire;

/// `target/<profile>/examples/<name>`, next to the running test's `deps/`;
/// fails, saying how to build it, when it is not there. `features` is
/// the `--features` the example needs ("" for none).
#[track_caller]
pub fn example_binary(name: &str, features: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps/<test>");
    let path = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    let features = if features.is_empty() {
        String::new()
    } else {
        format!(" --features {features}")
    };
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build{features} --example {name}` \
         (a plain `cargo test{features}` builds it too)",
        path.display()
    );
    path
}
