//! Issue 25.2, 2025-11-25 HTTP clients in front of a 2025-11-25 server:
//! `mcp-tasks-shim http -- <legacy server>` gives each 2025-11-25 HTTP
//! session an upstream process of its own, and `http --upstream-url <legacy
//! server>` a session of its own on that server, both relayed unchanged.
//!
//! - The TypeScript SDK 1.32.2 legacy client (`legacy_client.mjs --http`)
//!   runs its whole repertoire through the shim against the 2025-11-25
//!   reference server, as it does against that server directly.
//! - Two sessions of different principals (`--token`) at once, in front of
//!   the SDK-built task server (`tests/peers/sdk_task_server.mjs`) and of
//!   `@modelcontextprotocol/server-everything` over stdio: each gets the
//!   server's own `initialize` answer, creates tasks, sees only its own in
//!   `tasks/list`, and the other's task id is unknown to it; a session id
//!   used with the other principal's token is not found.
//! - The same two principals in front of `server-everything` over
//!   Streamable HTTP (`--upstream-url`), and the TypeScript client's
//!   repertoire in front of the 2025-11-25 reference server over HTTP.
//! - DELETE, and idle expiry, end the session's process; over HTTP a
//!   DELETE ends the upstream session, and a session the server forgot
//!   (it restarted) is not found, so the client opens a new one.
//!
//! Every message the shim returns is validated against the 2025-11-25
//! schema. Needs Node and `tests/peers/node_modules`: run `scripts/test.sh`.

mod support;

use std::time::Duration;

use reqwest::{Client, StatusCode};
use serde_json::{Value, json};
use support::forwarder::shim_through;
use support::http::{
    HttpShim, Sse, alive, block_on, children_of, client, gone_within, initialize, legacy, rpc, send,
};
use support::peers::{
    Everything, REFERENCE_PROFILE_CHECKS, peers_dir, read_transcript, require_peers,
    run_legacy_client_http,
};
use support::schema::{Revision, assert_conversation_valid, assert_valid};
use support::wire::{shim_bin, temp_path};

/// The script bounds itself at 60 s; this is the backstop.
const TIMEOUT: Duration = Duration::from_secs(90);
/// Failure guard on waits for a process to end.
const EXIT_WAIT: Duration = Duration::from_secs(30);

const TOKENS: [&str; 4] = ["--token", "tok-alice=alice", "--token", "tok-bob=bob"];

fn node(script: &str) -> Vec<String> {
    vec![
        "node".into(),
        peers_dir().join(script).to_string_lossy().into_owned(),
    ]
}

fn everything() -> Vec<String> {
    vec![
        "node".into(),
        peers_dir()
            .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
            .to_string_lossy()
            .into_owned(),
        "stdio".into(),
    ]
}

/// One 2025-11-25 session of `token`'s principal.
struct Session<'a> {
    c: &'a Client,
    url: &'a str,
    token: &'a str,
    sid: String,
    next: i64,
}

impl<'a> Session<'a> {
    /// `initialize` (validated), `notifications/initialized`; returns the
    /// session and the server's `initialize` result.
    async fn open(c: &'a Client, url: &'a str, token: &'a str) -> (Session<'a>, Value) {
        let (sid, result) = initialize(c, url, Some(token)).await;
        assert_valid(
            Revision::Legacy,
            &json!({"jsonrpc": "2.0", "id": 0, "result": result}),
            Some("initialize"),
        );
        let s = Session {
            c,
            url,
            token,
            sid,
            next: 1,
        };
        (s, result)
    }

    /// A request in the session; returns the whole answer (validated).
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let req = legacy(
            self.c,
            self.url,
            Some(&self.sid),
            &rpc(self.next, method, params),
        )
        .bearer_auth(self.token);
        let (status, body, _) = send(req).await;
        assert_eq!(status, StatusCode::OK, "{method}: {body}");
        assert_eq!(body["id"], self.next, "{method}: {body}");
        assert_valid(Revision::Legacy, &body, Some(method));
        body
    }

    /// Creates a task with tool `name`; returns its id.
    async fn task(&mut self, name: &str, arguments: Value) -> String {
        let body = self
            .call(
                "tools/call",
                json!({"name": name, "arguments": arguments, "task": {"ttl": 60_000}}),
            )
            .await;
        body["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} created no task: {body}"))
            .to_owned()
    }

    async fn listed(&mut self) -> Vec<String> {
        let body = self.call("tasks/list", json!({})).await;
        body["result"]["tasks"]
            .as_array()
            .unwrap_or_else(|| panic!("tasks/list: {body}"))
            .iter()
            .filter_map(|t| t["taskId"].as_str().map(str::to_owned))
            .collect()
    }
}

/// Two principals at once against `upstream` (a command, or with `flags`
/// naming a URL), each creating tasks with `tool`: answers, lists and
/// unknown ids stay within each session.
fn two_principals_stay_apart(flags: &[&str], upstream: &[String], tool: &str, arguments: Value) {
    require_peers();
    let mut all = TOKENS.to_vec();
    all.extend_from_slice(flags);
    let shim = HttpShim::spawn(&all, upstream);
    block_on(async {
        let c = client();
        let (mut alice, alice_init) = Session::open(&c, &shim.url, "tok-alice").await;
        let (mut bob, bob_init) = Session::open(&c, &shim.url, "tok-bob").await;
        // Each session's `initialize` is answered by its server.
        assert!(
            alice_init["serverInfo"]["name"].is_string(),
            "serverInfo: {alice_init}"
        );
        assert_eq!(alice_init["serverInfo"], bob_init["serverInfo"]);
        assert!(
            alice_init["capabilities"]["tasks"].is_object(),
            "the server's own task capabilities: {alice_init}"
        );

        let a1 = alice.task(tool, arguments.clone()).await;
        let b1 = bob.task(tool, arguments.clone()).await;
        let a2 = alice.task(tool, arguments.clone()).await;

        let mine = alice.listed().await;
        assert!(mine.contains(&a1) && mine.contains(&a2), "{mine:?}");
        assert!(!mine.contains(&b1), "alice sees bob's task: {mine:?}");
        let theirs = bob.listed().await;
        assert_eq!(theirs, vec![b1.clone()], "bob sees only his own task");

        // The other's task id is unknown here; one's own is not.
        let body = bob.call("tasks/get", json!({"taskId": a1})).await;
        assert!(
            body["error"]["code"].is_i64(),
            "bob read alice's task: {body}"
        );
        let body = alice.call("tasks/get", json!({"taskId": a1})).await;
        assert_eq!(body["result"]["taskId"], a1.as_str(), "{body}");

        // A session id with the other principal's token: no such session.
        let req = legacy(
            &c,
            &shim.url,
            Some(&alice.sid),
            &rpc(99, "tasks/list", json!({})),
        )
        .bearer_auth("tok-bob");
        let (status, body, _) = send(req).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert_valid(Revision::Legacy, &body, None);
    });
}

#[test]
fn two_principals_in_front_of_the_sdk_task_server() {
    two_principals_stay_apart(
        &[],
        &node("sdk_task_server.mjs"),
        "slow_task",
        json!({"ms": 60_000}),
    );
}

#[test]
fn two_principals_in_front_of_server_everything() {
    two_principals_stay_apart(
        &[],
        &everything(),
        "simulate-research-query",
        json!({"topic": "relays", "ambiguous": false}),
    );
}

/// The same over Streamable HTTP: each client session is a session of its
/// own on the server, whose isolation then holds as it does for its
/// direct clients.
#[test]
fn two_principals_in_front_of_server_everything_over_http() {
    let server = Everything::spawn();
    two_principals_stay_apart(
        &["--upstream-url", &server.url],
        &[],
        "simulate-research-query",
        json!({"topic": "relays", "ambiguous": false}),
    );
}

/// A question the server asks while the client waits on `tasks/result`
/// reaches that session, on that request's SSE stream, and the client's
/// answer (POSTed, 202) reaches the server: the task completes with it.
#[test]
fn a_task_question_reaches_its_own_session_and_its_answer_the_server() {
    require_peers();
    let shim = HttpShim::spawn(&TOKENS, &node("sdk_task_server.mjs"));
    block_on(async {
        let c = client();
        let (mut alice, _) = Session::open(&c, &shim.url, "tok-alice").await;
        let (mut bob, _) = Session::open(&c, &shim.url, "tok-bob").await;
        let task = alice.task("ask_task", json!({})).await;
        let bob_task = bob.task("slow_task", json!({"ms": 60_000})).await;

        let req = legacy(
            &c,
            &shim.url,
            Some(&alice.sid),
            &rpc(50, "tasks/result", json!({"taskId": task})),
        )
        .bearer_auth("tok-alice");
        let resp = tokio::time::timeout(support::http::STEP, req.send())
            .await
            .expect("tasks/result sent")
            .expect("HTTP");
        let mut sse = Sse::new(resp);
        let ask = sse.next().await.expect("the question on the stream");
        assert_eq!(ask["method"], "elicitation/create", "{ask}");
        assert_valid(Revision::Legacy, &ask, None);
        let answer = json!({"jsonrpc": "2.0", "id": ask["id"],
            "result": {"action": "accept", "content": {"name": "Ada"}}});
        let (status, _, _) =
            send(legacy(&c, &shim.url, Some(&alice.sid), &answer).bearer_auth("tok-alice")).await;
        assert_eq!(status, StatusCode::ACCEPTED);
        let mut last = Value::Null;
        while let Some(m) = sse.next().await {
            assert_valid(Revision::Legacy, &m, Some("tasks/result"));
            last = m;
        }
        assert_eq!(last["id"], 50, "{last}");
        assert!(
            last["result"]["content"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("Ada")),
            "the answer reached the task: {last}"
        );
        // Bob's session heard nothing of it, and his task is still his.
        let body = bob.call("tasks/get", json!({"taskId": bob_task})).await;
        assert_eq!(body["result"]["status"], "working", "{body}");
    });
}

/// The TypeScript SDK legacy client, over HTTP through the shim, passes
/// against the 2025-11-25 reference server what it passes against that
/// server over stdio.
#[test]
fn ts_sdk_http_client_through_the_relay_against_the_legacy_reference() {
    require_peers();
    let upstream = [
        shim_bin().to_owned(),
        "reference-server".into(),
        "--revision".into(),
        "2025-11-25".into(),
    ];
    let shim = HttpShim::spawn(&[], &upstream);
    ts_sdk_reference_run(&shim, "ts-http-relay-view.jsonl");
}

/// The same against the 2025-11-25 reference server over HTTP
/// (`--upstream-url`): questions during a task, cancels, notifications
/// and lists all ride the relayed session.
#[test]
fn ts_sdk_http_client_through_the_url_relay_against_the_legacy_reference() {
    require_peers();
    let server = support::http::HttpReference::start(support::http::LEGACY, &[]);
    let shim = HttpShim::spawn::<&str>(&["--upstream-url", &server.url], &[]);
    ts_sdk_reference_run(&shim, "ts-http-url-relay-view.jsonl");
}

/// Runs the TypeScript client's `reference` profile through `shim`: every
/// check passes, and everything it saw (recorded to `view`, a temporary
/// file) is valid 2025-11-25.
fn ts_sdk_reference_run(shim: &HttpShim, view: &str) {
    let view = temp_path(view);
    let run = run_legacy_client_http("reference", &view, &shim.url, TIMEOUT);
    run.assert_checks(REFERENCE_PROFILE_CHECKS);
    let seen = read_transcript(&view);
    let _ = std::fs::remove_file(&view);
    assert!(seen.len() > 50, "transcript too short: {}", seen.len());
    assert_conversation_valid(
        seen.iter()
            .map(|(dir, msg)| (Revision::Legacy, dir.as_str(), msg)),
    );
}

/// Over `--upstream-url`, a client's DELETE ends its session on the
/// server too (and only its own); a session the server forgot (it
/// restarted) answers 404, as the 2025-11-25 transport says, so that the
/// client initializes again, which then works.
#[test]
fn url_relay_sessions_end_and_are_forgotten_as_the_server_says() {
    let server = support::http::HttpReference::start(support::http::LEGACY, &[]);
    let addr = server.addr;
    block_on(async move {
        let (fwd, shim) = shim_through(addr, &TOKENS).await;
        let c = client();
        let (mut alice, _) = Session::open(&c, &shim.url, "tok-alice").await;
        let (mut bob, _) = Session::open(&c, &shim.url, "tok-bob").await;
        alice.call("tools/list", json!({})).await;
        // Each client session has a session of its own upstream.
        let upstream_sids = || {
            let sent = String::from_utf8_lossy(&fwd.sent.lock().unwrap()).to_lowercase();
            let mut sids: Vec<String> = sent
                .lines()
                .filter_map(|l| l.strip_prefix("mcp-session-id: "))
                .map(|v| v.trim().to_owned())
                .collect();
            sids.sort();
            sids.dedup();
            sids
        };
        let sids = upstream_sids();
        assert_eq!(sids.len(), 2, "one upstream session each: {sids:?}");

        let del = c
            .delete(&shim.url)
            .header("mcp-session-id", &alice.sid)
            .bearer_auth("tok-alice");
        assert_eq!(del.send().await.expect("DELETE").status(), StatusCode::OK);
        let deleted = support::poll::until_async("the upstream DELETE", EXIT_WAIT, || async {
            let sent = String::from_utf8_lossy(&fwd.sent.lock().unwrap()).into_owned();
            let at = sent.find("DELETE /")?;
            let head = sent[at..].split("\r\n\r\n").next()?;
            Some(head.to_lowercase())
        })
        .await;
        let alice_upstream = sids
            .iter()
            .find(|sid| deleted.contains(sid.as_str()))
            .unwrap_or_else(|| panic!("the DELETE names an upstream session: {deleted}"));
        let req = legacy(&c, &shim.url, Some(&alice.sid), &rpc(5, "ping", json!({})))
            .bearer_auth("tok-alice");
        let (status, body, _) = send(req).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert_valid(Revision::Legacy, &body, None);
        // Bob's session goes on, and was not the one ended.
        let body = bob.call("tools/list", json!({})).await;
        assert!(body["result"]["tools"].is_array(), "{body}");
        let bob_upstream = sids.iter().find(|s| *s != alice_upstream).unwrap();
        assert!(!deleted.contains(bob_upstream.as_str()), "{deleted}");

        // The server restarts and forgets every session: bob is told his
        // is not found, and a new one works.
        drop(server);
        let _back = support::http::HttpReference::start_at(support::http::LEGACY, &[], addr);
        let req = legacy(
            &c,
            &shim.url,
            Some(&bob.sid),
            &rpc(7, "tools/list", json!({})),
        )
        .bearer_auth("tok-bob");
        let (status, body, _) = send(req).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert_valid(Revision::Legacy, &body, None);
        let (mut bob, _) = Session::open(&c, &shim.url, "tok-bob").await;
        let body = bob.call("tools/list", json!({})).await;
        assert!(body["result"]["tools"].is_array(), "{body}");
        drop(alice);
    });
}

/// What a client sends that awaits no answer (here a notification) is
/// acknowledged only once the server took it: the client's next message
/// cannot overtake it (servers may refuse requests that come before
/// `notifications/initialized`).
#[test]
fn url_relay_acknowledges_a_notification_once_the_server_took_it() {
    let server = support::http::HttpReference::start(support::http::LEGACY, &[]);
    let addr = server.addr;
    block_on(async move {
        let (fwd, shim) = shim_through(addr, &[]).await;
        let c = client();
        let (sid, _) = initialize(&c, &shim.url, None).await;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"});
        fwd.freeze();
        let post = legacy(&c, &shim.url, Some(&sid), &note).send();
        // Set just before the server's bytes may pass: an acknowledgement
        // that comes with it unset came before the server took anything.
        let thawed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen_thawed = thawed.clone();
        let acknowledged = tokio::spawn(async move {
            let resp = post.await.expect("the POST");
            let after = seen_thawed.load(std::sync::atomic::Ordering::SeqCst);
            (resp.status(), after)
        });
        support::poll::until_async("the notification upstream", EXIT_WAIT, || async {
            let sent = String::from_utf8_lossy(&fwd.sent.lock().unwrap()).into_owned();
            sent.contains("roots/list_changed").then_some(())
        })
        .await;
        thawed.store(true, std::sync::atomic::Ordering::SeqCst);
        fwd.thaw();
        let (status, after) = tokio::time::timeout(EXIT_WAIT, acknowledged)
            .await
            .expect("acknowledged in time")
            .unwrap();
        assert_eq!(status, StatusCode::ACCEPTED);
        assert!(
            after,
            "the client's 202 came while the server's answer was held back"
        );
    });
}

/// DELETE ends the session's own process, and only that one.
#[test]
fn delete_ends_the_sessions_process() {
    require_peers();
    let shim = HttpShim::spawn(&TOKENS, &node("sdk_task_server.mjs"));
    block_on(async {
        let c = client();
        let before = children_of(shim.pid());
        let (alice, _) = Session::open(&c, &shim.url, "tok-alice").await;
        let after = children_of(shim.pid());
        let own: Vec<u32> = after
            .iter()
            .copied()
            .filter(|p| !before.contains(p))
            .collect();
        assert_eq!(
            own.len(),
            1,
            "one process for the session: {before:?} {after:?}"
        );
        let (bob, _) = Session::open(&c, &shim.url, "tok-bob").await;
        let bobs: Vec<u32> = children_of(shim.pid())
            .into_iter()
            .filter(|p| !after.contains(p))
            .collect();
        assert_eq!(bobs.len(), 1);

        let del = c
            .delete(&shim.url)
            .header("mcp-session-id", &alice.sid)
            .bearer_auth("tok-alice");
        let resp = del.send().await.expect("DELETE");
        assert_eq!(resp.status(), StatusCode::OK);
        let pid = own[0];
        let gone = tokio::task::spawn_blocking(move || gone_within(pid, EXIT_WAIT));
        assert!(
            gone.await.unwrap(),
            "the deleted session's process still runs"
        );
        assert!(alive(bobs[0]), "the other session's process runs on");
        let req = legacy(&c, &shim.url, Some(&alice.sid), &rpc(5, "ping", json!({})))
            .bearer_auth("tok-alice");
        let (status, body, _) = send(req).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        drop(bob);
    });
}

/// An idle session expires with its process (`--session-idle-timeout`),
/// as a DELETE would end it.
#[test]
fn an_idle_session_expires_with_its_process() {
    require_peers();
    let mut flags = TOKENS.to_vec();
    flags.extend(["--session-idle-timeout", "1s"]);
    let shim = HttpShim::spawn(&flags, &node("sdk_task_server.mjs"));
    block_on(async {
        let c = client();
        let before = children_of(shim.pid());
        let (alice, _) = Session::open(&c, &shim.url, "tok-alice").await;
        let own: Vec<u32> = children_of(shim.pid())
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect();
        assert_eq!(own.len(), 1, "one process for the session");
        let pid = own[0];
        let gone = tokio::task::spawn_blocking(move || gone_within(pid, EXIT_WAIT));
        assert!(gone.await.unwrap(), "the idle session's process still runs");
        let req = legacy(&c, &shim.url, Some(&alice.sid), &rpc(5, "ping", json!({})))
            .bearer_auth("tok-alice");
        let (status, body, _) = send(req).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
        assert_valid(Revision::Legacy, &body, None);
    });
}

/// The session caps hold for relayed sessions, each a process: past
/// `--max-sessions-per-principal` an `initialize` gets `503` and starts
/// no process; another principal still gets a session.
#[test]
fn session_caps_bound_the_processes() {
    require_peers();
    let mut flags = TOKENS.to_vec();
    flags.extend(["--max-sessions-per-principal", "1"]);
    let shim = HttpShim::spawn(&flags, &node("sdk_task_server.mjs"));
    block_on(async {
        let c = client();
        let (_alice, _) = Session::open(&c, &shim.url, "tok-alice").await;
        let before = children_of(shim.pid());
        let init = rpc(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "second", "version": "0"}}),
        );
        let (status, body, headers) =
            send(legacy(&c, &shim.url, None, &init).bearer_auth("tok-alice")).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["error"]["code"], -32603, "{body}");
        assert!(headers.get("mcp-session-id").is_none());
        assert_valid(Revision::Legacy, &body, None);
        assert_eq!(children_of(shim.pid()), before, "no process for it");
        let (_bob, _) = Session::open(&c, &shim.url, "tok-bob").await;
    });
}
