//! 2025-11-25 clients in front of a 2026-07-28 server scripted in process
//! (`upstream::channel`), for the orderings a real server produces only
//! now and then: a task that ends while the client's cancel is on its way,
//! and a stale status that arrives after the end. Every message the client
//! reads is validated against the 2025-11-25 schema.

mod support;

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks_shim::bridge::BridgeConfig;
use mcp_tasks_shim::bridge::legacy_front::LegacyFront;
use mcp_tasks_shim::jsonrpc::Message;
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::revision;
use mcp_tasks_shim::upstream::channel;
use serde_json::{Value, json};
use support::schema::{Revision, assert_valid};
use tokio::sync::mpsc;
use tokio::time::timeout;

const TASK: &str = "0123456789abcdef0123456789abcdef";

fn task(status: &str) -> Value {
    let mut t = json!({"taskId": TASK, "status": status,
        "createdAt": "2026-12-01T00:00:00.000Z", "lastUpdatedAt": "2026-12-01T00:00:00.000Z",
        "ttlMs": 60000, "pollIntervalMs": 50});
    if status == "completed" {
        t["result"] =
            json!({"content": [{"type": "text", "text": "done"}], "resultType": "complete"});
    }
    t
}

/// What the scripted server does around the task's end.
#[derive(Clone, Copy)]
enum Script {
    /// The task ends while the cancel is in flight: the end is announced,
    /// then the cancel acknowledged.
    EndsDuringCancel,
    /// The task ends at once, then a stale `working` status arrives.
    StaleAfterEnd,
    /// The task is granted no retention (`ttlMs: null`, "unlimited").
    Unlimited,
}

async fn server(
    script: Script,
    mut from_shim: mpsc::UnboundedReceiver<Message>,
    to_shim: mpsc::UnboundedSender<Message>,
) {
    let mut ended = false;
    let granted = |mut t: Value| {
        if let Script::Unlimited = script {
            t["ttlMs"] = Value::Null;
        }
        t
    };
    while let Some(msg) = from_shim.recv().await {
        let Message::Request(r) = &msg else { continue };
        let answer = match r.method.as_str() {
            "tools/list" => json!({"tools": [{"name": "job", "inputSchema": {"type": "object"},
                "execution": {"taskSupport": "optional"}}], "resultType": "complete"}),
            "tools/call" => {
                let mut created = granted(task("working"));
                created["resultType"] = json!("task");
                let _ = to_shim.send(Message::response(r.id.clone(), created));
                if let Script::StaleAfterEnd = script {
                    // After the shim has recorded the task.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    ended = true;
                    let _ = to_shim.send(Message::notification(
                        "notifications/tasks",
                        task("completed"),
                    ));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    let _ = to_shim.send(Message::notification(
                        "notifications/tasks",
                        task("working"),
                    ));
                }
                continue;
            }
            "tasks/get" => {
                let mut t = granted(task(if ended { "completed" } else { "working" }));
                t["resultType"] = json!("complete");
                t
            }
            "tasks/cancel" => {
                ended = true;
                let _ = to_shim.send(Message::notification(
                    "notifications/tasks",
                    task("completed"),
                ));
                tokio::time::sleep(Duration::from_millis(100)).await;
                json!({"resultType": "complete"})
            }
            // No listen streams here: the shim polls.
            _ => {
                let _ = to_shim.send(Message::error(
                    Some(r.id.clone()),
                    mcp_tasks_shim::jsonrpc::ErrorObject::new(-32601, "Method not found"),
                ));
                continue;
            }
        };
        let _ = to_shim.send(Message::response(r.id.clone(), answer));
    }
}

/// A legacy session in front of the scripted server; every message it
/// sends the client is schema-checked and collected.
struct Client {
    session: Arc<mcp_tasks_shim::bridge::legacy_front::LegacySession>,
    outbox: mpsc::UnboundedReceiver<Message>,
    seen: Vec<Value>,
    answered: Vec<(i64, String)>,
}

impl Client {
    async fn start(script: Script) -> Client {
        let (conn, events, server_end) = channel::pair(Duration::from_secs(10));
        tokio::spawn(server(script, server_end.from_shim, server_end.to_shim));
        let discover = json!({"supportedVersions": [revision::MODERN_VERSION],
            "capabilities": {"tools": {}, "extensions": {revision::TASKS_EXTENSION: {}}},
            "serverInfo": {"name": "scripted", "version": "0"}, "resultType": "complete"});
        let front = LegacyFront::new(
            conn,
            Arc::new(MemoryLedger::default()),
            BridgeConfig::default(),
            discover,
        );
        front.follow(events);
        let (out, outbox) = mpsc::unbounded_channel();
        let session = front.session(mcp_tasks_shim::scope::Principal::new("client").into(), out);
        let mut c = Client {
            session,
            outbox,
            seen: Vec::new(),
            answered: Vec::new(),
        };
        c.call(
            1,
            "initialize",
            json!({"protocolVersion": revision::LEGACY_VERSION,
            "capabilities": {}, "clientInfo": {"name": "scripted-test", "version": "0"}}),
        )
        .await;
        c
    }

    /// Sends request `id` and returns its answer.
    async fn call(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.answered.push((id, method.to_owned()));
        self.session
            .handle_client(Message::request(id, method, params));
        timeout(Duration::from_secs(5), async {
            loop {
                let m = self
                    .outbox
                    .recv()
                    .await
                    .expect("the outbox is open")
                    .to_value();
                let answered = m.get("id").and_then(|i| {
                    self.answered
                        .iter()
                        .find(|(k, _)| i == k)
                        .map(|(_, m)| m.clone())
                });
                assert_valid(Revision::Legacy, &m, answered.as_deref());
                self.seen.push(m.clone());
                if m.get("id") == Some(&json!(id)) && m.get("method").is_none() {
                    return m;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{method} was answered"))
    }

    /// The statuses of every `notifications/tasks/status` seen so far.
    fn statuses(&mut self) -> Vec<String> {
        while let Ok(m) = self.outbox.try_recv() {
            let m = m.to_value();
            assert_valid(Revision::Legacy, &m, None);
            self.seen.push(m);
        }
        self.seen
            .iter()
            .filter(|m| m["method"] == "notifications/tasks/status")
            .map(|m| {
                m["params"]["status"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }
}

fn create() -> Value {
    json!({"name": "job", "arguments": {}, "task": {"ttl": 60000}})
}

/// The task ends while the client's cancel is on its way: the cancel is
/// refused as for a finished task, and the task stays completed with its
/// result, instead of turning `cancelled` after the client read it done.
#[tokio::test(start_paused = true)]
async fn a_cancel_that_loses_to_the_end_leaves_the_task_completed() {
    let mut c = Client::start(Script::EndsDuringCancel).await;
    let created = c.call(2, "tools/call", create()).await;
    assert_eq!(created["result"]["task"]["taskId"], TASK, "{created}");
    let cancel = c.call(3, "tasks/cancel", json!({"taskId": TASK})).await;
    assert_eq!(cancel["error"]["code"], -32602, "{cancel}");
    assert!(
        cancel["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("completed")),
        "{cancel}"
    );
    let got = c.call(4, "tasks/get", json!({"taskId": TASK})).await;
    assert_eq!(got["result"]["status"], "completed", "{got}");
    let result = c.call(5, "tasks/result", json!({"taskId": TASK})).await;
    assert_eq!(result["result"]["content"][0]["text"], "done", "{result}");
    assert!(
        !c.statuses().contains(&"cancelled".to_owned()),
        "{:#?}",
        c.seen
    );
}

/// A stale `working` after the task's end changes nothing: no status
/// notification goes back from terminal, and the task reads completed.
#[tokio::test(start_paused = true)]
async fn a_stale_status_after_the_end_is_ignored() {
    let mut c = Client::start(Script::StaleAfterEnd).await;
    c.call(2, "tools/call", create()).await;
    // The script sends both notifications before it reads its next
    // request, so its answer to that one comes after them.
    c.call(3, "tools/list", json!({})).await;
    let got = c.call(4, "tasks/get", json!({"taskId": TASK})).await;
    assert_eq!(got["result"]["status"], "completed", "{got}");
    let statuses = c.statuses();
    let end = statuses
        .iter()
        .position(|s| s == "completed")
        .expect("the end was told");
    assert!(
        statuses[end..].iter().all(|s| s == "completed"),
        "a status after the end: {statuses:?}"
    );
}

/// A task granted no retention: the shim keeps its record for
/// `max_task_ttl_ms` (then answers for it as for an unknown task), and
/// says so, instead of passing on "unlimited".
#[tokio::test(start_paused = true)]
async fn a_task_granted_no_ttl_shows_how_long_the_shim_keeps_it() {
    let bound = BridgeConfig::default().max_task_ttl_ms;
    let mut c = Client::start(Script::Unlimited).await;
    let created = c.call(2, "tools/call", create()).await;
    assert_eq!(created["result"]["task"]["ttl"], bound, "{created}");
    let got = c.call(3, "tasks/get", json!({"taskId": TASK})).await;
    assert_eq!(got["result"]["ttl"], bound, "{got}");
    let listed = c.call(4, "tasks/list", json!({})).await;
    assert_eq!(listed["result"]["tasks"][0]["ttl"], bound, "{listed}");
    // Paused time: past the bound, the record is gone.
    let bound_ms = u64::try_from(bound).expect("a positive bound");
    tokio::time::advance(Duration::from_millis(bound_ms - 1_000)).await;
    let kept = c.call(5, "tasks/get", json!({"taskId": TASK})).await;
    assert_eq!(
        kept["result"]["status"], "working",
        "kept until the bound: {kept}"
    );
    tokio::time::advance(Duration::from_millis(2_000)).await;
    let gone = c.call(6, "tasks/get", json!({"taskId": TASK})).await;
    assert_eq!(
        gone["error"]["code"], -32602,
        "unknown after the bound: {gone}"
    );
    let listed = c.call(7, "tasks/list", json!({})).await;
    assert_eq!(listed["result"]["tasks"], json!([]), "{listed}");
}
