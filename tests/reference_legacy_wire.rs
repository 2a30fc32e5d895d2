//! The 2025-11-25 reference server on the raw wire: what an SDK client
//! will not send. A malformed `params.task` (schema `TaskMetadata`: an
//! object whose `ttl` is an integer) is the caller's error; before, the
//! server ran such a call as a task with its default retention, or as a
//! plain call, and a shim under test never saw the refusal a real server
//! would give. Every message the server emits is validated against the
//! 2025-11-25 schema.

mod support;

use std::process::Command;

use serde_json::{Value, json};
use support::schema::Revision;
use support::wire::{Wire, shim_bin};

fn legacy_server() -> Wire {
    let mut cmd = Command::new(shim_bin());
    cmd.args(["reference-server", "--revision", "2025-11-25"]);
    let mut w = Wire::from_command(cmd, Revision::Legacy);
    w.ok(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "raw", "version": "0"}}),
    );
    w.notify("notifications/initialized", json!({}));
    w
}

fn slow(task: Value) -> Value {
    json!({"name": "slow_compute", "arguments": {"seconds": 0}, "task": task})
}

#[test]
fn a_malformed_params_task_is_invalid_params() {
    let mut w = legacy_server();
    for (task, why) in [
        (json!(5), "must be an object"),
        (json!("yes"), "must be an object"),
        (json!({"ttl": "60000"}), "ttl must be"),
        (json!({"ttl": -1}), "ttl must be"),
        (json!({"ttl": 1.5}), "ttl must be"),
    ] {
        let answer = w.call("tools/call", slow(task.clone()));
        let error = &answer["error"];
        assert_eq!(error["code"], -32602, "params.task {task}: {answer}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains(why), "params.task {task}: {message}");
    }
    // Well-formed ones still make tasks, with and without a ttl.
    for task in [json!({}), json!({"ttl": 60000})] {
        let created = w.ok("tools/call", slow(task.clone()));
        assert!(
            created["task"]["taskId"].is_string(),
            "params.task {task}: {created}"
        );
    }
    assert_eq!(
        w.ok("tools/call", slow(json!({"ttl": 60000})))["task"]["ttl"],
        60000
    );
}

/// At the end of its input the server answers the calls it was asked (a
/// slow plain call included, see `stdio_client_eof`), but does not wait
/// for a blocking `tasks/result` of a task still running: it exits at
/// once, so a shim stopping it is not held for its grace period by a job
/// that may run for hours.
#[test]
fn a_blocking_tasks_result_does_not_hold_the_exit() {
    let mut w = legacy_server();
    let created = w.ok(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 30}, "task": {"ttl": 60000}}),
    );
    let id = created["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    w.request("tasks/result", json!({"taskId": id}));
    w.ok("ping", json!({}));
    w.close_stdin();
    let started = std::time::Instant::now();
    let status = w
        .wait_exit(std::time::Duration::from_secs(10))
        .expect("the server exits");
    assert!(status.success(), "{status}");
    let took = started.elapsed();
    // A server held by the waiting request would exit only at the end of
    // its 3 s drain, which begins after its input closed: anything short
    // of that is the exit at once (the widest bound that still tells).
    assert!(took < std::time::Duration::from_secs(3), "took {took:?}");
}

/// `external_job` (a fixture third-party 2025-11-25 suites call) is
/// task-required: listed so, refused without `params.task` (-32601) or
/// without `job_id` (-32602), and its task's result names the job.
#[test]
fn external_job_is_a_required_task_naming_its_job() {
    let mut w = legacy_server();
    let tools = w.ok("tools/list", json!({}));
    let tool = tools["tools"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["name"] == "external_job"))
        .cloned()
        .unwrap_or_else(|| panic!("external_job listed: {tools}"));
    assert_eq!(tool["execution"]["taskSupport"], "required", "{tool}");
    assert_eq!(
        tool["inputSchema"],
        json!({"type": "object", "properties": {"job_id": {"type": "string"}},
            "required": ["job_id"]}),
        "{tool}"
    );
    let plain = w.call(
        "tools/call",
        json!({"name": "external_job", "arguments": {"job_id": "j-1"}}),
    );
    assert_eq!(plain["error"]["code"], -32601, "{plain}");
    let missing = w.call(
        "tools/call",
        json!({"name": "external_job", "arguments": {}, "task": {}}),
    );
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    let created = w.ok(
        "tools/call",
        json!({"name": "external_job", "arguments": {"job_id": "j-1"}, "task": {"ttl": 60000}}),
    );
    assert_eq!(created["task"]["status"], "working", "{created}");
    let task_id = created["task"]["taskId"].clone();
    let result = w.ok("tasks/result", json!({"taskId": task_id}));
    assert_eq!(
        support::wire::text_of(&result),
        "Job j-1 completed by the external worker",
        "{result}"
    );
    let got = w.ok("tasks/get", json!({"taskId": task_id}));
    assert_eq!(got["status"], "completed", "{got}");
}
