//! Issue 6, item 7: upstream faults. A real misbehaving upstream
//! (`tests/peers/fault_relay.py` in front of the reference server: it dies,
//! goes silent or writes garbage when a `slow_compute` labelled "FAULT" is
//! called) and, for HTTP upstreams, a TCP forwarder that cuts connections.
//!
//! Each test asserts what a client notices: the waiting request gets
//! `-32603` naming the cause, later requests fail at once (or, with
//! `--restart-upstream`, work again), other HTTP sessions keep being
//! served. Every wait is bounded; the fault→error latency is printed, never
//! asserted.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use support::forwarder::{Forwarder, shim_through};
use support::http::{self as h, HttpShim, block_on};
use support::schema::Revision;
use support::wire::{Wire, shim_bin, temp_path, text_of};

/// Liveness flags small enough for a test: a hang is declared after
/// ~1.2 s of silence with requests outstanding.
const PING: [&str; 4] = ["--upstream-ping", "200ms", "--upstream-ping-timeout", "1s"];

fn reference(rev: &str) -> Vec<String> {
    vec![
        shim_bin().to_owned(),
        "reference-server".into(),
        "--revision".into(),
        rev.into(),
    ]
}

/// `python3 fault_relay.py MODE -- <reference server of revision rev>`.
fn relay(mode: &str, rev: &str) -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/fault_relay.py");
    let mut cmd = vec![
        "python3".to_owned(),
        script.to_string_lossy().into_owned(),
        mode.to_owned(),
        "--".to_owned(),
    ];
    cmd.extend(reference(rev));
    cmd
}

/// Where the relay notes the fault time; set in the shim's environment so
/// its upstream child inherits it.
struct Stamp(PathBuf);

impl Stamp {
    fn new(name: &str) -> Stamp {
        let p = temp_path(&format!("fault-{name}.stamp"));
        let _ = std::fs::remove_file(&p);
        Stamp(p)
    }

    /// Seconds from the fault to now, printed with `what`.
    fn report(&self, what: &str) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        match std::fs::read_to_string(&self.0)
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
        {
            Some(t) => eprintln!("LATENCY {what}: fault→error {:.0} ms", (now - t) * 1000.0),
            None => eprintln!("LATENCY {what}: no fault stamp"),
        }
    }
}

impl Drop for Stamp {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// How long the shim waits for a relayed upstream's answer to its revision
/// probe: a failure guard. The relay is a Python process starting the
/// reference server, which on a loaded machine can take longer than the
/// default 5 s; a probe timed out would make the shim guess the revision.
const PROBE: [&str; 2] = ["--probe-timeout", "60s"];

/// `mcp-tasks-shim stdio FLAGS -- UPSTREAM`, speaking `rev` to the shim.
fn stdio_shim(flags: &[&str], upstream: &[String], rev: Revision, stamp: &Stamp) -> Wire {
    let mut cmd = Command::new(shim_bin());
    cmd.arg("stdio")
        .args(PROBE)
        .args(flags)
        .arg("--")
        .args(upstream);
    cmd.env("RUST_LOG", "warn")
        .env("FAULT_RELAY_STAMP", &stamp.0);
    Wire::from_command(cmd, rev)
}

/// A `--restart-upstream` stdio shim over a reference server of
/// `upstream` revision that exits on the FAULT call; `client` speaks.
fn restarting_shim(upstream: &str, client: Revision, stamp: &Stamp) -> Wire {
    stdio_shim(
        &["--restart-upstream"],
        &relay("exit", upstream),
        client,
        stamp,
    )
}

/// `params` as `client` sends them (a modern client adds its `_meta`,
/// without the tasks extension).
fn as_client(client: Revision, params: Value) -> Value {
    match client {
        Revision::Modern => modern_params(params, false),
        Revision::Legacy => params,
    }
}

/// The session's first exchange: `server/discover` or `initialize`.
fn open_session(shim: &mut Wire, client: Revision) {
    match client {
        Revision::Modern => {
            shim.ok("server/discover", modern_params(json!({}), true));
        }
        Revision::Legacy => {
            shim.initialize();
        }
    }
}

fn modern_params(mut params: Value, ext: bool) -> Value {
    params["_meta"] = h::modern_meta(ext);
    params
}

/// The error a response carries, failing the test if it succeeded.
#[track_caller]
fn error_of(r: &Value) -> &Value {
    r.get("error")
        .unwrap_or_else(|| panic!("expected an error, got {r}"))
}

/// `-32603` whose message contains `cause`.
#[track_caller]
fn assert_upstream_error(r: &Value, cause: &str) {
    // A JSON-RPC error response reads the same in both revisions.
    for rev in [Revision::Legacy, Revision::Modern] {
        support::schema::assert_valid(rev, r, None);
    }
    let e = error_of(r);
    assert_eq!(e["code"], -32603, "{r}");
    let msg = e["message"].as_str().unwrap_or_default();
    assert!(msg.contains(cause), "message should name {cause:?}: {msg}");
}

fn fault_call() -> Value {
    json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "FAULT"}})
}

// ---------------------------------------------------------------- stdio --

/// An upstream that exits before the first request is answered (during
/// the probe, or as the request comes in): the request gets `-32603`
/// naming the exit, in either revision, never just the end of the output.
/// Ten fresh processes each, as the loss was a race the shim lost in
/// about one start in three.
#[test]
fn an_upstream_that_dies_at_start_still_answers_the_first_request() {
    let dying = ["sh".to_owned(), "-c".into(), "exit 3".into()];
    for client in [Revision::Legacy, Revision::Modern] {
        for _ in 0..10 {
            let mut shim = Wire::spawn(&[], &dying);
            shim.rev = client;
            let first = match client {
                Revision::Legacy => shim.call(
                    "initialize",
                    json!({"protocolVersion": "2025-11-25", "capabilities": {},
                           "clientInfo": {"name": "fault-test", "version": "0"}}),
                ),
                Revision::Modern => shim.call("tools/list", modern_params(json!({}), false)),
            };
            assert_upstream_error(&first, "exit status: 3");
        }
    }
}

/// A legacy client blocked in `tasks/result` on a modern upstream that dies.
#[test]
fn legacy_client_blocked_on_tasks_result_when_the_upstream_dies() {
    let stamp = Stamp::new("legacy-kill");
    let mut shim = stdio_shim(&[], &relay("exit", "2026-07-28"), Revision::Legacy, &stamp);
    shim.initialize();
    let mut call = fault_call();
    call["task"] = json!({"ttl": 60_000});
    let created = shim.ok("tools/call", call);
    let task_id = created["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let r = shim.call("tasks/result", json!({"taskId": task_id}));
    stamp.report("stdio legacy→modern kill (blocking tasks/result)");
    assert_upstream_error(&r, "upstream exited");
    assert!(
        error_of(&r)["message"].as_str().unwrap().contains('7'),
        "the exit status is named: {r}"
    );
    // Without --restart-upstream the stdio shim ends with its upstream.
    let status = shim
        .wait_exit(Duration::from_secs(10))
        .expect("the shim exits after its upstream died");
    assert!(!status.success());
}

/// A modern client's `subscriptions/listen` over stdio when its legacy
/// upstream dies (no restart): before the session ends, the stream is
/// answered with the error naming the cause, as every other open request
/// is, instead of the output just stopping.
#[test]
fn modern_client_listen_is_answered_when_the_upstream_dies() {
    let stamp = Stamp::new("modern-listen-kill");
    let mut shim = stdio_shim(&[], &relay("exit", "2025-11-25"), Revision::Modern, &stamp);
    open_session(&mut shim, Revision::Modern);
    let listen = shim.request(
        "subscriptions/listen",
        modern_params(json!({"notifications": {"taskIds": []}}), true),
    );
    let r = shim.call("tools/call", as_client(Revision::Modern, fault_call()));
    stamp.report("stdio modern→legacy kill, listen open");
    assert_upstream_error(&r, "upstream exited");
    let answer = shim.response(&listen);
    assert_upstream_error(&answer, "upstream exited");
    let status = shim
        .wait_exit(Duration::from_secs(10))
        .expect("the shim exits after its upstream died");
    assert!(!status.success());
}

/// A legacy client's plain call on a modern upstream that hangs.
#[test]
fn legacy_client_call_when_the_upstream_stops_answering() {
    let stamp = Stamp::new("legacy-silent");
    let mut shim = stdio_shim(
        &PING,
        &relay("silent", "2026-07-28"),
        Revision::Legacy,
        &stamp,
    );
    shim.initialize();
    let r = shim.call("tools/call", fault_call());
    stamp.report("stdio legacy→modern silent (incl. 1000 ms ping timeout)");
    assert_upstream_error(&r, "upstream stopped answering");
}

/// A modern server that acknowledges a cancel and lets the task run on
/// answers every poll as it did before: the cancel the shim pinned still
/// shows. (The shim remembers the last upstream answer that told it
/// nothing new, with the record it was judged against; a poll answered
/// from that memo after the cancel would read `working`.)
#[test]
fn a_pinned_cancel_shows_though_the_server_answers_as_before() {
    let stamp = Stamp::new("legacy-keepgoing");
    let mut shim = stdio_shim(
        &[],
        &relay("keepgoing", "2026-07-28"),
        Revision::Legacy,
        &stamp,
    );
    shim.initialize();
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "runs on"},
        "task": {"ttl": 60_000}});
    let created = shim.ok("tools/call", call);
    let id = created["task"]["taskId"].clone();
    let polled = |t: &Value| (t["status"].clone(), t["statusMessage"].clone());
    let first = shim.ok("tasks/get", json!({"taskId": id}));
    assert_eq!(first["status"], "working", "{first}");
    for _ in 0..3 {
        let again = shim.ok("tasks/get", json!({"taskId": id}));
        assert_eq!(polled(&again), polled(&first), "{again}");
    }
    let cancelled = shim.ok("tasks/cancel", json!({"taskId": id}));
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    for _ in 0..3 {
        let after = shim.ok("tasks/get", json!({"taskId": id}));
        assert_eq!(after["status"], "cancelled", "{after}");
    }
}

/// A legacy client's plain call on a modern upstream that writes garbage.
#[test]
fn legacy_client_call_when_the_upstream_writes_garbage() {
    let stamp = Stamp::new("legacy-garbage");
    let mut shim = stdio_shim(
        &[],
        &relay("garbage", "2026-07-28"),
        Revision::Legacy,
        &stamp,
    );
    shim.initialize();
    let r = shim.call("tools/call", fault_call());
    stamp.report("stdio legacy→modern garbage");
    assert_upstream_error(&r, "upstream sent invalid JSON-RPC");
    let msg = error_of(&r)["message"].as_str().unwrap();
    assert!(msg.contains("this is not JSON-RPC"), "excerpt shown: {msg}");
}

/// An upstream answer over the 16 MiB limit is refused, and the call it
/// answers fails at once with the reason instead of waiting for the
/// request timeout; the session goes on. A legacy server, behind a legacy
/// client (pass-through) and a modern one (translated).
#[test]
fn an_answer_over_the_size_limit_fails_its_call_at_once() {
    for client in [Revision::Legacy, Revision::Modern] {
        let stamp = Stamp::new(&format!("huge-{client:?}"));
        let mut shim = stdio_shim(&[], &relay("huge", "2025-11-25"), client, &stamp);
        let wrap = |p: Value| as_client(client, p);
        open_session(&mut shim, client);
        let started = Instant::now();
        let r = shim.call("tools/call", wrap(fault_call()));
        stamp.report(&format!("stdio {client:?} client, huge answer"));
        assert_upstream_error(&r, "exceeds the limit");
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{client:?}: answered when the answer was refused, not at the timeout"
        );
        let r = shim.ok(
            "tools/call",
            wrap(json!({"name": "greet", "arguments": {"name": "after"}})),
        );
        assert!(text_of(&r).contains("after"), "{client:?}: {r}");
    }
}

/// An upstream answer that is valid JSON the shim's parser cannot hold
/// (nested deeper than its limit, a number beyond `f64`) fails its call
/// at once, naming why; the stream is not broken, so the session goes on
/// (it used to be taken for garbage, which ends the session).
#[test]
fn an_answer_the_parser_cannot_hold_fails_its_call_and_the_session_goes_on() {
    for client in [Revision::Legacy, Revision::Modern] {
        let stamp = Stamp::new(&format!("deep-{client:?}"));
        let mut shim = stdio_shim(&[], &relay("deep", "2025-11-25"), client, &stamp);
        let wrap = |p: Value| as_client(client, p);
        open_session(&mut shim, client);
        let r = shim.call("tools/call", wrap(fault_call()));
        assert_upstream_error(&r, "recursion limit");
        let r = shim.ok(
            "tools/call",
            wrap(json!({"name": "greet", "arguments": {"name": "after"}})),
        );
        assert!(text_of(&r).contains("after"), "{client:?}: {r}");
    }
}

/// A 2026-07-28 client sees a legacy server's log messages only at or
/// above the `logLevel` its request asked for, and none when it asked for
/// none (the 2026-07-28 schema's MUST NOT).
#[test]
fn log_messages_reach_a_modern_client_only_as_asked() {
    let stamp = Stamp::new("logs");
    let mut shim = stdio_shim(&[], &relay("logs", "2025-11-25"), Revision::Modern, &stamp);
    shim.ok("server/discover", modern_params(json!({}), true));
    let call = |level: Option<&str>| {
        let mut p = modern_params(
            json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "FAULT"}}),
            false,
        );
        if let Some(l) = level {
            p["_meta"]["io.modelcontextprotocol/logLevel"] = json!(l);
        }
        p
    };
    let logs = |shim: &mut Wire| -> Vec<Value> {
        shim.take_backlog()
            .into_iter()
            .filter(|m| m["method"] == "notifications/message")
            .collect()
    };
    shim.ok("tools/call", call(Some("warning")));
    let seen = logs(&mut shim);
    assert_eq!(seen.len(), 1, "only the error: {seen:?}");
    assert_eq!(seen[0]["params"]["level"], "error", "{seen:?}");
    shim.ok("tools/call", call(Some("debug")));
    assert_eq!(logs(&mut shim).len(), 2, "both at debug");
    shim.ok("tools/call", call(None));
    let seen = logs(&mut shim);
    assert!(seen.is_empty(), "none without logLevel: {seen:?}");
}

/// A legacy upstream, one fault per mode, behind a modern client (bridged)
/// and behind a legacy one (pass-through, where answers come straight from
/// the child's reader thread): the waiting call fails with the cause.
#[test]
fn waiting_call_fails_with_the_cause_for_each_fault() {
    for client in [Revision::Modern, Revision::Legacy] {
        for (mode, cause) in [
            ("exit", "upstream exited"),
            ("silent", "upstream stopped answering"),
            ("garbage", "upstream sent invalid JSON-RPC"),
        ] {
            let label = format!("{client:?} client, {mode}");
            let stamp = Stamp::new(&format!("{client:?}-{mode}"));
            let mut shim = stdio_shim(&PING, &relay(mode, "2025-11-25"), client, &stamp);
            // Without the extension, `slow_compute` (optional) is a plain call.
            let wrap = |p: Value| as_client(client, p);
            open_session(&mut shim, client);
            // Answered before the fault.
            let r = shim.ok(
                "tools/call",
                wrap(json!({"name": "greet", "arguments": {"name": "before"}})),
            );
            assert!(text_of(&r).contains("before"), "{label}: {r}");
            let r = shim.call("tools/call", wrap(fault_call()));
            stamp.report(&format!("stdio {label}"));
            assert_upstream_error(&r, cause);
            // Nothing hangs afterwards: without --restart-upstream the stdio
            // shim ends with its upstream (the client sees end of output).
            let started = Instant::now();
            let status = shim
                .wait_exit(Duration::from_secs(10))
                .expect("the shim exits after its upstream failed");
            assert!(!status.success(), "{label}: exit status {status}");
            eprintln!(
                "{label}: the shim exited {} ms after the error",
                started.elapsed().as_millis()
            );
        }
    }
}

/// A modern client's task on a legacy upstream that dies and is
/// restarted: the task died with it. The shim marks it failed as soon as
/// the child is gone, naming why, and tells the task's listen stream then,
/// without waiting for a `tasks/get` to find the loss; later `tasks/get`s
/// read it failed, instead of the client's own task turning into an
/// unknown id. (Without a restart the stdio shim exits, so there is no
/// later `tasks/get` to ask.)
#[test]
fn modern_client_task_reads_failed_after_a_restart() {
    let stamp = Stamp::new("modern-task-kill");
    let mut shim = restarting_shim("2025-11-25", Revision::Modern, &stamp);
    shim.ok("server/discover", modern_params(json!({}), true));
    let created = shim.ok("tools/call", modern_params(fault_call(), true));
    assert_eq!(created["resultType"], "task", "{created}");
    let task_id = created["taskId"].as_str().expect("taskId").to_owned();
    let listen = shim.request(
        "subscriptions/listen",
        modern_params(json!({"notifications": {"taskIds": [task_id]}}), true),
    );
    // The relay dies 300 ms in; the stream hears of it on its own.
    let deadline = Instant::now() + Duration::from_secs(15);
    let told = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let m = shim
            .next(left)
            .expect("the listen stream is told the task failed");
        if m["method"] == "notifications/tasks" && m["params"]["status"] == "failed" {
            stamp.report("stdio modern→legacy kill + restart (listen)");
            break m;
        }
    };
    support::schema::assert_valid(Revision::Modern, &told, None);
    assert_eq!(
        told["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], listen,
        "{told}"
    );
    // Told once: not again when the task's own tasks/result fails too,
    // nor when the new child is up.
    let quiet_until = Instant::now() + Duration::from_millis(1500);
    while let Some(m) = shim.next(quiet_until.saturating_duration_since(Instant::now())) {
        assert!(
            !(m["method"] == "notifications/tasks" && m["params"]["taskId"] == task_id.as_str()),
            "a second notification for the lost task: {m}"
        );
        if Instant::now() >= quiet_until {
            break;
        }
    }
    let get = || modern_params(json!({"taskId": task_id}), true);
    let failed = shim.call("tasks/get", get());
    support::schema::assert_valid(Revision::Modern, &failed, Some("tasks/get"));
    let result = &failed["result"];
    assert_eq!(result["status"], "failed", "{failed}");
    let error = &result["error"];
    assert_eq!(error["code"], -32603, "{failed}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(message.contains("no longer knows this task"), "{failed}");
    assert!(
        message.contains("upstream exited"),
        "names the cause: {failed}"
    );
    assert_eq!(result["statusMessage"], error["message"], "{failed}");
    assert_eq!(told["params"]["error"], *error, "{told}");
    // It stays failed: the ledger holds the outcome now.
    let again = shim.call("tasks/get", get());
    support::schema::assert_valid(Revision::Modern, &again, Some("tasks/get"));
    assert_eq!(again["result"]["status"], "failed", "{again}");
    assert_eq!(again["result"]["error"], *error, "{again}");
    // And the restarted upstream serves new work.
    let r = shim.ok(
        "tools/call",
        modern_params(
            json!({"name": "greet", "arguments": {"name": "later"}}),
            false,
        ),
    );
    assert!(text_of(&r).contains("later"), "{r}");
}

/// The other direction: a legacy client's tasks on a modern upstream that
/// dies and is restarted. A blocking `tasks/result` asked after the fault
/// answers the loss as `-32603`; from then on `tasks/get` reads the task
/// failed, and `tasks/list` lists it, and the other task the old child
/// ran, as failed rather than working.
#[test]
fn legacy_client_task_reads_failed_after_a_restart() {
    let stamp = Stamp::new("legacy-task-kill");
    let mut shim = restarting_shim("2026-07-28", Revision::Legacy, &stamp);
    shim.initialize();
    let as_task = |mut call: Value| {
        call["task"] = json!({"ttl": 60_000});
        call
    };
    let other = json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "other"}});
    let other = shim.ok("tools/call", as_task(other))["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let created = shim.ok("tools/call", as_task(fault_call()));
    let task_id = created["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(15);
    support::poll::until("the relay's fault", Duration::from_secs(15), || {
        stamp.0.exists().then_some(())
    });
    // Asked across the restart: the wait's poll meets the new upstream,
    // which does not know the task. (A wait that started before the
    // child's death was noticed fails with the death instead; ask again.)
    let within = deadline.saturating_duration_since(Instant::now());
    let r = support::poll::until("a tasks/result past the death", within, || {
        let r = shim.call("tasks/result", json!({"taskId": task_id}));
        let message = r["error"]["message"].as_str().unwrap_or_default();
        (!message.contains("upstream exited")).then_some(r)
    });
    stamp.report("stdio legacy→modern kill + restart (tasks/result)");
    assert_upstream_error(&r, "no longer knows this task");
    assert!(
        error_of(&r)["message"]
            .as_str()
            .unwrap()
            .contains("not found"),
        "the upstream's words: {r}"
    );
    let got = shim.call("tasks/get", json!({"taskId": task_id}));
    support::schema::assert_valid(Revision::Legacy, &got, Some("tasks/get"));
    assert_eq!(got["result"]["status"], "failed", "{got}");
    assert_eq!(
        got["result"]["statusMessage"],
        error_of(&r)["message"],
        "{got}"
    );
    let listed = shim.ok("tasks/list", json!({}));
    // The one listed, by id.
    let entry = |id: &str| -> Value {
        let all = listed["tasks"].as_array().expect("tasks");
        let found: Vec<_> = all.iter().filter(|t| t["taskId"] == id).collect();
        assert_eq!(found.len(), 1, "{id} once in {listed}");
        found[0].clone()
    };
    assert_eq!(entry(&task_id)["status"], "failed", "{listed}");
    // Never read since the restart, it was found lost by the listing.
    let lost = entry(&other);
    assert_eq!(lost["status"], "failed", "{listed}");
    let message = lost["statusMessage"].as_str().unwrap_or_default();
    assert!(message.contains("no longer knows this task"), "{listed}");
    support::schema::assert_valid(
        Revision::Legacy,
        &json!({"jsonrpc": "2.0", "id": 1, "result": listed}),
        Some("tasks/list"),
    );
}

/// With `--restart-upstream`, each direction (and pass-through) fails the
/// call in flight at the fault and serves new requests from a new child.
#[test]
fn restart_upstream_serves_new_requests_after_a_kill() {
    for (client, upstream) in [
        (Revision::Legacy, "2026-07-28"),
        (Revision::Modern, "2025-11-25"),
        (Revision::Legacy, "2025-11-25"),
    ] {
        let label = format!("{client:?} client, {upstream} upstream");
        let stamp = Stamp::new(&format!("restart-{client:?}-{upstream}"));
        let mut shim = restarting_shim(upstream, client, &stamp);
        let modern = client == Revision::Modern;
        let wrap = |p: Value| if modern { modern_params(p, false) } else { p };
        if modern {
            shim.ok("server/discover", modern_params(json!({}), true));
        } else {
            shim.initialize();
        }
        let r = shim.call("tools/call", wrap(fault_call()));
        stamp.report(&format!("stdio restart, {label}"));
        assert_upstream_error(&r, "upstream exited");
        // The restarted child answers (the legacy upstream saw the
        // client's initialize again).
        let started = Instant::now();
        let r = shim.ok(
            "tools/call",
            wrap(json!({"name": "greet", "arguments": {"name": "again"}})),
        );
        eprintln!(
            "{label}: first call after the restart answered in {} ms",
            started.elapsed().as_millis()
        );
        assert!(text_of(&r).contains("again"), "{label}: {r}");
    }
}

/// An initialized pass-through session of a legacy client over a
/// 2025-11-25 child that the shim restarts after a fault. (The stamp must
/// live as long as the session: the fault relay writes it.)
fn restarting_legacy_session(name: &str) -> (Stamp, Wire) {
    let stamp = Stamp::new(name);
    let mut shim = restarting_shim("2025-11-25", Revision::Legacy, &stamp);
    shim.initialize();
    (stamp, shim)
}

/// The messages waiting unread in the shim's output that `keep` keeps.
fn backlog_where(shim: &mut Wire, keep: impl Fn(&Value) -> bool) -> Vec<Value> {
    shim.take_backlog()
        .into_iter()
        .filter(|m| keep(m))
        .collect()
}

/// The `debug` log messages the reference server sent while answering.
fn debug_logs(shim: &mut Wire) -> Vec<Value> {
    backlog_where(shim, |m| {
        m["method"] == "notifications/message" && m["params"]["level"] == "debug"
    })
}

/// A pass-through legacy session keeps its log level across a restart:
/// the new child is sent the client's `logging/setLevel` again after
/// `initialize`, as a legacy server keeps it per session.
#[test]
fn restart_upstream_replays_the_clients_log_level() {
    let (_stamp, mut shim) = restarting_legacy_session("restart-log-level");
    let greet = json!({"name": "greet", "arguments": {"name": "Ada"}});
    shim.ok("tools/call", greet.clone());
    assert_eq!(
        debug_logs(&mut shim),
        Vec::<Value>::new(),
        "no level asked, no logs"
    );
    shim.ok("logging/setLevel", json!({"level": "debug"}));
    shim.ok("tools/call", greet.clone());
    let before = debug_logs(&mut shim);
    assert_eq!(before.len(), 1, "{before:?}");
    assert_eq!(before[0]["params"]["data"], "tools/call greet");

    let r = shim.call("tools/call", fault_call());
    assert_upstream_error(&r, "upstream exited");
    shim.take_backlog();
    shim.ok("tools/call", greet);
    assert_eq!(
        debug_logs(&mut shim),
        before,
        "the restarted child logs at the level the client set"
    );
}

/// The reference legacy server's one resource, which each `greet` changes.
const GREETINGS: &str = "mcp-tasks-shim://reference/greetings";

/// How many `notifications/resources/updated` for [`GREETINGS`] arrived.
fn greeting_updates(shim: &mut Wire) -> usize {
    backlog_where(shim, |m| {
        m["method"] == "notifications/resources/updated" && m["params"]["uri"] == GREETINGS
    })
    .len()
}

/// A pass-through legacy session keeps its resource subscriptions across
/// restarts: the new child is sent each `resources/subscribe` the client
/// has not taken back, and not the ones it has.
#[test]
fn restart_upstream_replays_the_clients_resource_subscriptions() {
    let (_stamp, mut shim) = restarting_legacy_session("restart-subscriptions");
    let greet = json!({"name": "greet", "arguments": {"name": "Ada"}});
    let restart = |shim: &mut Wire| {
        let r = shim.call("tools/call", fault_call());
        assert_upstream_error(&r, "upstream exited");
        shim.take_backlog();
    };
    // Refused by the server: kept anyway, and refused again on replay
    // without failing the restart.
    let unknown = shim.call(
        "resources/subscribe",
        json!({"uri": "mcp-tasks-shim://reference/nothing"}),
    );
    assert_eq!(error_of(&unknown)["code"], -32002, "{unknown}");
    shim.ok("tools/call", greet.clone());
    assert_eq!(greeting_updates(&mut shim), 0, "not subscribed, no updates");

    shim.ok("resources/subscribe", json!({"uri": GREETINGS}));
    shim.ok("tools/call", greet.clone());
    assert_eq!(greeting_updates(&mut shim), 1, "subscribed");

    restart(&mut shim);
    shim.ok("tools/call", greet.clone());
    assert_eq!(
        greeting_updates(&mut shim),
        1,
        "the restarted child was subscribed again"
    );

    shim.ok("resources/unsubscribe", json!({"uri": GREETINGS}));
    restart(&mut shim);
    shim.ok("tools/call", greet);
    assert_eq!(
        greeting_updates(&mut shim),
        0,
        "an unsubscribed resource stays unsubscribed after a restart"
    );
}

// ----------------------------------------------------------------- HTTP --

fn http_shim(flags: &[&str], upstream: &[String], stamp: &Stamp) -> HttpShim {
    // The relay inherits the shim's environment; HttpShim has no hook for
    // it, so the stamp path travels through a wrapper.
    let mut cmd = vec![
        "env".to_owned(),
        format!("FAULT_RELAY_STAMP={}", stamp.0.display()),
    ];
    cmd.extend(upstream.iter().cloned());
    let flags: Vec<&str> = PROBE.iter().chain(flags).copied().collect();
    HttpShim::spawn(&flags, &cmd)
}

/// A 2025-11-25 HTTP upstream restarted in place no longer knows the
/// shim's session and answers 404. As the spec has a client do, the shim
/// opens a new session (its `initialize` again, then `initialized`) and
/// sends the request again in it: the client never sees the 404.
#[test]
fn http_legacy_upstream_restarted_in_place_gets_a_new_session() {
    block_on(async {
        let upstream = h::HttpReference::start("2025-11-25", &[]);
        let addr = upstream.addr;
        let shim = HttpShim::spawn(&["--upstream-url", &upstream.url], &[] as &[&str]);
        let c = h::client();
        let greet = |id: i64, name: &str| {
            h::modern(
                &c,
                &shim.url,
                id,
                "tools/call",
                json!({"name": "greet", "arguments": {"name": name}}),
            )
        };
        let (status, body, _) = h::send(greet(1, "before")).await;
        assert_eq!(status, 200, "{body}");
        support::schema::assert_valid(Revision::Modern, &body, Some("tools/call"));
        assert!(text_of(&body["result"]).contains("before"), "{body}");

        drop(upstream);
        let _restarted = h::HttpReference::start_at("2025-11-25", &[], addr);
        for (id, name) in [(2, "after"), (3, "again")] {
            let (status, body, _) = h::send(greet(id, name)).await;
            assert_eq!(status, 200, "{body}");
            support::schema::assert_valid(Revision::Modern, &body, Some("tools/call"));
            assert!(text_of(&body["result"]).contains(name), "{body}");
        }
    });
}

/// A 2025-11-25 HTTP upstream that, as the Python SDK's server does, puts
/// an `Mcp-Session-Id` on its 400 to the revision probe (a session it
/// does not keep) and refuses unknown sessions with 404
/// (`tests/peers/stray_session_ids.py` in front of the reference server).
/// The shim took that id for its session and sent everything under it:
/// every request met 404, the renewal too, for good. A session is now
/// taken only from the answer to `initialize`.
#[test]
fn http_legacy_upstream_session_comes_from_initialize_only() {
    block_on(async {
        let upstream = h::HttpReference::start("2025-11-25", &[]);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/stray_session_ids.py");
        let mut relay = KillOnDrop(
            Command::new("python3")
                .arg(&script)
                .arg(&upstream.url)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("start stray_session_ids.py"),
        );
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(relay.0.stdout.take().expect("piped")),
            &mut line,
        )
        .expect("the relay's address");
        let port = line.trim().trim_start_matches("listening on ").to_owned();
        let url = format!("http://127.0.0.1:{port}/mcp");
        let shim = HttpShim::spawn(&["--upstream-url", &url], &[] as &[&str]);
        let c = h::client();
        let (status, body, _) =
            h::send(h::modern(&c, &shim.url, 1, "server/discover", json!({}))).await;
        assert_eq!(status, 200, "{body}");
        support::schema::assert_valid(Revision::Modern, &body, Some("server/discover"));
        for id in 2..4 {
            let (status, body, _) = h::send(h::modern(
                &c,
                &shim.url,
                id,
                "tools/call",
                json!({"name": "greet", "arguments": {"name": "Py"}}),
            ))
            .await;
            assert_eq!(status, 200, "{body}");
            support::schema::assert_valid(Revision::Modern, &body, Some("tools/call"));
            assert!(text_of(&body["result"]).contains("Py"), "{body}");
        }
    });
}

/// Over an HTTP upstream, a 2025-11-25 server's question during a call
/// comes on that call's own answer stream, so the shim knows whose it is.
/// It used to guess (the newest call), and with calls of two clients open
/// it refused the question: here an anonymous client's call asks for a
/// name (before its task exists) while another client's long call is
/// open, and the asking client gets the question (an MRTR round), every
/// time. Five rounds.
#[test]
fn http_upstream_questions_go_to_the_call_whose_stream_carried_them() {
    block_on(async {
        let upstream = h::HttpReference::start("2025-11-25", &[]);
        // Through a forwarder: what the shim sent upstream shows when the
        // other call is open there.
        let (fwd, shim) = shim_through(upstream.addr, &[]).await;
        let others_sent = || {
            fwd.sent_messages()
                .iter()
                .filter(|m| m["params"]["arguments"]["label"] == "other")
                .count()
        };
        let c = h::client();
        for round in 0..5 {
            // Another client's call, open all along.
            let long = tokio::spawn(
                h::modern(
                    &c,
                    &shim.url,
                    1,
                    "tools/call",
                    // No extension declared: a plain call, open 3 s.
                    json!({"name": "slow_compute", "arguments": {"seconds": 3, "label": "other"},
                        "_meta": h::modern_meta(false)}),
                )
                .send(),
            );
            support::poll::until_async("the other call sent upstream", h::STEP, || async {
                (others_sent() > round).then_some(())
            })
            .await;
            let mut ask = json!({"name": "test_tool_with_task", "arguments": {}});
            ask["_meta"] = h::modern_meta(true);
            ask["_meta"]["io.modelcontextprotocol/clientCapabilities"]["elicitation"] =
                json!({"form": {}});
            let req = c
                .post(&shim.url)
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "test_tool_with_task")
                .body(h::rpc(2, "tools/call", ask).to_string());
            let (status, body, _) = h::send(req).await;
            assert_eq!(status, 200, "round {round}: {body}");
            support::schema::assert_valid(Revision::Modern, &body, Some("tools/call"));
            assert_eq!(
                body["result"]["resultType"], "input_required",
                "round {round}: the asking call did not get its question: {body}"
            );
            long.abort();
        }
    });
}

/// A child process killed when the test is done with it, passed or not.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One legacy HTTP session's upstream dies mid-call: that call fails, the
/// other session (and a modern client) get fast, clear errors, the shim
/// still serves HTTP; with `--restart-upstream` they are served again.
#[test]
fn http_front_upstream_killed_mid_call() {
    block_on(async {
        for restart in [false, true] {
            let stamp = Stamp::new(&format!("http-kill-{restart}"));
            let flags: &[&str] = if restart {
                &["--restart-upstream"]
            } else {
                &[]
            };
            let shim = http_shim(flags, &relay("exit", "2026-07-28"), &stamp);
            let c = h::client();
            let (a, _) = h::initialize(&c, &shim.url, None).await;
            let (b, _) = h::initialize(&c, &shim.url, None).await;
            let call = h::rpc(2, "tools/call", fault_call());
            let (_, body, _) = h::send(h::legacy(&c, &shim.url, Some(&a), &call)).await;
            stamp.report(&format!("http legacy→modern kill (restart={restart})"));
            assert_upstream_error(&body, "upstream exited");

            let greet = h::rpc(
                3,
                "tools/call",
                json!({"name": "greet", "arguments": {"name": "B"}}),
            );
            let started = Instant::now();
            let (status, body, _) = h::send(h::legacy(&c, &shim.url, Some(&b), &greet)).await;
            eprintln!(
                "http (restart={restart}): other session answered in {} ms",
                started.elapsed().as_millis()
            );
            assert_eq!(status, 200, "{body}");
            if restart {
                assert!(text_of(&body["result"]).contains('B'), "{body}");
            } else {
                assert_upstream_error(&body, "not restarted");
            }
            // A modern client is told the same way.
            let (_, body, _) = h::send(h::modern(&c, &shim.url, 4, "tools/list", json!({}))).await;
            if restart {
                assert!(body["result"]["tools"].is_array(), "{body}");
            } else {
                assert_upstream_error(&body, "upstream exited");
            }
            let metrics = c.get(format!("{}/metrics", shim.base)).send().await;
            assert!(metrics.is_ok_and(|r| r.status() == 200));
        }
    });
}

/// A modern HTTP client over a legacy upstream that dies mid-call.
#[test]
fn http_front_modern_client_upstream_killed() {
    block_on(async {
        let stamp = Stamp::new("http-modern-kill");
        let shim = http_shim(&[], &relay("exit", "2025-11-25"), &stamp);
        let c = h::client();
        let mut params = fault_call();
        params["_meta"] = h::modern_meta(false);
        let (_, body, _) = h::send(h::modern(&c, &shim.url, 1, "tools/call", params)).await;
        stamp.report("http modern→legacy kill");
        assert_upstream_error(&body, "upstream exited");
        let started = Instant::now();
        let (_, body, _) = h::send(h::modern(&c, &shim.url, 2, "tools/list", json!({}))).await;
        eprintln!(
            "http modern→legacy: next request failed in {} ms",
            started.elapsed().as_millis()
        );
        assert_upstream_error(&body, "upstream exited");
    });
}

/// A modern HTTP client's `subscriptions/listen` stream when the legacy
/// upstream dies for good (no `--restart-upstream`): nothing more can come
/// on it, so it is answered with `-32603` naming the cause and ends, in
/// time, instead of staying open and silent.
#[test]
fn http_listen_stream_ends_when_the_upstream_is_gone() {
    block_on(async {
        let stamp = Stamp::new("http-listen-kill");
        let shim = http_shim(&[], &relay("exit", "2025-11-25"), &stamp);
        let c = h::client();
        let mut listen = json!({"notifications": {"taskIds": []}});
        listen["_meta"] = h::modern_meta(true);
        let resp = h::modern(&c, &shim.url, 7, "subscriptions/listen", listen)
            .send()
            .await
            .expect("listen request");
        assert_eq!(resp.status(), 200);
        let mut stream = h::Sse::new(resp);
        let ack = stream.next().await.expect("the acknowledgement");
        support::schema::assert_valid(Revision::Modern, &ack, None);
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );

        let mut params = fault_call();
        params["_meta"] = h::modern_meta(false);
        let (_, body, _) = h::send(h::modern(&c, &shim.url, 1, "tools/call", params)).await;
        let killed = Instant::now();
        stamp.report("http modern→legacy kill, listen stream open");
        assert_upstream_error(&body, "upstream exited");

        let end = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("the listen stream is answered once the upstream is gone")
            .expect("an answer before the stream ends");
        support::schema::assert_valid(Revision::Modern, &end, Some("subscriptions/listen"));
        assert_eq!(end["id"], 7, "{end}");
        assert_upstream_error(&end, "upstream exited");
        eprintln!(
            "http listen: answered {} ms after the call's error",
            killed.elapsed().as_millis()
        );
        let after = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("the stream ends after its answer");
        assert!(after.is_none(), "nothing after the answer: {after:?}");
        // A stream asked for from now on would never carry anything: it is
        // refused at once, not opened to hang.
        let mut again = json!({"notifications": {"taskIds": []}});
        again["_meta"] = h::modern_meta(true);
        let (_, refused, _) = tokio::time::timeout(
            Duration::from_secs(5),
            h::send(h::modern(&c, &shim.url, 8, "subscriptions/listen", again)),
        )
        .await
        .expect("a listen after the end is answered at once");
        assert_upstream_error(&refused, "upstream exited");
    });
}

/// A `slow_compute` call of `seconds` made both ways at once through the
/// shim in front of `fwd`, with `fault` striking once both are under way
/// upstream: relayed for a modern client (id 1) and bridged in the legacy
/// session `sid` (id 2). Each answer comes with when it came, and the
/// fault with when it struck.
async fn slow_calls_both_ways(
    c: &reqwest::Client,
    url: &str,
    sid: &str,
    seconds: u64,
    fwd: &Forwarder,
    fault: impl FnOnce(),
) -> ((Value, Instant), (Value, Instant), Instant) {
    let fault = async {
        // Under way: both calls went upstream, and the bridged one's task
        // is being waited on (a read of it went too).
        support::poll::until_async("both calls under way upstream", h::STEP, || async {
            let sent = fwd.sent_messages();
            let calls = sent
                .iter()
                .filter(|m| m["params"]["arguments"]["label"] == "fault")
                .count();
            let waits = sent.iter().any(|m| {
                matches!(
                    m["method"].as_str(),
                    Some("tasks/get" | "tasks/result" | "subscriptions/listen")
                )
            });
            (calls == 2 && waits).then_some(())
        })
        .await;
        fault();
        Instant::now()
    };
    let slow = json!({"name": "slow_compute", "arguments": {"seconds": seconds, "label": "fault"}});
    let mut modern = slow.clone();
    modern["_meta"] = h::modern_meta(false);
    let modern_call = async {
        let r = h::send(h::modern(c, url, 1, "tools/call", modern)).await;
        (r.1, Instant::now())
    };
    let legacy_call = async {
        let r = h::send(h::legacy(c, url, Some(sid), &h::rpc(2, "tools/call", slow))).await;
        (r.1, Instant::now())
    };
    tokio::join!(modern_call, legacy_call, fault)
}

/// An HTTP upstream that stops answering (connections open, nothing comes
/// back): a relayed modern call and a bridged legacy one fail with
/// "upstream stopped answering" once a liveness check goes unanswered, and
/// once the upstream answers again so do new requests.
#[test]
fn http_upstream_that_stops_answering_fails_waiting_requests() {
    let server = support::http::HttpReference::start(support::http::MODERN, &[]);
    let target = server.addr;
    block_on(async move {
        let ping = [
            "--upstream-ping",
            "200ms",
            "--upstream-ping-timeout",
            "500ms",
        ];
        let (fwd, shim) = shim_through(target, &ping).await;
        let c = h::client();
        let (sid, _) = h::initialize(&c, &shim.url, None).await;
        let ((m, m_at), (l, l_at), frozen_at) =
            slow_calls_both_ways(&c, &shim.url, &sid, 30, &fwd, || fwd.freeze()).await;
        for (label, answer, at) in [("modern, relayed", &m, m_at), ("legacy, bridged", &l, l_at)] {
            let after = at.saturating_duration_since(frozen_at);
            eprintln!(
                "LATENCY http upstream hang ({label}): freeze→error {} ms",
                after.as_millis()
            );
            assert_upstream_error(answer, "upstream stopped answering");
            // The call would run 30 s: the answer came from the check (a
            // loose bound; the latency itself is printed, not asserted).
            assert!(
                after < Duration::from_secs(10),
                "{label}: {} ms",
                after.as_millis()
            );
        }
        fwd.thaw();
        let (_, body, _) = h::send(h::modern(&c, &shim.url, 3, "tools/list", json!({}))).await;
        assert!(body["result"]["tools"].is_array(), "{body}");
    });
}

/// An HTTP upstream whose connections drop mid-request: that request fails
/// quickly with the cause; the next ones work (new connections).
#[test]
fn http_upstream_connection_drop_fails_the_request_then_recovers() {
    let server = support::http::HttpReference::start(support::http::MODERN, &[]);
    let target = server.addr;
    block_on(async move {
        let (fwd, shim) = shim_through(target, &[]).await;
        let c = h::client();
        // A modern client (relayed) and a legacy session (bridged): both
        // wait on a long inline call when the connections are cut.
        let (sid, _) = h::initialize(&c, &shim.url, None).await;
        let ((m, m_at), (l, _), cut_at) =
            slow_calls_both_ways(&c, &shim.url, &sid, 5, &fwd, || fwd.cut_all()).await;
        eprintln!(
            "LATENCY http upstream drop (modern, relayed): cut→error {} ms",
            m_at.saturating_duration_since(cut_at).as_millis()
        );
        assert_upstream_error(&m, "HTTP upstream");
        // The cause is named (hyper's words for a closed connection).
        let msg = error_of(&m)["message"].as_str().unwrap().to_lowercase();
        assert!(
            msg.contains("closed") || msg.contains("reset") || msg.contains("eof"),
            "{msg}"
        );
        // The legacy session's call is a task the shim waits on: a cut
        // between polls costs nothing, a poll cut mid-way is sent again,
        // and a cut listen stream is opened again. It ends with its result.
        assert!(text_of(&l["result"]).contains("fault"), "{l}");
        // New requests open new connections and work.
        let (_, body, _) = h::send(h::modern(&c, &shim.url, 3, "tools/list", json!({}))).await;
        assert!(body["result"]["tools"].is_array(), "{body}");
        let greet = h::rpc(
            4,
            "tools/call",
            json!({"name": "greet", "arguments": {"name": "back"}}),
        );
        let (_, body, _) = h::send(h::legacy(&c, &shim.url, Some(&sid), &greet)).await;
        assert!(text_of(&body["result"]).contains("back"), "{body}");
    });
}

/// A `tasks/get` poll whose connection breaks before its answer (the
/// server closed a kept-alive connection as the poll went out) is sent
/// again on a new one: the legacy client blocked on `tasks/result` gets
/// the task's result, not the broken connection, and the log says why the
/// read went twice.
#[test]
fn http_a_poll_whose_connection_breaks_is_sent_again() {
    let server = support::http::HttpReference::start(
        support::http::MODERN,
        &["--no-listen", "--poll-interval-ms", "100"],
    );
    let target = server.addr;
    block_on(async move {
        let (fwd, shim) = shim_through(target, &[]).await;
        let c = h::client();
        let (sid, _) = h::initialize(&c, &shim.url, None).await;
        let mut slow =
            json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "kept"}});
        slow["task"] = json!({"ttl": 60_000});
        let call = h::rpc(2, "tools/call", slow);
        let (_, created, _) = h::send(h::legacy(&c, &shim.url, Some(&sid), &call)).await;
        let task = created["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("a task: {created}"))
            .to_owned();
        fwd.cut_next("tasks/get");
        let wait = h::rpc(3, "tasks/result", json!({"taskId": task}));
        let (_, body, _) = h::send(h::legacy(&c, &shim.url, Some(&sid), &wait)).await;
        support::schema::assert_valid(Revision::Legacy, &body, Some("tasks/result"));
        assert!(text_of(&body["result"]).contains("kept"), "{body}");
        let again = shim
            .wait_logged("sending the request again", Duration::from_secs(2))
            .await;
        assert_eq!(again.len(), 1, "the one cut read went again: {again:#?}");
        let unreachable = shim.logged("HTTP upstream unreachable");
        assert!(
            unreachable.is_empty(),
            "a read sent again is not an outage: {unreachable:#?}"
        );
    });
}

/// Over HTTP every 2026-07-28 client shares the one upstream session, so a
/// log message the legacy server sends during alice's call could be
/// anyone's: bob's open listen stream must not carry it.
#[test]
fn http_log_messages_do_not_reach_another_clients_listen_stream() {
    block_on(async {
        let stamp = Stamp::new("http-logs");
        let shim = http_shim(
            &["--token", "ta=alice", "--token", "tb=bob"],
            &relay("logs", "2025-11-25"),
            &stamp,
        );
        let c = h::client();
        let listen = h::modern(
            &c,
            &shim.url,
            1,
            "subscriptions/listen",
            json!({"notifications": {"toolsListChanged": true}}),
        )
        .bearer_auth("tb");
        let resp = tokio::time::timeout(h::STEP, listen.send())
            .await
            .expect("listen opens in time")
            .expect("listen request");
        let mut bob = h::Sse::new(resp);
        let ack = bob.next().await.expect("the acknowledgement");
        support::schema::assert_valid(Revision::Modern, &ack, None);
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );

        let mut params =
            json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "FAULT"}});
        params["_meta"] = h::modern_meta(false);
        params["_meta"]["io.modelcontextprotocol/logLevel"] = json!("debug");
        let (status, body, _) =
            h::send(h::modern(&c, &shim.url, 2, "tools/call", params).bearer_auth("ta")).await;
        assert_eq!(status, 200, "{body}");
        support::schema::assert_valid(Revision::Modern, &body, Some("tools/call"));
        stamp.report("http logs during alice's call");
        // Whatever bob's stream carries in the next second and a half, it
        // is no log message of alice's call.
        let until = Instant::now() + Duration::from_millis(1500);
        while let Some(left) = until.checked_duration_since(Instant::now()) {
            match tokio::time::timeout(left, bob.next()).await {
                Ok(Some(m)) => {
                    support::schema::assert_valid(Revision::Modern, &m, None);
                    assert_ne!(m["method"], "notifications/message", "leaked: {m}");
                }
                Ok(None) | Err(_) => break,
            }
        }
    });
}

/// A legacy server's progress reaches a modern client over stdio under the
/// client's own token (upstream it had one of the shim's).
#[test]
fn progress_reaches_a_modern_client_under_its_token() {
    let stamp = Stamp::new("progress-stdio");
    let mut shim = stdio_shim(
        &[],
        &relay("progress", "2025-11-25"),
        Revision::Modern,
        &stamp,
    );
    shim.ok("server/discover", modern_params(json!({}), true));
    let mut p = modern_params(
        json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "FAULT"}}),
        false,
    );
    p["_meta"]["progressToken"] = json!("my-token");
    shim.ok("tools/call", p);
    let seen: Vec<Value> = shim
        .take_backlog()
        .into_iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(seen.len(), 2, "{seen:?}");
    for m in &seen {
        assert_eq!(m["params"]["progressToken"], "my-token", "{m}");
    }
}

/// Progress the server writes right before its answer (same write) comes
/// before the answer, every time, for a client of either revision over
/// stdio: it travels through the front's event queue while the answer
/// goes straight to its request, and used to overtake it now and then.
#[test]
fn progress_just_before_an_answer_is_not_overtaken() {
    for (client, upstream) in [
        (Revision::Modern, "2025-11-25"),
        (Revision::Legacy, "2026-07-28"),
    ] {
        let stamp = Stamp::new(&format!("tight-{client:?}"));
        let mut shim = stdio_shim(&[], &relay("tight", upstream), client, &stamp);
        open_session(&mut shim, client);
        for n in 0..30 {
            let mut p = as_client(
                client,
                json!({"name": "slow_compute", "arguments": {"seconds": 0.05, "label": "FAULT"}}),
            );
            p["_meta"]["progressToken"] = json!(format!("t{n}"));
            let id = shim.request("tools/call", p);
            let mut before = 0;
            loop {
                let m = shim
                    .next(Duration::from_secs(10))
                    .expect("the call's messages");
                if m["id"] == id {
                    assert!(m.get("result").is_some(), "{m}");
                    break;
                }
                if m["method"] == "notifications/progress" {
                    assert_eq!(m["params"]["progressToken"], format!("t{n}"), "{m}");
                    before += 1;
                }
            }
            assert_eq!(before, 2, "{client:?} call {n}: progress after its answer");
        }
    }
}

/// Over HTTP too, a 2025-11-25 client's progress the server writes right
/// before its answer comes before the answer (on an SSE answer), every
/// time: the front routes it through the session's router, while the
/// answer goes straight to the POST.
#[test]
fn http_progress_just_before_an_answer_is_not_overtaken() {
    block_on(async {
        let stamp = Stamp::new("tight-http");
        let shim = http_shim(&[], &relay("tight", "2026-07-28"), &stamp);
        let c = h::client();
        let (sid, _) = h::initialize(&c, &shim.url, None).await;
        for n in 0..30 {
            let mut p = json!({"name": "slow_compute",
                "arguments": {"seconds": 0.05, "label": "FAULT"}});
            p["_meta"] = json!({"progressToken": format!("t{n}")});
            let body = h::rpc(100 + n, "tools/call", p);
            let resp =
                tokio::time::timeout(h::STEP, h::legacy(&c, &shim.url, Some(&sid), &body).send())
                    .await
                    .expect("answered in time")
                    .expect("the call");
            let got = if h::is_sse(resp.headers()) {
                let mut sse = h::Sse::new(resp);
                let mut got = Vec::new();
                while let Some(m) = sse.next().await {
                    got.push(m);
                }
                got
            } else {
                vec![resp.json::<Value>().await.expect("a JSON answer")]
            };
            for m in &got {
                let answers = m.get("method").is_none().then_some("tools/call");
                support::schema::assert_valid(Revision::Legacy, m, answers);
            }
            let progress = got
                .iter()
                .take_while(|m| m.get("method").is_some())
                .filter(|m| m["method"] == "notifications/progress")
                .count();
            assert_eq!(
                progress, 2,
                "call {n}: progress lost or after its answer: {got:?}"
            );
            assert_eq!(
                got.last().map(|m| &m["id"]),
                Some(&json!(100 + n)),
                "call {n}: {got:?}"
            );
        }
    });
}

/// Over HTTP, two clients that both use progress token 1 at once each get
/// their own call's progress, on an SSE answer, under token 1.
#[test]
fn http_progress_reaches_only_the_call_it_is_about() {
    block_on(async {
        let stamp = Stamp::new("progress-http");
        let shim = http_shim(
            &["--token", "ta=alice", "--token", "tb=bob"],
            &relay("progress", "2025-11-25"),
            &stamp,
        );
        let c = h::client();
        let call = |token: &'static str, seconds: f64| {
            let mut params = json!({"name": "slow_compute",
                "arguments": {"seconds": seconds, "label": "FAULT"}});
            params["_meta"] = h::modern_meta(false);
            params["_meta"]["progressToken"] = json!(1);
            let req = h::modern(&c, &shim.url, 1, "tools/call", params).bearer_auth(token);
            async move {
                let resp = tokio::time::timeout(h::STEP, req.send())
                    .await
                    .expect("answered in time")
                    .expect("the call");
                let mut sse = h::Sse::new(resp);
                let mut got = Vec::new();
                while let Some(m) = sse.next().await {
                    support::schema::assert_valid(Revision::Modern, &m, Some("tools/call"));
                    got.push(m);
                }
                got
            }
        };
        let (alice, bob) = tokio::join!(call("ta", 1.0), call("tb", 1.5));
        for (who, got, seconds) in [("alice", alice, "1.0"), ("bob", bob, "1.5")] {
            let progress: Vec<&Value> = got
                .iter()
                .filter(|m| m["method"] == "notifications/progress")
                .collect();
            assert_eq!(progress.len(), 2, "{who}: {got:?}");
            for m in progress {
                assert_eq!(m["params"]["progressToken"], 1, "{who}: {m}");
                assert_eq!(m["params"]["message"], seconds, "{who} got another's: {m}");
            }
            let last = got.last().expect("an answer");
            assert_eq!(
                last["id"], 1,
                "{who}: the stream ends with the answer: {got:?}"
            );
            assert!(last.get("result").is_some(), "{who}: {last}");
        }
    });
}

/// An MRTR round the upstream took with it (killed, then restarted): its
/// retry is told so, `-32603` naming the fault, not "invalid requestState".
#[test]
fn an_mrtr_round_lost_with_the_upstream_says_so() {
    let stamp = Stamp::new("mrtr-kill");
    let mut shim = restarting_shim("2025-11-25", Revision::Modern, &stamp);
    shim.ok("server/discover", modern_params(json!({}), true));
    let mut ask = modern_params(json!({"name": "test_tool_with_task"}), true);
    ask["_meta"]["io.modelcontextprotocol/clientCapabilities"]["elicitation"] = json!({"form": {}});
    let round = shim.ok("tools/call", ask.clone());
    assert_eq!(round["resultType"], "input_required", "{round}");
    let r = shim.call("tools/call", modern_params(fault_call(), false));
    assert_upstream_error(&r, "upstream exited");
    // The retry goes to the restarted child: a call it answers shows it
    // is up. (Sent at once, while the shim still winds the old child up,
    // the retry can fail as the fault call did, without naming the round.)
    let up = shim.ok(
        "tools/call",
        modern_params(
            json!({"name": "greet", "arguments": {"name": "again"}}),
            false,
        ),
    );
    assert!(text_of(&up).contains("again"), "{up}");
    let key = round["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next())
        .expect("one input request")
        .clone();
    let mut retry = ask;
    retry["requestState"] = round["requestState"].clone();
    retry["inputResponses"] = json!({key: {"action": "accept", "content": {"name": "Ann"}}});
    let r = shim.call("tools/call", retry);
    assert_upstream_error(&r, "lost with the upstream");
    let message = error_of(&r)["message"].as_str().unwrap_or_default();
    assert!(message.contains("upstream exited"), "{r}");
}

/// Only a failure guard for the tests on held answers: `fault_relay.py
/// slowcreate` lets an answer go on the cancel.
const HELD_MS: u64 = 30_000;

/// A stdio shim (`--request-timeout 3s`, no pings; 3 s, not 1, lets the
/// session's other requests through on a loaded machine) over a `rev`
/// reference server behind `fault_relay.py slowcreate`, initialized once
/// the upstream answered the probe; with the upstream's recordings (what
/// the shim sent, what came back), named after `name`.
fn held_answers_shim(rev: &str, name: &str) -> (Wire, std::path::PathBuf, std::path::PathBuf) {
    let (sent, got) = (
        temp_path(&format!("{name}-sent.jsonl")),
        temp_path(&format!("{name}-got.jsonl")),
    );
    let mut held = relay("slowcreate", rev);
    held.splice(3..3, ["--delay-ms".to_owned(), HELD_MS.to_string()]);
    let upstream = support::wire::recording_upstream(&held, &sent, &got);
    let mut flags = vec!["--request-timeout", "3s", "--upstream-ping", "0"];
    flags.extend(PROBE);
    let mut shim = Wire::spawn(&flags, &upstream);
    // The upstream is up once it answered the shim's probe.
    support::wire::recorded(&got, Instant::now() + Duration::from_secs(60), |_| true);
    shim.initialize();
    (shim, sent, got)
}

/// The session still answers a call, and nothing before its answer
/// answered any of the requests `ids` (a second answer, or one after a
/// cancel).
#[track_caller]
fn answers_after_none_of(shim: &mut Wire, ids: &[&Value]) {
    let hello = shim.call(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "still here"}}),
    );
    assert!(text_of(&hello["result"]).contains("still here"), "{hello}");
    // Both tests' clients speak 2025-11-25.
    support::schema::assert_valid(Revision::Legacy, &hello, Some("tools/call"));
    let before = shim.take_backlog();
    assert!(
        before.iter().all(|m| ids.iter().all(|id| m["id"] != **id)),
        "an answer to one of {ids:?}: {before:#?}"
    );
}

/// `--request-timeout` holds for requests relayed unchanged (a 2025-11-25
/// client in front of a 2025-11-25 server) as for the shim's own: the
/// client gets `-32603` naming the timeout, the session goes on, and the
/// server's late answer is dropped rather than sent as a second answer.
/// The server's answer is held back (`fault_relay.py slowcreate`) until
/// the shim cancels the call, so every step waits on an event, not on the
/// clock: the late answer crosses the cancel.
#[test]
fn pass_through_requests_time_out_too() {
    let (mut shim, sent, got) = held_answers_shim("2025-11-25", "timeout");
    let started = Instant::now();
    // Done at once by the server; the relay holds its answer back until
    // the call is cancelled, so what answers the client is the timeout.
    let slow = json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "FAULT"}});
    let r = shim.call("tools/call", slow);
    assert_upstream_error(&r, "no answer within 3 s");
    let answers_to_it = |m: &Value| m["id"] == r["id"] && m.get("result").is_some();
    // The server is told to stop, as for the shim's own requests; its
    // answer, let go then, comes late.
    let guard = started + Duration::from_millis(HELD_MS);
    let cancelled =
        support::wire::recorded(&sent, guard, |m| m["method"] == "notifications/cancelled");
    assert_eq!(cancelled["params"]["requestId"], r["id"], "{cancelled}");
    support::wire::recorded(&got, guard, answers_to_it);
    // The late answer reached the shim before this call's (one pipe, in
    // order): had the shim relayed it, it would come first.
    answers_after_none_of(&mut shim, &[&r["id"]]);
    let _ = std::fs::remove_file(&sent);
    let _ = std::fs::remove_file(&got);
}

/// The same for a 2025-11-25 client's plain `tools/call` translated for a
/// 2026-07-28 server, which no future waits for (a callback on the
/// child's reader answers it, see `bridge::legacy_front::plain`): the
/// timeout answers it `-32603` and cancels it upstream under the shim's
/// id, and the late answer is dropped. A plain call the client cancels
/// gets no answer and is cancelled upstream too. Every step waits on an
/// event (`fault_relay.py slowcreate` lets the answer go on the cancel).
#[test]
fn translated_plain_calls_time_out_and_are_cancelled_upstream() {
    let (mut shim, sent, got) = held_answers_shim("2026-07-28", "plain-timeout");
    let slow = json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "FAULT"}});
    let guard = Instant::now() + Duration::from_millis(HELD_MS);
    // The FAULT call as the server got it (under the shim's id), other
    // than `not`.
    let fault_call = |not: &Value| {
        support::wire::recorded(&sent, guard, |m| {
            m["params"]["arguments"]["label"] == "FAULT" && m["id"] != *not
        })
    };
    let cancel_of = |up: &Value| {
        let id = up["id"].clone();
        support::wire::recorded(&sent, guard, |m| {
            m["method"] == "notifications/cancelled" && m["params"]["requestId"] == id
        });
        let late = up["id"].clone();
        support::wire::recorded(&got, guard, |m| {
            m["id"] == late && m.get("result").is_some()
        });
    };

    let r = shim.call("tools/call", slow.clone());
    assert_upstream_error(&r, "no answer to tools/call within 3 s");
    let first = fault_call(&Value::Null);
    cancel_of(&first);

    let cancelled = shim.request("tools/call", slow);
    let up = fault_call(&first["id"]);
    shim.notify(
        "notifications/cancelled",
        json!({"requestId": cancelled, "reason": "changed my mind"}),
    );
    cancel_of(&up);

    // Both late answers reached the shim before this call's (one pipe, in
    // order): had the shim passed either on, it would come first.
    answers_after_none_of(&mut shim, &[&r["id"], &cancelled]);
    let _ = std::fs::remove_file(&sent);
    let _ = std::fs::remove_file(&got);
}

/// An `--upstream-url` server that goes away: every request fails at once
/// with `-32603` naming it, and the log says so, once when it starts (not
/// once per request) and once when the server is back.
#[test]
fn an_unreachable_url_upstream_is_logged_once_each_way() {
    let server = support::http::HttpReference::start(support::http::MODERN, &[]);
    let addr = server.addr;
    let shim = HttpShim::spawn::<&str>(&["--upstream-url", &server.url], &[]);
    block_on(async move {
        let c = h::client();
        let list = |id| h::modern(&c, &shim.url, id, "tools/list", json!({}));
        let (_, ok, _) = h::send(list(1)).await;
        assert!(ok["result"]["tools"].is_array(), "{ok}");
        drop(server);
        for id in 2..5 {
            let (_, body, _) = h::send(list(id)).await;
            assert_upstream_error(&body, "HTTP upstream unreachable");
        }
        // The log is read on another thread: wait for its line.
        let logged = |needle| shim.wait_logged(needle, Duration::from_secs(2));
        let gone = logged("HTTP upstream unreachable").await;
        assert_eq!(gone.len(), 1, "one line for three failures: {gone:#?}");
        assert!(gone[0].contains("ERROR"), "{gone:#?}");
        let _back = support::http::HttpReference::start_at(support::http::MODERN, &[], addr);
        let (_, ok, _) = h::send(list(5)).await;
        assert!(ok["result"]["tools"].is_array(), "{ok}");
        assert_eq!(logged("reachable again").await.len(), 1);
    });
}

/// Over HTTP without `--restart-upstream`, the shim keeps serving after
/// its child died, and a 2025-11-25 client's tasks died with the child:
/// `tasks/list` lists them failed, naming the exit, and `tasks/get` reads
/// them so, instead of listing `working` while `tasks/get` fails.
#[test]
fn http_legacy_tasks_read_failed_once_the_upstream_is_gone() {
    block_on(async {
        let stamp = Stamp::new("http-legacy-gone");
        let shim = http_shim(&[], &relay("exit", "2026-07-28"), &stamp);
        let c = h::client();
        let (sid, _) = h::initialize(&c, &shim.url, None).await;
        let mut slow =
            json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "mine"}});
        slow["task"] = json!({"ttl": 60_000});
        let (_, created, _) = h::send(h::legacy(
            &c,
            &shim.url,
            Some(&sid),
            &h::rpc(2, "tools/call", slow),
        ))
        .await;
        let task = created["result"]["task"]["taskId"]
            .as_str()
            .expect("a task")
            .to_owned();
        let (_, body, _) = h::send(h::legacy(
            &c,
            &shim.url,
            Some(&sid),
            &h::rpc(3, "tools/call", fault_call()),
        ))
        .await;
        assert_upstream_error(&body, "upstream exited");
        // The shim learns the end is for good just after the fault's
        // answer: bounded retries.
        let (c, url, sid, task) = (&c, shim.url.as_str(), sid.as_str(), task.as_str());
        let (listed, entry) =
            support::poll::until_async("the task failed", Duration::from_secs(5), || async move {
                let (_, listed, _) = h::send(h::legacy(
                    c,
                    url,
                    Some(sid),
                    &h::rpc(4, "tasks/list", json!({})),
                ))
                .await;
                support::schema::assert_valid(Revision::Legacy, &listed, Some("tasks/list"));
                let entry = listed["result"]["tasks"]
                    .as_array()
                    .and_then(|t| t.iter().find(|t| t["taskId"] == task))
                    .unwrap_or_else(|| panic!("the task is listed: {listed}"))
                    .clone();
                (entry["status"] == "failed").then_some((listed, entry))
            })
            .await;
        assert_eq!(entry["status"], "failed", "{listed}");
        assert!(
            entry["statusMessage"]
                .as_str()
                .unwrap_or_default()
                .contains("upstream exited"),
            "{entry}"
        );
        let (_, got, _) = h::send(h::legacy(
            c,
            &shim.url,
            Some(sid),
            &h::rpc(5, "tasks/get", json!({"taskId": task})),
        ))
        .await;
        support::schema::assert_valid(Revision::Legacy, &got, Some("tasks/get"));
        assert_eq!(got["result"]["status"], "failed", "{got}");
    });
}

/// `http` in front of a server that is gone before it answers anything (a
/// wrong command, a crash at start) does not start: it exits non-zero
/// naming why, as `stdio` does, instead of listening for good and
/// answering every client "the upstream exited". With
/// `--restart-upstream` it keeps trying instead.
#[test]
fn http_does_not_start_in_front_of_a_server_gone_at_start() {
    for (server, why) in [
        (&["false"][..], "upstream exited"),
        (&["sh", "-c", "echo hello; sleep 1"][..], "invalid JSON-RPC"),
    ] {
        let mut child = Command::new(shim_bin())
            .args(["http", "--listen", "127.0.0.1:0", "--"])
            .args(server)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let what = format!("the shim in front of {server:?}");
        let status = support::wire::exited_within(&mut child, Duration::from_secs(10), &what);
        let out = child.wait_with_output().unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(!status.success(), "{server:?}: {status}");
        assert!(!stderr.contains("listening on"), "{server:?}: {stderr}");
        assert!(stdout.is_empty(), "{server:?}: {stdout}");
        let last = stderr.lines().last().unwrap_or_default();
        assert!(
            last.contains("during start-up") && last.contains(why),
            "{server:?}: {stderr}"
        );
    }
    let mut shim = HttpShim::spawn(&["--restart-upstream"], &["false"]);
    let retrying = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(shim.wait_logged("upstream restart failed; retrying", Duration::from_secs(10)));
    assert!(
        !retrying.is_empty(),
        "it keeps trying to start the upstream"
    );
    assert!(
        shim.terminate(Duration::from_secs(5)).is_some(),
        "with --restart-upstream it serves, and stops on SIGTERM"
    );
}
