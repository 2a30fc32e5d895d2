//! A legacy client blocked in `tasks/result` on a 2026-07-28 upstream is
//! woken by the upstream's `notifications/tasks`, which the shim asks for
//! itself with `subscriptions/listen`, over a child's stdio and over HTTP;
//! an upstream without listen streams is polled instead.
//!
//! The upstream advertises a 60 s poll interval: a result that arrives
//! within the 20 s a test waits was pushed, not polled. What the shim sends
//! upstream is captured (a `tee` in front of the child's stdin, a recording
//! TCP forwarder in front of the HTTP server) and the listen requests in it
//! are validated against the 2026-07-28 schemas. Everything the shim sends
//! the legacy client is validated against 2025-11-25 as it is read.

mod support;

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::forwarder::{Forwarder, messages_in, shim_through};
use support::http::{self as h, HttpShim, block_on};
use support::schema::{Revision, SchemaFile, assert_valid, validate_def};
use support::wire::{Wire, shim_bin, temp_path, text_of};

/// The poll interval the upstream advertises: longer than any wait here.
const LONG_POLL_MS: &str = "60000";
/// Every wait for a result; far below [`LONG_POLL_MS`].
const WAIT: Duration = Duration::from_secs(20);
/// The upstream's first message on a listen stream.
const ACKNOWLEDGED: &[u8] = b"notifications/subscriptions/acknowledged";

/// The modern reference server on stdio with `flags`, its input copied to
/// `log` on the way.
fn teed_reference(log: &std::path::Path, flags: &str) -> Vec<String> {
    let script = format!(
        "tee '{}' | '{}' reference-server --revision 2026-07-28 {flags}",
        log.display(),
        shim_bin()
    );
    vec!["sh".into(), "-c".into(), script]
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn of_method<'a>(msgs: &'a [Value], method: &str) -> Vec<&'a Value> {
    msgs.iter().filter(|m| m["method"] == method).collect()
}

/// Checks a listen request the shim sent upstream: valid 2026-07-28 (core
/// request, extension filter) and asking for exactly `task`.
#[track_caller]
fn assert_listen_for(listen: &Value, task: &str) {
    assert_valid(Revision::Modern, listen, None);
    let filter = &listen["params"]["notifications"];
    validate_def(
        SchemaFile::TasksExtension,
        "TaskSubscriptionNotifications",
        filter,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(filter["taskIds"], json!([task]), "{listen}");
    let caps = &listen["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
    assert!(
        caps["extensions"]["io.modelcontextprotocol/tasks"].is_object(),
        "a listen for tasks declares the extension: {listen}"
    );
}

/// How many reads of a task's state (`tasks/get`, `subscriptions/listen`)
/// an upstream recording holds; 0 before the file exists.
fn waits_sent(recording: &std::path::Path) -> usize {
    let bytes = std::fs::read(recording).unwrap_or_default();
    messages_in(&bytes)
        .iter()
        .filter(|m| m["method"] == "tasks/get" || m["method"] == "subscriptions/listen")
        .count()
}

/// Waits (bounded) until `read` finds what it looks for.
#[track_caller]
fn eventually<T>(what: &str, read: impl FnMut() -> Option<T>) -> T {
    support::poll::until(what, WAIT, read)
}

/// What `slow_compute {seconds: 1, label}` answers.
fn done(label: &str) -> String {
    format!("slow_compute '{label}' finished after 1 s")
}

fn create(shim: &mut Wire, label: &str) -> String {
    let r = shim.ok(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": label},
            "task": {"ttl": 60_000}}),
    );
    r["task"]["taskId"].as_str().expect("a task").to_owned()
}

#[test]
fn stdio_wait_ends_on_the_pushed_completion_and_the_listen_is_closed() {
    let log = temp_path("listen-stdio.jsonl");
    let upstream = teed_reference(&log, &format!("--poll-interval-ms {LONG_POLL_MS}"));
    let mut shim = Wire::spawn(&[], &upstream);
    shim.initialize();

    let task = create(&mut shim, "pushed");
    let asked = Instant::now();
    let r = shim.ok("tasks/result", json!({"taskId": task}));
    let waited = asked.elapsed();
    assert_eq!(text_of(&r), done("pushed"), "{r}");
    assert!(
        waited < WAIT,
        "tasks/result took {waited:?} with a {LONG_POLL_MS} ms poll interval"
    );

    // What the shim asked the upstream: one listen for the task, closed
    // once the task ended.
    let listen = eventually("the listen to be cancelled", || {
        let msgs = messages_in(&std::fs::read(&log).unwrap_or_default());
        let listens = of_method(&msgs, "subscriptions/listen");
        assert_eq!(listens.len(), 1, "one listen per watched task: {listens:?}");
        let listen = listens[0].clone();
        let cancelled = of_method(&msgs, "notifications/cancelled")
            .into_iter()
            .find(|c| c["params"]["requestId"] == listen["id"])?;
        assert_valid(Revision::Modern, cancelled, None);
        Some(listen)
    });
    assert_listen_for(&listen, &task);

    // A plain call the upstream turns into a task is driven the same way.
    let asked = Instant::now();
    let r = shim.ok(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "driven"}}),
    );
    assert_eq!(text_of(&r), done("driven"), "{r}");
    assert!(
        asked.elapsed() < WAIT,
        "the driven call took {:?}",
        asked.elapsed()
    );
    let _ = std::fs::remove_file(&log);
}

#[test]
fn stdio_upstream_without_listen_is_polled_and_not_asked_again() {
    let log = temp_path("nolisten-stdio.jsonl");
    let upstream = teed_reference(&log, "--no-listen --poll-interval-ms 200");
    let mut shim = Wire::spawn(&[], &upstream);
    shim.initialize();

    for label in ["first", "second"] {
        let task = create(&mut shim, label);
        let r = shim.ok("tasks/result", json!({"taskId": task}));
        assert_eq!(text_of(&r), done(label), "{r}");
    }
    let msgs = messages_in(&std::fs::read(&log).expect("the capture"));
    let listens = of_method(&msgs, "subscriptions/listen");
    assert_eq!(
        listens.len(),
        1,
        "a refused listen is remembered, not retried per task: {listens:?}"
    );
    assert_valid(Revision::Modern, listens[0], None);
    assert!(
        of_method(&msgs, "tasks/get").len() >= 2,
        "the waits were polled"
    );
    let _ = std::fs::remove_file(&log);
}

#[test]
fn stdio_listen_after_an_upstream_restart_is_a_fresh_one() {
    let upstream = [
        shim_bin().to_owned(),
        "reference-server".into(),
        "--revision".into(),
        "2026-07-28".into(),
        "--poll-interval-ms".into(),
        LONG_POLL_MS.into(),
    ];
    // What the shim sends upstream shows when the wait is in flight.
    let sent = temp_path("listen-restart-upstream.jsonl");
    let mut shim = Wire::spawn(
        &[
            "--restart-upstream",
            "--record-upstream",
            sent.to_str().unwrap(),
        ],
        &upstream,
    );
    shim.initialize();

    // A wait in flight when the upstream dies fails with it.
    let task = create(&mut shim, "lost");
    let child = eventually("the upstream child", || {
        h::children_of(shim.pid()).into_iter().next()
    });
    let waits_before = waits_sent(&sent);
    let id = shim.request("tasks/result", json!({"taskId": task}));
    eventually("the wait sent upstream", || {
        (waits_sent(&sent) > waits_before).then_some(())
    });
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &child.to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success());
    let r = shim.response(&id);
    assert_eq!(r["error"]["code"], -32603, "{r}");

    // The successor gets its own listen: the next wait is pushed again,
    // long before a poll could see it.
    let task = eventually("the restarted upstream", || {
        let r = shim.call(
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "again"},
                "task": {"ttl": 60_000}}),
        );
        r["result"]["task"]["taskId"].as_str().map(str::to_owned)
    });
    let asked = Instant::now();
    let r = shim.ok("tasks/result", json!({"taskId": task}));
    assert_eq!(text_of(&r), done("again"), "{r}");
    assert!(asked.elapsed() < WAIT, "took {:?}", asked.elapsed());
    let _ = std::fs::remove_file(&sent);
}

/// One legacy HTTP session; every answer is checked against 2025-11-25.
async fn legacy_rpc(
    c: &reqwest::Client,
    url: &str,
    sid: &str,
    id: i64,
    method: &str,
    params: Value,
) -> Value {
    let (status, answer, _) =
        h::send(h::legacy(c, url, Some(sid), &h::rpc(id, method, params))).await;
    assert_eq!(status, StatusCode::OK, "{method}: {answer}");
    assert_valid(Revision::Legacy, &answer, Some(method));
    answer
}

/// The shim over HTTP in front of `target` (through a forwarder), and a
/// legacy session that created a `slow_compute` task of `seconds`.
struct HttpRig {
    fwd: Forwarder,
    shim: HttpShim,
    c: reqwest::Client,
    sid: String,
    task: String,
}

impl HttpRig {
    async fn start(target: std::net::SocketAddr, seconds: u64, label: &str) -> HttpRig {
        let (fwd, shim) = shim_through(target, &[]).await;
        let c = h::client();
        let (sid, _) = h::initialize(&c, &shim.url, None).await;
        let call = json!({"name": "slow_compute", "arguments": {"seconds": seconds, "label": label},
            "task": {"ttl": 60_000}});
        let r = legacy_rpc(&c, &shim.url, &sid, 1, "tools/call", call).await;
        let task = r["result"]["task"]["taskId"]
            .as_str()
            .expect("a task")
            .to_owned();
        HttpRig {
            fwd,
            shim,
            c,
            sid,
            task,
        }
    }

    /// The `subscriptions/listen` requests the shim sent upstream.
    fn listens(&self) -> Vec<Value> {
        let msgs = messages_in(&self.fwd.sent.lock().unwrap());
        of_method(&msgs, "subscriptions/listen")
            .into_iter()
            .cloned()
            .collect()
    }
}

#[test]
fn http_wait_ends_on_the_pushed_completion() {
    let server = h::HttpReference::start(h::MODERN, &["--poll-interval-ms", LONG_POLL_MS]);
    let target = server.addr;
    block_on(async move {
        let rig = HttpRig::start(target, 1, "http").await;
        let HttpRig {
            c, shim, sid, task, ..
        } = &rig;
        let asked = Instant::now();
        let r = legacy_rpc(
            c,
            &shim.url,
            sid,
            2,
            "tasks/result",
            json!({"taskId": task}),
        )
        .await;
        let waited = asked.elapsed();
        assert_eq!(text_of(&r["result"]), done("http"), "{r}");
        assert!(
            waited < WAIT,
            "tasks/result took {waited:?} with a {LONG_POLL_MS} ms poll interval"
        );

        let listens = rig.listens();
        assert_eq!(listens.len(), 1, "{listens:?}");
        assert_listen_for(&listens[0], task);
        let sent = String::from_utf8_lossy(&rig.fwd.sent.lock().unwrap()).to_lowercase();
        assert!(
            sent.contains("mcp-method: subscriptions/listen"),
            "the listen POST carries the modern headers"
        );
    });
}

/// The listen stream's connection drops mid-wait: the shim opens the
/// stream again, and the wait still ends on the pushed completion, not at
/// the next poll a minute later.
#[test]
fn http_listen_lost_mid_wait_is_opened_again() {
    let server = h::HttpReference::start(h::MODERN, &["--poll-interval-ms", LONG_POLL_MS]);
    let target = server.addr;
    block_on(async move {
        let rig = HttpRig::start(target, 3, "again").await;
        let HttpRig {
            c,
            shim,
            sid,
            task,
            fwd,
        } = &rig;
        let listens = || rig.listens().len();
        let asked = Instant::now();
        let wait = legacy_rpc(
            c,
            &shim.url,
            sid,
            2,
            "tasks/result",
            json!({"taskId": task}),
        );
        let cutter = async {
            // Cut once the stream works: its acknowledgement was handed
            // to the shim.
            support::poll::until_async("an acknowledged listen", WAIT, || async {
                let received = fwd.received.lock().unwrap();
                (listens() > 0 && find(&received, ACKNOWLEDGED).is_some()).then_some(())
            })
            .await;
            fwd.cut_all();
        };
        let (r, ()) = tokio::join!(wait, cutter);
        let waited = asked.elapsed();
        assert!(text_of(&r["result"]).contains("again"), "{r}");
        assert!(
            waited < WAIT,
            "tasks/result took {waited:?} with a {LONG_POLL_MS} ms poll interval"
        );
        assert_eq!(listens(), 2, "the lost stream was opened once more");
    });
}

#[test]
fn http_upstream_without_listen_is_polled() {
    let server = h::HttpReference::start(h::MODERN, &["--no-listen", "--poll-interval-ms", "200"]);
    let target = server.addr;
    block_on(async move {
        let (rec, shim) = shim_through(target, &[]).await;
        let c = h::client();
        let (sid, _) = h::initialize(&c, &shim.url, None).await;
        for (i, label) in [(1, "one"), (3, "two")] {
            let call = json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": label},
                "task": {"ttl": 60_000}});
            let r = legacy_rpc(&c, &shim.url, &sid, i, "tools/call", call).await;
            let task = r["result"]["task"]["taskId"]
                .as_str()
                .expect("a task")
                .to_owned();
            let r = legacy_rpc(
                &c,
                &shim.url,
                &sid,
                i + 1,
                "tasks/result",
                json!({"taskId": task}),
            )
            .await;
            assert_eq!(text_of(&r["result"]), done(label), "{r}");
        }
        let msgs = messages_in(&rec.sent.lock().unwrap());
        assert_eq!(
            of_method(&msgs, "subscriptions/listen").len(),
            1,
            "a refused listen is not retried per task"
        );
    });
}
