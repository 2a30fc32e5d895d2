//! The migration snapshot a user writes in their own `cargo test`, with the
//! library API (`mcp_tasks_shim::testing`) and insta: a 2025-11-25 client
//! recorded (`stdio --record`) in front of the 2026-07-28 reference server
//! (`--seed 1`), read back, checked against the client's revision's schema,
//! normalised with the default masks and snapshotted. The snapshot is what
//! an old client sees after the upgrade; any change to it is one a client
//! could notice.

mod support;

use std::time::Duration;

use mcp_tasks_shim::testing::schema::{Revision, assert_conversation_valid};
use mcp_tasks_shim::testing::{Masks, Transcript};
use serde_json::json;
use support::wire::{Wire, modern_reference, temp_path};

/// Records one conversation of a 2025-11-25 client through the shim; the
/// transcript file's path.
fn record_conversation() -> std::path::PathBuf {
    let path = temp_path("migration-snapshot.jsonl");
    let _ = std::fs::remove_file(&path);
    let mut server = modern_reference();
    server.extend(["--seed".to_owned(), "1".to_owned()]);
    let mut shim = Wire::spawn(&["--record", path.to_str().unwrap()], &server);
    shim.initialize();
    shim.ok("tools/list", json!({}));
    shim.ok(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "Ada"}}),
    );
    let created = shim.ok(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "snap"},
               "task": {"ttl": 60_000}}),
    );
    let task = created["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    // Each request waits for its answer, and the shim learns of the task's
    // end (and announces it) only while it serves tasks/result: the order
    // of the records is the same on every run.
    shim.ok("tasks/result", json!({"taskId": task}));
    shim.ok("tasks/get", json!({"taskId": task}));
    shim.close_stdin();
    assert!(
        shim.wait_exit(Duration::from_secs(20))
            .is_some_and(|s| s.success()),
        "the shim exits once the client leaves"
    );
    path
}

#[test]
fn an_old_client_sees_what_the_snapshot_says_after_the_upgrade() {
    let path = record_conversation();
    let transcript = Transcript::read(&path).expect("the recording reads back");
    let _ = std::fs::remove_file(&path);
    assert_conversation_valid(
        transcript.records.iter().filter_map(|(_, r)| {
            Some((Revision::Legacy, r.dir.as_str(), r.msg.as_ref()?.to_value()))
        }),
    );
    let normalized = transcript.normalized(&Masks::default());
    insta::with_settings!({snapshot_path => "../snapshots"}, {
        insta::assert_json_snapshot!("migration_legacy_client_modern_server", normalized);
    });
}
