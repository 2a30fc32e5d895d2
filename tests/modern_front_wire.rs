//! Modern clients against a legacy server, on the raw wire: what an SDK
//! client will not send. The real binary runs
//! `mcp-tasks-shim stdio -- mcp-tasks-shim reference-server --revision 2025-11-25`;
//! every message the shim emits is validated against the 2026-07-28
//! schemas as it arrives (see `modern_front_common`).

mod modern_front_common;
mod support;

use std::time::Duration;

use modern_front_common::{
    Raw, has_input, input_keys, legacy_reference, meta, record_path, terminal, text,
};
use serde_json::{Value, json};
use support::wire::{read_jsonl, recording_upstream};
use tokio::time::{Instant, timeout};

const BOUND: Duration = Duration::from_secs(40);

#[tokio::test(flavor = "multi_thread")]
async fn envelope_errors_and_mrtr_state() {
    timeout(BOUND, async {
        let mut s = Raw::new(&[], &legacy_reference());
        // The stdio proxy picks its engine from the client's first message
        // (one without any modern signal is taken for a legacy client), so
        // the session starts with a well-formed modern request.
        let d = s.ok("server/discover", json!({}), true).await;
        assert_eq!(d["supportedVersions"], json!(["2026-07-28"]), "{d}");
        assert_eq!(
            d["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
            json!({}),
            "{d}"
        );

        // No `_meta` at all: -32602.
        let r = s.call("tools/list", json!({})).await;
        assert_eq!(r["error"]["code"], -32602, "{r}");
        // `_meta` without the required client capabilities: -32602.
        let r = s
            .call(
                "tools/list",
                json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
            )
            .await;
        assert_eq!(r["error"]["code"], -32602, "{r}");

        // An unknown version: -32022 naming what is supported and what was asked.
        let mut m = meta(true);
        m["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
        let r = s.call("tools/list", json!({"_meta": m})).await;
        assert_eq!(r["error"]["code"], -32022, "{r}");
        let data = &r["error"]["data"];
        assert_eq!(data["requested"], "2099-01-01", "{r}");
        assert!(
            data["supported"]
                .as_array()
                .is_some_and(|a| a.contains(&json!("2026-07-28"))),
            "{r}"
        );

        // A forged requestState: -32602, and nothing is called upstream.
        let e = s
            .err(
                "tools/call",
                json!({"name": "test_tool_with_task", "requestState": "Zm9yZ2Vk.c2lnbmF0dXJl",
                    "inputResponses": {"elicitation-1": {"action": "accept", "content": {"name": "Eve"}}}}),
                true,
            )
            .await;
        assert_eq!(e["code"], -32602, "{e}");

        // A real MRTR round, its retry, then the same state replayed: -32602.
        let round = s
            .ok("tools/call", json!({"name": "test_tool_with_task"}), true)
            .await;
        assert_eq!(round["resultType"], "input_required", "{round}");
        let state = round["requestState"].as_str().expect("requestState").to_owned();
        let key = round["inputRequests"]
            .as_object()
            .and_then(|m| m.keys().next().cloned())
            .expect("one input request");
        // An answer that is not a result object is refused before the held
        // round is used up: the corrected retry below still works.
        let e = s
            .err(
                "tools/call",
                json!({"name": "test_tool_with_task", "requestState": state,
                    "inputResponses": {key.clone(): "Alice"}}),
                true,
            )
            .await;
        assert_eq!(e["code"], -32602, "a string as the input response: {e}");
        // Nor is a retry that names another tool, answers nothing, or
        // carries a state that is not a string.
        for (what, bad) in [
            (
                "another tool",
                json!({"name": "greet", "arguments": {"name": "Zed"}, "requestState": state,
                    "inputResponses": {key.clone(): {"action": "accept", "content": {"name": "Zed"}}}}),
            ),
            (
                "other arguments",
                json!({"name": "test_tool_with_task", "arguments": {"name": "Mallory"},
                    "requestState": state,
                    "inputResponses": {key.clone(): {"action": "accept", "content": {"name": "Zed"}}}}),
            ),
            (
                "no answers",
                json!({"name": "test_tool_with_task", "requestState": state}),
            ),
            (
                "an answer that is no elicitation result",
                json!({"name": "test_tool_with_task", "requestState": state,
                    "inputResponses": {key.clone(): {"action": "bogus"}}}),
            ),
            (
                "a number as the state",
                json!({"name": "test_tool_with_task", "requestState": 12}),
            ),
        ] {
            let e = s.err("tools/call", bad, true).await;
            assert_eq!(e["code"], -32602, "{what}: {e}");
        }
        // `{}` asks what no arguments asked.
        let retry = json!({"name": "test_tool_with_task", "arguments": {}, "requestState": state,
            "inputResponses": {key.clone(): {"action": "accept", "content": {"name": "Alice"}}}});
        let created = s.ok("tools/call", retry.clone(), true).await;
        assert_eq!(created["resultType"], "task", "{created}");
        let id = created["taskId"].as_str().unwrap().to_owned();
        let e = s.err("tools/call", retry, true).await;
        assert_eq!(e["code"], -32602, "a replayed requestState: {e}");
        let t = s.poll(&id, terminal).await;
        assert!(text(&t["result"]).contains("Alice"), "{t}");

        // Methods 2026-07-28 does not have (removed, or 2025-11-25 session
        // plumbing): refused, not forwarded to the shared upstream session.
        for m in [
            "tasks/list",
            "tasks/result",
            "ping",
            "logging/setLevel",
            "resources/subscribe",
            "resources/unsubscribe",
            "initialize",
        ] {
            let e = s.err(m, json!({"taskId": id}), true).await;
            assert_eq!(e["code"], -32601, "{m}: {e}");
        }
        s.close().await;
    })
    .await
    .expect("wire flow timed out");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_the_extension() {
    timeout(BOUND, async {
        let mut s = Raw::new(&[], &legacy_reference());
        let id = s
            .create("slow_compute", json!({"seconds": 5, "label": "x"}))
            .await;
        let required = |e: &Value| {
            e["code"] == -32021
                && e["data"]["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"]
                    == json!({})
        };
        // tasks/* without the extension: -32021 before any lookup (so the
        // same for a real and an unknown id).
        for task_id in [id.as_str(), "no-such-task"] {
            for (m, extra) in [
                ("tasks/get", json!({})),
                ("tasks/cancel", json!({})),
                ("tasks/update", json!({"inputResponses": {}})),
            ] {
                let mut p = extra;
                p["taskId"] = json!(task_id);
                let e = s.err(m, p, false).await;
                assert!(required(&e), "{m} {task_id}: {e}");
            }
        }
        // A required tool: -32021. An optional one runs plainly.
        let e = s
            .err("tools/call", json!({"name": "failing_job"}), false)
            .await;
        assert!(required(&e), "{e}");
        let r = s
            .ok(
                "tools/call",
                json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "plain"}}),
                false,
            )
            .await;
        assert_eq!(r["resultType"], "complete", "{r}");
        assert!(text(&r).contains("plain"), "{r}");

        // subscriptions/listen with taskIds but without the extension.
        let mut p = json!({"notifications": {"taskIds": [id]}});
        p["_meta"] = meta(false);
        let r = s.call("subscriptions/listen", p).await;
        assert!(required(&r["error"]), "{r}");

        s.ok("tasks/cancel", json!({"taskId": id}), true).await;
        s.close().await;
    })
    .await
    .expect("flow timed out");
}

/// Confirms `confirm_delete`'s question `key` with `tasks/update`, polls
/// the task to its end, and checks its result.
async fn confirm_and_finish(s: &mut Raw, id: &str, key: String) {
    s.ok(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}}),
        true,
    )
    .await;
    let done = s.poll(id, terminal).await;
    assert_eq!(text(&done["result"]), "Deleted notes.txt", "{done}");
}

/// `tasks/update` answers become the legacy server's JSON-RPC results,
/// which must be the result of the request asked (here an elicitation's):
/// anything else is refused, nothing reaches the server, and the question
/// is still open for a proper answer.
#[tokio::test(flavor = "multi_thread")]
async fn input_responses_that_are_not_results_are_refused() {
    timeout(BOUND, async {
        let mut s = Raw::new(&[], &legacy_reference());
        let id = s
            .create("confirm_delete", json!({"filename": "notes.txt"}))
            .await;
        let asked = s.poll(&id, has_input).await;
        let key = input_keys(&asked).remove(0);
        for bad in [
            json!("yes"),
            json!(true),
            json!(null),
            json!([1]),
            json!({"action": "bogus"}),
            json!({"action": "accept", "content": "yes"}),
        ] {
            let e = s
                .err(
                    "tasks/update",
                    json!({"taskId": id, "inputResponses": {key.clone(): bad.clone()}}),
                    true,
                )
                .await;
            assert_eq!(e["code"], -32602, "{bad}: {e}");
            assert!(
                e["message"].as_str().unwrap_or_default().contains(&key),
                "the message names the answer: {e}"
            );
        }
        // A malformed update says so, whatever its task id: the same
        // answer for this task and an unknown one.
        for task_id in [id.as_str(), "no-such-task"] {
            let e = s
                .err(
                    "tasks/update",
                    json!({"taskId": task_id, "inputResponses": "yes"}),
                    true,
                )
                .await;
            assert_eq!(e["code"], -32602, "{e}");
            assert!(
                e["message"]
                    .as_str()
                    .is_some_and(|m| m.contains("inputResponses")),
                "{task_id}: {e}"
            );
        }
        let still = s.poll(&id, has_input).await;
        assert_eq!(still["status"], "input_required", "{still}");
        confirm_and_finish(&mut s, &id, key).await;
        s.close().await;
    })
    .await
    .expect("update flow timed out");
}

/// Elicitation has two modes, declared apart. A form-mode question (the
/// legacy server's `confirm_delete`) is not shown to a request that
/// declared URL mode only, as a client that cannot render a form would
/// be stuck with it; a later request declaring form mode sees it.
#[tokio::test(flavor = "multi_thread")]
async fn a_form_question_is_not_shown_to_a_url_only_client() {
    timeout(BOUND, async {
        let mut s = Raw::new(&[], &legacy_reference());
        let id = s
            .create("confirm_delete", json!({"filename": "notes.txt"}))
            .await;
        // The question is there for a form-capable request.
        let asked = s.poll(&id, has_input).await;
        assert_eq!(asked["status"], "input_required", "{asked}");
        let mut url_only = meta(true);
        url_only["io.modelcontextprotocol/clientCapabilities"]["elicitation"] = json!({"url": {}});
        let seen = s
            .call("tasks/get", json!({"taskId": id, "_meta": url_only}))
            .await;
        let t = &seen["result"];
        assert!(
            t.get("inputRequests")
                .is_none_or(|i| i.as_object().is_some_and(|i| i.is_empty())),
            "a URL-only client is shown no form: {t}"
        );
        assert_ne!(t["status"], "input_required", "{t}");
        // Still held for a request that can take it.
        let again = s.poll(&id, has_input).await;
        let key = input_keys(&again).remove(0);
        confirm_and_finish(&mut s, &id, key).await;
        s.close().await;
    })
    .await
    .expect("mode flow timed out");
}

#[tokio::test(flavor = "multi_thread")]
async fn listen_stream_follows_a_task_to_its_end() {
    timeout(BOUND, async {
        let mut s = Raw::new(&[], &legacy_reference());
        let id = s
            .create("confirm_delete", json!({"filename": "notes.txt"}))
            .await;
        // A listen must say what it opts in to, in the schema's types: a
        // flag that is no boolean, or task ids that are no list of
        // strings, was acknowledged as not asked for.
        let e = s.err("subscriptions/listen", json!({}), true).await;
        assert_eq!(e["code"], -32602, "{e}");
        for bad in [
            json!({"toolsListChanged": "yes"}),
            json!({"taskIds": id}),
            json!({"taskIds": [id, 7]}),
        ] {
            let e = s
                .err("subscriptions/listen", json!({"notifications": bad}), true)
                .await;
            assert_eq!(e["code"], -32602, "{bad}: {e}");
        }
        let mut p = json!({"notifications": {"taskIds": [id, "not-mine"], "toolsListChanged": true}});
        p["_meta"] = meta(true);
        let listen = s.request("subscriptions/listen", p).await;
        let sub = |v: &Value| v["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].clone();

        let ack = s
            .next_matching(|v| v["method"] == "notifications/subscriptions/acknowledged")
            .await;
        assert_eq!(sub(&ack), json!(listen), "{ack}");
        assert_eq!(
            ack["params"]["notifications"],
            json!({"taskIds": [id]}),
            "only known tasks are accepted, and no tool list changes from \
             a server that declares it sends none: {ack}"
        );

        // The question arrives on the stream as an input_required task.
        let asked = s
            .next_matching(|v| v["method"] == "notifications/tasks" && has_input(&v["params"]))
            .await;
        assert_eq!(sub(&asked), json!(listen), "{asked}");
        assert_eq!(asked["params"]["taskId"], json!(id));
        // The stream and tasks/get tell the same story, status message
        // included (the server's "Waiting for client input.").
        let got = s.ok("tasks/get", json!({"taskId": id}), true).await;
        assert_eq!(got["status"], "input_required", "{got}");
        assert_eq!(
            asked["params"]["statusMessage"], got["statusMessage"],
            "stream {asked} vs tasks/get {got}"
        );
        let key = input_keys(&asked["params"]).remove(0);
        s.ok(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}}),
            true,
        )
        .await;

        // ...and the end, with the result inline.
        let done = s
            .next_matching(|v| v["method"] == "notifications/tasks" && terminal(&v["params"]))
            .await;
        assert_eq!(sub(&done), json!(listen), "{done}");
        assert_eq!(done["params"]["status"], "completed", "{done}");
        assert_eq!(text(&done["params"]["result"]), "Deleted notes.txt", "{done}");
        for n in s.received.iter().filter(|v| v["method"] == "notifications/tasks") {
            assert_eq!(sub(n), json!(listen), "every stream notification is tagged: {n}");
        }
        s.close().await;
    })
    .await
    .expect("listen flow timed out");
}

#[tokio::test(flavor = "multi_thread")]
async fn drive_required_tasks_and_task_ttl_flags() {
    timeout(BOUND, async {
        let mut s = Raw::new(
            &["--drive-required-tasks", "--task-ttl", "123456ms"],
            &legacy_reference(),
        );
        // A required tool, called without the extension: the shim runs the
        // task itself and answers with the final result.
        let r = s
            .ok("tools/call", json!({"name": "failing_job"}), false)
            .await;
        assert_eq!(r["resultType"], "complete", "{r}");
        assert_eq!(r["isError"], true, "{r}");
        // One ending in a JSON-RPC error answers with that error.
        let e = s
            .err("tools/call", json!({"name": "protocol_error_job"}), false)
            .await;
        assert_eq!(e["code"], -32603, "{e}");
        // One that asks for input mid-task: the question comes back as an
        // MRTR round of the call; the retry answers it and gets the result.
        let round = s
            .ok(
                "tools/call",
                json!({"name": "confirm_delete", "arguments": {"filename": "a.txt"}}),
                false,
            )
            .await;
        assert_eq!(round["resultType"], "input_required", "{round}");
        let key = input_keys(&round).remove(0);
        let done = s
            .ok(
                "tools/call",
                json!({"name": "confirm_delete", "arguments": {"filename": "a.txt"},
                    "requestState": round["requestState"],
                    "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}}),
                false,
            )
            .await;
        assert_eq!(done["resultType"], "complete", "{done}");
        assert_eq!(text(&done), "Deleted a.txt", "{done}");
        // Without elicitation declared, the question is refused upstream
        // and the tool ends on its own terms, in one answer.
        let mut p = json!({"name": "confirm_delete", "arguments": {"filename": "b.txt"}});
        p["_meta"] = modern_front_common::meta_with(false, false);
        let r = s.call("tools/call", p).await;
        assert!(
            r["result"]["resultType"] == "complete" || r.get("error").is_some(),
            "answered without a round: {r}"
        );
        // --task-ttl is the ttl asked of the legacy server (which honours it).
        let id = s
            .create("slow_compute", json!({"seconds": 0.1, "label": "ttl"}))
            .await;
        let t = s.poll(&id, terminal).await;
        assert_eq!(t["ttlMs"], 123456, "{t}");
        s.close().await;
    })
    .await
    .expect("drive flow timed out");
}

/// Reads what the shim sends until `deadline`; fails if any of it answers
/// request `id`.
async fn assert_unanswered_until(s: &mut Raw, id: i64, deadline: Instant) {
    let answer = |v: &Value| v["id"] == id && v.get("method").is_none();
    let left = deadline.saturating_duration_since(Instant::now());
    if let Ok(m) = timeout(left, s.next_matching(answer)).await {
        panic!("the cancelled request {id} was answered: {m}");
    }
}

/// [`support::wire::recorded`] on a multi-thread runtime's worker.
fn recorded(path: &std::path::Path, deadline: Instant, pred: impl Fn(&Value) -> bool) -> Value {
    tokio::task::block_in_place(|| support::wire::recorded(path, deadline.into_std(), pred))
}

/// `notifications/cancelled` for request `id`, as a modern client sends it.
fn cancel_of(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": id, "reason": "the user gave up", "_meta": meta(false)}})
}

/// Tasks the shim drives for plain calls are not the client's: they take
/// none of its `--max-tasks-per-client` (neither while they run nor until
/// they expire), which still holds for the tasks it asks for.
#[tokio::test(flavor = "multi_thread")]
async fn driven_tasks_take_none_of_the_clients_task_cap() {
    timeout(BOUND, async {
        let mut s = Raw::new(
            &["--drive-required-tasks", "--max-tasks-per-client", "1"],
            &legacy_reference(),
        );
        for n in 0..3 {
            let r = s
                .ok("tools/call", json!({"name": "failing_job"}), false)
                .await;
            assert_eq!(r["resultType"], "complete", "plain call {n}: {r}");
            assert_eq!(r["isError"], true, "plain call {n}: {r}");
        }
        // The one task the client may hold is still free for it...
        s.create("slow_compute", json!({"seconds": 30, "label": "mine"}))
            .await;
        // ...and, taken, the cap holds.
        let mut p = json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "over"}});
        p["_meta"] = meta(true);
        let r = s.call("tools/call", p).await;
        assert_eq!(r["error"]["code"], -32603, "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("task limit")),
            "{r}"
        );
        // A plain call of a required tool still runs past a full cap.
        let r = s
            .ok("tools/call", json!({"name": "failing_job"}), false)
            .await;
        assert_eq!(r["resultType"], "complete", "{r}");
        s.close().await;
    })
    .await
    .expect("driven cap flow timed out");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_driven_call_cancels_its_task_upstream() {
    let (sent, got) = (record_path("drive-sent"), record_path("drive-got"));
    timeout(BOUND, async {
        let mut s = Raw::new(
            &["--drive-required-tasks"],
            &recording_upstream(&legacy_reference(), &sent, &got),
        );
        // A required tool that works for a second (the client sees no
        // task): the shim drives it, and the cancel comes well before the
        // second is up (the recordings are read every 50 ms).
        let started = Instant::now();
        let mut p = json!({"name": "failing_job"});
        p["_meta"] = meta(false);
        let id = s.request("tools/call", p).await;
        let deadline = started + Duration::from_secs(5);
        let call = recorded(&sent, deadline, |m| m["method"] == "tools/call");
        let created = recorded(&got, deadline, |m| {
            m["id"] == call["id"] && m.get("method").is_none()
        });
        let task = created["result"]["task"]["taskId"].clone();
        assert!(task.is_string(), "{created}");
        s.send(cancel_of(id)).await;
        s.ok("tools/list", json!({}), false).await;
        // The task is cancelled upstream, and ends so.
        let cancel = recorded(&sent, deadline, |m| m["method"] == "tasks/cancel");
        assert_eq!(cancel["params"]["taskId"], task, "{cancel}");
        let ack = recorded(&got, deadline, |m| {
            m["id"] == cancel["id"] && m.get("method").is_none()
        });
        assert_eq!(ack["result"]["status"], "cancelled", "{ack}");
        assert_unanswered_until(&mut s, id, Instant::now() + Duration::from_secs(1)).await;
        s.close().await;
    })
    .await
    .expect("drive cancel flow timed out");
    let _ = std::fs::remove_file(&sent);
    let _ = std::fs::remove_file(&got);
}

/// A modern client's other notifications reach the legacy server without
/// the 2026-07-28 per-request `_meta` members; its own `_meta` stays.
#[tokio::test(flavor = "multi_thread")]
async fn notifications_reach_a_legacy_server_in_its_terms() {
    let (sent, got) = (record_path("notify-sent"), record_path("notify-got"));
    timeout(BOUND, async {
        let mut s = Raw::new(&[], &recording_upstream(&legacy_reference(), &sent, &got));
        s.ok("server/discover", json!({}), true).await;
        let mut m = meta(true);
        m["example.com/trace"] = json!("t-1");
        s.send(
            json!({"jsonrpc": "2.0", "method": "notifications/roots/list_changed",
            "params": {"_meta": m}}),
        )
        .await;
        let n = recorded(&sent, Instant::now() + Duration::from_secs(5), |v| {
            v["method"] == "notifications/roots/list_changed"
        });
        assert_eq!(
            n["params"],
            json!({"_meta": {"example.com/trace": "t-1"}}),
            "{n}"
        );
        support::schema::assert_valid(support::schema::Revision::Legacy, &n, None);
        s.close().await;
    })
    .await
    .expect("notification flow timed out");
}

/// A 2026-07-28 client cancels a task while the 2025-11-25 server's
/// question about it is open: the shim answers the server's
/// `elicitation/create` (`cancel`) instead of leaving it waiting for an
/// answer no client will give. Twenty tasks: the server's error for the
/// task's `tasks/result` may come before its answer to the cancel, or a
/// second question after the cancel, and then the question was left open
/// (a review saw 5 to 12 of 30).
#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_tasks_open_question_is_answered_upstream() {
    let (sent, got) = (record_path("cancel-q-sent"), record_path("cancel-q-got"));
    timeout(BOUND, async {
        let mut s = Raw::new(&[], &recording_upstream(&legacy_reference(), &sent, &got));
        s.ok("server/discover", json!({}), true).await;
        for n in 0..20 {
            let (tool, args) = if n % 2 == 0 {
                ("confirm_delete", json!({"filename": format!("m{n}.txt")}))
            } else {
                // Two questions: the second may reach the shim after the
                // cancel took the first.
                ("multi_input", json!({}))
            };
            let id = s.create(tool, args).await;
            s.poll(&id, has_input).await;
            s.ok("tasks/cancel", json!({"taskId": id}), true).await;
        }
        // Every question the server asked is answered, cancelled.
        let (got, sent) = (&got, &sent);
        support::poll::until_async(
            "every question answered",
            Duration::from_secs(3),
            || async move {
                let asked: Vec<Value> = read_jsonl(got)
                    .into_iter()
                    .filter(|m| m["method"] == "elicitation/create")
                    .collect();
                let answers = read_jsonl(sent);
                let open: Vec<&Value> = asked
                    .iter()
                    .filter(|q| {
                        !answers
                            .iter()
                            .any(|a| a["id"] == q["id"] && a.get("method").is_none())
                    })
                    .collect();
                if open.is_empty() {
                    assert!(asked.len() >= 20, "{asked:#?}");
                    for a in answers.iter().filter(|a| {
                        a.get("method").is_none() && asked.iter().any(|q| q["id"] == a["id"])
                    }) {
                        assert_eq!(a["result"], json!({"action": "cancel"}), "{a}");
                    }
                    return Some(());
                }
                None
            },
        )
        .await;
        s.close().await;
    })
    .await
    .expect("cancel flow timed out");
    let _ = std::fs::remove_file(&sent);
    let _ = std::fs::remove_file(&got);
}

/// `external_job` is task-required on the 2025-11-25 server: through the
/// shim a 2026-07-28 client with the tasks extension gets a task that
/// completes with the job's text; one without it gets -32021, as for the
/// other task-only tools; a missing `job_id` is the server's -32602.
#[tokio::test(flavor = "multi_thread")]
async fn external_job_through_the_shim_is_a_task() {
    timeout(BOUND, async {
        let mut s = Raw::new(&[], &legacy_reference());
        let e = s
            .err(
                "tools/call",
                json!({"name": "external_job", "arguments": {"job_id": "j-2"}}),
                false,
            )
            .await;
        assert_eq!(e["code"], -32021, "{e}");
        let e = s
            .err(
                "tools/call",
                json!({"name": "external_job", "arguments": {}}),
                true,
            )
            .await;
        assert_eq!(e["code"], -32602, "{e}");
        let id = s.create("external_job", json!({"job_id": "j-2"})).await;
        let t = s.poll(&id, terminal).await;
        assert_eq!(t["status"], "completed", "{t}");
        assert_eq!(
            text(&t["result"]),
            "Job j-2 completed by the external worker",
            "{t}"
        );
        s.close().await;
    })
    .await
    .expect("external_job flow timed out");
}

/// A 2025-11-25 server whose `tasks/result` does not block but refuses at
/// once while the task works (`tests/peers/nonblocking_result_server.py`):
/// the refusal is "not ready", not the task's outcome. The shim polls the
/// task and asks again once it has ended, so a 2026-07-28 client polling
/// `tasks/get` sees it completed with its result, not failed.
#[tokio::test(flavor = "multi_thread")]
async fn a_tasks_result_refused_while_working_is_asked_again() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/peers/nonblocking_result_server.py");
    let upstream = vec!["python3".to_owned(), script.to_string_lossy().into_owned()];
    timeout(BOUND, async {
        let mut s = Raw::new(&[], &upstream);
        let id = s.create("job", json!({})).await;
        let t = s.poll(&id, terminal).await;
        assert_eq!(t["status"], "completed", "{t}");
        assert_eq!(text(&t["result"]), format!("{id} done"), "{t}");
        s.close().await;
    })
    .await
    .expect("non-blocking tasks/result flow timed out");
}
