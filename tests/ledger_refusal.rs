//! A task the ledger refuses after the server has started it: a call that
//! raced another to a client's last slot (the check before forwarding
//! passed for both), or a ledger whose store failed. The client is told
//! the call failed, so the server's task must be cancelled, not left to
//! run unseen. Both bridges, in process, against the reference servers;
//! the ledger is the memory one with its insert refused.

mod support;

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks_shim::bridge::BridgeConfig;
use mcp_tasks_shim::bridge::legacy_front::LegacyFront;
use mcp_tasks_shim::bridge::modern_front::ModernFront;
use mcp_tasks_shim::jsonrpc::Message;
use mcp_tasks_shim::ledger::{
    Change, Detail, Found, LedgerError, MemoryLedger, Millis, Page, TaskLedger, TaskRecord,
};
use mcp_tasks_shim::reference::ReferenceServer;
use mcp_tasks_shim::revision::{self, Revision};
use mcp_tasks_shim::scope::Scope;
use mcp_tasks_shim::upstream::{AnyUpstream, Link, channel};
use serde_json::{Value, json};
use support::schema::{Revision as SchemaRev, assert_valid};
use tokio::sync::mpsc;
use tokio::time::timeout;

const STEP: Duration = Duration::from_secs(10);

/// The memory ledger, except that every insert finds the scope full: the
/// last slot went to another call between the check (which passed) and
/// the insert.
#[derive(Debug, Default)]
struct LastSlotTaken(MemoryLedger);

#[mcp_tasks_shim::ledger::async_trait]
impl TaskLedger for LastSlotTaken {
    async fn insert(&self, _: TaskRecord, _: Millis) -> Result<(), LedgerError> {
        Err(LedgerError::ScopeFull(1))
    }
    async fn check_room(&self, _: &Scope, _: Millis) -> Result<(), LedgerError> {
        Ok(())
    }
    async fn fetch(&self, scope: &Scope, task_id: &str, now: Millis, detail: Detail) -> Found {
        self.0.fetch(scope, task_id, now, detail).await
    }
    async fn update(&self, scope: &Scope, task_id: &str, now: Millis, change: Change<'_>) -> Found {
        self.0.update(scope, task_id, now, change).await
    }
    async fn list(
        &self,
        scope: &Scope,
        cursor: Option<&str>,
        limit: usize,
        now: Millis,
    ) -> Result<Page, LedgerError> {
        self.0.list(scope, cursor, limit, now).await
    }
    async fn scope_of(&self, task_id: &str, now: Millis) -> Result<Option<Scope>, LedgerError> {
        self.0.scope_of(task_id, now).await
    }
    async fn drop_scope(&self, scope: &Scope) -> Result<(), LedgerError> {
        self.0.drop_scope(scope).await
    }
    async fn evict_expired(&self, now: Millis) -> Result<usize, LedgerError> {
        self.0.evict_expired(now).await
    }
    async fn len(&self) -> Result<usize, LedgerError> {
        self.0.len().await
    }
}

/// An in-process reference server of `revision`, probed; every message
/// the shim sends it is copied to the returned receiver.
async fn tapped_server(revision: Revision) -> (Link, mpsc::UnboundedReceiver<Message>) {
    let (conn, events, mut server_end) = channel::pair(STEP);
    let server = ReferenceServer::new(revision, server_end.to_shim.clone());
    let (tap, tapped) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(msg) = server_end.from_shim.recv().await {
            let _ = tap.send(msg.clone());
            server.handle(msg);
        }
    });
    (Link::probe(conn, events, STEP).await, tapped)
}

/// Waits for the shim to send the server `tasks/cancel`; returns its taskId.
async fn cancel_sent(tapped: &mut mpsc::UnboundedReceiver<Message>) -> String {
    timeout(STEP, async {
        loop {
            let m = tapped.recv().await.expect("the server's tap is open");
            if m.method() == Some("tasks/cancel") {
                return m.params().unwrap()["taskId"].as_str().unwrap().to_owned();
            }
        }
    })
    .await
    .expect("the refused task was cancelled upstream")
}

/// The client's next answer (requests and notifications skipped).
async fn answer(outbox: &mut mpsc::UnboundedReceiver<Message>) -> Value {
    timeout(STEP, async {
        loop {
            let m = outbox.recv().await.expect("the session's outbox is open");
            if matches!(m, Message::Response(_) | Message::Error(_)) {
                return m.to_value();
            }
        }
    })
    .await
    .expect("the call was answered")
}

fn assert_refused_and_cancelled(answer: &Value) {
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("task limit"), "{answer}");
    assert!(message.contains("cancelled"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_client_a_refused_task_is_cancelled_upstream() {
    let (link, mut tapped) = tapped_server(Revision::Modern).await;
    let Link {
        upstream: AnyUpstream::Modern(upstream),
        events,
        discover,
        ..
    } = link
    else {
        panic!("the reference server was probed as 2025-11-25");
    };
    let front = LegacyFront::new(
        upstream,
        Arc::new(LastSlotTaken::default()),
        BridgeConfig::default(),
        discover,
    );
    front.follow(events);
    let (out, mut outbox) = mpsc::unbounded_channel();
    let session = front.session(mcp_tasks_shim::scope::Principal::new("client").into(), out);
    session.handle_client(Message::request(
        1,
        "initialize",
        json!({"protocolVersion": revision::LEGACY_VERSION, "capabilities": {},
               "clientInfo": {"name": "refusal-test", "version": "0"}}),
    ));
    answer(&mut outbox).await;
    session.handle_client(Message::request(
        2,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "raced"},
               "task": {"ttl": 60000}}),
    ));
    let refused = answer(&mut outbox).await;
    assert_valid(SchemaRev::Legacy, &refused, Some("tools/call"));
    assert_refused_and_cancelled(&refused);
    let cancelled = cancel_sent(&mut tapped).await;
    assert!(!cancelled.is_empty());
}

/// A 2026-07-28 client's session, over `ledger`, in front of the tapped
/// 2025-11-25 reference server: the session, its outbox and the tap.
async fn modern_client(
    ledger: Arc<dyn TaskLedger>,
) -> (
    Arc<mcp_tasks_shim::bridge::modern_front::ModernSession>,
    mpsc::UnboundedReceiver<Message>,
    mpsc::UnboundedReceiver<Message>,
) {
    let (link, tapped) = tapped_server(Revision::Legacy).await;
    let Link {
        upstream: AnyUpstream::Legacy(upstream),
        events,
        ..
    } = link
    else {
        panic!("the reference server was probed as 2026-07-28");
    };
    let front = ModernFront::new(upstream, ledger, BridgeConfig::default());
    front.follow(events);
    let (out, outbox) = mpsc::unbounded_channel();
    (
        front.session(mcp_tasks_shim::scope::Principal::new("client").into(), out),
        outbox,
        tapped,
    )
}

/// A 2026-07-28 client's per-request `_meta`, declaring the extension.
fn modern_meta() -> Value {
    json!({
        revision::META_PROTOCOL_VERSION: revision::MODERN_VERSION,
        revision::META_CLIENT_CAPABILITIES: {"extensions": {revision::TASKS_EXTENSION: {}}},
        revision::META_CLIENT_INFO: {"name": "refusal-test", "version": "0"},
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_client_a_refused_task_is_cancelled_upstream() {
    let (session, mut outbox, mut tapped) = modern_client(Arc::new(LastSlotTaken::default())).await;
    let meta = modern_meta();
    session.handle_client(Message::request(
        1,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "raced"},
               "_meta": meta}),
    ));
    let refused = answer(&mut outbox).await;
    assert_valid(SchemaRev::Modern, &refused, Some("tools/call"));
    assert_refused_and_cancelled(&refused);
    let cancelled = cancel_sent(&mut tapped).await;
    assert!(!cancelled.is_empty());
}

/// With the ledger's cap reached, a 2026-07-28 client's next task call is
/// refused before it reaches the 2025-11-25 server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_client_at_its_cap_is_refused_before_the_server_starts_work() {
    let (session, mut outbox, mut tapped) = modern_client(Arc::new(MemoryLedger::new(1))).await;
    let meta = modern_meta();
    let call = |id: i64, label: &str| {
        Message::request(
            id,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": label},
                   "_meta": meta}),
        )
    };
    session.handle_client(call(1, "first"));
    let created = answer(&mut outbox).await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    session.handle_client(call(2, "second"));
    let refused = answer(&mut outbox).await;
    assert_valid(SchemaRev::Modern, &refused, Some("tools/call"));
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("task limit") && !m.contains("cancelled")),
        "{refused}"
    );
    // Everything the server was sent so far: one call only, no cancel.
    let mut sent = Vec::new();
    while let Ok(m) = tapped.try_recv() {
        sent.push(m.to_value());
    }
    let calls: Vec<&Value> = sent
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .collect();
    assert_eq!(calls.len(), 1, "{sent:#?}");
    assert_eq!(calls[0]["params"]["arguments"]["label"], "first");
    assert!(
        !sent.iter().any(|m| m["method"] == "tasks/cancel"),
        "{sent:#?}"
    );
}
