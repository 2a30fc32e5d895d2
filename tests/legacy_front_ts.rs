//! Issue 3, "legacy clients against a modern server", with a real legacy
//! client: the official TypeScript SDK (`@modelcontextprotocol/sdk` 1.32.2,
//! `StdioClientTransport`) runs its whole task repertoire THROUGH THE SHIM
//! against the 2026-07-28 reference server:
//!
//! ```text
//! node legacy_client.mjs --profile shim -- \
//!     mcp-tasks-shim stdio --record R --page-size 4 -- \
//!         mcp-tasks-shim reference-server --revision 2026-07-28
//! ```
//!
//! The script (`tests/peers/legacy_client.mjs`, shared with
//! `reference_legacy_ts.rs`, which runs it against the 2025-11-25 reference
//! server directly) checks: initialize, tools/list taskSupport, plain calls
//! (including tools the upstream runs as a task, driven to the end by the
//! shim, with an elicitation answered on the way), task creation, polling,
//! blocking `tasks/result`, `isError` → `failed`, JSON-RPC error via
//! `tasks/result`, elicitation while `input_required` (answer reaches the
//! tool), `callToolStream` (explicit task and SDK-chosen task, completed and
//! failed), two elicitations at once, MRTR input before the task, cancel,
//! double cancel `-32602`, unknown ids `-32602`, `tasks/list` pages (newest
//! first, no duplicates, bad cursor `-32602`) and status notifications.
//!
//! Afterwards every message of the shim's own `--record` transcript is
//! validated against the 2025-11-25 schema: everything the shim emitted
//! toward the legacy client is schema-valid.
//!
//! Needs Node and `tests/peers/node_modules`: run `scripts/test.sh`.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::peers::{SHIM_PROFILE_CHECKS, read_transcript, run_legacy_client};
use support::schema::{Revision, assert_conversation_valid};
use support::wire::{shim_bin, temp_path};

/// The script bounds itself at 60 s; this is the backstop.
const TIMEOUT: Duration = Duration::from_secs(90);

const RELATED_TASK: &str = "/params/_meta/io.modelcontextprotocol~1related-task/taskId";

#[test]
fn ts_sdk_client_through_the_shim_against_the_modern_reference() {
    let record = temp_path("ts-shim-record.jsonl");
    let client_view = temp_path("ts-client-view.jsonl");
    let record_arg = record.to_string_lossy().into_owned();
    let command = [
        shim_bin(),
        "stdio",
        "--record",
        &record_arg,
        "--page-size",
        "4",
        "--",
        shim_bin(),
        "reference-server",
        "--revision",
        "2026-07-28",
    ];
    let run = run_legacy_client("shim", &client_view, &command, TIMEOUT);

    run.assert_checks(SHIM_PROFILE_CHECKS);
    let pages = run.check("tasks/list pages")["pages"].as_i64().unwrap_or(0);
    assert!(pages > 1, "tasks/list paginated: {}", run.out);

    // The shim's own transcript of the client side: all of it is 2025-11-25.
    let recorded = read_transcript(&record);
    let seen_by_client = read_transcript(&client_view);
    let _ = std::fs::remove_file(&record);
    let _ = std::fs::remove_file(&client_view);
    assert!(
        recorded.len() > 100,
        "transcript too short: {}",
        recorded.len()
    );
    assert_conversation_valid(
        recorded
            .iter()
            .map(|(dir, msg)| (Revision::Legacy, dir.as_str(), msg)),
    );

    // The record is what the client saw: the client's s2c messages appear in
    // the shim's s2c record, in order (the record may hold a few more that
    // were written after the client stopped reading).
    let shim_s2c: Vec<&Value> = recorded
        .iter()
        .filter(|(d, _)| d == "s2c")
        .map(|(_, m)| m)
        .collect();
    let mut rest = shim_s2c.iter();
    for (dir, msg) in &seen_by_client {
        if dir == "s2c" {
            assert!(
                rest.any(|m| *m == msg),
                "the client saw a message the shim did not record (or out of order): {msg}"
            );
        }
    }
    let client_c2s = seen_by_client.iter().filter(|(d, _)| d == "c2s").count();
    let shim_c2s = recorded.iter().filter(|(d, _)| d == "c2s").count();
    assert_eq!(client_c2s, shim_c2s, "every client message was recorded");

    // Elicitation on the tasks/result path names its task; the one asked
    // before the task existed (MRTR) and those of driven plain calls do not.
    let elicitations: Vec<&Value> = shim_s2c
        .iter()
        .copied()
        .filter(|m| m["method"] == "elicitation/create")
        .collect();
    assert!(
        elicitations
            .iter()
            .any(|m| m.pointer(RELATED_TASK).is_some()),
        "{elicitations:#?}"
    );
    assert!(
        elicitations
            .iter()
            .any(|m| m.pointer(RELATED_TASK).is_none()),
        "{elicitations:#?}"
    );

    // Nothing of the modern wire leaks to the legacy client.
    for m in &shim_s2c {
        let text = m.to_string();
        for modern in ["resultType", "ttlMs", "pollIntervalMs", "inputRequests"] {
            assert!(
                !text.contains(&format!("\"{modern}\"")),
                "modern field {modern} sent to a legacy client: {m}"
            );
        }
    }
}

/// The TypeScript SDK's task-augmented call of a tool the operator marked
/// `forbidden` (`--task-support slow_compute=forbidden`) gets `-32601`, as
/// the 2025-11-25 spec says servers SHOULD, in a schema-valid answer; the
/// call never reaches the upstream. Before, it got a synthetic task.
#[test]
fn ts_sdk_task_call_of_a_forbidden_tool_gets_32601() {
    let transcript = temp_path("ts-forbidden.jsonl");
    let (sent, got) = (
        temp_path("ts-forbidden-sent.jsonl"),
        temp_path("ts-forbidden-got.jsonl"),
    );
    let mut command = vec![
        shim_bin().to_owned(),
        "stdio".into(),
        "--task-support".into(),
        "slow_compute=forbidden".into(),
        "--".into(),
    ];
    command.extend(support::wire::recording_upstream(
        &support::wire::modern_reference(),
        &sent,
        &got,
    ));
    support::peers::require_peers();
    let mut cmd = std::process::Command::new("node");
    cmd.current_dir(support::peers::peers_dir())
        .arg("forbidden_task_client.mjs")
        .arg("slow_compute")
        .arg(&transcript)
        .arg("--")
        .args(&command);
    let (status, out) = support::peers::run_bounded(&mut cmd, TIMEOUT);
    let line: Value = out
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no result line: {out}"));
    assert!(status.success() && line["ok"] == true, "{out}");
    assert_eq!(line["code"], -32601, "{line}");
    assert_eq!(line["support"], "forbidden", "{line}");

    let seen = read_transcript(&transcript);
    assert_conversation_valid(
        seen.iter()
            .map(|(dir, msg)| (Revision::Legacy, dir.as_str(), msg)),
    );
    let upstream_calls: Vec<Value> = support::wire::read_jsonl(&sent)
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .collect();
    assert!(upstream_calls.is_empty(), "{upstream_calls:?}");
    for path in [&transcript, &sent, &got] {
        let _ = std::fs::remove_file(path);
    }
}
