//! Issue 3, "legacy clients against a modern server", on the raw wire: a
//! JSON-RPC line driver (`support::wire::Wire`) in front of the real shim
//! binary (`mcp-tasks-shim stdio -- <modern reference server>`), for the
//! behaviours an SDK hides: bad input, policy flags, synthetic tasks,
//! pagination, the cancel pin, session plumbing and process lifecycle.
//!
//! Every message the shim writes is validated against the 2025-11-25 schema
//! (with the method of the request it answers) as it is read.

mod support;

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::wire::{
    Wire, modern_reference, read_jsonl, recorded, recording_upstream, temp_path, text_of,
};

const RELATED: &str = "io.modelcontextprotocol/related-task";

fn task_call(name: &str, args: Value) -> Value {
    json!({"name": name, "arguments": args, "task": {"ttl": 60_000}})
}

/// Creates a task; returns its id.
#[track_caller]
fn create(shim: &mut Wire, name: &str, args: Value) -> String {
    let r = shim.ok("tools/call", task_call(name, args));
    assert_eq!(r["task"]["status"], "working", "{r}");
    r["task"]["taskId"].as_str().expect("taskId").to_owned()
}

/// Task `id` as `tasks/list` shows it (its first page).
#[track_caller]
fn listed(shim: &mut Wire, id: &str) -> Value {
    let list = shim.ok("tasks/list", json!({}));
    list["tasks"]
        .as_array()
        .and_then(|ts| ts.iter().find(|t| t["taskId"] == id))
        .cloned()
        .unwrap_or_else(|| panic!("{id} not listed: {list}"))
}

/// In front of a 2026-07-28 server, what comes before `initialize` and
/// says nothing of the client's revision does not decide it: a request is
/// refused naming both ways to start, a notification is dropped, and the
/// `initialize` after them still opens a 2025-11-25 session.
#[test]
fn messages_without_a_revision_leave_it_open() {
    let mut shim = Wire::legacy_front(&[]);
    shim.notify("notifications/roots/list_changed", json!({}));
    let e = shim.err("tools/list", json!({}));
    assert_eq!(e["code"], -32600, "{e}");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("initialize") && message.contains("_meta"),
        "{e}"
    );
    let init = shim.initialize();
    assert_eq!(init["protocolVersion"], "2025-11-25", "{init}");
    let tools = shim.ok("tools/list", json!({}));
    assert!(
        tools["tools"].as_array().is_some_and(|t| !t.is_empty()),
        "{tools}"
    );
    let rest = shim.take_backlog();
    assert!(rest.is_empty(), "nothing else came: {rest:?}");
}

#[test]
fn bad_input_is_refused_and_the_session_survives() {
    let mut shim = Wire::legacy_front(&[]);
    shim.initialize();

    // Not JSON: parse error, no id to answer to (the MCP schemas allow an
    // absent id on errors; a null one they do not).
    shim.send_raw("{not json");
    let m = shim.next(Duration::from_secs(5)).expect("an answer");
    assert_eq!(m["error"]["code"], -32700, "{m}");
    assert!(m.get("id").is_none_or(Value::is_null), "{m}");

    // Valid JSON the parser cannot hold: refused, but under its id (read
    // from the members before the trouble), so the request is answered.
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":94,"method":"tools/call","params":{{"name":"echo","arguments":{{"x":{}{}}}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let big = r#"{"jsonrpc":"2.0","id":95,"method":"tools/call","params":{"name":"echo","arguments":{"x":1e400}}}"#;
    for (id, line) in [(94, deep.as_str()), (95, big)] {
        shim.send_raw(line);
        let m = shim.next(Duration::from_secs(5)).expect("an answer");
        assert_eq!(m["id"], id, "{m}");
        assert_eq!(m["error"]["code"], -32700, "{m}");
    }

    // A batch: MCP has none.
    shim.send_raw(r#"[{"jsonrpc":"2.0","id":90,"method":"ping"}]"#);
    let m = shim.next(Duration::from_secs(5)).expect("an answer");
    assert_eq!(m["error"]["code"], -32600, "{m}");

    // params that are not an object; the id is salvaged.
    for (id, params) in [(91, json!([1, 2])), (92, json!(5)), (93, json!("x"))] {
        shim.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
        let m = shim.next(Duration::from_secs(5)).expect("an answer");
        assert_eq!(m["id"], id, "{m}");
        let code = m["error"]["code"].as_i64().unwrap_or_default();
        assert!(code == -32600 || code == -32602, "{m}");
    }

    // tools/call without a name.
    let e = shim.err("tools/call", json!({"arguments": {}}));
    assert_eq!(e["code"], -32602, "{e}");

    // An unknown method is forwarded; the upstream's -32601 comes back.
    let e = shim.err("foo/bar", json!({}));
    assert_eq!(e["code"], -32601, "{e}");
    assert!(
        e["message"].as_str().unwrap_or("").contains("foo/bar"),
        "{e}"
    );

    // Session plumbing the shim serves itself.
    assert_eq!(shim.ok("ping", Value::Null), json!({}));
    assert_eq!(
        shim.ok("logging/setLevel", json!({"level": "debug"})),
        json!({})
    );
    assert_eq!(shim.err("logging/setLevel", json!({}))["code"], -32602);
    // Every later upstream request would carry it in `_meta`, where the
    // 2026-07-28 schema allows only the RFC 5424 names.
    assert_eq!(
        shim.err("logging/setLevel", json!({"level": "loud"}))["code"],
        -32602
    );

    // Still alive and useful.
    let tools = shim.ok("tools/list", json!({}));
    assert_eq!(tools["tools"].as_array().map(Vec::len), Some(9), "{tools}");
    let r = shim.ok(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "again"}}),
    );
    assert_eq!(text_of(&r), "Hello, again!");
}

#[test]
fn task_support_flags_shape_tools_list_and_calls() {
    let (sent, got) = (
        temp_path("policy-sent.jsonl"),
        temp_path("policy-got.jsonl"),
    );
    let mut shim = Wire::spawn(
        &[
            "--task-support",
            "greet=required",
            "--task-support",
            "slow_compute=forbidden",
        ],
        &recording_upstream(&modern_reference(), &sent, &got),
    );
    shim.initialize();
    let tools = shim.ok("tools/list", json!({}));
    let support = |name: &str| {
        tools["tools"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["name"] == name))
            .map(|t| t["execution"]["taskSupport"].clone())
            .unwrap_or(Value::Null)
    };
    assert_eq!(support("greet"), "required");
    assert_eq!(support("slow_compute"), "forbidden");
    assert_eq!(support("confirm_delete"), "optional");

    // required without params.task: -32601 (2025-11-25 rule).
    let e = shim.err(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "x"}}),
    );
    assert_eq!(e["code"], -32601, "{e}");
    // required with params.task: a task.
    let id = create(&mut shim, "greet", json!({"name": "x"}));
    let r = shim.ok("tasks/result", json!({"taskId": id}));
    assert_eq!(text_of(&r), "Hello, x!");

    // forbidden with params.task: -32601, as the 2025-11-25 spec says
    // servers SHOULD; no task (synthetic or not), nothing sent upstream.
    let e = shim.err(
        "tools/call",
        task_call("slow_compute", json!({"seconds": 0, "label": "forbidden"})),
    );
    assert_eq!(e["code"], -32601, "{e}");
    let message = e["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("slow_compute") && message.contains("forbidden"),
        "{e}"
    );
    let list = shim.ok("tasks/list", json!({}));
    assert_eq!(list["tasks"].as_array().map(Vec::len), Some(1), "{list}");
    // Without params.task it runs; once its answer is back, everything the
    // refused call could have sent would have been recorded before it.
    let r = shim.ok(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "plain"}}),
    );
    assert!(text_of(&r).contains("plain"), "{r}");
    let calls: Vec<Value> = read_jsonl(&sent)
        .into_iter()
        .filter(|m| m["params"]["name"] == "slow_compute")
        .collect();
    assert_eq!(
        calls.len(),
        1,
        "only the plain call went upstream: {calls:?}"
    );
    assert_eq!(
        calls[0]["params"]["arguments"]["label"], "plain",
        "{calls:?}"
    );
}

#[test]
fn a_plain_upstream_answer_becomes_a_synthetic_task() {
    let mut shim = Wire::legacy_front(&[]);
    shim.initialize();
    let r = shim.ok(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "Synth"}, "task": {"ttl": 30_000}}),
    );
    let task = &r["task"];
    assert_eq!(
        task["status"], "working",
        "2025-11-25: working at creation: {r}"
    );
    assert_eq!(task["ttl"], 30_000, "{r}");
    let id = task["taskId"].as_str().expect("taskId").to_owned();
    assert!(id.len() >= 22, "task ids are unguessable: {id}");

    let t = shim.ok("tasks/get", json!({"taskId": id}));
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["taskId"], id.as_str());

    let result = shim.ok("tasks/result", json!({"taskId": id}));
    assert_eq!(text_of(&result), "Hello, Synth!", "{result}");
    assert_eq!(result["_meta"][RELATED]["taskId"], id.as_str(), "{result}");

    let list = shim.ok("tasks/list", json!({}));
    assert_eq!(list["tasks"][0]["taskId"], id.as_str(), "{list}");
    assert_eq!(list["tasks"][0]["status"], "completed", "{list}");

    // Terminal: cancel refused.
    let e = shim.err("tasks/cancel", json!({"taskId": id}));
    assert_eq!(e["code"], -32602, "{e}");
}

/// One rule for every `params.task.ttl` that is no positive integer
/// number of milliseconds: `-32602` naming it, and nothing starts. Before,
/// zero and negative ones were silently granted the default retention,
/// while a fractional one was refused.
#[test]
fn a_ttl_that_is_no_positive_integer_is_refused_like_a_fractional_one() {
    let mut shim = Wire::legacy_front(&[]);
    shim.initialize();
    for ttl in [
        json!(-1_000_000),
        json!(-1),
        json!(0),
        json!(-0.0),
        json!(1.5),
    ] {
        let e = shim.err(
            "tools/call",
            json!({"name": "greet", "arguments": {"name": "Ttl"}, "task": {"ttl": ttl}}),
        );
        assert_eq!(e["code"], -32602, "ttl {ttl}: {e}");
        let message = e["message"].as_str().unwrap_or_default();
        assert!(message.contains("positive integer"), "ttl {ttl}: {e}");
    }
    let list = shim.ok("tasks/list", json!({}));
    assert_eq!(list["tasks"], json!([]), "no task was made: {list}");
}

/// A synthetic task's result is kept in the shim's ledger for the
/// retention the client asks for, up to `--max-task-ttl` (1 h by
/// default): a client asking for `i64::MAX` pinned its result, of any
/// size, in memory for good. The answer says what was granted.
#[test]
fn a_synthetic_tasks_retention_is_bounded() {
    for (flags, asked, granted) in [
        (&[][..], json!(i64::MAX), 3_600_000),
        (&[][..], json!(1e308), 3_600_000),
        (&[][..], json!(60_000), 60_000),
        (&["--max-task-ttl", "5s"][..], json!(60_000), 5_000),
    ] {
        let mut shim = Wire::legacy_front(flags);
        shim.initialize();
        let r = shim.ok(
            "tools/call",
            json!({"name": "greet", "arguments": {"name": "Long"}, "task": {"ttl": asked}}),
        );
        assert_eq!(r["task"]["ttl"], granted, "{flags:?} asked {asked}: {r}");
        let id = r["task"]["taskId"].as_str().expect("taskId").to_owned();
        let listed = shim.ok("tasks/list", json!({}));
        assert_eq!(listed["tasks"][0]["taskId"], id.as_str(), "{listed}");
        assert_eq!(listed["tasks"][0]["ttl"], granted, "{listed}");
    }
}

/// A `params.task` that is no `TaskMetadata` (not an object, or a `ttl`
/// that is no integer) is refused with `-32602`, as a 2025-11-25 server
/// refuses it, and starts nothing: before, it was taken as a task request
/// with the default retention.
#[test]
fn a_task_param_that_is_no_task_metadata_is_refused() {
    let mut shim = Wire::legacy_front(&[]);
    shim.initialize();
    for task in [
        json!(5),
        json!(null),
        json!("soon"),
        json!([]),
        json!({"ttl": 1.5}),
        json!({"ttl": "60000"}),
    ] {
        let e = shim.err(
            "tools/call",
            json!({"name": "greet", "arguments": {"name": "Bad"}, "task": task}),
        );
        assert_eq!(e["code"], -32602, "task {task}: {e}");
        assert!(
            e["message"].as_str().unwrap_or("").contains("params.task"),
            "task {task}: {e}"
        );
    }
    let list = shim.ok("tasks/list", json!({}));
    assert_eq!(list["tasks"], json!([]), "nothing was started: {list}");
    // A null ttl still counts as none asked.
    let r = shim.ok(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "Ok"}, "task": {"ttl": null}}),
    );
    assert!(r["task"]["ttl"].as_i64().is_some_and(|t| t > 0), "{r}");
    // An integer in JSON Schema's sense is one, however it is written.
    for ttl in [json!(60000.0), json!(6e4)] {
        let r = shim.ok(
            "tools/call",
            json!({"name": "greet", "arguments": {"name": "Ok"}, "task": {"ttl": ttl}}),
        );
        assert_eq!(r["task"]["ttl"], 60000, "ttl {ttl}: {r}");
    }
}

/// A task cancelled while it waited for input does not go on saying it
/// waits for input: not in the cancel's answer, `tasks/get` or
/// `tasks/list`.
#[test]
fn a_cancelled_task_does_not_keep_its_old_status_message() {
    let mut shim = Wire::legacy_front(&[]);
    shim.initialize();
    // The shim sends the question to a client that only polls; answered,
    // the task would complete before the cancel reaches it. This user
    // never answers.
    shim.auto_answer = false;
    let id = create(&mut shim, "confirm_delete", json!({"filename": "a.txt"}));
    let before = support::poll::until("input_required", Duration::from_secs(10), || {
        let t = shim.ok("tasks/get", json!({"taskId": id}));
        (t["status"] == "input_required").then_some(t)
    });
    let waiting = before["statusMessage"].clone();
    assert!(waiting.is_string(), "{before}");
    let cancelled = shim.ok("tasks/cancel", json!({"taskId": id}));
    let got = shim.ok("tasks/get", json!({"taskId": id}));
    let listed = listed(&mut shim, &id);
    for t in [&cancelled, &got, &listed] {
        assert_eq!(t["status"], "cancelled", "{t}");
        assert_ne!(t["statusMessage"], waiting, "a stale status message: {t}");
    }
}

#[test]
fn tasks_list_pages_with_opaque_cursors_newest_first() {
    let mut shim = Wire::legacy_front(&["--page-size", "2"]);
    shim.initialize();
    // Real upstream tasks and synthetic ones, interleaved.
    let mut created = Vec::new();
    for i in 0..5 {
        let id = if i % 2 == 0 {
            create(
                &mut shim,
                "slow_compute",
                json!({"seconds": 0, "label": format!("t{i}")}),
            )
        } else {
            create(&mut shim, "greet", json!({"name": format!("t{i}")}))
        };
        created.push(id);
    }

    let mut seen = Vec::new();
    let mut sizes = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let page = shim.ok("tasks/list", params);
        let tasks = page["tasks"].as_array().expect("tasks").clone();
        sizes.push(tasks.len());
        seen.extend(
            tasks
                .iter()
                .map(|t| t["taskId"].as_str().unwrap().to_owned()),
        );
        match page.get("nextCursor") {
            Some(Value::String(c)) => {
                assert!(
                    !created.iter().any(|id| c.contains(id.as_str())),
                    "the cursor is opaque, not a task id: {c}"
                );
                cursor = Some(c.clone());
            }
            None => break,
            Some(other) => panic!("nextCursor must be a string: {other}"),
        }
    }
    assert_eq!(sizes, [2, 2, 1]);
    let newest_first: Vec<String> = created.iter().rev().cloned().collect();
    assert_eq!(seen, newest_first, "every task once, newest first");

    // Bad cursors: invented, or a real one tampered with.
    let e = shim.err("tasks/list", json!({"cursor": "bogus"}));
    assert_eq!(e["code"], -32602, "{e}");
    let page = shim.ok("tasks/list", json!({}));
    let mut tampered = page["nextCursor"].as_str().unwrap().to_owned();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    let e = shim.err("tasks/list", json!({"cursor": tampered}));
    assert_eq!(e["code"], -32602, "{e}");
    let e = shim.err("tasks/list", json!({"cursor": 7}));
    assert_eq!(e["code"], -32602, "{e}");
}

#[test]
fn elicitation_on_tasks_result_names_its_task_and_reaches_the_tool() {
    let mut shim = Wire::legacy_front(&[]);
    shim.initialize();
    let id = create(
        &mut shim,
        "confirm_delete",
        json!({"filename": "notes.txt"}),
    );
    let r = shim.ok("tasks/result", json!({"taskId": id}));
    assert_eq!(text_of(&r), "Deleted notes.txt", "{r}");
    assert_eq!(r["_meta"][RELATED]["taskId"], id.as_str(), "{r}");
    let asked: Vec<&Value> = shim
        .answered
        .iter()
        .filter(|m| m["method"] == "elicitation/create")
        .collect();
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert_eq!(asked[0]["params"]["_meta"][RELATED]["taskId"], id.as_str());
    assert_eq!(asked[0]["params"]["message"], "Delete notes.txt?");
}

/// `sh -c` wrapper that writes the upstream's pid to `pidfile`, then execs it.
fn pid_recording_upstream(pidfile: &std::path::Path) -> Vec<String> {
    let inner = modern_reference()
        .iter()
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    vec![
        "sh".into(),
        "-c".into(),
        format!("echo $$ > '{}'; exec {inner}", pidfile.display()),
    ]
}

#[test]
fn closing_stdin_ends_the_shim_and_its_upstream() {
    let pidfile = temp_path("upstream.pid");
    let record = temp_path("close-record.jsonl");
    let record_arg = record.to_string_lossy().into_owned();
    let mut shim = Wire::spawn(
        &["--record", &record_arg],
        &pid_recording_upstream(&pidfile),
    );
    shim.initialize();
    // A task still running upstream when the client leaves.
    create(
        &mut shim,
        "slow_compute",
        json!({"seconds": 30, "label": "left behind"}),
    );
    let upstream_pid: u32 = std::fs::read_to_string(&pidfile)
        .expect("pid file")
        .trim()
        .parse()
        .expect("a pid");
    assert!(support::http::alive(upstream_pid));

    let started = Instant::now();
    shim.close_stdin();
    let status = shim
        .wait_exit(Duration::from_secs(6))
        .expect("the shim exits after its client closes stdin");
    assert!(status.success(), "exit status {status}");
    assert!(started.elapsed() < Duration::from_secs(6));
    // The shim waited for (reaped) its child before exiting.
    assert!(
        !support::http::alive(upstream_pid),
        "upstream {upstream_pid} outlived the shim"
    );
    // The transcript was flushed and closed.
    let lines = std::fs::read_to_string(&record).expect("record written");
    assert!(lines.lines().count() >= 4, "{lines}");
    // Each record says when (ms since the recording started, never going
    // back) and whose session it was.
    let mut last = 0;
    for line in lines.lines() {
        let r: Value = serde_json::from_str(line).expect("a JSON record");
        let t = r["t"].as_u64().unwrap_or_else(|| panic!("a time: {line}"));
        assert!(t >= last, "{line}");
        last = t;
        assert_eq!(r["session"], "stdio", "{line}");
    }
    let _ = std::fs::remove_file(&pidfile);
    let _ = std::fs::remove_file(&record);
}

#[test]
fn an_upstream_exit_fails_pending_requests_and_the_shim_exits_nonzero() {
    // Answers the probe like a modern server, then exits on the next line.
    // (The shim's upstream ids are strings, `mcp-tasks-shim-1-1`.)
    let script = r#"
read -r line
id=$(printf '%s' "$line" | sed -n 's/^{"jsonrpc":"2.0","id":\("[^"]*"\|[0-9]*\),.*/\1/p')
printf '{"jsonrpc":"2.0","id":%s,"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"resultType":"complete","ttlMs":0,"cacheScope":"public"}}\n' "$id"
read -r line
exit 3
"#;
    let mut shim = Wire::spawn(&[], &["sh", "-c", script]);
    let init = shim.initialize();
    assert!(
        init["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object(),
        "{init}"
    );

    let e = shim.err("tools/list", json!({}));
    assert_eq!(e["code"], -32603, "{e}");
    let msg = e["message"].as_str().unwrap_or("");
    assert!(
        msg.contains("exit") && msg.contains('3'),
        "the error names the cause: {msg}"
    );
    let status = shim
        .wait_exit(Duration::from_secs(6))
        .expect("the shim exits when its upstream is gone");
    assert!(!status.success(), "exit status {status}");
}

/// Reads what the shim sends until `deadline`; fails if any of it answers
/// request `id`.
#[track_caller]
fn assert_unanswered_until(shim: &mut Wire, id: &Value, deadline: Instant) {
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Some(m) = shim.next(left) else { break };
        assert!(
            !(m.get("method").is_none() && m["id"] == *id),
            "the cancelled request {id} was answered: {m}"
        );
    }
}

/// A client at its per-client cap is refused before its call reaches the
/// server: no task is started that the client would never see (a retry
/// would do the work twice).
#[test]
fn a_client_at_its_cap_is_refused_before_the_server_starts_work() {
    let (sent, got) = (temp_path("cap-sent.jsonl"), temp_path("cap-got.jsonl"));
    let mut shim = Wire::spawn(
        &["--max-tasks-per-client", "1"],
        &recording_upstream(&modern_reference(), &sent, &got),
    );
    shim.initialize();
    create(
        &mut shim,
        "slow_compute",
        json!({"seconds": 30, "label": "first"}),
    );
    let e = shim.err(
        "tools/call",
        task_call("slow_compute", json!({"seconds": 30, "label": "second"})),
    );
    assert_eq!(e["code"], -32603, "{e}");
    assert!(
        e["message"]
            .as_str()
            .is_some_and(|m| m.contains("task limit")),
        "{e}"
    );
    // A plain call still goes through; once its answer is back, the
    // recording holds everything sent before it.
    let plain = shim.ok(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "after"}}),
    );
    assert!(text_of(&plain).contains("after"), "{plain}");
    let deadline = Instant::now() + Duration::from_secs(5);
    recorded(&sent, deadline, |m| {
        m["method"] == "tools/call" && m["params"]["arguments"]["name"] == "after"
    });
    let calls: Vec<Value> = read_jsonl(&sent)
        .into_iter()
        .filter(|m| m["method"] == "tools/call")
        .collect();
    assert!(
        !calls
            .iter()
            .any(|m| m["params"]["arguments"]["label"] == "second"),
        "the refused call reached the server: {calls:#?}"
    );
    // Nothing was cancelled either: the first task runs on.
    let first = shim.ok("tasks/list", json!({}));
    assert_eq!(first["tasks"][0]["status"], "working", "{first}");
    let _ = std::fs::remove_file(&sent);
    let _ = std::fs::remove_file(&got);
}

/// A task whose retention ends while a `tasks/result` waits on it is
/// gone, as the next `tasks/get` will say (`-32602`), not "lost by the
/// upstream" (`-32603`): the server forgets it at the end of the TTL it
/// announced, a moment before the shim's record would.
#[test]
fn a_task_that_expires_during_a_wait_is_gone_not_lost() {
    let mut upstream = modern_reference();
    upstream.extend(["--task-ttl-ms".to_owned(), "1500".to_owned()]);
    let mut shim = Wire::spawn(&[], &upstream);
    shim.initialize();
    let id = create(
        &mut shim,
        "slow_compute",
        json!({"seconds": 5, "label": "outlived"}),
    );
    let e = shim.err("tasks/result", json!({"taskId": id}));
    assert_eq!(e["code"], -32602, "{e}");
    let again = shim.err("tasks/get", json!({"taskId": id}));
    assert_eq!(again["code"], -32602, "{again}");
}

/// A 2026-07-28 server names itself in every result's `_meta`
/// (`io.modelcontextprotocol/serverInfo`); a 2025-11-25 client learnt the
/// name once, from `initialize`, and its results do not carry it, nor the
/// `resultType` and cache hints it has no use for. (A plain answer goes
/// through the shim as text; the rest as trees.)
#[test]
fn results_carry_no_modern_server_info() {
    let mut shim = Wire::legacy_front(&[]);
    shim.initialize();
    let key = "io.modelcontextprotocol/serverInfo";
    let plain = shim.ok(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "Info"}}),
    );
    assert!(plain["_meta"].get(key).is_none(), "{plain}");
    assert!(plain.get("resultType").is_none(), "{plain}");
    assert_eq!(text_of(&plain), "Hello, Info!");
    let tools = shim.ok("tools/list", json!({}));
    assert!(tools["_meta"].get(key).is_none(), "{tools}");
    for modern_only in ["resultType", "ttlMs", "cacheScope"] {
        assert!(tools.get(modern_only).is_none(), "{tools}");
    }
    let created = shim.ok(
        "tools/call",
        task_call("slow_compute", json!({"seconds": 0, "label": "info"})),
    );
    assert!(created["_meta"].get(key).is_none(), "{created}");
    let synthetic = shim.ok(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "S"}, "task": {}}),
    );
    let id = synthetic["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let result = shim.ok("tasks/result", json!({"taskId": id}));
    assert!(result["_meta"].get(key).is_none(), "{result}");
}

/// A client that declared no elicitation, calling a tool that asks before
/// it makes its task (an MRTR round): the question is declined for it at
/// once, as inside a task, and the call goes on with that answer. Before,
/// the whole call failed with "Upstream error: the server needs …".
#[test]
fn undeclared_input_before_a_task_is_declined_not_fatal() {
    let mut shim = Wire::legacy_front(&[]);
    shim.ok(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "no-elicitation", "version": "1"}}),
    );
    shim.notify("notifications/initialized", json!({}));
    let plain = shim.ok(
        "tools/call",
        json!({"name": "test_tool_with_task", "arguments": {}, "task": {}}),
    );
    let id = plain["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {plain}"))
        .to_owned();
    let result = shim.ok("tasks/result", json!({"taskId": id}));
    assert!(text_of(&result).contains("Hello"), "{result}");
    assert!(
        shim.received
            .iter()
            .all(|m| m["method"] != "elicitation/create"),
        "the client was never asked"
    );
}

/// The next message matching `pred` within `within`; others are kept.
#[track_caller]
fn seen_within(shim: &mut Wire, within: Duration, pred: impl Fn(&Value) -> bool) -> Option<Value> {
    let deadline = Instant::now() + within;
    let mut kept = Vec::new();
    let mut found = None;
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        let Some(m) = shim.next(left) else { break };
        if pred(&m) {
            found = Some(m);
            break;
        }
        kept.push(m);
    }
    for m in kept.into_iter().rev() {
        shim.unread(m);
    }
    found
}

fn withdraws(question: &Value) -> impl Fn(&Value) -> bool + '_ {
    move |m| m["method"] == "notifications/cancelled" && m["params"]["requestId"] == question["id"]
}

/// A question the client has not answered is withdrawn
/// (`notifications/cancelled` naming it) when the client cancels its task,
/// so the client's prompt does not stay up for a task that is gone; a
/// question whose wait alone was cancelled stays asked (see
/// `a_question_is_not_asked_again_after_a_cancelled_wait`).
#[test]
fn a_question_is_withdrawn_when_its_task_is_cancelled() {
    let mut shim = Wire::legacy_front(&[]);
    shim.initialize();
    shim.auto_answer = false;
    let task = create(&mut shim, "confirm_delete", json!({"filename": "g.txt"}));
    let wait = shim.request("tasks/result", json!({"taskId": task}));
    let asked = seen_within(&mut shim, support::wire::REQUEST_TIMEOUT, |m| {
        m["method"] == "elicitation/create"
    })
    .expect("the task's question");
    assert!(
        seen_within(&mut shim, Duration::from_millis(500), withdraws(&asked)).is_none(),
        "withdrawn while the task still waits on it"
    );
    let cancelled = shim.ok("tasks/cancel", json!({"taskId": task}));
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let withdrawal = seen_within(&mut shim, support::wire::REQUEST_TIMEOUT, withdraws(&asked))
        .unwrap_or_else(|| {
            panic!(
                "question {} not withdrawn: {:#?}",
                asked["id"], shim.received
            )
        });
    assert!(
        withdrawal["params"]["reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{withdrawal}"
    );
    let ended = shim.response(&wait);
    assert!(
        ended.get("error").is_some() || ended["result"].is_object(),
        "{ended}"
    );
    // A late answer changes nothing: the task stays cancelled.
    shim.send(&json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"action": "accept", "content": {"confirm": true}}}));
    let t = shim.ok("tasks/get", json!({"taskId": task}));
    assert_eq!(t["status"], "cancelled", "{t}");
}

/// A question asked during a plain call is withdrawn when the client
/// cancels that call.
#[test]
fn a_question_is_withdrawn_when_its_call_is_cancelled() {
    let mut shim = Wire::legacy_front(&[]);
    shim.initialize();
    shim.auto_answer = false;
    let call = shim.request(
        "tools/call",
        json!({"name": "confirm_delete", "arguments": {"filename": "h.txt"}}),
    );
    let asked = seen_within(&mut shim, support::wire::REQUEST_TIMEOUT, |m| {
        m["method"] == "elicitation/create"
    })
    .expect("the call's question");
    shim.notify("notifications/cancelled", json!({"requestId": call}));
    seen_within(&mut shim, support::wire::REQUEST_TIMEOUT, withdraws(&asked)).unwrap_or_else(
        || {
            panic!(
                "question {} not withdrawn: {:#?}",
                asked["id"], shim.received
            )
        },
    );
    shim.ok("ping", json!({}));
    assert_unanswered_until(
        &mut shim,
        &call,
        Instant::now() + Duration::from_millis(500),
    );
}

/// Several questions of one task reach the client in the server's order
/// (its `inputRequests`): they went out in whatever order the runtime ran
/// one task per question, mostly reversed. Eight tasks.
#[test]
fn a_tasks_questions_come_in_the_servers_order() {
    let mut shim = Wire::legacy_front(&[]);
    shim.initialize();
    shim.auto_answer = false;
    for round in 0..8 {
        let task = create(&mut shim, "multi_input", json!({}));
        let wait = shim.request("tasks/result", json!({"taskId": task}));
        let mut asked = Vec::new();
        while asked.len() < 2 {
            let q = seen_within(&mut shim, support::wire::REQUEST_TIMEOUT, |m| {
                m["method"] == "elicitation/create"
            })
            .unwrap_or_else(|| panic!("round {round}: two questions, got {asked:#?}"));
            asked.push(q);
        }
        let messages: Vec<&str> = asked
            .iter()
            .map(|q| q["params"]["message"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(messages[1], "Proceed?", "round {round}: {messages:?}");
        for q in &asked {
            let content = if q["params"]["message"] == "Proceed?" {
                json!({"confirm": true})
            } else {
                json!({"name": "Ada"})
            };
            shim.send(&json!({"jsonrpc": "2.0", "id": q["id"],
                "result": {"action": "accept", "content": content}}));
        }
        let done = shim.response(&wait);
        assert!(
            text_of(&done["result"]).contains("Ada"),
            "round {round}: {done}"
        );
    }
}

/// A client that answers an elicitation with something that is no
/// ElicitResult (`"yes"`, an unknown action) has accepted nothing: the
/// server is told `cancel`. Before, the shim forwarded `{}` in a
/// `tasks/update` the tasks extension's schema refuses.
#[test]
fn an_answer_that_is_no_elicit_result_is_a_cancel() {
    for (n, bad) in [
        json!("yes"),
        json!({"action": "maybe"}),
        json!([1]),
        json!(null),
    ]
    .into_iter()
    .enumerate()
    {
        let (sent, got) = (
            temp_path(&format!("bad-answer-{n}-sent.jsonl")),
            temp_path(&format!("bad-answer-{n}-got.jsonl")),
        );
        let mut shim = Wire::spawn(&[], &recording_upstream(&modern_reference(), &sent, &got));
        shim.initialize();
        shim.auto_answer = false;
        let task = create(&mut shim, "confirm_delete", json!({"filename": "k.txt"}));
        let wait = shim.request("tasks/result", json!({"taskId": task}));
        let asked = seen_within(&mut shim, support::wire::REQUEST_TIMEOUT, |m| {
            m["method"] == "elicitation/create"
        })
        .expect("the task's question");
        shim.send(&json!({"jsonrpc": "2.0", "id": asked["id"], "result": bad}));
        let done = shim.response(&wait);
        assert_eq!(
            text_of(&done["result"]),
            "Deletion of k.txt cancelled",
            "{bad}: {done}"
        );
        let update = recorded(
            &sent,
            Instant::now() + support::wire::REQUEST_TIMEOUT,
            |m| m["method"] == "tasks/update",
        );
        let answers = update["params"]["inputResponses"]
            .as_object()
            .expect("inputResponses");
        assert!(
            answers.values().all(|a| a == &json!({"action": "cancel"})),
            "{bad}: {update}"
        );
        drop(shim);
        let _ = std::fs::remove_file(&sent);
        let _ = std::fs::remove_file(&got);
    }
}

/// Sampling the client did not declare has no answer meaning "no" in
/// 2026-07-28: the task fails, naming why, and is cancelled upstream,
/// instead of waiting on the input until its ttl (and a blocking
/// `tasks/result` with it).
#[test]
fn undeclared_sampling_fails_the_task_instead_of_hanging() {
    let mut shim = Wire::spawn(&[], &modern_reference());
    shim.initialize();
    let task = create(&mut shim, "summarize", json!({"text": "a long text"}));
    let r = shim.call("tasks/result", json!({"taskId": task}));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(
        r["error"]["message"].to_string().contains("sampling"),
        "{r}"
    );
    let got = shim.ok("tasks/get", json!({"taskId": task}));
    assert_eq!(got["status"], "failed", "{got}");
    // A plain call the server runs as a task says the same, not that a
    // task it never asked for was cancelled.
    let r = shim.call(
        "tools/call",
        json!({"name": "summarize", "arguments": {"text": "a long text"}}),
    );
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(
        r["error"]["message"].to_string().contains("sampling"),
        "{r}"
    );
}

/// Answers `elicitation/create` `asked` with an accepted form of `content`.
fn accept(shim: &mut Wire, asked: &Value, content: Value) {
    shim.send(&json!({"jsonrpc": "2.0", "id": asked["id"],
        "result": {"action": "accept", "content": content}}));
}

/// An answer the server refuses (an accepted form without its required
/// member) is asked again, and the corrected answer completes the task.
/// A server that refuses three answers fails the task, naming the
/// refusal. Before, the refusal was only logged: the question was never
/// asked again and `tasks/result` waited until the task's ttl.
#[test]
fn a_refused_answer_is_asked_again_then_fails_the_task() {
    let elicits = |m: &Value| m["method"] == "elicitation/create";
    for refusals in [1, 3] {
        let mut shim = Wire::spawn(&[], &modern_reference());
        shim.initialize();
        shim.auto_answer = false;
        let task = create(&mut shim, "confirm_delete", json!({"filename": "k.txt"}));
        let wait = shim.request("tasks/result", json!({"taskId": task}));
        for n in 0..refusals {
            let asked = seen_within(&mut shim, support::wire::REQUEST_TIMEOUT, elicits)
                .unwrap_or_else(|| panic!("question {} of {refusals}", n + 1));
            accept(&mut shim, &asked, json!({}));
        }
        if refusals < 3 {
            let again = seen_within(&mut shim, support::wire::REQUEST_TIMEOUT, elicits)
                .expect("the question, asked again");
            accept(&mut shim, &again, json!({"confirm": true}));
            let done = shim.response(&wait);
            assert_eq!(text_of(&done["result"]), "Deleted k.txt", "{done}");
        } else {
            let failed = shim.response(&wait);
            let message = failed["error"]["message"].to_string();
            assert_eq!(failed["error"]["code"], -32603, "{failed}");
            assert!(
                message.contains("refused") && message.contains("3 times"),
                "{failed}"
            );
            let got = shim.ok("tasks/get", json!({"taskId": task}));
            assert_eq!(got["status"], "failed", "{got}");
        }
    }
}

/// `external_job` in front of the 2026-07-28 server: a 2025-11-25 client
/// asking for a task gets one, and its `tasks/result` names the job; a
/// missing `job_id` is the server's -32602.
#[test]
fn external_job_through_the_shim_is_a_task() {
    let mut shim = Wire::spawn(&[], &modern_reference());
    shim.initialize();
    let missing = shim.call("tools/call", task_call("external_job", json!({})));
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    let task = create(&mut shim, "external_job", json!({"job_id": "j-3"}));
    let result = shim.ok("tasks/result", json!({"taskId": task}));
    assert_eq!(
        text_of(&result),
        "Job j-3 completed by the external worker",
        "{result}"
    );
    assert_eq!(listed(&mut shim, &task)["status"], "completed");
}

/// A client polling a running task hears the same answer, poll after poll,
/// until the task ends, and then hears the end: the shim answers a poll
/// that brings nothing new from what it remembers of the last one, and
/// must not go on doing so once the server's answer changes.
#[test]
fn polls_that_bring_nothing_new_still_hear_the_end() {
    let mut shim = Wire::legacy_front(&[]);
    shim.initialize();
    let id = create(
        &mut shim,
        "slow_compute",
        json!({"seconds": 1, "label": "p"}),
    );
    let mut working = Vec::new();
    let done = support::poll::until("completed", Duration::from_secs(10), || {
        let t = shim.ok("tasks/get", json!({"taskId": id}));
        if t["status"] == "working" {
            working.push(t);
            return None;
        }
        Some(t)
    });
    assert_eq!(done["status"], "completed", "{done}");
    assert!(working.len() >= 3, "polled while it ran: {working:?}");
    // Nothing changed while it ran: every poll answered the same.
    assert!(working.iter().all(|t| *t == working[0]), "{working:?}");
    let result = shim.ok("tasks/result", json!({"taskId": id}));
    assert!(text_of(&result).contains('p'), "{result}");
    // And once ended, it stays ended.
    let again = shim.ok("tasks/get", json!({"taskId": id}));
    assert_eq!(again, done);
}
