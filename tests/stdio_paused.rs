//! The stdio front's timing on paused time: `stdio::serve_stdio` between
//! a client of one revision and the crate's reference server of the other,
//! both in process over duplex pairs, under
//! `#[tokio::test(start_paused = true)]`.
//! The engine's polls, the reference server's task durations and the
//! client's own waits run on tokio's clock, which jumps ahead only once
//! everything waits: "settled" means settled, not "a guess later".

mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use mcp_tasks_shim::driver::stdio::{self, ProxyOptions};
use mcp_tasks_shim::jsonrpc::Message;
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::reference::ReferenceServer;
use mcp_tasks_shim::upstream;
use serde_json::{Value, json};
use support::schema::{Revision, assert_valid};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf};
use tokio::io::{WriteHalf, split};
use tokio::time::timeout;

/// Bound on one answer, in paused (virtual) time.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// What crossed the upstream link, each way, in order; waited on as it
/// grows.
#[derive(Clone)]
struct Tap {
    /// Shim → server.
    sent: tokio::sync::watch::Sender<Vec<Value>>,
    /// Server → shim.
    got: tokio::sync::watch::Sender<Vec<Value>>,
}

/// The first message in `log` matching `pred`, waited for (paused time,
/// bounded).
async fn recorded(
    log: &tokio::sync::watch::Sender<Vec<Value>>,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let mut rx = log.subscribe();
    let found = timeout(REQUEST_TIMEOUT, rx.wait_for(|l| l.iter().any(&pred)))
        .await
        .unwrap_or_else(|_| panic!("not recorded: {:#?}", log.borrow()))
        .expect("the tap is open")
        .iter()
        .find(|m| pred(m))
        .cloned();
    found.expect("found")
}

/// The reference server's wire loop on one end of a duplex pair; what
/// crosses it is recorded. With `hold`, the server's answer to every
/// `tools/call` labelled `FAULT` is held back that long (a server slow to
/// create the task) while other lines flow, as `fault_relay.py slowcreate`
/// does for a child server.
fn spawn_server(
    revision: mcp_tasks_shim::revision::Revision,
    end: DuplexStream,
    hold: Option<Duration>,
) -> Tap {
    let tap = Tap {
        sent: tokio::sync::watch::Sender::new(Vec::new()),
        got: tokio::sync::watch::Sender::new(Vec::new()),
    };
    let (r, mut w) = split(end);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Message>();
    let server = ReferenceServer::new(revision, tx.clone());
    let held: Arc<std::sync::Mutex<Vec<Value>>> = Arc::default();
    let got = tap.got.clone();
    let holding = held.clone();
    tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            let v = msg.to_value();
            let answer_held = v.get("method").is_none() && {
                let mut ids = holding.lock().unwrap();
                let before = ids.len();
                ids.retain(|id| *id != v["id"]);
                ids.len() != before
            };
            if let (true, Some(hold)) = (answer_held, hold) {
                let tx = tx.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(hold).await;
                    let _ = tx.send(msg);
                });
                continue;
            }
            got.send_modify(|l| l.push(v));
            if w.write_all(&msg.to_line()).await.is_err() {
                break;
            }
        }
    });
    let sent = tap.sent.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(r).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let msg = Message::parse(line.as_bytes()).expect("shim sent valid JSON-RPC");
            let v = msg.to_value();
            if hold.is_some()
                && v["method"] == "tools/call"
                && v["params"]["arguments"]["label"] == "FAULT"
            {
                held.lock().unwrap().push(v["id"].clone());
            }
            sent.send_modify(|l| l.push(v));
            server.handle(msg);
        }
    });
    tap
}

/// A client of the shim; every message the shim sends it is checked
/// against its revision's schema.
struct Client {
    rev: Revision,
    w: WriteHalf<DuplexStream>,
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    next_id: i64,
    /// Methods of the requests not answered yet, by id.
    sent: HashMap<String, String>,
    backlog: Vec<Value>,
    /// The upstream link.
    tap: Tap,
}

impl Client {
    /// A 2025-11-25 client of the shim (default options) in front of the
    /// 2026-07-28 reference server.
    async fn legacy_front() -> Client {
        Client::start(Revision::Legacy, mcp_tasks_shim::revision::Revision::Modern).await
    }

    /// A 2026-07-28 client of the shim in front of the 2025-11-25
    /// reference server.
    async fn modern_front() -> Client {
        Client::start(Revision::Modern, mcp_tasks_shim::revision::Revision::Legacy).await
    }

    async fn start(rev: Revision, server: mcp_tasks_shim::revision::Revision) -> Client {
        Client::start_with(rev, server, ProxyOptions::default(), None).await
    }

    /// As [`Client::start`], with `opts` (`request_timeout` is the
    /// upstream link's, as `--request-timeout` makes it) and the
    /// server's [`spawn_server`] `hold`.
    async fn start_with(
        rev: Revision,
        server: mcp_tasks_shim::revision::Revision,
        opts: ProxyOptions,
        hold: Option<Duration>,
    ) -> Client {
        let (shim_up, server_end) = tokio::io::duplex(64 * 1024);
        let tap = spawn_server(server, server_end, hold);
        let (from_server, to_server) = split(shim_up);
        let link = upstream::io::connect(
            from_server,
            to_server,
            opts.request_timeout,
            opts.probe_timeout,
            opts.max_message_bytes,
        )
        .await;
        let (client_end, shim_down) = tokio::io::duplex(64 * 1024);
        let (shim_r, shim_w) = split(shim_down);
        tokio::spawn(stdio::serve_stdio(
            shim_r,
            shim_w,
            link,
            Arc::new(MemoryLedger::default()),
            opts,
        ));
        let (r, w) = split(client_end);
        Client {
            rev,
            w,
            lines: BufReader::new(r).lines(),
            next_id: 0,
            sent: HashMap::new(),
            backlog: Vec::new(),
            tap,
        }
    }

    async fn write(&mut self, msg: &Value) {
        let mut line = serde_json::to_vec(msg).unwrap();
        line.push(b'\n');
        self.w.write_all(&line).await.expect("the shim reads");
    }

    /// Sends a request; its id.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.sent.insert(id.to_string(), method.to_owned());
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    async fn notify(&mut self, method: &str, params: Value) {
        self.write(&json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// The next message within `within` (paused time), schema-checked.
    async fn next(&mut self, within: Duration) -> Option<Value> {
        let line = timeout(within, self.lines.next_line()).await.ok()?;
        let line = line.expect("the shim's output reads")?;
        let msg: Value = serde_json::from_str(&line).expect("the shim writes JSON");
        let answered = msg
            .get("id")
            .filter(|_| msg.get("method").is_none())
            .and_then(|id| self.sent.remove(&id.to_string()));
        assert_valid(self.rev, &msg, answered.as_deref());
        Some(msg)
    }

    /// Lets `d` of (paused) time pass, keeping what the shim sends meanwhile.
    async fn settle(&mut self, d: Duration) {
        let until = tokio::time::Instant::now() + d;
        loop {
            let left = until.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return;
            }
            match self.next(left).await {
                Some(m) => self.backlog.push(m),
                None => return,
            }
        }
    }

    /// Reads what the shim sends for `d` (paused time); fails if any of it
    /// answers request `id`.
    async fn assert_unanswered_for(&mut self, id: &Value, d: Duration) {
        self.settle(d).await;
        let answer = self
            .backlog
            .iter()
            .find(|m| m.get("method").is_none() && m["id"] == *id);
        assert!(
            answer.is_none(),
            "the cancelled request {id} was answered: {answer:?}"
        );
    }

    /// The response to `id`; everything else read meanwhile is kept.
    async fn response(&mut self, id: &Value) -> Value {
        let answers = |m: &Value| m.get("method").is_none() && m.get("id") == Some(id);
        if let Some(i) = self.backlog.iter().position(answers) {
            return self.backlog.remove(i);
        }
        loop {
            let msg = self
                .next(REQUEST_TIMEOUT)
                .await
                .unwrap_or_else(|| panic!("no answer to {id} within {REQUEST_TIMEOUT:?}"));
            if answers(&msg) {
                return msg;
            }
            self.backlog.push(msg);
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.response(&id).await
    }

    async fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params).await;
        assert!(r.get("error").is_none(), "{method}: {r}");
        r["result"].clone()
    }

    async fn err(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params).await;
        r.get("error")
            .cloned()
            .unwrap_or_else(|| panic!("{method} should fail: {r}"))
    }

    /// `initialize` declaring `capabilities`, then `initialized`.
    async fn initialize(&mut self, capabilities: Value) {
        self.ok(
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
                "clientInfo": {"name": "stdio-paused", "version": "1.0.0"}}),
        )
        .await;
        self.notify("notifications/initialized", json!({})).await;
    }

    /// The `elicitation/create` questions among what the shim sends until
    /// it has been quiet for `quiet` (paused time); the rest is kept.
    async fn questions(&mut self, quiet: Duration) -> Vec<Value> {
        let mut seen = Vec::new();
        while let Some(m) = self.next(quiet).await {
            if m["method"] == "elicitation/create" {
                seen.push(m);
            } else {
                self.backlog.push(m);
            }
        }
        seen
    }

    /// A task of `name`; its id.
    async fn create(&mut self, name: &str, args: Value) -> String {
        let call = json!({"name": name, "arguments": args, "task": {"ttl": 60_000}});
        let r = self.ok("tools/call", call).await;
        assert_eq!(r["task"]["status"], "working", "{r}");
        r["task"]["taskId"].as_str().expect("taskId").to_owned()
    }

    /// Task `id` as `tasks/list` shows it.
    async fn listed(&mut self, id: &str) -> Value {
        let list = self.ok("tasks/list", json!({})).await;
        list["tasks"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["taskId"] == id))
            .cloned()
            .unwrap_or_else(|| panic!("{id} not listed: {list}"))
    }
}

/// A cancel is pinned everywhere: the blocking `tasks/result` in flight
/// fails naming it, and `tasks/get`, `tasks/list`, `tasks/result` and a
/// second cancel all see the task cancelled; the client is told once.
#[tokio::test(start_paused = true)]
async fn a_cancel_is_pinned_everywhere() {
    let mut shim = Client::legacy_front().await;
    shim.initialize(json!({})).await;
    let id = shim
        .create("slow_compute", json!({"seconds": 30, "label": "pinned"}))
        .await;
    // A blocking tasks/result in flight when the cancel lands, settled in:
    // the wait follows the task upstream, so the upstream's news of the
    // cancel races the cancel's own answer. Half a second of the task's
    // 30 s passes, once all is quiet.
    let waiting = shim.request("tasks/result", json!({"taskId": id})).await;
    shim.settle(Duration::from_millis(500)).await;
    assert!(
        !shim.backlog.iter().any(|m| m.get("id") == Some(&waiting)),
        "nothing answers a wait on a 30 s task: {:#?}",
        shim.backlog
    );

    let c = shim.ok("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(c["status"], "cancelled", "{c}");
    assert_eq!(c["taskId"], id.as_str(), "{c}");

    let blocked = shim.response(&waiting).await;
    assert!(blocked.get("error").is_some(), "{blocked}");
    assert!(
        blocked["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("cancel"),
        "{blocked}"
    );

    let t = shim.ok("tasks/get", json!({"taskId": id})).await;
    assert_eq!(t["status"], "cancelled", "{t}");
    let listed = shim.listed(&id).await;
    assert_eq!(listed["status"], "cancelled", "{listed}");
    let e = shim.err("tasks/result", json!({"taskId": id})).await;
    assert_eq!(e["code"], -32602, "{e}");
    let e = shim.err("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(e["code"], -32602, "double cancel: {e}");
    assert!(
        e["message"].as_str().unwrap_or("").contains("cancelled"),
        "{e}"
    );

    // The client was told, with one status notification (the upstream's
    // own news of the end, seen during the cancel, is not told again):
    // everything the shim still sends, until it has been quiet a while.
    let told = |m: &Value| {
        m["method"] == "notifications/tasks/status"
            && m["params"]["taskId"] == id.as_str()
            && m["params"]["status"] == "cancelled"
    };
    let mut seen = std::mem::take(&mut shim.backlog);
    while let Some(m) = shim.next(Duration::from_secs(1)).await {
        seen.push(m);
    }
    let notes: Vec<&Value> = seen.iter().filter(|m| told(m)).collect();
    assert_eq!(notes.len(), 1, "{seen:#?}");

    // Unknown ids: -32602, one answer for all three methods.
    let mut messages = Vec::new();
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let e = shim.err(method, json!({"taskId": "no-such-task"})).await;
        assert_eq!(e["code"], -32602, "{method}: {e}");
        messages.push(e["message"].clone());
    }
    assert!(messages.windows(2).all(|w| w[0] == w[1]), "{messages:?}");
}

/// A client cancels its `tasks/result` while the task's question waits,
/// then waits again: the question is not asked a second time (it is still
/// the client's to answer), and answering it finishes the task.
#[tokio::test(start_paused = true)]
async fn a_question_is_not_asked_again_after_a_cancelled_wait() {
    let mut shim = Client::legacy_front().await;
    shim.initialize(json!({"elicitation": {"form": {}}})).await;
    let task = shim
        .create("confirm_delete", json!({"filename": "f.txt"}))
        .await;
    let first = shim.request("tasks/result", json!({"taskId": task})).await;
    // The question comes (waited for as long as any answer), then no
    // second one while the shim stays quiet.
    let mut asked = loop {
        let m = shim
            .next(REQUEST_TIMEOUT)
            .await
            .expect("the task's question is asked");
        if m["method"] == "elicitation/create" {
            break vec![m];
        }
        shim.backlog.push(m);
    };
    asked.extend(shim.questions(Duration::from_millis(800)).await);
    assert_eq!(asked.len(), 1, "{asked:#?}");
    shim.notify("notifications/cancelled", json!({"requestId": first}))
        .await;
    // The cancelled wait is gone, watcher and all, once the shim is quiet.
    asked.extend(shim.questions(Duration::from_millis(300)).await);
    assert_eq!(asked.len(), 1, "asked again after the cancel: {asked:#?}");
    let second = shim.request("tasks/result", json!({"taskId": task})).await;
    let again = shim.questions(Duration::from_millis(800)).await;
    assert!(again.is_empty(), "asked again: {again:#?}");
    shim.write(&json!({"jsonrpc": "2.0", "id": asked[0]["id"],
        "result": {"action": "accept", "content": {"confirm": true}}}))
        .await;
    let done = shim.response(&second).await;
    assert!(
        done["result"]["content"].to_string().contains("f.txt"),
        "{done}"
    );
}

/// A cancelled `tasks/result` gets no answer, not even when the task
/// ends, and the task runs on to its end (the cancel was of the wait).
#[tokio::test(start_paused = true)]
async fn a_cancelled_tasks_result_gets_no_answer_and_leaves_the_task_running() {
    let mut shim = Client::legacy_front().await;
    shim.initialize(json!({})).await;
    let task = shim
        .create("slow_compute", json!({"seconds": 5, "label": "kept"}))
        .await;
    let id = shim.request("tasks/result", json!({"taskId": task})).await;
    // Answered after the wait above was taken up (input is read in order).
    shim.ok("ping", json!({})).await;
    shim.notify("notifications/cancelled", json!({"requestId": id}))
        .await;
    shim.ok("ping", json!({})).await;
    // A second wait ends with the task, when the abandoned one would have
    // been answered too: it says nothing then, nor a moment after.
    let r = shim.ok("tasks/result", json!({"taskId": task})).await;
    assert!(r["content"].to_string().contains("kept"), "{r}");
    shim.assert_unanswered_for(&id, Duration::from_secs(1))
        .await;
    // Cancelling the wait is not cancelling the task: it ran to its end.
    let t = shim.ok("tasks/get", json!({"taskId": task})).await;
    assert_eq!(t["status"], "completed", "{t}");
}

/// A cancelled plain call, which the modern server turned into a task the
/// shim drives, gets no answer, not even after the work would have ended;
/// the shim cancels the task upstream while it runs, and never sends the
/// client's own id there.
#[tokio::test(start_paused = true)]
async fn a_cancelled_plain_call_gets_no_answer_and_its_driven_task_is_cancelled() {
    let mut shim = Client::legacy_front().await;
    shim.initialize(json!({})).await;
    const WORK_S: u64 = 10;
    let started = tokio::time::Instant::now();
    let id = shim
        .request(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": WORK_S, "label": "unwanted"}}),
        )
        .await;
    let tap = shim.tap.clone();
    let call = recorded(&tap.sent, |m| m["method"] == "tools/call").await;
    // Cancelled once the server has created the task.
    let created = recorded(&tap.got, |m| {
        m["id"] == call["id"] && m.get("method").is_none()
    })
    .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    shim.notify(
        "notifications/cancelled",
        json!({"requestId": id, "reason": "the user gave up"}),
    )
    .await;
    // Later requests are answered; the cancelled one never is.
    shim.ok("ping", json!({})).await;
    // The client could not see that task, so the shim cancels it, while
    // it still runs.
    let cancel = recorded(&tap.sent, |m| m["method"] == "tasks/cancel").await;
    assert_eq!(cancel["params"]["taskId"], created["result"]["taskId"]);
    let ack = recorded(&tap.got, |m| {
        m["id"] == cancel["id"] && m.get("method").is_none()
    })
    .await;
    // Acknowledged, not refused as for an ended task: it still ran.
    assert!(ack.get("result").is_some(), "{ack}");
    let work_over = started + Duration::from_secs(WORK_S + 1);
    shim.assert_unanswered_for(&id, work_over - tokio::time::Instant::now())
        .await;
    // The client's id means nothing upstream: it is never sent there.
    let upstream_sent = tap.sent.borrow().clone();
    assert!(
        !upstream_sent
            .iter()
            .any(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == id),
        "{upstream_sent:#?}"
    );
}

/// The 2026-07-28 request `_meta` of a client declaring elicitation and,
/// `with_tasks`, the tasks extension.
fn meta(with_tasks: bool) -> Value {
    let mut caps = json!({"elicitation": {"form": {}}});
    if with_tasks {
        caps["extensions"] = json!({"io.modelcontextprotocol/tasks": {}});
    }
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "stdio-paused", "version": "1"}})
}

/// A modern client's cancelled call is cancelled upstream under the
/// shim's id, in 2025-11-25 terms; nothing answers it, not even after the
/// work would have ended, and the client's own id never goes upstream.
#[tokio::test(start_paused = true)]
async fn a_cancelled_call_is_cancelled_upstream_under_the_shims_id() {
    let mut s = Client::modern_front().await;
    const WORK_S: u64 = 10;
    let started = tokio::time::Instant::now();
    let mut p =
        json!({"name": "slow_compute", "arguments": {"seconds": WORK_S, "label": "unwanted"}});
    p["_meta"] = meta(false);
    let id = s.request("tools/call", p).await;
    // Cancelled once the call is upstream.
    let tap = s.tap.clone();
    let call = recorded(&tap.sent, |m| m["method"] == "tools/call").await;
    s.write(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "the user gave up", "_meta": meta(false)}}),
    )
    .await;
    // Later requests are answered.
    let listed = s.call("tools/list", json!({"_meta": meta(false)})).await;
    assert!(listed["result"]["tools"].is_array(), "{listed}");
    // Upstream the call has the shim's id; the cancel names that id, in
    // 2025-11-25 terms (no 2026-07-28 `_meta`).
    let cancel = recorded(&tap.sent, |m| {
        m["method"] == "notifications/cancelled" && m["params"]["requestId"] == call["id"]
    })
    .await;
    assert!(cancel["params"].get("_meta").is_none(), "{cancel}");
    // Nothing answers the cancelled request, even after the call would
    // have ended: the upstream stopped it (it never answered it) and the
    // shim sent nothing of its own.
    let work_over = started + Duration::from_secs(WORK_S + 1);
    s.assert_unanswered_for(&id, work_over - tokio::time::Instant::now())
        .await;
    let upstream_got = tap.got.borrow().clone();
    assert!(
        !upstream_got.iter().any(|m| m["id"] == call["id"]),
        "the upstream finished the cancelled call: {upstream_got:#?}"
    );
    let upstream_sent = tap.sent.borrow().clone();
    assert!(
        !upstream_sent
            .iter()
            .any(|m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == id),
        "the client's id reached the upstream: {upstream_sent:#?}"
    );
}

/// A task may run longer than `--request-timeout`: the shim's wait for
/// its outcome (a blocking `tasks/result` upstream) is asked again when
/// one wait times out while the task still runs, instead of the task
/// reading `failed` with "no answer to tasks/result within 1 s".
#[tokio::test(start_paused = true)]
async fn a_task_may_outlast_the_request_timeout() {
    let opts = ProxyOptions {
        request_timeout: Duration::from_secs(1),
        ..ProxyOptions::default()
    };
    let mut s = Client::start_with(
        Revision::Modern,
        mcp_tasks_shim::revision::Revision::Legacy,
        opts,
        None,
    )
    .await;
    s.ok("server/discover", json!({"_meta": meta(true)})).await;
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 2.5, "label": "long"},
        "_meta": meta(true)});
    let created = s.ok("tools/call", call).await;
    assert_eq!(created["resultType"], "task", "{created}");
    let id = created["taskId"].as_str().expect("taskId").to_owned();
    // Polled as a client does, at the interval the shim asks for, in
    // paused time (bounded).
    let mut t = Value::Null;
    for _ in 0..200 {
        t = s
            .ok("tasks/get", json!({"taskId": id, "_meta": meta(true)}))
            .await;
        if ["completed", "failed", "cancelled"].contains(&t["status"].as_str().unwrap_or("")) {
            break;
        }
        let pause = t["pollIntervalMs"].as_u64().unwrap_or(100).min(250);
        s.settle(Duration::from_millis(pause)).await;
    }
    assert_eq!(t["status"], "completed", "{t}");
    assert!(t["result"]["content"].to_string().contains("long"), "{t}");
}

/// A client cancels a task call before the server has answered its
/// creation (the server takes 5 s): the shim awaits the creation and
/// cancels the task with `tasks/cancel`, instead of dropping the answer,
/// which left a task nobody could reach running to its end. Both ways:
/// a 2026-07-28 client in front of a 2025-11-25 server (which must not be
/// sent `notifications/cancelled` for a task-augmented request: that
/// revision requires `tasks/cancel`), and a 2025-11-25 client asking a
/// 2026-07-28 server for a task.
#[tokio::test(start_paused = true)]
async fn a_task_call_cancelled_before_its_creation_gets_its_task_cancelled() {
    use mcp_tasks_shim::revision::Revision as Server;
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 5, "label": "FAULT"}});
    let mut legacy_call = call.clone();
    legacy_call["task"] = json!({"ttl": 60000});
    let mut modern_call = call;
    modern_call["_meta"] = meta(true);
    for (client, server, params, task_of) in [
        (
            Revision::Modern,
            Server::Legacy,
            modern_call,
            "/result/task/taskId",
        ),
        (
            Revision::Legacy,
            Server::Modern,
            legacy_call,
            "/result/taskId",
        ),
    ] {
        let hold = Some(Duration::from_secs(5));
        let mut shim = Client::start_with(client, server, ProxyOptions::default(), hold).await;
        let as_client = |mut params: Value| {
            if client == Revision::Modern {
                params["_meta"] = meta(true);
            }
            params
        };
        match client {
            Revision::Modern => {
                shim.ok("server/discover", as_client(json!({}))).await;
            }
            Revision::Legacy => shim.initialize(json!({})).await,
        }
        let tap = shim.tap.clone();
        let id = shim.request("tools/call", params).await;
        let upstream_call = recorded(&tap.sent, |m| m["method"] == "tools/call").await;
        shim.notify("notifications/cancelled", json!({"requestId": id}))
            .await;
        let created = recorded(&tap.got, |m| {
            m["id"] == upstream_call["id"] && m.pointer(task_of).is_some()
        })
        .await;
        let task = created.pointer(task_of).cloned().unwrap_or_default();
        let cancel = recorded(&tap.sent, |m| {
            m["method"] == "tasks/cancel" && m["params"]["taskId"] == task
        })
        .await;
        if server == Server::Legacy {
            let upstream_sent = tap.sent.borrow().clone();
            assert!(
                !upstream_sent
                    .iter()
                    .any(|m| m["method"] == "notifications/cancelled"
                        && m["params"]["requestId"] == upstream_call["id"]),
                "a task-augmented request was cancelled with notifications/cancelled: {upstream_sent:#?}"
            );
        }
        // Whatever the shim tells the client about the call it does by
        // the time the server acknowledged the cancel; a request after
        // that is answered after it.
        recorded(&tap.got, |m| {
            m["id"] == cancel["id"] && m.get("method").is_none()
        })
        .await;
        shim.ok("tools/list", as_client(json!({}))).await;
        for m in std::mem::take(&mut shim.backlog) {
            assert!(
                !(m.get("method").is_none() && m["id"] == id),
                "{client:?}: the cancelled call was answered: {m}"
            );
        }
    }
}
