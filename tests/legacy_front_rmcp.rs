//! Issue 3 with a modern server we did not write: a 2025-11-25 client (the
//! raw driver) through the shim against a server built on the official Rust
//! SDK, `rmcp` 3.11, whose `TaskManager` serves the tasks extension
//! (`examples/rmcp_task_server.rs`, one slow cancellable task tool).
//!
//! Checked: initialize (tasks capability derived from rmcp's discover),
//! tools/list (`taskSupport` added), task creation, polling, blocking
//! `tasks/result` with related-task `_meta`, `tasks/list`, cancel + double
//! cancel, and a plain call of a tool rmcp runs as a task (driven by the
//! shim). Every shim→client message is validated against 2025-11-25.
//!
//! The example is built by `cargo test` (all targets); when running this
//! file alone, build it first: `cargo build --example rmcp_task_server`.

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::wire::{Wire, text_of};

const RELATED: &str = "io.modelcontextprotocol/related-task";

fn start() -> Wire {
    let server = support::example_binary("rmcp_task_server", "")
        .to_string_lossy()
        .into_owned();
    let mut shim = Wire::spawn(&[], &[server]);
    shim.initialize();
    shim
}

#[test]
fn legacy_client_through_the_shim_against_an_rmcp_task_server() {
    let mut shim = start();

    let tools = shim.ok("tools/list", json!({}));
    assert_eq!(tools["tools"][0]["name"], "slow", "{tools}");
    assert_eq!(
        tools["tools"][0]["execution"]["taskSupport"], "optional",
        "{tools}"
    );

    // Create, poll to the end, fetch the result.
    let r = shim.ok(
        "tools/call",
        json!({"name": "slow", "arguments": {"seconds": 0.3, "label": "polled"},
            "task": {"ttl": 60_000}}),
    );
    assert_eq!(r["task"]["status"], "working", "{r}");
    assert_eq!(r["task"]["pollInterval"], 50, "rmcp's hint, renamed: {r}");
    let polled = r["task"]["taskId"].as_str().unwrap().to_owned();
    let mut statuses = Vec::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let within = deadline.saturating_duration_since(std::time::Instant::now());
    support::poll::until("the polled task to complete", within, || {
        let t = shim.ok("tasks/get", json!({"taskId": polled}));
        let status = t["status"].as_str().unwrap().to_owned();
        assert!(t.get("result").is_none(), "payloads are stripped: {t}");
        statuses.push(status.clone());
        if status == "completed" {
            return Some(());
        }
        assert_eq!(status, "working", "{t}: {statuses:?}");
        None
    });
    let result = shim.ok("tasks/result", json!({"taskId": polled}));
    assert_eq!(text_of(&result), "slow 'polled' finished after 0.3 s");
    assert_eq!(result["_meta"][RELATED]["taskId"], polled.as_str());

    // Blocking tasks/result on a fresh task.
    let r = shim.ok(
        "tools/call",
        json!({"name": "slow", "arguments": {"seconds": 0.2, "label": "blocked"},
            "task": {}}),
    );
    let blocked = r["task"]["taskId"].as_str().unwrap().to_owned();
    let result = shim.ok("tasks/result", json!({"taskId": blocked}));
    assert_eq!(text_of(&result), "slow 'blocked' finished after 0.2 s");

    // Cancel a long one; a second cancel is refused; the result is an error.
    let r = shim.ok(
        "tools/call",
        json!({"name": "slow", "arguments": {"seconds": 60, "label": "cancelled"},
            "task": {"ttl": 60_000}}),
    );
    let long = r["task"]["taskId"].as_str().unwrap().to_owned();
    let c = shim.ok("tasks/cancel", json!({"taskId": long}));
    assert_eq!(c["status"], "cancelled", "{c}");
    let t = shim.ok("tasks/get", json!({"taskId": long}));
    assert_eq!(t["status"], "cancelled", "{t}");
    let e = shim.err("tasks/cancel", json!({"taskId": long}));
    assert_eq!(e["code"], -32602, "{e}");
    let e = shim.err("tasks/result", json!({"taskId": long}));
    assert_eq!(e["code"], -32602, "{e}");

    // tasks/list: the shim's ledger, newest first.
    let list = shim.ok("tasks/list", json!({}));
    let ids: Vec<&str> = list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["taskId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [long.as_str(), blocked.as_str(), polled.as_str()]);

    // Unknown id.
    let e = shim.err("tasks/get", json!({"taskId": "no-such-task"}));
    assert_eq!(e["code"], -32602, "{e}");

    // A plain call: rmcp still makes a task (the shim declares the
    // extension upstream); the shim drives it and answers plainly.
    let r = shim.ok(
        "tools/call",
        json!({"name": "slow", "arguments": {"seconds": 0.2, "label": "plain"}}),
    );
    assert!(r.get("task").is_none(), "{r}");
    assert_eq!(text_of(&r), "slow 'plain' finished after 0.2 s");
    assert!(r.get("_meta").and_then(|m| m.get(RELATED)).is_none(), "{r}");

    // Status notifications were sent for the changes the shim saw.
    let notes: Vec<Value> = shim
        .received
        .iter()
        .filter(|m| m["method"] == "notifications/tasks/status")
        .cloned()
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n["params"]["taskId"] == long.as_str() && n["params"]["status"] == "cancelled"),
        "{notes:#?}"
    );

    shim.close_stdin();
    let status = shim.wait_exit(Duration::from_secs(6)).expect("shim exits");
    assert!(status.success(), "{status}");
}
