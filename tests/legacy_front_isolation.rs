//! Issue 3: two legacy client sessions through ONE shim (one `LegacyFront`,
//! one upstream, one ledger) cannot see or touch each other's tasks.
//!
//! Built with the library API: the modern reference server runs as a child
//! process (`transport::child::spawn`), a `upstream::Connection` talks to it
//! over `transport::read_lines` / `write_lines`, `server/discover` is sent
//! by hand, and two sessions are opened with `LegacyFront::session`.
//!
//! Asserted: each session's `tasks/list` shows exactly its own tasks; a
//! foreign task id answers `tasks/get`, `tasks/result` and `tasks/cancel`
//! exactly like a random unknown id (same code, same message, same data); a
//! foreign `tasks/cancel` leaves the task running for its owner; a foreign
//! `tasks/list` cursor is refused like an invented one; no message about one
//! session's tasks reaches the other. Every message each session receives is
//! valid 2025-11-25.

mod support;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use mcp_tasks_shim::bridge::BridgeConfig;
use mcp_tasks_shim::bridge::legacy_front::{LegacyFront, LegacySession};
use mcp_tasks_shim::jsonrpc::{DEFAULT_MAX_MESSAGE_BYTES, ErrorObject, Id, Message};
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::revision;
use mcp_tasks_shim::transport::{self, Inbound, child};
use mcp_tasks_shim::upstream::{Connection, Upstream, UpstreamEvent};
use serde_json::{Value, json};
use support::schema::{Revision, assert_valid};
use tokio::sync::mpsc;

const TIMEOUT: Duration = Duration::from_secs(20);

/// One front over the modern reference server (a child process).
struct Shim {
    front: Arc<LegacyFront>,
    conn: Arc<Connection>,
    child: tokio::process::Child,
}

async fn start(page_size: usize) -> Shim {
    let up = child::spawn(
        env!("CARGO_BIN_EXE_mcp-tasks-shim"),
        &[
            "reference-server".into(),
            "--revision".into(),
            "2026-07-28".into(),
        ],
    )
    .expect("spawn the modern reference server");
    let (in_tx, mut in_rx) = mpsc::unbounded_channel();
    tokio::spawn(transport::read_lines(
        up.stdout,
        in_tx,
        DEFAULT_MAX_MESSAGE_BYTES,
    ));
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    tokio::spawn(transport::write_lines(up.stdin, out_rx));
    let conn = Arc::new(Connection::new(out_tx, TIMEOUT));

    // Upstream traffic: answers resolve requests, the rest goes to the front
    // (once it exists).
    let cell: Arc<OnceLock<Arc<LegacyFront>>> = Arc::default();
    let (c, f) = (conn.clone(), cell.clone());
    tokio::spawn(async move {
        while let Some(inbound) = in_rx.recv().await {
            let Inbound::Message(msg) = inbound else {
                continue;
            };
            if let Some(event) = c.on_inbound(msg)
                && let Some(front) = f.get()
            {
                front.handle_upstream(event).await;
            }
        }
        c.close("the upstream exited");
        if let Some(front) = f.get() {
            front
                .handle_upstream(UpstreamEvent::Closed("the upstream exited".into()))
                .await;
        }
    });

    let info = json!({"name": "isolation-test", "version": "1"});
    let probe = revision::probe_request(Id::Num(0), &info);
    let discover = tokio::time::timeout(
        TIMEOUT,
        conn.request("server/discover", probe.params().cloned().unwrap()),
    )
    .await
    .expect("discover in time")
    .expect("upstream reachable")
    .expect("discover succeeds");
    let config = BridgeConfig {
        page_size,
        ..BridgeConfig::default()
    };
    let front = LegacyFront::new(
        conn.clone(),
        Arc::new(MemoryLedger::default()),
        config,
        discover,
    );
    assert!(cell.set(front.clone()).is_ok());
    Shim {
        front,
        conn,
        child: up.child,
    }
}

/// One legacy client session, driven message by message.
struct Client {
    session: Arc<LegacySession>,
    rx: mpsc::UnboundedReceiver<Message>,
    next_id: i64,
    /// Everything this session received besides the answers waited for.
    others: Vec<Value>,
    /// Every message this session received.
    all: Vec<Value>,
}

impl Client {
    async fn open(shim: &Shim, scope: &str) -> Client {
        let (tx, rx) = mpsc::unbounded_channel();
        let session = shim
            .front
            .session(mcp_tasks_shim::scope::Principal::new(scope).into(), tx);
        let mut c = Client {
            session,
            rx,
            next_id: 1,
            others: Vec::new(),
            all: Vec::new(),
        };
        c.call(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": scope, "version": "1"}}),
        )
        .await
        .expect("initialize");
        c
    }

    async fn call(&mut self, method: &str, params: Value) -> Result<Value, ErrorObject> {
        let id = Id::Num(self.next_id);
        self.next_id += 1;
        self.session
            .handle_client(Message::request(id.clone(), method, params));
        let wait = async {
            loop {
                let msg = self.rx.recv().await.expect("session outbox open");
                let v = msg.to_value();
                let answers = msg.method().is_none() && msg.id() == Some(&id);
                assert_valid(Revision::Legacy, &v, answers.then_some(method));
                self.all.push(v.clone());
                match msg {
                    Message::Response(r) if r.id == id => return Ok(r.result),
                    Message::Error(e) if e.id.as_ref() == Some(&id) => return Err(e.error),
                    _ => self.others.push(v),
                }
            }
        };
        tokio::time::timeout(TIMEOUT, wait)
            .await
            .unwrap_or_else(|_| panic!("no answer to {method} within {TIMEOUT:?}"))
    }

    async fn ok(&mut self, method: &str, params: Value) -> Value {
        match self.call(method, params).await {
            Ok(v) => v,
            Err(e) => panic!("{method} failed: {e:?}"),
        }
    }

    async fn create(&mut self, seconds: f64, label: &str) -> String {
        let r = self
            .ok(
                "tools/call",
                json!({"name": "slow_compute", "arguments": {"seconds": seconds, "label": label},
                    "task": {"ttl": 60_000}}),
            )
            .await;
        r["task"]["taskId"].as_str().expect("taskId").to_owned()
    }

    async fn listed(&mut self) -> Vec<String> {
        let mut ids = Vec::new();
        let mut cursor = None;
        for _ in 0..20 {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = self.ok("tasks/list", params).await;
            ids.extend(
                page["tasks"]
                    .as_array()
                    .expect("tasks")
                    .iter()
                    .map(|t| t["taskId"].as_str().unwrap().to_owned()),
            );
            match page["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_owned()),
                None => return ids,
            }
        }
        panic!("tasks/list never ended");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_cannot_see_or_touch_each_others_tasks() {
    let mut shim = start(2).await;
    let mut alice = Client::open(&shim, "session-alice").await;
    let mut bob = Client::open(&shim, "session-bob").await;

    let a_slow = alice.create(30.0, "alice-slow").await;
    let a_done = alice.create(0.0, "alice-done").await;
    let a_more = alice.create(30.0, "alice-more").await;
    let b_slow = bob.create(30.0, "bob-slow").await;
    // Alice's quick task has ended (blocking result) before Bob pokes it.
    let r = alice.ok("tasks/result", json!({"taskId": a_done})).await;
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("alice-done")
    );

    // Each list shows exactly its own tasks, newest first.
    assert_eq!(
        alice.listed().await,
        [a_more.clone(), a_done.clone(), a_slow.clone()]
    );
    assert_eq!(bob.listed().await, std::slice::from_ref(&b_slow));

    // A foreign id is answered exactly like an id nobody ever saw.
    let random = mcp_tasks_shim::ids::random_id();
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let unknown = bob
            .call(method, json!({"taskId": random}))
            .await
            .expect_err("unknown id refused");
        assert_eq!(unknown.code, -32602, "{method}: {unknown:?}");
        for foreign in [&a_slow, &a_done] {
            let e = bob
                .call(method, json!({"taskId": foreign}))
                .await
                .expect_err("foreign id refused");
            assert_eq!(e, unknown, "{method} of a foreign task vs an unknown one");
        }
        let e = alice
            .call(method, json!({"taskId": b_slow}))
            .await
            .expect_err("foreign id refused");
        assert_eq!(e, unknown, "{method}, the other way round");
    }

    // Bob's cancel did not touch Alice's task: it still runs, and Alice
    // (only Alice) can cancel it.
    let t = alice.ok("tasks/get", json!({"taskId": a_slow})).await;
    assert_eq!(t["status"], "working", "{t}");
    let c = alice.ok("tasks/cancel", json!({"taskId": a_slow})).await;
    assert_eq!(c["status"], "cancelled");
    let t = bob.ok("tasks/get", json!({"taskId": b_slow})).await;
    assert_eq!(
        t["status"], "working",
        "Alice's cancel left Bob's task alone: {t}"
    );

    // Alice's cursor means nothing to Bob: refused like an invented one.
    let page = alice.ok("tasks/list", json!({})).await;
    let cursor = page["nextCursor"]
        .as_str()
        .expect("a second page")
        .to_owned();
    let invented = bob
        .call("tasks/list", json!({"cursor": "bogus"}))
        .await
        .expect_err("bad cursor");
    let foreign = bob
        .call("tasks/list", json!({"cursor": cursor}))
        .await
        .expect_err("foreign cursor");
    assert_eq!(invented.code, -32602);
    assert_eq!(foreign, invented);

    // Nothing Bob received mentions Alice's tasks, and vice versa.
    for (who, msgs, foreign) in [
        ("bob", &bob.all, vec![&a_slow, &a_done, &a_more]),
        ("alice", &alice.all, vec![&b_slow]),
    ] {
        for m in msgs {
            let text = m.to_string();
            for id in &foreign {
                assert!(
                    !text.contains(id.as_str()),
                    "{who} saw a foreign task id: {m}"
                );
            }
        }
    }

    // Clean up: cancel what still runs, close the upstream.
    let _ = alice.call("tasks/cancel", json!({"taskId": a_more})).await;
    let _ = bob.call("tasks/cancel", json!({"taskId": b_slow})).await;
    shim.conn.close("test over");
    let _ = tokio::time::timeout(Duration::from_secs(5), shim.child.wait()).await;
    let _ = shim.child.kill().await;
}
