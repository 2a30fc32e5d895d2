//! Issue 28's rmcp examples (feature `rmcp`), driven by the official
//! TypeScript SDK 1.32.2 legacy client (`tests/peers/legacy_client.mjs
//! --profile rmcp`):
//!
//! - `examples/rmcp_stdio_in_process`: the rmcp reference server on a duplex
//!   pair behind the shim, the binary's own stdin/stdout the 2025-11-25
//!   client side. The client launches the binary like any stdio server.
//! - `examples/rmcp_layer`: rmcp's `StreamableHttpService` on axum behind
//!   `TasksCompatLayer`, on 127.0.0.1:0; the client speaks Streamable HTTP
//!   (`StreamableHTTPClientTransport`) and is served by the layer's legacy
//!   front, whose upstream is the rmcp service in the same process. (Its
//!   2026-07-28 pass-through is what `scripts/conformance.sh rmcp-layer`
//!   checks: 44/44.)
//!
//! The profile checks the server's declared `taskSupport` (greet forbidden,
//! slow_compute optional, the task-only tools required, refusals of each
//! misuse), task calls completing through blocking `tasks/result`,
//! `isError` → `failed`, a JSON-RPC error, elicitation while
//! `input_required` (confirm_delete) and before the task exists
//! (test_tool_with_task, rmcp's MRTR), two questions at once, cancel,
//! `tasks/list` and status notifications. Everything the example emitted
//! to the client validates against the 2025-11-25 schema.
//!
//! The server's own checks where rmcp's task manager has none (an accepted
//! form lacking a required answer, a forged MRTR `requestState`) are
//! driven over `mcp_tasks_shim::rmcp::link`, the in-process pair the stdio
//! example uses, with 2026-07-28 requests.
//!
//! The examples are built by `cargo test --features rmcp` (all targets);
//! when running this file alone, build them first:
//! `cargo build --features rmcp --examples`.
//! Needs Node and `tests/peers/node_modules`: run `scripts/test.sh`.

mod support;

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::peers::{read_transcript, run_legacy_client, run_legacy_client_http};
use support::schema::{Revision, assert_conversation_valid};
use support::wire::temp_path;

/// The script bounds itself at 60 s; this is the backstop.
const TIMEOUT: Duration = Duration::from_secs(90);

/// The checks `legacy_client.mjs --profile rmcp` runs.
const RMCP_PROFILE_CHECKS: &[&str] = &[
    "initialize",
    "tools/list taskSupport",
    "plain call",
    "create + poll + result",
    "tasks/result blocks",
    "tool error ends failed",
    "protocol error",
    "elicitation during input_required",
    "callToolStream, task chosen by the SDK",
    "callToolStream, failed task",
    "two elicitations at once",
    "input before the task exists",
    "cancel",
    "unknown task id",
    "tasks/list pages",
    "taskSupport violations",
    "status notifications",
];

/// An example of the `rmcp` feature, built.
fn example(name: &str) -> PathBuf {
    support::example_binary(name, "rmcp")
}

/// The `taskSupport` the rmcp reference server declares for each tool.
fn declared_support() -> Value {
    json!({
        "greet": "forbidden",
        "slow_compute": "optional",
        "failing_job": "required",
        "protocol_error_job": "required",
        "confirm_delete": "required",
        "multi_input": "required",
        "test_tool_with_task": "required",
        "summarize": "required",
        "external_job": "required",
    })
}

/// What a legacy client saw: schema-valid 2025-11-25 only, no modern
/// member leaking through, and the confirm_delete question tagged with its
/// task.
fn check_client_view(seen: &[(String, Value)]) {
    assert!(seen.len() > 50, "transcript too short: {}", seen.len());
    assert_conversation_valid(
        seen.iter()
            .map(|(dir, msg)| (Revision::Legacy, dir.as_str(), msg)),
    );
    let s2c: Vec<&Value> = seen
        .iter()
        .filter(|(d, _)| d == "s2c")
        .map(|(_, m)| m)
        .collect();
    for m in &s2c {
        let text = m.to_string();
        for modern in ["resultType", "ttlMs", "pollIntervalMs", "inputRequests"] {
            assert!(
                !text.contains(&format!("\"{modern}\"")),
                "modern field {modern} sent to a legacy client: {m}"
            );
        }
    }
    let confirm = s2c
        .iter()
        .find(|m| {
            m["method"] == "elicitation/create" && m["params"]["message"] == "Delete notes.txt?"
        })
        .unwrap_or_else(|| panic!("confirm_delete's question was sent: {s2c:#?}"));
    assert!(
        confirm
            .pointer("/params/_meta/io.modelcontextprotocol~1related-task/taskId")
            .is_some(),
        "{confirm}"
    );
}

#[test]
fn ts_sdk_legacy_client_against_the_rmcp_stdio_example() {
    let bin = example("rmcp_stdio_in_process");
    let view = temp_path("rmcp-stdio-client-view.jsonl");
    let run = run_legacy_client("rmcp", &view, &[bin.to_string_lossy()], TIMEOUT);
    run.assert_checks(RMCP_PROFILE_CHECKS);
    assert_eq!(
        run.check("tools/list taskSupport")["support"],
        declared_support(),
        "{}",
        run.out
    );
    let seen = read_transcript(&view);
    let _ = std::fs::remove_file(&view);
    check_client_view(&seen);
}

/// The `rmcp_layer` example on a free loopback port, killed on drop.
struct LayerExample {
    child: Child,
    url: String,
}

impl LayerExample {
    fn start() -> LayerExample {
        let mut child = Command::new(example("rmcp_layer"))
            .args(["--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the rmcp_layer example");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        // The example says where it listens once it accepts connections;
        // the rest of its stderr is drained so it never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix("listening on ") {
                    let _ = tx.send(url.to_owned());
                } else {
                    eprintln!("rmcp_layer: {line}");
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("rmcp_layer printed its address within 30 s");
        LayerExample { child, url }
    }
}

impl Drop for LayerExample {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn ts_sdk_legacy_client_against_the_rmcp_layer_example_over_http() {
    let server = LayerExample::start();
    let view = temp_path("rmcp-layer-client-view.jsonl");
    let run = run_legacy_client_http("rmcp", &view, &server.url, TIMEOUT);
    run.assert_checks(RMCP_PROFILE_CHECKS);
    assert_eq!(
        run.check("tools/list taskSupport")["support"],
        declared_support(),
        "{}",
        run.out
    );
    let seen = read_transcript(&view);
    let _ = std::fs::remove_file(&view);
    check_client_view(&seen);
}

/// 2026-07-28 `_meta` declaring the tasks extension and elicitation.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {"io.modelcontextprotocol/tasks": {}},
            "elicitation": {"form": {}}
        },
        "io.modelcontextprotocol/clientInfo": {"name": "rmcp-examples-test", "version": "1"}
    })
}

async fn call(
    link: &mcp_tasks_shim::upstream::Link,
    method: &str,
    mut params: Value,
) -> Result<Value, (i64, String)> {
    params["_meta"] = modern_meta();
    let answer = tokio::time::timeout(
        Duration::from_secs(10),
        link.upstream.request(method, params),
    )
    .await
    .expect("an answer in time")
    .expect("the in-process server is there");
    answer.map_err(|e| (e.code, e.message))
}

async fn task_in(link: &mcp_tasks_shim::upstream::Link, id: &str, status: &str) -> Value {
    let what = format!("task {id} to reach {status}");
    support::poll::until_async(&what, Duration::from_secs(5), || async move {
        let t = call(link, "tasks/get", json!({"taskId": id}))
            .await
            .unwrap();
        (t["status"] == status).then_some(t)
    })
    .await
}

#[tokio::test]
async fn the_rmcp_server_refuses_an_incomplete_form_and_a_forged_request_state() {
    use mcp_tasks_shim::driver::stdio::ProxyOptions;
    use mcp_tasks_shim::reference::rmcp::RmcpReferenceServer;
    use mcp_tasks_shim::revision::Revision as Rev;

    let link =
        mcp_tasks_shim::rmcp::link(RmcpReferenceServer::new(), &ProxyOptions::default()).await;
    assert_eq!(link.revision(), Rev::Modern, "{}", link.discover);

    // An accepted form without the required `confirm` is refused, and the
    // question stays open; a complete one is taken and reaches the tool.
    let created = call(
        &link,
        "tools/call",
        json!({"name": "confirm_delete", "arguments": {"filename": "a.txt"}}),
    )
    .await
    .unwrap();
    assert_eq!(created["resultType"], "task", "{created}");
    let id = created["taskId"].as_str().unwrap().to_owned();
    let waiting = task_in(&link, &id, "input_required").await;
    let key = waiting["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .unwrap_or_else(|| panic!("{waiting}"));
    let refused = call(
        &link,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {&key: {"action": "accept", "content": {}}}}),
    )
    .await
    .unwrap_err();
    assert_eq!(refused.0, -32602, "{refused:?}");
    assert!(refused.1.contains("confirm"), "{refused:?}");
    let still = task_in(&link, &id, "input_required").await;
    assert!(still["inputRequests"].get(&key).is_some(), "{still}");
    call(
        &link,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {&key: {"action": "accept", "content": {"confirm": true}}}}),
    )
    .await
    .unwrap();
    let done = task_in(&link, &id, "completed").await;
    assert_eq!(
        done["result"]["content"][0]["text"], "Deleted a.txt",
        "{done}"
    );

    // MRTR before the task: a requestState the server did not seal is
    // refused; the one it sealed creates the task.
    let ask = json!({"name": "test_tool_with_task", "arguments": {}});
    let round_one = call(&link, "tools/call", ask.clone()).await.unwrap();
    assert_eq!(round_one["resultType"], "input_required", "{round_one}");
    assert!(round_one.get("taskId").is_none(), "{round_one}");
    let state = round_one["requestState"].as_str().unwrap().to_owned();
    let answer = json!({"user_name": {"action": "accept", "content": {"name": "Bob"}}});
    let mut forged = ask.clone();
    forged["inputResponses"] = answer.clone();
    forged["requestState"] = json!(format!("{state}x"));
    let refused = call(&link, "tools/call", forged).await.unwrap_err();
    assert_eq!(refused.0, -32602, "{refused:?}");
    let mut retry = ask;
    retry["inputResponses"] = answer;
    retry["requestState"] = json!(state);
    let task = call(&link, "tools/call", retry).await.unwrap();
    assert_eq!(task["resultType"], "task", "{task}");
    assert!(task.get("requestState").is_none(), "{task}");
    let done = task_in(&link, task["taskId"].as_str().unwrap(), "completed").await;
    assert_eq!(
        done["result"]["content"][0]["text"],
        "Hello, Bob! (name gathered before the task was created)",
        "{done}"
    );
}
