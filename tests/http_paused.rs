//! The HTTP front's timing on paused time: the library's router driven
//! in process (tower `oneshot`, no sockets) over an in-process reference
//! server, under `#[tokio::test(start_paused = true)]`. The idle-session
//! sweeps, the reference server's task durations and the clients' own
//! pacing all run on tokio's clock, which jumps ahead whenever everything
//! waits: the order of events is the one real time would give, without
//! waiting for it.

mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode};
use futures_util::StreamExt;
use mcp_tasks_shim::driver::http::{ConfiguredPrincipals, HttpOptions, HttpShim};
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::reference::ReferenceServer;
use mcp_tasks_shim::revision::Revision as Rev;
use mcp_tasks_shim::upstream::{Link, channel};
use serde_json::{Value, json};
use support::http::{BOTH, LEGACY, rpc};
use support::schema::{Revision, assert_valid};
use tokio::time::timeout;
use tower::ServiceExt;

/// Bound on one exchange, in paused (virtual) time.
const STEP: Duration = Duration::from_secs(15);

/// An in-process reference server of `revision`, probed; `heard` gets
/// every message the shim sends it.
async fn in_process(revision: Rev, heard: tokio::sync::watch::Sender<Vec<Value>>) -> Link {
    let (conn, events, mut server_end) = channel::pair(Duration::from_secs(30));
    let server = ReferenceServer::new(revision, server_end.to_shim.clone());
    tokio::spawn(async move {
        while let Some(msg) = server_end.from_shim.recv().await {
            heard.send_modify(|h| h.push(msg.to_value()));
            server.handle(msg);
        }
    });
    Link::probe(conn, events, Duration::from_secs(5)).await
}

/// The shim's router (and its metrics at `/metrics`), called in process.
#[derive(Clone)]
struct Front {
    router: Router,
    /// What the upstream server was sent, in order.
    heard: tokio::sync::watch::Sender<Vec<Value>>,
}

impl Front {
    async fn start(opts: HttpOptions) -> (HttpShim, Front) {
        let heard = tokio::sync::watch::Sender::new(Vec::new());
        let shim = HttpShim::new(
            opts,
            in_process(Rev::Modern, heard.clone()).await,
            Arc::new(MemoryLedger::default()),
            Arc::new(ConfiguredPrincipals::default()),
        )
        .expect("the default path");
        let router = shim.router().merge(shim.metrics_router("/metrics"));
        (shim, Front { router, heard })
    }

    /// How many messages the upstream was sent so far.
    fn upstream_count(&self) -> usize {
        self.heard.borrow().len()
    }

    /// Waits (paused time, bounded) until the upstream was sent a message
    /// matching `pred`, after the first `from`.
    async fn upstream_heard(&self, from: usize, pred: impl Fn(&Value) -> bool) -> Value {
        let mut rx = self.heard.subscribe();
        let found = |h: &Vec<Value>| h.iter().skip(from).find(|m| pred(m)).cloned();
        let heard = timeout(STEP, rx.wait_for(|h| found(h).is_some()))
            .await
            .unwrap_or_else(|_| panic!("never sent upstream: {:#?}", self.heard.borrow()))
            .expect("the server loop runs");
        found(&heard).expect("found")
    }

    /// A 2025-11-25 POST of `body`, as a request to send.
    fn legacy_post(sid: Option<&str>, body: &Value, accept: &str) -> Request<Body> {
        let mut req = Request::post("/mcp")
            .header("content-type", "application/json")
            .header("accept", accept)
            .header("mcp-protocol-version", LEGACY);
        if let Some(sid) = sid {
            req = req.header("mcp-session-id", sid);
        }
        req.body(Body::from(body.to_string())).unwrap()
    }

    async fn call(&self, req: Request<Body>) -> axum::response::Response {
        timeout(STEP, self.router.clone().oneshot(req))
            .await
            .expect("answered in time")
            .expect("the router is infallible")
    }

    /// A 2025-11-25 POST of `body` accepting `accept`; the whole answer.
    async fn post(&self, sid: Option<&str>, body: &Value, accept: &str) -> Exchange {
        read(self.call(Front::legacy_post(sid, body, accept)).await).await
    }

    async fn ping(&self, sid: &str, id: i64) -> Exchange {
        self.post(Some(sid), &rpc(id, "ping", json!({})), BOTH)
            .await
    }

    /// A session opened with `initialize` and `notifications/initialized`.
    async fn initialize(&self) -> String {
        let init = rpc(
            0,
            "initialize",
            json!({"protocolVersion": LEGACY, "capabilities": {"elicitation": {"form": {}}},
                "clientInfo": {"name": "paused-test", "version": "0"}}),
        );
        let (s, body, h) = self.post(None, &init, BOTH).await;
        assert_eq!(s, StatusCode::OK, "initialize: {body}");
        assert_valid(Revision::Legacy, &body, Some("initialize"));
        let sid = h["mcp-session-id"].to_str().unwrap().to_owned();
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let (s, _, _) = self.post(Some(&sid), &note, BOTH).await;
        assert_eq!(s, StatusCode::ACCEPTED);
        sid
    }

    /// The id of a `slow_compute` task of `seconds` started in session
    /// `sid` (request id 1).
    async fn start_task(&self, sid: &str, seconds: u64, label: &str) -> String {
        let call = rpc(
            1,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": seconds, "label": label},
                   "task": {"ttl": 120000}}),
        );
        let (_, created, _) = self.post(Some(sid), &call, BOTH).await;
        assert_valid(Revision::Legacy, &created, Some("tools/call"));
        created["result"]["task"]["taskId"]
            .as_str()
            .expect("a task was created")
            .to_owned()
    }

    /// A gauge of the metrics endpoint.
    async fn gauge(&self, name: &str) -> u64 {
        let resp = self
            .call(Request::get("/metrics").body(Body::empty()).unwrap())
            .await;
        let text = String::from_utf8(body_bytes(resp).await).unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in\n{text}"))
    }

    /// Waits (in paused time, bounded) until gauge `name` reads `want`.
    async fn await_gauge(&self, name: &str, want: u64) {
        let mut tick = tokio::time::interval(Duration::from_millis(100));
        let mut got = self.gauge(name).await;
        for _ in 0..100 {
            if got == want {
                return;
            }
            tick.tick().await;
            got = self.gauge(name).await;
        }
        assert_eq!(got, want, "{name}");
    }
}

/// (status, JSON body or Null, headers); an SSE answer is read to its end
/// and its last `message` event returned.
type Exchange = (StatusCode, Value, HeaderMap);

async fn body_bytes(resp: axum::response::Response) -> Vec<u8> {
    let mut body = resp.into_body().into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = timeout(STEP, body.next()).await.expect("the body ends") {
        bytes.extend_from_slice(&chunk.expect("a body chunk"));
    }
    bytes
}

async fn read(resp: axum::response::Response) -> Exchange {
    let (status, mut messages, headers) = read_all(resp).await;
    (status, messages.pop().unwrap_or(Value::Null), headers)
}

/// (status, every message of the body, headers): an SSE body's `message`
/// events read to its end, or the one JSON body.
async fn read_all(resp: axum::response::Response) -> (StatusCode, Vec<Value>, HeaderMap) {
    let (status, headers) = (resp.status(), resp.headers().clone());
    let sse = headers
        .get("content-type")
        .is_some_and(|t| t.to_str().unwrap_or("").starts_with("text/event-stream"));
    let text = String::from_utf8(body_bytes(resp).await).unwrap();
    let messages = if sse {
        text.split("\n\n")
            .filter_map(|event| {
                let data: Vec<&str> = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                serde_json::from_str::<Value>(&data.join("\n")).ok()
            })
            .collect()
    } else {
        serde_json::from_str(&text).into_iter().collect()
    };
    (status, messages, headers)
}

/// `--session-idle-timeout 1s --max-sessions 5`: only the session left
/// alone ends (its anonymous task with it); requests, an open GET stream, a
/// call in flight and a blocking `tasks/result` keep theirs, and idle time
/// counts from the end of the last of them.
#[tokio::test(start_paused = true)]
async fn idle_legacy_sessions_expire_and_busy_ones_stay() {
    let (shim, front) = Front::start(HttpOptions {
        session_idle_timeout: Some(Duration::from_secs(1)),
        max_sessions: 5,
        max_anonymous_sessions: Some(5),
        ..HttpOptions::default()
    })
    .await;
    const SESSIONS: &str = "mcp_shim_legacy_sessions";
    const TASKS: &str = "mcp_shim_ledger_tasks";

    // Left alone after creating a task in its (anonymous) scope.
    let idle = front.initialize().await;
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "idle"},
        "task": {"ttl": 60000}});
    let (s, body, _) = front
        .post(Some(&idle), &rpc(1, "tools/call", call), BOTH)
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_valid(Revision::Legacy, &body, Some("tools/call"));

    // Kept busy four ways: requests every 300 ms, an open GET stream, a
    // call that takes 3 s (the upstream runs it as a task the shim drives
    // to its end), and a blocking `tasks/result` of a 3 s task answered as
    // plain JSON.
    let pinged = front.initialize().await;
    let streaming = front.initialize().await;
    let calling = front.initialize().await;
    let waiting = front.initialize().await;
    let get_stream = front
        .call(
            Request::get("/mcp")
                .header("mcp-session-id", &streaming)
                .header("accept", "text/event-stream")
                .header("mcp-protocol-version", LEGACY)
                .body(Body::empty())
                .unwrap(),
        )
        .await;
    assert_eq!(get_stream.status(), StatusCode::OK);
    let slow_call = {
        let (front, sid) = (front.clone(), calling.clone());
        tokio::spawn(async move {
            let call = json!({"name": "slow_compute", "arguments": {"seconds": 3, "label": "c"}});
            front
                .post(Some(&sid), &rpc(2, "tools/call", call), BOTH)
                .await
        })
    };
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 3, "label": "w"},
        "task": {"ttl": 60000}});
    let (s, body, _) = front
        .post(Some(&waiting), &rpc(2, "tools/call", call), BOTH)
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let task = body["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let tasks_before = front.gauge(TASKS).await;
    assert_eq!(tasks_before, 2, "both tasks are in the ledger");
    let slow_result = {
        let (front, sid) = (front.clone(), waiting.clone());
        tokio::spawn(async move {
            let wait = rpc(9, "tasks/result", json!({"taskId": task}));
            front.post(Some(&sid), &wait, "application/json").await
        })
    };
    let (stop_pings, mut stopped) = tokio::sync::watch::channel(false);
    let pings = {
        let (front, sid) = (front.clone(), pinged.clone());
        tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(300));
            loop {
                tokio::select! {
                    _ = every.tick() => {}
                    _ = stopped.wait_for(|s| *s) => return,
                }
                let (s, body, _) = front.ping(&sid, 3).await;
                assert_eq!(s, StatusCode::OK, "a session in use stays: {body}");
            }
        })
    };

    // The limit: a sixth session is refused, and leaves nothing behind.
    let init = rpc(
        0,
        "initialize",
        json!({"protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "sixth", "version": "0"}}),
    );
    let (s, body, h) = front.post(None, &init, BOTH).await;
    assert_eq!(s, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["error"]["code"], -32603, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("too many open sessions"),
        "{body}"
    );
    assert!(
        h.get("mcp-session-id").is_none(),
        "no session for a refused initialize"
    );
    assert_valid(Revision::Legacy, &body, None);
    assert_eq!(front.gauge(SESSIONS).await, 5);

    // Only the idle session ends, and its anonymous task with it.
    front.await_gauge(SESSIONS, 4).await;
    let (s, body, _) = front.ping(&idle, 4).await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "an expired session is unknown: {body}"
    );
    assert_valid(Revision::Legacy, &body, None);
    assert_eq!(
        front.gauge(TASKS).await,
        tasks_before - 1,
        "its task went with it"
    );
    let (s, body, _) = front.ping(&streaming, 5).await;
    assert_eq!(
        s,
        StatusCode::OK,
        "a session with a GET stream stays: {body}"
    );
    for (sid, answer, method) in [
        (&calling, slow_call, "tools/call"),
        (&waiting, slow_result, "tasks/result"),
    ] {
        let (s, body, _) = timeout(STEP, answer).await.unwrap().unwrap();
        assert_eq!(s, StatusCode::OK, "{body}");
        assert!(
            body["result"]["content"].is_array(),
            "the long {method}'s answer: {body}"
        );
        assert_valid(Revision::Legacy, &body, Some(method));
        let (s, body, _) = front.ping(sid, 6).await;
        assert_eq!(
            s,
            StatusCode::OK,
            "idle time counts from the end of the {method}: {body}"
        );
    }

    // A refused initialize opens nothing either.
    let (s, body, h) = front
        .post(None, &rpc(7, "initialize", json!({})), BOTH)
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert!(body["error"]["code"].is_i64(), "{body}");
    assert!(
        h.get("mcp-session-id").is_none(),
        "no session for a failed initialize: {h:?}"
    );
    assert_eq!(front.gauge(SESSIONS).await, 4);

    // Once nothing keeps them, the rest end too, and new sessions open.
    stop_pings.send_replace(true);
    timeout(STEP, pings).await.unwrap().unwrap();
    drop(get_stream);
    front.await_gauge(SESSIONS, 0).await;
    let fresh = front.initialize().await;
    let (s, body, _) = front.ping(&fresh, 8).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    shim.begin_shutdown("the test is over");
    shim.finish().await;
}

/// A plain call the client cancels (`notifications/cancelled`): its POST
/// ends without an answer (the receiver owes none) instead of staying open
/// for good, and the session goes on answering.
#[tokio::test(start_paused = true)]
async fn a_cancelled_call_ends_its_post_without_an_answer() {
    let (shim, front) = Front::start(HttpOptions::default()).await;
    let sid = front.initialize().await;
    let call = rpc(
        1,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "c"}}),
    );
    let posted = {
        let front = front.clone();
        let req = Front::legacy_post(Some(&sid), &call, BOTH);
        tokio::spawn(async move { read_all(front.call(req).await).await })
    };
    // The call is running upstream before it is cancelled.
    front
        .upstream_heard(0, |m| {
            m["method"] == "tools/call" && m["params"]["arguments"]["label"] == "c"
        })
        .await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "no longer needed"}});
    let (s, _, _) = front.post(Some(&sid), &cancel, BOTH).await;
    assert_eq!(s, StatusCode::ACCEPTED);
    let (s, messages, _) = timeout(Duration::from_secs(10), posted)
        .await
        .expect("the cancelled call's POST was not answered")
        .unwrap();
    assert_eq!(s, StatusCode::OK);
    for m in &messages {
        assert_valid(Revision::Legacy, m, Some("tools/call"));
    }
    assert!(
        messages.iter().all(|m| m.get("id") != Some(&json!(1))),
        "a cancelled request was answered: {messages:#?}"
    );
    let (s, pong, _) = front.ping(&sid, 2).await;
    assert_eq!(s, StatusCode::OK);
    assert_valid(Revision::Legacy, &pong, Some("ping"));
    assert_eq!(pong["id"], 2, "{pong}");
    shim.begin_shutdown("the test is over");
    shim.finish().await;
}

/// `begin_shutdown` answers a client waiting on a task at once, `-32603`
/// naming the reason given, instead of leaving it to the task's 60 s.
#[tokio::test(start_paused = true)]
async fn begin_shutdown_answers_a_client_waiting_on_a_task() {
    let (shim, front) = Front::start(HttpOptions::default()).await;
    let sid = front.initialize().await;
    let task_id = front.start_task(&sid, 60, "long").await;
    let before = front.upstream_count();
    let waiting = {
        let (front, sid) = (front.clone(), sid.clone());
        let wait = rpc(2, "tasks/result", json!({"taskId": task_id}));
        tokio::spawn(async move { front.post(Some(&sid), &wait, BOTH).await })
    };
    // The wait is open upstream (it asks after the task) before the
    // application stops.
    let task = task_id.clone();
    front
        .upstream_heard(before, move |m| {
            m["method"] != "tools/call" && m["params"]["taskId"] == task.as_str()
        })
        .await;
    assert!(!waiting.is_finished(), "tasks/result blocks on a 60 s task");
    shim.begin_shutdown("the application is stopping");
    let (status, answer, _) = waiting.await.unwrap();
    assert_eq!(status, StatusCode::OK);
    assert_valid(Revision::Legacy, &answer, Some("tasks/result"));
    // The shutdown's answer, not the task's (that would be a result).
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("the application is stopping")),
        "the error names the reason given: {answer}"
    );
    shim.finish().await;
}

/// A legacy client polling `tasks/get` over HTTP, in front of an upstream
/// that hands back no answer as text (so no poll is answered from a memo):
/// each poll of a working task reaches the upstream, and the poll after the
/// task's end hears it. (`http_front.rs` polls one with text answers.)
#[tokio::test(start_paused = true)]
async fn polls_that_hear_nothing_new_still_hear_the_end() {
    let (shim, front) = Front::start(HttpOptions::default()).await;
    let sid = front.initialize().await;
    let task_id = front.start_task(&sid, 3, "polled").await;
    let poll = |id: i64| rpc(id, "tasks/get", json!({"taskId": task_id}));
    let mut statuses = Vec::new();
    for id in 2..40 {
        let before = front.upstream_count();
        let (status, answer, _) = front.post(Some(&sid), &poll(id), BOTH).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        assert_valid(Revision::Legacy, &answer, Some("tasks/get"));
        assert!(
            front.upstream_count() > before,
            "poll {id} of a working task asks the upstream"
        );
        let seen = answer["result"]["status"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        statuses.push(seen.clone());
        if seen != "working" {
            break;
        }
        tokio::time::advance(Duration::from_millis(250)).await;
    }
    let working = statuses.iter().filter(|s| *s == "working").count();
    assert!(working >= 3, "several polls while it works: {statuses:?}");
    assert_eq!(
        statuses.last().map(String::as_str),
        Some("completed"),
        "the poll after the end hears it: {statuses:?}"
    );
    shim.finish().await;
}
