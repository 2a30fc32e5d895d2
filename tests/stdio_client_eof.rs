//! A stdio client closing its side (stdin) while the session still has
//! work: the real shim binary over real pipes, in front of the reference
//! server as a real child process.
//!
//! - A question the shim put to the client (`elicitation/create`) that the
//!   client leaves unanswered does not keep the shim alive: the request
//!   waiting on it is answered with an error and the shim exits 0.
//!
//! Every wait is bounded.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::wire::{REQUEST_TIMEOUT, Wire};

/// How long the shim may take to exit once its client has closed stdin
/// (the guide: the child gets 3 s before it is killed).
const EXIT: Duration = Duration::from_secs(6);

/// Legacy client, modern upstream: the client is asked to confirm and
/// leaves instead of answering, while `waiting` (sent by `start`) waits
/// for that answer.
fn leaving_with_an_elicitation_unanswered(start: impl FnOnce(&mut Wire) -> Value) {
    let mut shim = Wire::legacy_front(&[]);
    shim.initialize();
    shim.auto_answer = false;
    let waiting = start(&mut shim);
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let m = shim
            .next(left)
            .expect("the shim asks the client to confirm");
        if m["method"] == "elicitation/create" {
            break;
        }
    }
    shim.close_stdin();
    let status = shim
        .wait_exit(EXIT)
        .expect("the shim exits after its client closed stdin, question unanswered");
    assert!(status.success(), "exit status {status}");
    let answer = shim
        .take_backlog()
        .into_iter()
        .find(|m| m["id"] == waiting && m.get("method").is_none())
        .expect("the waiting request is answered");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
}

#[test]
fn an_unanswered_elicitation_in_a_call_does_not_keep_the_shim_alive() {
    leaving_with_an_elicitation_unanswered(|shim| {
        shim.request(
            "tools/call",
            json!({"name": "confirm_delete", "arguments": {"filename": "x"}}),
        )
    });
}

#[test]
fn an_unanswered_elicitation_in_a_blocking_tasks_result_does_not_keep_the_shim_alive() {
    leaving_with_an_elicitation_unanswered(|shim| {
        let created = shim.ok(
            "tools/call",
            json!({"name": "confirm_delete", "arguments": {"filename": "x"},
                "task": {"ttl": 60_000}}),
        );
        let id = created["task"]["taskId"].clone();
        assert!(id.is_string(), "{created}");
        shim.request("tasks/result", json!({"taskId": id}))
    });
}
