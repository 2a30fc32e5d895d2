//! `--ledger PATH`: a shim restart loses no task ownership, cancel pins or
//! cached results.
//!
//! A 2026-07-28 reference server runs over HTTP as a long-lived upstream
//! process; `mcp-tasks-shim http --upstream-url … --ledger FILE` sits in
//! front of it for 2025-11-25 clients with principals alice and bob. Tasks
//! are created, the shim is stopped with SIGTERM, a new shim opens the same
//! ledger, and the clients (new sessions, same tokens) find what they left.
//! Without `--ledger` the same restart forgets everything (the default).
//!
//! `--ledger redis://…` (docs/scaling.md): two shim instances share one
//! real `redis-server` started by the test, and each serves the tasks the
//! other created, with the same checks as after a restart.
//! Every message the shim answers with is validated against its revision's
//! schema.

mod support;

use std::process::{Command, Stdio};
use std::time::Duration;

use reqwest::{Client, StatusCode};
use serde_json::{Value, json};
use support::http::{
    HttpReference, HttpShim, LEGACY, MODERN, STEP, client, initialize, legacy, modern, rpc, send,
};
use support::poll;
use support::schema::{Revision, assert_valid};
use support::wire::{shim_bin, temp_path, text_of};

fn shim(upstream: &HttpReference, ledger: Option<&str>) -> HttpShim {
    let mut flags = vec![
        "--upstream-url".to_owned(),
        upstream.url.clone(),
        "--token".into(),
        "t1=alice".into(),
        "--token".into(),
        "t2=bob".into(),
    ];
    if let Some(ledger) = ledger {
        flags.push("--ledger".into());
        flags.push(ledger.to_owned());
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    HttpShim::spawn::<&str>(&flags, &[])
}

fn stop(mut shim: HttpShim) {
    let status = shim.terminate(STEP).expect("the shim exits after SIGTERM");
    assert!(status.success(), "shim exit status {status}");
}

/// One legacy client: a session and its bearer token.
struct LegacyClient {
    c: Client,
    url: String,
    sid: String,
    token: &'static str,
    next: i64,
}

impl LegacyClient {
    async fn connect(shim: &HttpShim, token: &'static str) -> LegacyClient {
        let c = client();
        let (sid, init) = initialize(&c, &shim.url, Some(token)).await;
        assert!(
            init["capabilities"]["tasks"]["list"].is_object(),
            "the shim offers tasks/list: {init}"
        );
        LegacyClient {
            c,
            url: shim.url.clone(),
            sid,
            token,
            next: 1,
        }
    }

    /// Sends a request; returns the whole JSON-RPC answer, schema-checked.
    async fn rpc(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let body = rpc(self.next, method, params);
        let req = legacy(&self.c, &self.url, Some(&self.sid), &body).bearer_auth(self.token);
        let (status, answer, _) = send(req).await;
        assert_eq!(status, StatusCode::OK, "{method}: {answer}");
        assert_valid(Revision::Legacy, &answer, Some(method));
        assert_eq!(answer["id"], self.next, "{answer}");
        answer
    }

    async fn ok(&mut self, method: &str, params: Value) -> Value {
        let answer = self.rpc(method, params).await;
        assert!(answer.get("error").is_none(), "{method}: {answer}");
        answer["result"].clone()
    }

    async fn err(&mut self, method: &str, params: Value) -> Value {
        let answer = self.rpc(method, params).await;
        assert!(answer.get("result").is_none(), "{method}: {answer}");
        answer["error"].clone()
    }

    /// `tools/call` with `params.task`; returns the created task id.
    async fn create(&mut self, tool: &str, arguments: Value) -> String {
        let r = self
            .ok(
                "tools/call",
                json!({"name": tool, "arguments": arguments, "task": {"ttl": 600_000}}),
            )
            .await;
        assert_eq!(r["task"]["status"], "working", "{r}");
        r["task"]["taskId"].as_str().expect("a task id").to_owned()
    }

    async fn status(&mut self, task: &str) -> String {
        let t = self.ok("tasks/get", json!({"taskId": task})).await;
        t["status"].as_str().expect("a status").to_owned()
    }

    async fn list(&mut self) -> Vec<String> {
        let mut ids = Vec::new();
        let mut cursor = Value::Null;
        for _ in 0..50 {
            let params = if cursor.is_null() {
                json!({})
            } else {
                json!({"cursor": cursor})
            };
            let page = self.ok("tasks/list", params).await;
            for t in page["tasks"].as_array().expect("tasks") {
                ids.push(t["taskId"].as_str().unwrap().to_owned());
            }
            cursor = page.get("nextCursor").cloned().unwrap_or(Value::Null);
            if cursor.is_null() {
                return ids;
            }
        }
        panic!("tasks/list never ended");
    }
}

/// What alice and bob made before the restart.
struct Made {
    greeted: String,
    computed: String,
    cancelled: String,
    working: String,
    bobs: String,
}

async fn make_tasks(shim: &HttpShim) -> Made {
    let mut alice = LegacyClient::connect(shim, "t1").await;
    let mut bob = LegacyClient::connect(shim, "t2").await;
    // `greet` runs without a task upstream: the shim mints the task, and
    // the ledger is the only place its result lives.
    let greeted = alice.create("greet", json!({"name": "Ada"})).await;
    let computed = alice
        .create("slow_compute", json!({"seconds": 0, "label": "quick"}))
        .await;
    let r = alice.ok("tasks/result", json!({"taskId": computed})).await;
    assert!(text_of(&r).contains("quick"), "{r}");
    let cancelled = alice
        .create("slow_compute", json!({"seconds": 600, "label": "never"}))
        .await;
    let c = alice.ok("tasks/cancel", json!({"taskId": cancelled})).await;
    assert_eq!(c["status"], "cancelled");
    let working = alice
        .create("slow_compute", json!({"seconds": 4, "label": "slow"}))
        .await;
    let bobs = bob.create("greet", json!({"name": "Bob"})).await;
    Made {
        greeted,
        computed,
        cancelled,
        working,
        bobs,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_shim_remembers_every_principals_tasks() {
    let upstream = HttpReference::start(MODERN, &[]);
    let ledger = temp_path("ledger.redb");
    let first = shim(&upstream, ledger.to_str());
    let made = make_tasks(&first).await;
    stop(first);

    let second = shim(&upstream, ledger.to_str());
    finds_what_was_made(&second, &made).await;
    stop(second);
    let _ = std::fs::remove_file(&ledger);
}

/// What a shim that did not make `made` must still answer: alice and bob
/// (new sessions, same tokens) find their own tasks and only those.
async fn finds_what_was_made(second: &HttpShim, made: &Made) {
    let mut alice = LegacyClient::connect(second, "t1").await;
    let mut bob = LegacyClient::connect(second, "t2").await;

    // Ownership: alice lists exactly her four tasks, newest first.
    let listed = alice.list().await;
    assert_eq!(
        listed,
        [
            made.working.as_str(),
            &made.cancelled,
            &made.computed,
            &made.greeted
        ],
        "alice's tasks after the restart"
    );
    assert_eq!(bob.list().await, [made.bobs.as_str()]);

    // Cached results: the synthetic task's result exists nowhere else.
    let r = alice
        .ok("tasks/result", json!({"taskId": made.greeted}))
        .await;
    assert!(text_of(&r).contains("Ada"), "{r}");
    let r = alice
        .ok("tasks/result", json!({"taskId": made.computed}))
        .await;
    assert!(text_of(&r).contains("quick"), "{r}");
    assert_eq!(alice.status(&made.computed).await, "completed");

    // The cancel pin holds.
    assert_eq!(alice.status(&made.cancelled).await, "cancelled");
    let e = alice
        .err("tasks/result", json!({"taskId": made.cancelled}))
        .await;
    assert_eq!(e["code"], -32602, "{e}");
    let e = alice
        .err("tasks/cancel", json!({"taskId": made.cancelled}))
        .await;
    assert_eq!(e["code"], -32602, "cancelling a cancelled task: {e}");

    // The task that was working has no poller in this process: asking
    // starts one, and the blocking tasks/result waits for its end.
    let s = alice.status(&made.working).await;
    assert!(s == "working" || s == "completed", "{s}");
    let r = alice
        .ok("tasks/result", json!({"taskId": made.working}))
        .await;
    assert!(text_of(&r).contains("slow"), "{r}");
    assert_eq!(alice.status(&made.working).await, "completed");

    // Isolation survives too: bob cannot see alice's tasks, nor she his.
    for id in [&made.greeted, &made.working, &made.cancelled] {
        let e = bob.err("tasks/get", json!({"taskId": id})).await;
        assert_eq!(e["code"], -32602, "{e}");
        let e = bob.err("tasks/result", json!({"taskId": id})).await;
        assert_eq!(e["code"], -32602, "{e}");
    }
    let e = alice.err("tasks/get", json!({"taskId": made.bobs})).await;
    assert_eq!(e["code"], -32602, "{e}");
    let r = bob.ok("tasks/result", json!({"taskId": made.bobs})).await;
    assert!(text_of(&r).contains("Bob"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_sharing_a_redis_ledger_serve_each_others_tasks() {
    let redis = support::redis::RedisServer::start();
    let upstream = HttpReference::start(MODERN, &[]);
    let a = shim(&upstream, Some(&redis.url()));
    let b = shim(&upstream, Some(&redis.url()));
    // Made through A, served by B while A still runs.
    let made = make_tasks(&a).await;
    finds_what_was_made(&b, &made).await;
    // And back: B's new task is on A's list, newest first; A's cancel of
    // it is B's cancel too.
    let mut alice_b = LegacyClient::connect(&b, "t1").await;
    let fresh = alice_b
        .create("slow_compute", json!({"seconds": 600, "label": "shared"}))
        .await;
    let mut alice_a = LegacyClient::connect(&a, "t1").await;
    assert_eq!(alice_a.list().await.first(), Some(&fresh));
    let c = alice_a.ok("tasks/cancel", json!({"taskId": fresh})).await;
    assert_eq!(c["status"], "cancelled");
    assert_eq!(alice_b.status(&fresh).await, "cancelled");
    let mut bob_a = LegacyClient::connect(&a, "t2").await;
    assert_eq!(bob_a.list().await, [made.bobs.as_str()]);
    stop(a);
    stop(b);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_ledger_file_a_restart_forgets() {
    let upstream = HttpReference::start(MODERN, &[]);
    let first = shim(&upstream, None);
    let mut alice = LegacyClient::connect(&first, "t1").await;
    let greeted = alice.create("greet", json!({"name": "Ada"})).await;
    assert_eq!(alice.list().await, [greeted.as_str()]);
    stop(first);

    let second = shim(&upstream, None);
    let mut alice = LegacyClient::connect(&second, "t1").await;
    assert!(alice.list().await.is_empty());
    let e = alice.err("tasks/get", json!({"taskId": greeted})).await;
    assert_eq!(e["code"], -32602, "{e}");
    stop(second);
}

/// A 2026-07-28 request as `token`'s principal; returns the result,
/// schema-checked.
async fn modern_ok(c: &Client, shim: &HttpShim, token: &str, method: &str, params: Value) -> Value {
    let id = support::wire::unique() as i64 + 1;
    let (status, answer, _) =
        send(modern(c, &shim.url, id, method, params).bearer_auth(token)).await;
    assert_eq!(status, StatusCode::OK, "{method}: {answer}");
    assert_valid(Revision::Modern, &answer, Some(method));
    assert!(answer.get("error").is_none(), "{method}: {answer}");
    answer["result"].clone()
}

/// Polls a modern `tasks/get` until the task is terminal (bounded).
async fn modern_settled(c: &Client, shim: &HttpShim, token: &str, task: &str) -> Value {
    let what = format!("task {task} to settle");
    poll::until_async(&what, Duration::from_secs(20), || async move {
        let t = modern_ok(c, shim, token, "tasks/get", json!({"taskId": task})).await;
        ["completed", "failed", "cancelled"]
            .contains(&t["status"].as_str().unwrap_or(""))
            .then_some(t)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_is_an_internal_error_and_service_resumes() {
    let mut redis = support::redis::RedisServer::start();
    let upstream = HttpReference::start(MODERN, &[]);
    let a = shim(&upstream, Some(&redis.url()));
    let mut alice = LegacyClient::connect(&a, "t1").await;
    let id = alice.create("greet", json!({"name": "Ada"})).await;
    redis.stop();
    // Not "unknown task": a client told that would drop a task that still
    // exists. -32603 names the ledger; nothing hangs (2 s bound per call).
    for (method, params) in [
        ("tasks/get", json!({"taskId": id})),
        ("tasks/result", json!({"taskId": id})),
        ("tasks/cancel", json!({"taskId": id})),
        ("tasks/list", json!({})),
    ] {
        let e = alice.err(method, params).await;
        assert_eq!(e["code"], -32603, "{method}: {e}");
        assert!(
            e["message"].as_str().unwrap_or("").contains("ledger"),
            "{method}: {e}"
        );
    }
    // A Redis restart (empty, no persistence here) is picked up without
    // restarting the shim.
    redis.restart();
    let fresh = alice.create("greet", json!({"name": "again"})).await;
    assert_eq!(alice.list().await, [fresh.as_str()]);
    stop(a);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_clients_keep_finished_results_across_a_restart() {
    let ledger = temp_path("modern.redb");
    modern_results_outlive_their_shim(&ledger.display().to_string(), true).await;
    let _ = std::fs::remove_file(&ledger);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_clients_read_results_through_another_instance() {
    let redis = support::redis::RedisServer::start();
    modern_results_outlive_their_shim(&redis.url(), false).await;
}

/// A modern client's finished task, created through one shim, read through
/// a second one on the same `ledger` (after the first stopped when
/// `restart`, beside it otherwise). The legacy reference server keeps tasks
/// per session, so the second shim (a new upstream session) can only
/// answer from the ledger.
async fn modern_results_outlive_their_shim(ledger: &str, restart: bool) {
    let upstream = HttpReference::start(LEGACY, &[]);
    let c = client();
    let first = shim(&upstream, Some(ledger));
    let created = modern_ok(
        &c,
        &first,
        "t1",
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "kept"}}),
    )
    .await;
    assert_eq!(created["resultType"], "task", "{created}");
    let id = created["taskId"].as_str().expect("a task id").to_owned();
    let before = modern_settled(&c, &first, "t1", &id).await;
    assert_eq!(before["status"], "completed", "{before}");
    let first = if restart {
        stop(first);
        None
    } else {
        Some(first)
    };

    let second = shim(&upstream, Some(ledger));
    let after = modern_ok(&c, &second, "t1", "tasks/get", json!({"taskId": id})).await;
    assert_eq!(after["status"], "completed", "{after}");
    assert_eq!(after["result"], before["result"], "the cached result");
    // Still bob's business not at all.
    let (_, e, _) =
        send(modern(&c, &second.url, 9, "tasks/get", json!({"taskId": id})).bearer_auth("t2"))
            .await;
    assert_valid(Revision::Modern, &e, Some("tasks/get"));
    assert_eq!(e["error"]["code"], -32602, "{e}");
    stop(second);
    if let Some(first) = first {
        stop(first);
    }
}

/// A modern client's *running* task, made through one instance, asked of a
/// second instance on the same Redis ledger in front of one 2025-11-25
/// server (which keeps tasks per connection, so the second instance's
/// upstream session cannot see it). The second instance used to take the
/// upstream's "unknown task" as news: it stored the task as failed for
/// everyone, and acknowledged `tasks/update` and `tasks/cancel` it could
/// not carry. Now it answers `-32603` saying another instance holds the
/// task, and leaves the task alone: the first instance still runs it to
/// its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_instance_leaves_a_running_legacy_task_alone() {
    let redis = support::redis::RedisServer::start();
    let upstream = HttpReference::start(LEGACY, &[]);
    let c = client();
    let first = shim(&upstream, Some(&redis.url()));
    let second = shim(&upstream, Some(&redis.url()));
    let created = modern_ok(
        &c,
        &first,
        "t1",
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 2, "label": "held"}}),
    )
    .await;
    let id = created["taskId"].as_str().expect("a task id").to_owned();
    for (method, params) in [
        ("tasks/get", json!({"taskId": id})),
        (
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"x": {"action": "decline"}}}),
        ),
        ("tasks/cancel", json!({"taskId": id})),
    ] {
        let (_, e, _) = send(modern(&c, &second.url, 5, method, params).bearer_auth("t1")).await;
        assert_valid(Revision::Modern, &e, Some(method));
        assert_eq!(e["error"]["code"], -32603, "{method}: {e}");
        let message = e["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("another shim instance"),
            "{method}: {message}"
        );
    }
    let settled = modern_settled(&c, &first, "t1", &id).await;
    assert_eq!(settled["status"], "completed", "untouched: {settled}");
    stop(second);
    stop(first);
}

/// Runs a shim that must refuse to start; returns its stderr. Bounded: a
/// shim that starts anyway is killed and the test fails.
fn refused_start(upstream: &HttpReference, ledger: &std::path::Path) -> String {
    let mut child = Command::new(shim_bin())
        .args(["http", "--listen", "127.0.0.1:0", "--upstream-url"])
        .arg(&upstream.url)
        .arg("--ledger")
        .arg(ledger)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a shim");
    let what = format!(
        "a shim on {} (started instead of refusing)",
        ledger.display()
    );
    let status = support::wire::exited_within(&mut child, STEP, &what);
    assert!(!status.success());
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    stderr
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_file_serves_one_shim_at_a_time() {
    let upstream = HttpReference::start(MODERN, &[]);
    let ledger = temp_path("locked.redb");
    let first = shim(&upstream, ledger.to_str());
    let stderr = refused_start(&upstream, &ledger);
    assert!(stderr.contains("in use by another process"), "{stderr}");
    let stderr = refused_start(&upstream, &temp_path("no-such-dir").join("ledger.redb"));
    assert!(
        stderr.contains("no-such-dir") && stderr.contains("does not exist"),
        "{stderr}"
    );
    stop(first);
    // Once the first shim is gone, the file is free again.
    let again = shim(&upstream, ledger.to_str());
    stop(again);
    let _ = std::fs::remove_file(&ledger);
}

/// A ledger file damaged outside the shim (512 bytes overwritten) is
/// refused at start with a message naming it, never opened and trusted
/// (which could panic then, or on a later request).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_ledger_file_is_refused_at_start() {
    let upstream = HttpReference::start(MODERN, &[]);
    let ledger = temp_path("damaged.redb");
    let first = shim(&upstream, ledger.to_str());
    let mut alice = LegacyClient::connect(&first, "t1").await;
    alice.create("greet", json!({"name": "Ada"})).await;
    stop(first);
    let clean = std::fs::read(&ledger).expect("the ledger file");
    for offset in [4096usize, 8192, 12288, 16384] {
        let mut damaged = clean.clone();
        let end = (offset + 512).min(damaged.len());
        damaged[offset..end].fill(0xAB);
        std::fs::write(&ledger, &damaged).unwrap();
        let stderr = refused_start(&upstream, &ledger);
        assert!(
            stderr.contains("cannot open ledger"),
            "offset {offset}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "offset {offset}: {stderr}");
    }
    let _ = std::fs::remove_file(&ledger);
}

#[test]
fn over_stdio_the_ledger_is_kept_but_a_new_process_is_a_new_client() {
    // A stdio client's scope lives as long as its process: a durable
    // ledger cannot give its tasks to the next process's client, and sweeps
    // them when that process opens the file.
    let ledger = temp_path("stdio.redb");
    let path = ledger.display().to_string();
    let mut first = support::wire::Wire::legacy_front(&["--ledger", &path]);
    first.initialize();
    let created = first.ok(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "Ada"}, "task": {"ttl": 60_000}}),
    );
    let id = created["task"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();
    let r = first.ok("tasks/result", json!({"taskId": id}));
    assert!(text_of(&r).contains("Ada"), "{r}");
    first.close_stdin();
    let status = first
        .wait_exit(STEP)
        .expect("the shim exits with its client");
    assert!(status.success(), "{status}");
    assert!(ledger.exists(), "the ledger file was written");

    let mut second = support::wire::Wire::legacy_front(&["--ledger", &path]);
    second.initialize();
    let page = second.ok("tasks/list", json!({}));
    assert_eq!(page["tasks"], json!([]), "{page}");
    let e = second.err("tasks/get", json!({"taskId": id}));
    assert_eq!(e["code"], -32602, "{e}");
    second.close_stdin();
    assert!(second.wait_exit(STEP).is_some());
    let _ = std::fs::remove_file(&ledger);
}

/// A stdio process's tasks are unreachable once it has exited, whichever
/// command opens the file next: an HTTP shim sweeps them too (it used to
/// keep them, and count them in its gauge, until their TTL).
#[tokio::test(flavor = "multi_thread")]
async fn an_http_shim_sweeps_what_an_ended_stdio_process_left() {
    let ledger = temp_path("stdio-then-http.redb");
    let path = ledger.display().to_string();
    let mut first = support::wire::Wire::legacy_front(&["--ledger", &path]);
    first.initialize();
    let created = first.ok(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "Ada"}, "task": {"ttl": 600_000}}),
    );
    assert!(created["task"]["taskId"].is_string(), "{created}");
    first.close_stdin();
    assert!(first.wait_exit(STEP).is_some_and(|s| s.success()));

    let upstream = HttpReference::start(MODERN, &[]);
    let second = shim(&upstream, Some(&path));
    let metrics = client()
        .get(format!("{}/metrics", second.base))
        .send()
        .await
        .expect("/metrics")
        .text()
        .await
        .expect("/metrics body");
    let held = metrics
        .lines()
        .find_map(|l| l.strip_prefix("mcp_shim_ledger_tasks"))
        .map(str::trim);
    assert_eq!(held, Some("0"), "{metrics}");
    stop(second);
    let _ = std::fs::remove_file(&ledger);
}

/// A task that finishes while Redis does not answer: the shim could not
/// store its outcome then, and must not drop it. Once Redis answers again
/// the outcome is in the ledger, so `tasks/get` answers it with the
/// upstream gone (nothing left to ask), through this instance and through
/// another one on the same Redis.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outcome_seen_while_redis_is_frozen_is_stored_when_it_is_back() {
    let redis = support::redis::RedisServer::start();
    let upstream = HttpReference::start(LEGACY, &[]);
    let c = client();
    let first = shim(&upstream, Some(&redis.url()));
    let created = modern_ok(
        &c,
        &first,
        "t1",
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 4, "label": "outage"}}),
    )
    .await;
    assert_eq!(created["resultType"], "task", "{created}");
    let id = created["taskId"].as_str().expect("a task id").to_owned();
    // The shim follows the task's outcome upstream; it arrives while
    // Redis is frozen, and storing it times out (logged when it does).
    redis.freeze();
    let stored = first
        .wait_logged("could not store a task's outcome", Duration::from_secs(60))
        .await;
    assert!(!stored.is_empty(), "the outcome never came");
    redis.thaw();
    // The shim then asks the upstream for the final status, and stores
    // it and the kept outcome: wait until Redis holds both (bounded),
    // then take the upstream away, so nobody can tell the shim again.
    let mut raw = redis::Client::open(redis.url())
        .and_then(|c| c.get_connection())
        .expect("a probe connection");
    let key = format!("mcp-tasks-shim:rec:{id}");
    poll::until("the outcome in redis", Duration::from_secs(60), || {
        let stored: Option<String> = redis::cmd("GET").arg(&key).query(&mut raw).expect("GET");
        let stored: Value = serde_json::from_str(&stored.unwrap_or_default()).unwrap_or_default();
        (stored["task"]["status"] == "completed" && stored["payload"]["kind"] == "result")
            .then_some(())
    });
    drop(upstream);
    let here = modern_ok(&c, &first, "t1", "tasks/get", json!({"taskId": id})).await;
    assert_eq!(here["status"], "completed", "{here}");
    assert!(text_of(&here["result"]).contains("outage"), "{here}");
    // Its upstream goes as soon as it has started: a new upstream session
    // would not know the task anyway.
    let second = shim(&HttpReference::start(LEGACY, &[]), Some(&redis.url()));
    let there = modern_ok(&c, &second, "t1", "tasks/get", json!({"taskId": id})).await;
    assert_eq!(there["status"], "completed", "{there}");
    assert_eq!(there["result"], here["result"], "the same cached result");
    stop(second);
    stop(first);
}

/// The same outage as a 2025-11-25 client sees it, in front of a
/// 2026-07-28 upstream: a task that ends while Redis is frozen reads as
/// ended once Redis is back, through `tasks/get`, `tasks/result` and
/// `tasks/list`, on this instance and on another sharing the ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_task_that_ends_while_redis_is_frozen_reads_as_ended_when_it_is_back() {
    let redis = support::redis::RedisServer::start();
    let ledger = redis.url();
    let flags = ["--token", "t1=alice", "--ledger", &ledger];
    let first = HttpShim::spawn(&flags, &support::wire::modern_reference());
    let mut alice = LegacyClient::connect(&first, "t1").await;
    let id = alice
        .create("slow_compute", json!({"seconds": 3, "label": "outage"}))
        .await;
    // Something watches the task while Redis is frozen: a blocking
    // tasks/result in another session. Its answer may be the result or
    // -32603 (the ledger did not answer); either is fine.
    let mut waiter = LegacyClient::connect(&first, "t1").await;
    let waited = {
        let id = id.clone();
        tokio::spawn(async move { waiter.rpc("tasks/result", json!({"taskId": id})).await })
    };
    // Frozen only once the waiter waits: the shim then watches the task.
    let c = reqwest::Client::new();
    let (c, metrics) = (&c, format!("{}/metrics", first.base));
    let metrics = metrics.as_str();
    poll::until_async(
        "the waiter to wait",
        Duration::from_secs(60),
        || async move {
            let text = c.get(metrics).send().await.unwrap().text().await.unwrap();
            let watched = text
                .lines()
                .find_map(|l| l.strip_prefix("mcp_shim_watched_tasks "))
                .and_then(|v| v.trim().parse::<u64>().ok());
            watched.is_some_and(|n| n > 0).then_some(())
        },
    )
    .await;
    redis.freeze();
    let seen = first
        .wait_logged(
            "could not store what the upstream said of a task",
            Duration::from_secs(60),
        )
        .await;
    assert!(!seen.is_empty(), "the task's end was never seen");
    redis.thaw();
    let answer = waited.await.expect("the waiting tasks/result");
    if let Some(e) = answer.get("error") {
        assert_eq!(e["code"], -32603, "{answer}");
    } else {
        assert!(text_of(&answer["result"]).contains("outage"), "{answer}");
    }

    let second = HttpShim::spawn(&flags, &support::wire::modern_reference());
    // The second instance learns of the end only from Redis, once the
    // first has stored what it kept: wait for it (bounded).
    for shim in [&first, &second] {
        let mut alice = LegacyClient::connect(shim, "t1").await;
        poll::until_with("completed", Duration::from_secs(60), &mut alice, |alice| {
            let id = id.clone();
            Box::pin(async move {
                let t = alice.rpc("tasks/get", json!({"taskId": id})).await;
                (t["result"]["status"] == "completed").then_some(())
            })
        })
        .await;
        let r = alice.ok("tasks/result", json!({"taskId": id})).await;
        assert!(text_of(&r).contains("outage"), "{r}");
        let page = alice.ok("tasks/list", json!({})).await;
        let listed = page["tasks"].as_array().expect("tasks");
        assert_eq!(listed.len(), 1, "{page}");
        assert_eq!(listed[0]["taskId"], id.as_str(), "{page}");
        assert_eq!(listed[0]["status"], "completed", "{page}");
    }
    stop(second);
    stop(first);
}
