//! 2026-07-28 clients in front of 2025-11-25 servers scripted in process
//! (`upstream::channel`), for what the reference server never does: the
//! exact timing of a race, or results a server should not send. Every
//! answer the client reads is validated against the 2026-07-28 schema.
//!
//! `a_question_queued_for_a_finished_call_goes_to_the_other_one`: a
//! server's untagged question (elicitation during a plain `tools/call`)
//! while one client has two calls open. The shim cannot tell whose it is
//! and hands it to the newest call; when that call's own answer arrives
//! with the question still queued, the question must go on to the other
//! call, not be dropped: the server would wait for its answer, and the
//! other call with it, until the request timeout. The question and the
//! newest call's answer arrive back to back, the race the shim used to
//! lose about half the time: twenty fresh sessions.
//!
//! `odd_results_are_made_valid_or_refused`: a result with a `resultType`
//! of the wrong type reaches the client as `"complete"`; a driven task
//! whose `tasks/result` is not an object fails with `-32603` naming it,
//! rather than as a result no 2026-07-28 client could read.

mod support;

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks_shim::bridge::BridgeConfig;
use mcp_tasks_shim::bridge::modern_front::ModernFront;
use mcp_tasks_shim::jsonrpc::{Id, Message};
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::revision;
use mcp_tasks_shim::upstream::channel;
use serde_json::{Map, Value, json};
use support::schema::{Revision, assert_valid};
use tokio::sync::mpsc;
use tokio::time::timeout;

/// The scripted servers' `InitializeResult`: a 2025-11-25 server with
/// tools and no tasks.
fn scripted_init() -> Value {
    json!({"protocolVersion": revision::LEGACY_VERSION,
           "capabilities": {"tools": {}},
           "serverInfo": {"name": "scripted", "version": "0"}})
}

/// A legacy server with two plain tools: `older` waits for the answer to
/// a question it asks (untagged) once `newer` has been called; `newer`
/// is answered right after the question, in the same breath. `older_open`
/// is told when `older` has arrived.
async fn scripted_server(
    mut from_shim: mpsc::UnboundedReceiver<Message>,
    to_shim: mpsc::UnboundedSender<Message>,
    older_open: Arc<tokio::sync::Notify>,
) {
    let mut older: Option<Id> = None;
    while let Some(msg) = from_shim.recv().await {
        match &msg {
            Message::Request(r) => match r.method.as_str() {
                "initialize" => {
                    let _ = to_shim.send(Message::response(r.id.clone(), scripted_init()));
                }
                "tools/list" => {
                    let tool = |name: &str| {
                        json!({"name": name, "inputSchema": {"type": "object"},
                               "execution": {"taskSupport": "forbidden"}})
                    };
                    let _ = to_shim.send(Message::response(
                        r.id.clone(),
                        json!({"tools": [tool("older"), tool("newer")]}),
                    ));
                }
                "tools/call" if r.params.as_ref().unwrap()["name"] == "older" => {
                    older = Some(r.id.clone());
                    older_open.notify_one();
                }
                "tools/call" => {
                    // The question (for `older`), then `newer`'s answer.
                    let _ = to_shim.send(Message::request(
                        "question",
                        "elicitation/create",
                        json!({"mode": "form", "message": "Proceed?",
                               "requestedSchema": {"type": "object",
                                   "properties": {"ok": {"type": "boolean"}}}}),
                    ));
                    let _ = to_shim.send(Message::response(
                        r.id.clone(),
                        json!({"content": [{"type": "text", "text": "newer done"}]}),
                    ));
                }
                _ => {}
            },
            Message::Response(a) if a.id == Id::from("question") => {
                let id = older.take().expect("older was called first");
                let _ = to_shim.send(Message::response(
                    id,
                    json!({"content": [{"type": "text", "text": "older done"}]}),
                ));
            }
            _ => {}
        }
    }
}

fn call(id: i64, tool: &str, extra: Map<String, Value>) -> Message {
    let mut params = json!({
        "name": tool,
        "arguments": {},
        "_meta": {
            revision::META_PROTOCOL_VERSION: revision::MODERN_VERSION,
            revision::META_CLIENT_CAPABILITIES: {"elicitation": {"form": {}}},
            revision::META_CLIENT_INFO: {"name": "interjection-test", "version": "0"},
        }
    });
    params.as_object_mut().unwrap().extend(extra);
    Message::request(id, "tools/call", params)
}

/// One session: both calls, every MRTR round answered; returns the texts
/// of the results in the order they came.
async fn both_calls_finish() -> Vec<String> {
    // Long enough that a dropped question shows as this test's timeout.
    let (conn, events, server_end) = channel::pair(Duration::from_secs(60));
    let front = ModernFront::new(
        conn,
        Arc::new(MemoryLedger::default()),
        BridgeConfig::default(),
    );
    let older_open = Arc::new(tokio::sync::Notify::new());
    tokio::spawn(scripted_server(
        server_end.from_shim,
        server_end.to_shim,
        older_open.clone(),
    ));
    front.follow(events);
    let (out, mut outbox) = mpsc::unbounded_channel();
    let session = front.session(mcp_tasks_shim::scope::Principal::new("client").into(), out);
    // Learn the tools first, so both calls go straight upstream.
    session.handle_client(Message::request(
        100,
        "tools/list",
        json!({"_meta": {
            revision::META_PROTOCOL_VERSION: revision::MODERN_VERSION,
            revision::META_CLIENT_CAPABILITIES: {},
            revision::META_CLIENT_INFO: {"name": "interjection-test", "version": "0"},
        }}),
    ));
    outbox.recv().await.expect("tools/list answered");
    session.handle_client(call(1, "older", Map::new()));
    // `older` is open upstream before `newer` is called.
    tokio::time::timeout(Duration::from_secs(10), older_open.notified())
        .await
        .expect("older reaches the server");
    session.handle_client(call(2, "newer", Map::new()));
    let mut texts = Vec::new();
    let mut next_id = 3;
    while texts.len() < 2 {
        let m = outbox.recv().await.expect("the session's outbox is open");
        let v = m.to_value();
        assert_valid(Revision::Modern, &v, Some("tools/call"));
        let Some(result) = v.get("result") else {
            assert!(v.get("error").is_none(), "a call failed: {v}");
            continue;
        };
        if result["resultType"] == "input_required" {
            let responses: Map<String, Value> = result["inputRequests"]
                .as_object()
                .unwrap()
                .keys()
                .map(|k| {
                    (
                        k.clone(),
                        json!({"action": "accept", "content": {"ok": true}}),
                    )
                })
                .collect();
            // The retry names the tool whose round it is: the id says.
            let tool = if v["id"] == 1 { "older" } else { "newer" };
            let mut extra = Map::new();
            extra.insert("inputResponses".into(), Value::Object(responses));
            extra.insert("requestState".into(), result["requestState"].clone());
            session.handle_client(call(next_id, tool, extra));
            next_id += 1;
            continue;
        }
        assert_eq!(result["resultType"], "complete", "{v}");
        texts.push(result["content"][0]["text"].as_str().unwrap().to_owned());
    }
    texts
}

#[tokio::test(start_paused = true)]
async fn a_question_queued_for_a_finished_call_goes_to_the_other_one() {
    for round in 0..20 {
        let mut texts = timeout(Duration::from_secs(5), both_calls_finish())
            .await
            .unwrap_or_else(|_| panic!("round {round}: a call was left waiting"));
        texts.sort();
        assert_eq!(texts, ["newer done", "older done"], "round {round}");
    }
}

/// A legacy server whose plain call answers `resultType: null`, and whose
/// one required tool makes a task that ends with a `tasks/result` of
/// `"done"` (not an object).
async fn odd_server(
    mut from_shim: mpsc::UnboundedReceiver<Message>,
    to_shim: mpsc::UnboundedSender<Message>,
) {
    let task = json!({"taskId": "t-1", "status": "working",
        "createdAt": "2026-11-30T00:00:00Z", "lastUpdatedAt": "2026-11-30T00:00:00Z",
        "ttl": 60000, "pollInterval": 50});
    while let Some(msg) = from_shim.recv().await {
        let Message::Request(r) = &msg else { continue };
        let answer = match r.method.as_str() {
            "initialize" => json!({"protocolVersion": revision::LEGACY_VERSION,
                "capabilities": {"tools": {}, "tasks": {"requests": {"tools": {"call": {}}}}},
                "serverInfo": {"name": "odd", "version": "0"}}),
            "tools/list" => json!({"tools": [
                {"name": "plain", "inputSchema": {"type": "object"},
                 "execution": {"taskSupport": "forbidden"}},
                {"name": "job", "inputSchema": {"type": "object"},
                 "execution": {"taskSupport": "required"}}]}),
            "tools/call" if r.params.as_ref().unwrap()["name"] == "plain" => {
                json!({"content": [{"type": "text", "text": "plain"}], "resultType": null})
            }
            "tools/call" => json!({"task": task}),
            "tasks/get" => {
                let mut t = task.clone();
                t["status"] = json!("completed");
                t
            }
            "tasks/result" => json!("done"),
            _ => continue,
        };
        let _ = to_shim.send(Message::response(r.id.clone(), answer));
    }
}

#[tokio::test(start_paused = true)]
async fn odd_results_are_made_valid_or_refused() {
    let (conn, events, server_end) = channel::pair(Duration::from_secs(10));
    let config = BridgeConfig {
        drive_required_tasks: true,
        ..BridgeConfig::default()
    };
    let front = ModernFront::new(conn, Arc::new(MemoryLedger::default()), config);
    tokio::spawn(odd_server(server_end.from_shim, server_end.to_shim));
    front.follow(events);
    let (out, mut outbox) = mpsc::unbounded_channel();
    let session = front.session(mcp_tasks_shim::scope::Principal::new("client").into(), out);
    let mut answers = Vec::new();
    for (id, tool) in [(1, "plain"), (2, "job")] {
        session.handle_client(call(id, tool, Map::new()));
        let answer = timeout(Duration::from_secs(5), outbox.recv())
            .await
            .expect("answered")
            .expect("the outbox is open")
            .to_value();
        assert_valid(Revision::Modern, &answer, Some("tools/call"));
        answers.push(answer);
    }
    assert_eq!(
        answers[0]["result"]["resultType"], "complete",
        "{}",
        answers[0]
    );
    assert_eq!(answers[0]["result"]["content"][0]["text"], "plain");
    assert_eq!(answers[1]["error"]["code"], -32603, "{}", answers[1]);
    assert!(
        answers[1]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("t-1") && m.contains("not an object")),
        "{}",
        answers[1]
    );
}

/// A legacy server whose one plain tool asks a question (untagged) and,
/// once answered, reports progress under the call's token, then answers.
async fn asking_progress_server(
    mut from_shim: mpsc::UnboundedReceiver<Message>,
    to_shim: mpsc::UnboundedSender<Message>,
) {
    let mut call: Option<(Id, Value)> = None;
    while let Some(msg) = from_shim.recv().await {
        match &msg {
            Message::Request(r) => match r.method.as_str() {
                "initialize" => {
                    let _ = to_shim.send(Message::response(r.id.clone(), scripted_init()));
                }
                "tools/list" => {
                    let _ = to_shim.send(Message::response(
                        r.id.clone(),
                        json!({"tools": [{"name": "ask", "inputSchema": {"type": "object"},
                               "execution": {"taskSupport": "forbidden"}}]}),
                    ));
                }
                "tools/call" => {
                    let token = r.params.as_ref().unwrap()["_meta"]["progressToken"].clone();
                    call = Some((r.id.clone(), token));
                    let _ = to_shim.send(Message::request(
                        "question",
                        "elicitation/create",
                        json!({"mode": "form", "message": "Proceed?",
                               "requestedSchema": {"type": "object",
                                   "properties": {"ok": {"type": "boolean"}}}}),
                    ));
                }
                _ => {}
            },
            Message::Response(a) if a.id == Id::from("question") => {
                let (id, token) = call.take().expect("asked during a call");
                // At once: the retry's route must already stand.
                let _ = to_shim.send(Message::notification(
                    "notifications/progress",
                    json!({"progressToken": token, "progress": 1, "total": 2}),
                ));
                // The notification and the answer travel apart inside the
                // shim over a channel: give the first a head start.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let _ = to_shim.send(Message::response(
                    id,
                    json!({"content": [{"type": "text", "text": "done"}]}),
                ));
            }
            _ => {}
        }
    }
}

/// After an MRTR round, the retry is the request the client waits on:
/// the call's progress comes under the retry's own `progressToken`, not
/// the first request's (which was answered with the round), and not at
/// all when the retry asks for none. The scripted server reports progress
/// right after the question's answer, so the route must be the retry's
/// before that answer goes up.
#[tokio::test(start_paused = true)]
async fn progress_after_an_mrtr_retry_is_the_retrys() {
    // Fresh sessions, many times: the server reports progress the moment
    // it has its answer, which the hand-over used to lose to.
    let cases = (0..15).flat_map(|_| [Some("B"), None]);
    for retry_token in cases {
        let (conn, events, server_end) = channel::pair(Duration::from_secs(60));
        let front = ModernFront::new(
            conn,
            Arc::new(MemoryLedger::default()),
            BridgeConfig::default(),
        );
        tokio::spawn(asking_progress_server(
            server_end.from_shim,
            server_end.to_shim,
        ));
        front.follow(events);
        let (out, mut outbox) = mpsc::unbounded_channel();
        let session = front.session(mcp_tasks_shim::scope::Principal::new("client").into(), out);
        let mut first = call(1, "ask", Map::new());
        if let Message::Request(r) = &mut first {
            r.params.as_mut().unwrap()["_meta"]["progressToken"] = json!("A");
        }
        session.handle_client(first);
        let round = timeout(Duration::from_secs(5), outbox.recv())
            .await
            .expect("the round")
            .expect("open outbox")
            .to_value();
        assert_valid(Revision::Modern, &round, Some("tools/call"));
        let result = &round["result"];
        assert_eq!(result["resultType"], "input_required", "{round}");
        let key = result["inputRequests"]
            .as_object()
            .unwrap()
            .keys()
            .next()
            .unwrap()
            .clone();
        let mut extra = Map::new();
        extra.insert(
            "inputResponses".into(),
            json!({key: {"action": "accept", "content": {"ok": true}}}),
        );
        extra.insert("requestState".into(), result["requestState"].clone());
        let mut retry = call(2, "ask", extra);
        if let (Message::Request(r), Some(t)) = (&mut retry, retry_token) {
            r.params.as_mut().unwrap()["_meta"]["progressToken"] = json!(t);
        }
        session.handle_client(retry);
        let mut progress = Vec::new();
        loop {
            let m = timeout(Duration::from_secs(5), outbox.recv())
                .await
                .expect("the retry's answer")
                .expect("open outbox")
                .to_value();
            if m["method"] == "notifications/progress" {
                assert_valid(Revision::Modern, &m, None);
                progress.push(m["params"]["progressToken"].clone());
                continue;
            }
            assert_valid(Revision::Modern, &m, Some("tools/call"));
            assert_eq!(m["id"], 2, "{m}");
            assert_eq!(m["result"]["content"][0]["text"], "done", "{m}");
            break;
        }
        let want: Vec<Value> = retry_token.into_iter().map(|t| json!(t)).collect();
        assert_eq!(progress, want, "retry token {retry_token:?}");
    }
}
