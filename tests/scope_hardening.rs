//! The scoping holes an adversarial review of the HTTP front found, each
//! closed: a notification that names another scope's task, a task that
//! outlives its session's records, principal names that collided with
//! other origins' scopes, and a principal header that was read as
//! anonymous. Every answer a client reads is validated against its
//! revision's schema.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mcp_tasks_shim::bridge::BridgeConfig;
use mcp_tasks_shim::bridge::legacy_front::{LegacyFront, LegacySession};
use mcp_tasks_shim::jsonrpc::{Id, Message};
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::revision;
use mcp_tasks_shim::scope::Principal;
use mcp_tasks_shim::upstream::channel;
use reqwest::Client;
use serde_json::{Value, json};
use support::http::{HttpShim, client, initialize, legacy, modern, rpc, send};
use support::schema::{Revision, assert_valid};
use support::wire::modern_reference;
use tokio::sync::mpsc;
use tokio::time::timeout;

const STEP: Duration = Duration::from_secs(15);

/// A 2026-07-28 server in process that makes a task of every call (its
/// id counted up) and records every notification the shim sends it.
async fn recording_server(
    mut from_shim: mpsc::UnboundedReceiver<Message>,
    to_shim: mpsc::UnboundedSender<Message>,
    notified: Arc<Mutex<Vec<Value>>>,
) {
    let mut next = 0u32;
    while let Some(msg) = from_shim.recv().await {
        let r = match msg {
            Message::Request(r) => r,
            Message::Notification(n) => {
                notified.lock().unwrap().push(n.params.unwrap_or_default());
                continue;
            }
            _ => continue,
        };
        let answer = match r.method.as_str() {
            "tools/call" => {
                next += 1;
                json!({"taskId": format!("{next:032x}"), "status": "working",
                    "createdAt": "2026-12-01T00:00:00.000Z",
                    "lastUpdatedAt": "2026-12-01T00:00:00.000Z",
                    "ttlMs": 60000, "pollIntervalMs": 60000, "resultType": "task"})
            }
            _ => json!({"tools": [], "resultType": "complete"}),
        };
        let _ = to_shim.send(Message::response(r.id.clone(), answer));
    }
}

/// A legacy session of `name` over `front`, initialized.
async fn open(
    front: &Arc<LegacyFront>,
    name: &str,
) -> (Arc<LegacySession>, mpsc::UnboundedReceiver<Message>) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let session = front.session(Principal::new(name).into(), tx);
    session.handle_client(Message::request(
        Id::Num(0),
        "initialize",
        json!({"protocolVersion": revision::LEGACY_VERSION, "capabilities": {},
            "clientInfo": {"name": name, "version": "0"}}),
    ));
    answer(&mut rx, 0, "initialize").await;
    (session, rx)
}

/// The answer to request `id` off `rx`, schema-checked.
async fn answer(rx: &mut mpsc::UnboundedReceiver<Message>, id: i64, method: &str) -> Value {
    timeout(STEP, async {
        loop {
            let m = rx.recv().await.expect("outbox open").to_value();
            let answers = m.get("id") == Some(&json!(id)) && m.get("method").is_none();
            assert_valid(Revision::Legacy, &m, answers.then_some(method));
            if answers {
                return m;
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("{method} answered"))
}

/// A `tasks/cancel` or `tasks/update` sent as a notification (no id) went
/// upstream verbatim, past the ledger: a server that acts on notifications
/// would cancel or answer another principal's task. It now passes the
/// same scope check as the request would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notification_about_another_scopes_task_is_dropped() {
    let notified = Arc::new(Mutex::new(Vec::new()));
    let (conn, events, server_end) = channel::pair(STEP);
    tokio::spawn(recording_server(
        server_end.from_shim,
        server_end.to_shim,
        notified.clone(),
    ));
    let discover = json!({"supportedVersions": [revision::MODERN_VERSION],
        "capabilities": {"tools": {}, "extensions": {revision::TASKS_EXTENSION: {}}},
        "serverInfo": {"name": "recording", "version": "0"}, "resultType": "complete"});
    let front = LegacyFront::new(
        conn,
        Arc::new(MemoryLedger::default()),
        BridgeConfig::default(),
        discover,
    );
    front.follow(events);
    let (alice, mut alice_rx) = open(&front, "alice").await;
    let (mallory, mut mallory_rx) = open(&front, "mallory").await;

    alice.handle_client(Message::request(
        Id::Num(1),
        "tools/call",
        json!({"name": "job", "arguments": {}, "task": {"ttl": 60000}}),
    ));
    let created = answer(&mut alice_rx, 1, "tools/call").await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();

    for method in ["tasks/cancel", "tasks/update"] {
        mallory.handle_client(Message::notification(
            method,
            json!({"taskId": task, "inputResponses": {}, "from": "mallory"}),
        ));
    }
    // Named like a task method, naming no task: nothing to check it by.
    mallory.handle_client(Message::notification(
        "tasks/cancel",
        json!({"from": "mallory"}),
    ));
    // The owner's own notification still goes.
    alice.handle_client(Message::notification(
        "tasks/cancel",
        json!({"taskId": task, "from": "alice"}),
    ));
    // One upstream stream, in order: once this is answered, every
    // notification sent before it has reached the server.
    mallory.handle_client(Message::request(Id::Num(2), "tools/list", json!({})));
    answer(&mut mallory_rx, 2, "tools/list").await;

    let froms: Vec<Value> = notified
        .lock()
        .unwrap()
        .iter()
        .map(|p| p["from"].clone())
        .collect();
    assert_eq!(froms, vec![json!("alice")], "what reached the server");
}

fn slow(seconds: f64, label: &str) -> Value {
    json!({"name": "slow_compute", "arguments": {"seconds": seconds, "label": label}})
}

/// A legacy task-augmented call in session `sid`; its task id.
async fn legacy_task(c: &Client, url: &str, sid: &str, label: &str, who: Who<'_>) -> String {
    let mut params = slow(2.0, label);
    params["task"] = json!({"ttl": 60_000});
    let req = who.apply(legacy(c, url, Some(sid), &rpc(1, "tools/call", params)));
    let (status, body, _) = send(req).await;
    assert_eq!(status, 200, "{body}");
    assert_valid(Revision::Legacy, &body, Some("tools/call"));
    body["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {body}"))
        .to_owned()
}

/// Who a request speaks for.
#[derive(Clone, Copy)]
enum Who<'a> {
    Anonymous,
    Token(&'a str),
    Header(&'a str),
}

impl Who<'_> {
    fn apply(self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Who::Anonymous => req,
            Who::Token(t) => req.bearer_auth(t),
            Who::Header(v) => req.header("x-principal", v),
        }
    }
}

/// Opens a legacy session for `who`; its id.
async fn session(c: &Client, url: &str, who: Who<'_>) -> String {
    let body = rpc(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "scope-test", "version": "0"}}),
    );
    let (status, answer, headers) = send(who.apply(legacy(c, url, None, &body))).await;
    assert_eq!(status, 200, "{answer}");
    headers["mcp-session-id"].to_str().unwrap().to_owned()
}

/// `method` of `task` from an anonymous 2026-07-28 caller, through the
/// relay: the answer, checked against the 2026-07-28 schema.
async fn modern_probe(c: &Client, url: &str, method: &str, task: &str) -> Value {
    let mut params = json!({"taskId": task});
    if method == "tasks/update" {
        params["inputResponses"] = json!({"k": {"action": "accept", "content": {}}});
    }
    let (_, body, _) = send(modern(c, url, 7, method, params)).await;
    assert_valid(Revision::Modern, &body, Some(method));
    body
}

/// When a legacy session ended, its ledger records went with it, but the
/// task lived on upstream; the relay then found no owner and forwarded an
/// anonymous 2026-07-28 caller's `tasks/get` and `tasks/cancel`: it read
/// the ended session's result and could cancel a running task. The relay
/// now serves only the ids the ledger holds for the caller's own scope.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_whose_session_ended_is_no_one_elses() {
    let shim = HttpShim::spawn(&[], &modern_reference());
    let (c, url) = (client(), shim.url.clone());
    let (sid, _) = initialize(&c, &url, None).await;
    let running = legacy_task(&c, &url, &sid, "still-running", Who::Anonymous).await;
    let (status, _, _) = send(c.delete(&url).header("mcp-session-id", &sid)).await;
    assert_eq!(status, 200, "DELETE ends the session");

    let unknown = format!("{:032x}", 7u128);
    for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
        let orphan = modern_probe(&c, &url, method, &running).await;
        let never = modern_probe(&c, &url, method, &unknown).await;
        assert_eq!(orphan["error"]["code"], -32602, "{method}: {orphan}");
        assert_eq!(
            orphan["error"]["code"], never["error"]["code"],
            "{method}: an ended session's task reads as an unknown one"
        );
    }
    // A 2026-07-28 caller's own task is still its own.
    let (_, made, _) = send(modern(&c, &url, 8, "tools/call", slow(0.2, "mine"))).await;
    let mine = made["result"]["taskId"].as_str().expect("a task");
    let got = modern_probe(&c, &url, "tasks/get", mine).await;
    assert!(got["result"]["status"].is_string(), "{got}");
}

/// Token principals named like another origin's scope (`header:carol`,
/// `stdio:x`) shared that scope: `header:carol` saw the header principal
/// carol's tasks, and a durable ledger's start-up sweep deleted
/// `stdio:x`'s. Each origin's scopes are now apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn principal_names_cannot_reach_other_origins_scopes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = dir.path().join("tasks.redb");
    let ledger = ledger.to_str().unwrap();
    let flags = [
        "--token",
        "tc=header:carol",
        "--token",
        "tx=stdio:x",
        "--principal-header",
        "x-principal",
        "--ledger",
        ledger,
    ];
    let c = client();
    let (token_task, stdio_task) = {
        let shim = HttpShim::spawn(&flags, &modern_reference());
        let url = shim.url.clone();
        let carol = session(&c, &url, Who::Header("carol")).await;
        legacy_task(&c, &url, &carol, "carols", Who::Header("carol")).await;
        let impostor = session(&c, &url, Who::Token("tc")).await;
        let token_task = legacy_task(&c, &url, &impostor, "tokens", Who::Token("tc")).await;
        let x = session(&c, &url, Who::Token("tx")).await;
        let stdio_task = legacy_task(&c, &url, &x, "xs", Who::Token("tx")).await;

        // The token principal `header:carol` lists its own task only.
        let (_, listed, _) = send(Who::Token("tc").apply(legacy(
            &c,
            &url,
            Some(&impostor),
            &rpc(2, "tasks/list", json!({})),
        )))
        .await;
        assert_valid(Revision::Legacy, &listed, Some("tasks/list"));
        let ids: Vec<&str> = listed["result"]["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .filter_map(|t| t["taskId"].as_str())
            .collect();
        assert_eq!(ids, vec![token_task.as_str()], "{listed}");
        (token_task, stdio_task)
    };

    // A new process over the same ledger: the start-up sweep drops ended
    // sessions' scopes, never a principal's.
    let shim = HttpShim::spawn(&flags, &modern_reference());
    let url = shim.url.clone();
    for (token, task) in [("tx", &stdio_task), ("tc", &token_task)] {
        let sid = session(&c, &url, Who::Token(token)).await;
        let (_, listed, _) = send(Who::Token(token).apply(legacy(
            &c,
            &url,
            Some(&sid),
            &rpc(3, "tasks/list", json!({})),
        )))
        .await;
        assert_valid(Revision::Legacy, &listed, Some("tasks/list"));
        assert!(
            listed["result"]["tasks"]
                .as_array()
                .is_some_and(|ts| ts.iter().any(|t| t["taskId"] == task.as_str())),
            "{token}'s task survived the restart: {listed}"
        );
    }
}

/// A principal header that is not visible ASCII (UTF-8 `José`) was read
/// as "no principal", in the scope every anonymous caller reads. It is
/// refused now, as a doubled one is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_header_that_is_not_ascii_is_refused() {
    let shim = HttpShim::spawn(&["--principal-header", "x-principal"], &modern_reference());
    let (c, url) = (client(), shim.url.clone());
    let jose = reqwest::header::HeaderValue::from_bytes("José".as_bytes()).unwrap();
    let body = rpc(
        0,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "scope-test", "version": "0"}}),
    );
    let (status, answer, _) =
        send(legacy(&c, &url, None, &body).header("x-principal", jose.clone())).await;
    assert_eq!(status, 401, "{answer}");
    assert_valid(Revision::Legacy, &answer, Some("initialize"));
    let (status, answer, _) =
        send(modern(&c, &url, 1, "tools/list", json!({})).header("x-principal", jose)).await;
    assert_eq!(status, 401, "{answer}");
    assert_valid(Revision::Modern, &answer, Some("tools/list"));
}
