//! The modern bridge serves many clients (principals, over HTTP) through one
//! 2025-11-25 upstream session. An untagged server→client request (MRTR
//! input) names no call; with calls of two clients open, handing it to
//! either could show one client another's question. It must be refused.
//!
//! Driven in process against a scripted legacy server (`channel::pair`), so
//! that both calls are provably open when the request arrives.

mod support;

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks_shim::bridge::BridgeConfig;
use mcp_tasks_shim::bridge::modern_front::ModernFront;
use mcp_tasks_shim::jsonrpc::{Id, Message};
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::upstream::channel::pair;
use serde_json::{Value, json};
use support::schema::{Revision, assert_valid};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::timeout;

const STEP: Duration = Duration::from_secs(10);

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "scopes-test", "version": "0"},
    })
}

async fn next(rx: &mut UnboundedReceiver<Message>, what: &str) -> Message {
    timeout(STEP, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .unwrap_or_else(|| panic!("channel closed waiting for {what}"))
}

/// Answers the shim's requests until a `tools/call` arrives; returns its id.
async fn serve_until_call(
    from_shim: &mut UnboundedReceiver<Message>,
    to_shim: &tokio::sync::mpsc::UnboundedSender<Message>,
) -> Id {
    loop {
        // Notifications (initialized) need no answer.
        let Message::Request(r) = next(from_shim, "a request from the shim").await else {
            continue;
        };
        match r.method.as_str() {
            "initialize" => {
                let result = json!({"protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "scripted", "version": "0"}});
                to_shim.send(Message::response(r.id, result)).unwrap();
            }
            "tools/list" => {
                let result = json!({"tools": [{"name": "ask",
                    "inputSchema": {"type": "object"},
                    "execution": {"taskSupport": "forbidden"}}]});
                to_shim.send(Message::response(r.id, result)).unwrap();
            }
            "tools/call" => return r.id,
            m => panic!("unexpected request {m}"),
        }
    }
}

#[tokio::test]
async fn untagged_input_never_goes_to_another_clients_call() {
    untagged_input_between(|front, a_tx, b_tx| {
        (
            front.session(mcp_tasks_shim::scope::Principal::new("alice").into(), a_tx),
            front.session(mcp_tasks_shim::scope::Principal::new("bob").into(), b_tx),
        )
    })
    .await;
}

/// Two callers without credentials share the anonymous scope over HTTP,
/// but they are still two clients: one's question is not the other's.
#[tokio::test]
async fn untagged_input_never_goes_to_another_anonymous_clients_call() {
    untagged_input_between(|front, a_tx, b_tx| {
        (
            front.request_session(None, a_tx),
            front.request_session(None, b_tx),
        )
    })
    .await;
}

type Sessions = (
    Arc<mcp_tasks_shim::bridge::modern_front::ModernSession>,
    Arc<mcp_tasks_shim::bridge::modern_front::ModernSession>,
);

async fn untagged_input_between(
    open: impl FnOnce(
        &Arc<ModernFront>,
        tokio::sync::mpsc::UnboundedSender<Message>,
        tokio::sync::mpsc::UnboundedSender<Message>,
    ) -> Sessions,
) {
    let (conn, events, server) = pair(STEP);
    let (mut from_shim, to_shim) = (server.from_shim, server.to_shim);
    let front = ModernFront::new(
        conn,
        Arc::new(MemoryLedger::default()),
        BridgeConfig::default(),
    );
    front.follow(events);
    let (a_tx, mut a_rx) = tokio::sync::mpsc::unbounded_channel();
    let (b_tx, mut b_rx) = tokio::sync::mpsc::unbounded_channel();
    let (alice, bob) = open(&front, a_tx, b_tx);
    let call = |id: i64| {
        Message::request(
            id,
            "tools/call",
            json!({"name": "ask", "arguments": {}, "_meta": meta()}),
        )
    };

    // Alice's call is open upstream, then Bob's.
    alice.handle_client(call(1));
    let alice_call = serve_until_call(&mut from_shim, &to_shim).await;
    bob.handle_client(call(2));
    let bob_call = serve_until_call(&mut from_shim, &to_shim).await;

    // The server asks a question that names no call (it is Alice's).
    let question = json!({"mode": "form", "message": "Alice's secret question?",
        "requestedSchema": {"type": "object", "properties": {}}});
    to_shim
        .send(Message::request("q1", "elicitation/create", question))
        .unwrap();
    // It is refused upstream rather than guessed.
    let refusal = next(&mut from_shim, "the answer to the question").await;
    assert_valid(
        Revision::Legacy,
        &serde_json::to_value(&refusal).unwrap(),
        None,
    );
    match refusal {
        Message::Error(e) => {
            assert_eq!(e.id, Some(Id::Str("q1".into())));
            assert_eq!(e.error.code, -32601, "{:?}", e.error);
        }
        other => panic!("the question was not refused: {other:?}"),
    }

    // Both calls end with their own plain results; neither client ever saw
    // an input request.
    for (id, text) in [(alice_call, "for alice"), (bob_call, "for bob")] {
        let result = json!({"content": [{"type": "text", "text": text}]});
        to_shim.send(Message::response(id, result)).unwrap();
    }
    for (rx, text) in [(&mut a_rx, "for alice"), (&mut b_rx, "for bob")] {
        let answer = next(rx, "the call's answer").await;
        let value = serde_json::to_value(&answer).unwrap();
        assert_valid(Revision::Modern, &value, Some("tools/call"));
        match answer {
            Message::Response(r) => {
                assert_eq!(r.result["content"][0]["text"], text, "{:?}", r.result);
                assert!(r.result.get("inputRequests").is_none(), "{:?}", r.result);
            }
            other => panic!("not a result: {other:?}"),
        }
    }
}
