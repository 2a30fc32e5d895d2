//! The official Rust SDK's client (`rmcp` 3.11) driving the reference tool
//! set through the 2026-07-28 tasks extension: one scenario, run against
//! the 2026-07-28 reference server directly (`reference_modern_rmcp`) and
//! through the shim in front of the 2025-11-25 one (`modern_front_rmcp`),
//! so both paths are held to the same behaviour.
//!
//! Included with `#[path]` by the two rmcp tests only, so the other test
//! crates do not compile rmcp's client; `pub` for the same reason as in
//! `support`.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::*;
use serde_json::{Value, json};

/// The client side of a running rmcp session.
pub type Client = rmcp::Peer<rmcp::RoleClient>;

/// How long one task may take to reach the state a step waits for.
pub const STEP: Duration = Duration::from_secs(15);

/// What differs between the two servers the scenario runs against.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    /// The key the MRTR round of `test_tool_with_task` asks under, when
    /// the server names it (the shim derives its own).
    pub mrtr_key: Option<&'static str>,
    /// Whether the MRTR answer must carry a `requestState` (the shim signs
    /// one; the reference server keeps no state between rounds).
    pub request_state: bool,
}

/// The JSON-RPC code of an error answer.
pub fn mcp_code(e: &ServiceError) -> Option<i32> {
    match e {
        ServiceError::McpError(d) => Some(d.code.0),
        _ => None,
    }
}

/// Polls `tasks/get` at the server's interval (at most 200 ms) until `done`.
pub async fn poll<F: Fn(&GetTaskResult) -> bool>(
    client: &Client,
    id: &str,
    done: F,
) -> GetTaskResult {
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

/// Whether the task has ended.
pub fn terminal(t: &GetTaskResult) -> bool {
    t.task.status().is_terminal()
}

/// The first text block of a completed task's result.
pub fn result_text(t: &GetTaskResult) -> String {
    match &t.task.payload {
        TaskPayload::Completed { result } => result["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned(),
        other => panic!("expected a completed task, got {other:?}"),
    }
}

/// The keys of an `input_required` task's outstanding questions.
pub fn input_keys(t: &GetTaskResult) -> Vec<String> {
    match &t.task.payload {
        TaskPayload::InputRequired { input_requests } => input_requests.keys().cloned().collect(),
        other => panic!("expected input_required, got {other:?}"),
    }
}

/// `tools/call` params for `name` with object `args`.
pub fn params(name: &'static str, args: Value) -> CallToolRequestParams {
    let p = CallToolRequestParams::new(name);
    match args {
        Value::Object(m) => p.with_arguments(m),
        _ => p,
    }
}

/// Calls `name`, which must answer with a `working` task; its id.
pub async fn create(client: &Client, name: &'static str, args: Value) -> String {
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

/// Input responses keyed by question.
pub fn responses(pairs: &[(&str, Value)]) -> InputResponses {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

/// The whole repertoire: the tool set is listed, a forbidden tool answers
/// plainly, tasks complete, ask one and two questions (answered through
/// `tasks/update`, all at once and partially), the MRTR round runs before
/// a task, tool and protocol errors end `completed`/`failed`, cancel
/// settles, and unknown ids are `-32602`.
pub async fn task_repertoire(client: &Client, expect: Expect) {
    listed_and_plain(client).await;

    let id = create(
        client,
        "slow_compute",
        json!({"seconds": 0.3, "label": "rmcp"}),
    )
    .await;
    let t = poll(client, &id, terminal).await;
    assert_eq!(t.task.status(), TaskStatus::Completed);
    assert!(result_text(&t).contains("rmcp"));

    questions(client).await;
    mrtr_round(client, expect).await;
    errors_and_cancel(client).await;
}

async fn listed_and_plain(client: &Client) {
    // The conformance tool set, without the 2025 `execution` member.
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
}

async fn questions(client: &Client) {
    // One question mid-task; an unknown key in the answer is ignored.
    let id = create(client, "confirm_delete", json!({"filename": "a.txt"})).await;
    let t = poll(client, &id, |t| {
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
        result_text(&poll(client, &id, terminal).await),
        "Deleted a.txt"
    );

    // Two questions at once, the name question answered alone: the task
    // stays input_required with the other; the second answer completes it.
    let id = create(client, "multi_input", json!({})).await;
    let two = |t: &GetTaskResult| matches!(&t.task.payload, TaskPayload::InputRequired { input_requests } if input_requests.len() == 2);
    let mut keys = input_keys(&poll(client, &id, two).await);
    // The server checks each form has what it asked for: name first.
    keys.sort_by_key(|k| !k.starts_with("name"));
    let first = json!({"action": "accept", "content": {"name": "Alice"}});
    client
        .update_task(UpdateTaskParams::new(&id, responses(&[(&keys[0], first)])))
        .await
        .expect("partial update");
    let one = |t: &GetTaskResult| matches!(&t.task.payload, TaskPayload::InputRequired { input_requests } if input_requests.len() == 1);
    let t = poll(client, &id, one).await;
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
    let text = result_text(&poll(client, &id, terminal).await);
    assert!(text.contains("Alice") && text.contains("true"), "{text}");
}

async fn mrtr_round(client: &Client, expect: Expect) {
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
    if let Some(want) = expect.mrtr_key {
        assert_eq!(key, want, "{requests:?}");
    }
    let mut retry =
        CallToolRequestParams::new("test_tool_with_task").with_input_responses(responses(&[(
            &key,
            json!({"action": "accept", "content": {"name": "Alice"}}),
        )]));
    match ir.request_state {
        Some(state) => retry = retry.with_request_state(state),
        None => assert!(!expect.request_state, "round 1 carries no requestState"),
    }
    let CallToolResponse::Task(created) = client.call_tool_once(retry).await.expect("round 2")
    else {
        panic!("round 2 must create a task")
    };
    assert!(result_text(&poll(client, &created.task.task_id, terminal).await).contains("Alice"));
}

async fn errors_and_cancel(client: &Client) {
    // A tool error ends completed with isError; a protocol error, failed.
    let id = create(client, "failing_job", json!({})).await;
    let t = poll(client, &id, terminal).await;
    assert!(
        matches!(&t.task.payload, TaskPayload::Completed { result } if result["isError"] == true),
        "{t:?}"
    );
    let id = create(client, "protocol_error_job", json!({})).await;
    let t = poll(client, &id, terminal).await;
    assert!(
        matches!(&t.task.payload, TaskPayload::Failed { error } if error["code"] == -32603),
        "{t:?}"
    );

    // Cancel: ack, settles to cancelled, a second cancel is acked too.
    let id = create(
        client,
        "slow_compute",
        json!({"seconds": 30, "label": "rmcp-cancel"}),
    )
    .await;
    client
        .cancel_task(CancelTaskParams::new(&id))
        .await
        .expect("tasks/cancel");
    assert_eq!(
        poll(client, &id, terminal).await.task.status(),
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
    let e = client
        .cancel_task(CancelTaskParams::new("no-such-task"))
        .await
        .expect_err("unknown id");
    assert_eq!(mcp_code(&e), Some(-32602), "{e}");
}
