//! Issue 25.1: input for a task whose client never calls `tasks/result`
//! before the task ends. The official TypeScript SDK client
//! (`@modelcontextprotocol/sdk` 1.32.2, `tests/peers/poll_only_client.mjs`)
//! with an elicitation handler runs the 2026-07-28 reference server's
//! `confirm_delete` (one question) and `multi_input` (two at once) as tasks
//! through the shim, over stdio and over Streamable HTTP:
//!
//! - `--mode poll`: it polls only `tasks/get` until the task is terminal,
//!   then calls `tasks/result`. The shim must send the questions itself;
//!   before, the task stayed `input_required` until the client gave up.
//! - `--mode result`: it polls until `input_required`, then waits on
//!   `tasks/result`, which the questions may come on.
//!
//! Either way each question reaches the client exactly once, tagged with
//! its task, and the task completes with the answers. Everything the shim
//! sent is validated against the 2025-11-25 schema.
//!
//! Needs Node and `tests/peers/node_modules`: run `scripts/test.sh`.

mod support;

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value;
use support::http::HttpShim;
use support::peers::{ScriptRun, read_transcript, run_peer_script};
use support::schema::{Revision, assert_conversation_valid};
use support::wire::{modern_reference, shim_bin, temp_path};

/// The script bounds itself at 60 s; this is the backstop.
const TIMEOUT: Duration = Duration::from_secs(90);

const RELATED_TASK: &str = "/params/_meta/io.modelcontextprotocol~1related-task/taskId";

const CHECKS: &[&str] = &[
    "initialize",
    "confirm_delete",
    "multi_input",
    "no question twice",
];

/// The script in `mode` through `mcp-tasks-shim stdio` (recording what it
/// sends) in front of the modern reference server; the shim's record.
fn over_stdio(mode: &str) -> (ScriptRun, Vec<(String, Value)>) {
    let record = temp_path(&format!("direct-input-{mode}-record.jsonl"));
    let record_arg = record.to_string_lossy().into_owned();
    let mut args = vec!["--mode", mode, "--", shim_bin(), "stdio", "--record"];
    args.push(&record_arg);
    args.push("--");
    let upstream = modern_reference();
    args.extend(upstream.iter().map(String::as_str));
    let run = run_peer_script("poll_only_client.mjs", &args, TIMEOUT);
    let recorded = read_transcript(&record);
    let _ = std::fs::remove_file(&record);
    (run, recorded)
}

/// The script in `mode` against `mcp-tasks-shim http` in front of the
/// modern reference server; what the client saw on the wire.
fn over_http(mode: &str) -> (ScriptRun, Vec<(String, Value)>) {
    let shim = HttpShim::spawn(&[], &modern_reference());
    let view = temp_path(&format!("direct-input-{mode}-http-view.jsonl"));
    let view_arg = view.to_string_lossy().into_owned();
    let args = [
        "--mode",
        mode,
        "--transcript",
        &view_arg,
        "--http",
        &shim.url,
    ];
    let run = run_peer_script("poll_only_client.mjs", &args, TIMEOUT);
    let seen = read_transcript(&view);
    let _ = std::fs::remove_file(&view);
    (run, seen)
}

/// What the client side of the conversation shows: all of it 2025-11-25,
/// three questions (one task's one, another's two), each sent once under
/// one id, tagged with its task, and answered.
#[track_caller]
fn assert_each_question_once(run: &ScriptRun, wire: &[(String, Value)]) {
    run.assert_checks(CHECKS);
    assert_conversation_valid(
        wire.iter()
            .map(|(dir, msg)| (Revision::Legacy, dir.as_str(), msg)),
    );
    let questions: Vec<&Value> = wire
        .iter()
        .filter(|(d, m)| d == "s2c" && m["method"] == "elicitation/create")
        .map(|(_, m)| m)
        .collect();
    assert_eq!(questions.len(), 3, "{questions:#?}");
    let mut ids = HashSet::new();
    let mut asked = HashSet::new();
    for q in &questions {
        assert!(ids.insert(q["id"].to_string()), "id sent twice: {q}");
        let task = q.pointer(RELATED_TASK).and_then(Value::as_str);
        assert!(task.is_some(), "untagged task question: {q}");
        let message = q["params"]["message"].to_string();
        assert!(asked.insert((task, message)), "question asked twice: {q}");
        assert!(
            wire.iter()
                .any(|(d, m)| d == "c2s" && m["id"] == q["id"] && m.get("result").is_some()),
            "question {} answered",
            q["id"]
        );
    }
}

#[test]
fn a_client_polling_only_tasks_get_over_stdio_gets_each_question_once() {
    let (run, recorded) = over_stdio("poll");
    assert_each_question_once(&run, &recorded);
}

#[test]
fn a_client_waiting_on_tasks_result_over_stdio_gets_each_question_once() {
    let (run, recorded) = over_stdio("result");
    assert_each_question_once(&run, &recorded);
}

#[test]
fn a_client_polling_only_tasks_get_over_http_gets_each_question_once() {
    let (run, seen) = over_http("poll");
    assert_each_question_once(&run, &seen);
}

#[test]
fn a_client_waiting_on_tasks_result_over_http_gets_each_question_once() {
    let (run, seen) = over_http("result");
    assert_each_question_once(&run, &seen);
}
