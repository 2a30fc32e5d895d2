//! Modern clients against a legacy server, with a real third-party client:
//! the official Rust SDK (`rmcp` 3.11, `server/discover` lifecycle, tasks
//! extension declared) talks to the real binary running
//! `mcp-tasks-shim stdio --record FILE -- mcp-tasks-shim reference-server --revision 2025-11-25`.
//! It discovers, lists, creates tasks, polls them, reads results inline,
//! answers mid-task input with `tasks/update` (all at once, and partially),
//! runs the MRTR round before a task, cancels; a second client without the
//! extension gets -32021. The shim's own transcript of each conversation is
//! validated against the 2026-07-28 schemas, message by message.
//!
//! What rmcp cannot send is covered in `modern_front_wire.rs`.

mod modern_front_common;
mod support;

use std::path::Path;
use std::time::Duration;

use modern_front_common::{STEP, legacy_reference, record_path, spawn_shim};
use rmcp::ServiceError;
use rmcp::model::*;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use serde_json::{Value, json};
use support::schema::{Revision, assert_conversation_valid};
use tokio::process::Child;
use tokio::time::timeout;

type Client = rmcp::Peer<rmcp::RoleClient>;

async fn connect(
    record: &Path,
    with_tasks: bool,
) -> (Child, RunningService<rmcp::RoleClient, ClientConfig>) {
    let record = record.to_str().unwrap();
    let mut shim = spawn_shim(&["--record", record], &legacy_reference());
    let transport = (shim.stdout.take().unwrap(), shim.stdin.take().unwrap());
    let caps = ClientCapabilities::builder().enable_elicitation();
    let caps = if with_tasks {
        caps.enable_tasks().build()
    } else {
        caps.build()
    };
    let config = ClientConfig::new(
        caps,
        Implementation::new("mcp-tasks-shim-rmcp-peer", "1.0.0"),
    );
    let running = config
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover through the shim");
    (shim, running)
}

/// Closes the client, waits for the shim to exit, and validates every
/// message of its transcript against the 2026-07-28 schemas.
async fn finish(
    mut shim: Child,
    running: RunningService<rmcp::RoleClient, ClientConfig>,
    record: &Path,
) {
    running.cancel().await.expect("close client");
    let status = timeout(Duration::from_secs(10), shim.wait())
        .await
        .expect("the shim exits after its client")
        .unwrap();
    assert!(status.success(), "{status}");
    let text = std::fs::read_to_string(record).expect("the shim wrote its transcript");
    let conversation: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("transcript lines are JSON"))
        .collect();
    assert!(
        conversation
            .iter()
            .any(|r| r["dir"] == "s2c" && r["msg"]["result"]["supportedVersions"].is_array()),
        "the transcript holds the discover answer"
    );
    assert_conversation_valid(conversation.iter().map(|r| {
        (
            Revision::Modern,
            r["dir"].as_str().unwrap_or("?"),
            &r["msg"],
        )
    }));
}

fn mcp_code(e: &ServiceError) -> Option<i32> {
    match e {
        ServiceError::McpError(d) => Some(d.code.0),
        _ => None,
    }
}

async fn poll<F: Fn(&GetTaskResult) -> bool>(client: &Client, id: &str, done: F) -> GetTaskResult {
    let deadline = tokio::time::Instant::now() + STEP;
    loop {
        let t = client
            .get_task(GetTaskParams::new(id))
            .await
            .expect("tasks/get");
        if done(&t) {
            return t;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "task {id} stuck: {t:?}"
        );
        let pause = t.task.task.poll_interval_ms.unwrap_or(100).min(200);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

fn terminal(t: &GetTaskResult) -> bool {
    t.task.status().is_terminal()
}

fn result_text(t: &GetTaskResult) -> String {
    match &t.task.payload {
        TaskPayload::Completed { result } => result["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        other => panic!("expected a completed task, got {other:?}"),
    }
}

fn input_keys(t: &GetTaskResult) -> Vec<String> {
    match &t.task.payload {
        TaskPayload::InputRequired { input_requests } => input_requests.keys().cloned().collect(),
        other => panic!("expected input_required, got {other:?}"),
    }
}

fn params(name: &'static str, args: Value) -> CallToolRequestParams {
    let p = CallToolRequestParams::new(name);
    match args {
        Value::Object(m) => p.with_arguments(m),
        _ => p,
    }
}

async fn create(client: &Client, name: &'static str, args: Value) -> String {
    match client
        .call_tool_once(params(name, args))
        .await
        .expect("tools/call")
    {
        CallToolResponse::Task(t) => {
            assert_eq!(t.task.status, TaskStatus::Working, "{name}: {t:?}");
            t.task.task_id
        }
        other => panic!("{name}: expected a task, got {other:?}"),
    }
}

fn responses(pairs: &[(&str, Value)]) -> InputResponses {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn rmcp_client_with_tasks_through_the_shim() {
    timeout(Duration::from_secs(45), with_tasks())
        .await
        .expect("rmcp flow timed out");
}

async fn with_tasks() {
    let record = record_path("modern-front-rmcp");
    let (shim, running) = connect(&record, true).await;
    let client = running.peer().clone();

    // server/discover, answered from the legacy InitializeResult.
    let info = running.peer_info().expect("discover result");
    let server = info.server_info.clone().expect("serverInfo moved to _meta");
    assert_eq!(server.name, "mcp-tasks-shim-reference", "{server:?}");

    // tools/list: the conformance tool set, without the 2025 `execution`.
    let tools = client.list_all_tools().await.expect("tools/list");
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    for n in [
        "greet",
        "slow_compute",
        "failing_job",
        "protocol_error_job",
        "confirm_delete",
        "multi_input",
        "test_tool_with_task",
    ] {
        assert!(names.contains(&n.to_owned()), "{n} listed: {names:?}");
    }

    // A forbidden tool answers plainly even with the extension declared.
    match client
        .call_tool_once(params("greet", json!({"name": "World"})))
        .await
        .expect("greet")
    {
        CallToolResponse::Complete(r) => {
            assert_eq!(r.content[0].as_text().unwrap().text, "Hello, World!")
        }
        other => panic!("greet: {other:?}"),
    }

    // Create + poll + inline result.
    let id = create(
        &client,
        "slow_compute",
        json!({"seconds": 0.3, "label": "rmcp"}),
    )
    .await;
    let t = poll(&client, &id, terminal).await;
    assert_eq!(t.task.status(), TaskStatus::Completed);
    assert!(result_text(&t).contains("rmcp"));

    // One question mid-task; an unknown key in the answer is ignored.
    let id = create(&client, "confirm_delete", json!({"filename": "a.txt"})).await;
    let t = poll(&client, &id, |t| {
        t.task.status() == TaskStatus::InputRequired
    })
    .await;
    let keys = input_keys(&t);
    assert_eq!(keys.len(), 1, "{keys:?}");
    let answer = json!({"action": "accept", "content": {"confirm": true}});
    client
        .update_task(UpdateTaskParams::new(
            &id,
            responses(&[
                (&keys[0], answer),
                ("never-issued", json!({"action": "decline"})),
            ]),
        ))
        .await
        .expect("tasks/update");
    assert_eq!(
        result_text(&poll(&client, &id, terminal).await),
        "Deleted a.txt"
    );

    // Two questions at once, the first answered alone: the task stays
    // input_required with the other one; the second answer completes it.
    let id = create(&client, "multi_input", json!({})).await;
    let t = poll(&client, &id, |t| matches!(&t.task.payload, TaskPayload::InputRequired { input_requests } if input_requests.len() == 2)).await;
    let keys = input_keys(&t);
    let first = json!({"action": "accept", "content": {"name": "Alice"}});
    client
        .update_task(UpdateTaskParams::new(&id, responses(&[(&keys[0], first)])))
        .await
        .expect("partial update");
    let t = poll(&client, &id, |t| match &t.task.payload {
        TaskPayload::InputRequired { input_requests } => input_requests.len() == 1,
        _ => false,
    })
    .await;
    assert_eq!(t.task.status(), TaskStatus::InputRequired);
    assert_eq!(
        input_keys(&t),
        vec![keys[1].clone()],
        "only the unanswered key remains"
    );
    let second = json!({"action": "accept", "content": {"confirm": true}});
    client
        .update_task(UpdateTaskParams::new(
            &id,
            responses(&[(&keys[1], second), (&keys[0], json!({"action": "decline"}))]),
        ))
        .await
        .expect("second update (an answered key again is ignored)");
    let text = result_text(&poll(&client, &id, terminal).await);
    assert!(text.contains("Alice") && text.contains("true"), "{text}");

    // MRTR round before the task exists, then the task.
    let first = client
        .call_tool_once(CallToolRequestParams::new("test_tool_with_task"))
        .await
        .expect("round 1");
    let CallToolResponse::InputRequired(ir) = first else {
        panic!("round 1: {first:?}")
    };
    let requests = ir.input_requests.expect("inputRequests");
    assert_eq!(requests.len(), 1, "{requests:?}");
    let key = requests.keys().next().unwrap().clone();
    let state = ir.request_state.expect("a signed requestState");
    let retry = CallToolRequestParams::new("test_tool_with_task")
        .with_input_responses(responses(&[(
            &key,
            json!({"action": "accept", "content": {"name": "Alice"}}),
        )]))
        .with_request_state(state);
    let CallToolResponse::Task(created) = client.call_tool_once(retry).await.expect("round 2")
    else {
        panic!("round 2 must create a task")
    };
    assert!(result_text(&poll(&client, &created.task.task_id, terminal).await).contains("Alice"));

    // Legacy `failed` + isError → completed with the result; a JSON-RPC
    // error → failed with the error.
    let id = create(&client, "failing_job", json!({})).await;
    let t = poll(&client, &id, terminal).await;
    assert!(
        matches!(&t.task.payload, TaskPayload::Completed { result } if result["isError"] == true),
        "{t:?}"
    );
    let id = create(&client, "protocol_error_job", json!({})).await;
    let t = poll(&client, &id, terminal).await;
    assert!(
        matches!(&t.task.payload, TaskPayload::Failed { error } if error["code"] == -32603),
        "{t:?}"
    );

    // Cancel: ack, settles to cancelled, a second cancel is acked too.
    let id = create(
        &client,
        "slow_compute",
        json!({"seconds": 30, "label": "rmcp-cancel"}),
    )
    .await;
    client
        .cancel_task(CancelTaskParams::new(&id))
        .await
        .expect("tasks/cancel");
    assert_eq!(
        poll(&client, &id, terminal).await.task.status(),
        TaskStatus::Cancelled
    );
    client
        .cancel_task(CancelTaskParams::new(&id))
        .await
        .expect("cancel of a terminal task is acked");

    // Unknown ids.
    let e = client
        .get_task(GetTaskParams::new("no-such-task"))
        .await
        .expect_err("unknown id");
    assert_eq!(mcp_code(&e), Some(-32602), "{e}");

    finish(shim, running, &record).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rmcp_client_without_tasks_through_the_shim() {
    timeout(Duration::from_secs(30), without_tasks())
        .await
        .expect("rmcp flow timed out");
}

async fn without_tasks() {
    let record = record_path("modern-front-rmcp-no-tasks");
    let (shim, running) = connect(&record, false).await;
    let client = running.peer().clone();

    // tasks/get without the extension: -32021 (before any lookup).
    let e = client
        .get_task(GetTaskParams::new("no-such-task"))
        .await
        .expect_err("-32021");
    assert_eq!(mcp_code(&e), Some(-32021), "{e}");
    // A tool the legacy server runs only as a task: -32021.
    let e = client
        .call_tool_once(params("confirm_delete", json!({"filename": "a"})))
        .await
        .expect_err("-32021");
    assert_eq!(mcp_code(&e), Some(-32021), "{e}");
    // An optional one runs as a plain call.
    match client
        .call_tool_once(params(
            "slow_compute",
            json!({"seconds": 0, "label": "plain"}),
        ))
        .await
        .expect("plain")
    {
        CallToolResponse::Complete(r) => {
            assert!(r.content[0].as_text().unwrap().text.contains("plain"))
        }
        other => panic!("{other:?}"),
    }

    finish(shim, running, &record).await;
}
