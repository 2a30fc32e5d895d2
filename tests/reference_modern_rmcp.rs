//! The 2026-07-28 reference server against a real third-party peer: the
//! official Rust SDK
//!   client (`rmcp` 3.11, `server/discover` lifecycle, tasks extension
//!   declared) creates tasks, polls them, answers mid-task input with
//!   `tasks/update` (all at once and partially), runs the MRTR round before
//!   a task, and cancels. A recording relay sits between client and server
//!   so the whole conversation is validated against the 2026-07-28 schemas.
//!
//! What rmcp cannot send is covered in `reference_modern_wire.rs`.
//!
//! Set `MCP_SHIM_RECORD=1` to refresh `tests/corpus/recorded/rmcp-modern.jsonl`.

mod support;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceError;
use rmcp::model::*;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};
use support::schema::{Revision, assert_conversation_valid};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::timeout;

type Log = Arc<Mutex<Vec<(String, Value)>>>;

const STEP: Duration = Duration::from_secs(15);

fn spawn_server() -> Child {
    Command::new(env!("CARGO_BIN_EXE_mcp-tasks-shim"))
        .args(["reference-server", "--revision", "2026-07-28"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the reference server")
}

/// Copies lines from `from` to `to`, logging each as `dir`.
fn relay<R, W>(from: R, mut to: W, dir: &'static str, log: Log)
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut lines = BufReader::new(from).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                log.lock().unwrap().push((dir.to_owned(), v));
            }
            if to.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                break;
            }
            let _ = to.flush().await;
        }
    });
}

fn mcp_code(e: &ServiceError) -> Option<i32> {
    match e {
        ServiceError::McpError(d) => Some(d.code.0),
        _ => None,
    }
}

async fn poll<F: Fn(&GetTaskResult) -> bool>(
    client: &rmcp::Peer<rmcp::RoleClient>,
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
        tokio::time::sleep(Duration::from_millis(
            t.task.task.poll_interval_ms.unwrap_or(100),
        ))
        .await;
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

async fn create(client: &rmcp::Peer<rmcp::RoleClient>, name: &'static str, args: Value) -> String {
    let mut p = CallToolRequestParams::new(name);
    if let Value::Object(m) = args {
        p = p.with_arguments(m);
    }
    match client.call_tool_once(p).await.expect("tools/call") {
        CallToolResponse::Task(t) => t.task.task_id,
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
async fn rmcp_client_drives_the_modern_reference_server() {
    timeout(Duration::from_secs(90), rmcp_flow())
        .await
        .expect("rmcp flow timed out");
}

async fn rmcp_flow() {
    let log: Log = Arc::default();
    let mut server = spawn_server();
    let (client_end, relay_end) = tokio::io::duplex(1 << 16);
    let (relay_read, relay_write) = tokio::io::split(relay_end);
    relay(relay_read, server.stdin.take().unwrap(), "c2s", log.clone());
    relay(
        server.stdout.take().unwrap(),
        relay_write,
        "s2c",
        log.clone(),
    );

    let config = ClientConfig::new(
        ClientCapabilities::builder()
            .enable_elicitation()
            .enable_tasks()
            .build(),
        Implementation::new("mcp-tasks-shim-rmcp-peer", "1.0.0"),
    );
    let running = config
        .serve_with_lifecycle(
            client_end,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover handshake");
    let client = running.peer().clone();

    // tools/list: the conformance tool set, no 2025 `execution` member.
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
    let greet = CallToolRequestParams::new("greet")
        .with_arguments(json!({"name": "World"}).as_object().unwrap().clone());
    match client.call_tool_once(greet).await.expect("greet") {
        CallToolResponse::Complete(r) => {
            assert_eq!(r.content[0].as_text().unwrap().text, "Hello, World!")
        }
        other => panic!("greet: {other:?}"),
    }

    // Create + poll to completion.
    let id = create(
        &client,
        "slow_compute",
        json!({"seconds": 0.3, "label": "rmcp"}),
    )
    .await;
    let t = poll(&client, &id, terminal).await;
    assert_eq!(t.task.status(), TaskStatus::Completed);
    assert!(result_text(&t).contains("rmcp"));

    // Mid-task input answered with tasks/update.
    let id = create(&client, "confirm_delete", json!({"filename": "a.txt"})).await;
    let t = poll(&client, &id, |t| {
        t.task.status() == TaskStatus::InputRequired
    })
    .await;
    let keys = input_keys(&t);
    assert_eq!(keys.len(), 1);
    let answer = json!({"action": "accept", "content": {"confirm": true}});
    client
        .update_task(UpdateTaskParams::new(
            &id,
            responses(&[
                (&keys[0], answer.clone()),
                ("never-issued", json!({"action": "decline"})),
            ]),
        ))
        .await
        .expect("tasks/update");
    let t = poll(&client, &id, terminal).await;
    assert_eq!(result_text(&t), "Deleted a.txt");

    // Two questions at once, answered one at a time.
    let id = create(&client, "multi_input", json!({})).await;
    let t = poll(&client, &id, |t| matches!(&t.task.payload, TaskPayload::InputRequired { input_requests } if input_requests.len() == 2)).await;
    // The name question first: the server checks each form has what it
    // asked for.
    let mut keys = input_keys(&t);
    keys.sort_by_key(|k| !k.starts_with("name"));
    let first = json!({"action": "accept", "content": {"name": "Alice"}});
    client
        .update_task(UpdateTaskParams::new(&id, responses(&[(&keys[0], first)])))
        .await
        .expect("partial update");
    let t = client
        .get_task(GetTaskParams::new(&id))
        .await
        .expect("tasks/get");
    assert_eq!(
        input_keys(&t),
        vec![keys[1].clone()],
        "only the unanswered key remains"
    );
    let second = json!({"action": "accept", "content": {"confirm": true}});
    client
        .update_task(UpdateTaskParams::new(&id, responses(&[(&keys[1], second)])))
        .await
        .expect("second update");
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
    assert!(requests.contains_key("user_name"), "{requests:?}");
    let mut retry =
        CallToolRequestParams::new("test_tool_with_task").with_input_responses(responses(&[(
            "user_name",
            json!({"action": "accept", "content": {"name": "Alice"}}),
        )]));
    if let Some(state) = ir.request_state {
        retry = retry.with_request_state(state);
    }
    let CallToolResponse::Task(created) = client.call_tool_once(retry).await.expect("round 2")
    else {
        panic!("round 2 must create a task")
    };
    assert!(result_text(&poll(&client, &created.task.task_id, terminal).await).contains("Alice"));

    // Tool error: completed with isError. Protocol error: failed with error.
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
    let e = client
        .cancel_task(CancelTaskParams::new("no-such-task"))
        .await
        .expect_err("unknown id");
    assert_eq!(mcp_code(&e), Some(-32602), "{e}");

    running.cancel().await.expect("close client");
    tokio::time::sleep(Duration::from_millis(100)).await;
    let conversation = log.lock().unwrap().clone();
    assert!(
        conversation
            .iter()
            .any(|(d, m)| d == "c2s" && m["method"] == "server/discover")
    );
    assert_conversation_valid(
        conversation
            .iter()
            .map(|(d, m)| (Revision::Modern, d.as_str(), m)),
    );
    if std::env::var_os("MCP_SHIM_RECORD").is_some() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/corpus/recorded/rmcp-modern.jsonl"
        );
        let text: String = conversation
            .iter()
            .map(|(d, m)| format!("{}\n", json!({"dir": d, "msg": m})))
            .collect();
        std::fs::write(path, text).expect("write transcript");
    }
}
