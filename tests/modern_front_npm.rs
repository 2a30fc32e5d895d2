//! Modern clients against real third-party legacy (2025-11-25) servers,
//! through the real binary (`mcp-tasks-shim stdio -- node …`):
//! - `@modelcontextprotocol/server-everything` (pinned in tests/peers),
//!   whose `simulate-research-query` tool is task-required and, with
//!   `ambiguous: true`, asks for an elicitation on the tasks/result stream;
//! - `tests/peers/sdk_task_server.mjs`, built only from the TypeScript
//!   SDK's task APIs, including an elicitation sent directly (tagged with
//!   its task, not on tasks/result), even before the CreateTaskResult.
//!
//! Every message the shim emits is validated against the 2026-07-28
//! schemas as it arrives. Quirks met are listed in docs/legacy-servers.md.
//! Needs `npm ci --prefix tests/peers` (scripts/test.sh does it).

mod modern_front_common;
mod support;

use std::time::Duration;

use modern_front_common::{Raw, has_input, input_keys, meta, peers_dir, terminal, text};
use serde_json::json;
use tokio::time::timeout;

fn node(script: &str, args: &[&str]) -> Vec<String> {
    let path = peers_dir().join(script);
    let mut v = vec!["node".to_owned(), path.to_str().unwrap().to_owned()];
    v.extend(args.iter().map(|a| a.to_string()));
    v
}

fn everything() -> Vec<String> {
    node(
        "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        &["stdio"],
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn server_everything_behind_the_shim() {
    timeout(Duration::from_secs(40), everything_flow())
        .await
        .expect("server-everything flow timed out");
}

async fn everything_flow() {
    let mut s = Raw::new(&[], &everything());
    let d = s.ok("server/discover", json!({}), true).await;
    assert_eq!(
        d["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
        json!({}),
        "{d}"
    );
    assert_eq!(
        d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcp-servers/everything",
        "{d}"
    );
    // What the shim bridges, and only that: list changes on listen
    // streams, not resource subscriptions (which it does not carry).
    assert!(d["capabilities"]["resources"].is_object(), "{d}");
    assert!(
        d["capabilities"]["resources"].get("subscribe").is_none(),
        "resource subscriptions are not advertised: {d}"
    );
    let mut p = json!({"notifications": {"promptsListChanged": true,
        "resourcesListChanged": true, "resourceSubscriptions": ["demo://resource/static/document/architecture.md"]}});
    p["_meta"] = meta(true);
    s.request("subscriptions/listen", p).await;
    let ack = s
        .next_matching(|v| v["method"] == "notifications/subscriptions/acknowledged")
        .await;
    assert_eq!(
        ack["params"]["notifications"],
        json!({"promptsListChanged": true, "resourcesListChanged": true}),
        "prompt and resource list changes are carried: {ack}"
    );

    // Its task tool is registered only after `initialized`; the shim
    // initializes on the first request, so it is listed from then on.
    let list = s.ok("tools/list", json!({}), true).await;
    let tools = list["tools"].as_array().expect("tools");
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    for n in [
        "echo",
        "simulate-research-query",
        "trigger-elicitation-request",
    ] {
        assert!(names.contains(&n), "{n} listed: {names:?}");
    }
    assert!(
        tools.iter().all(|t| t.get("execution").is_none()),
        "no 2025 execution member: {list}"
    );

    // A plain tool.
    let r = s
        .ok(
            "tools/call",
            json!({"name": "echo", "arguments": {"message": "hi"}}),
            true,
        )
        .await;
    assert_eq!(r["resultType"], "complete", "{r}");
    assert_eq!(text(&r), "Echo: hi");

    // The task-required tool without the extension: -32021.
    let e = s
        .err(
            "tools/call",
            json!({"name": "simulate-research-query", "arguments": {"topic": "x"}}),
            false,
        )
        .await;
    assert_eq!(e["code"], -32021, "{e}");

    // Create, poll, answer the elicitation with tasks/update, read the
    // report inline.
    let id = s
        .create(
            "simulate-research-query",
            json!({"topic": "python", "ambiguous": true}),
        )
        .await;
    let t = s.poll(&id, |t| has_input(t) || terminal(t)).await;
    assert!(has_input(&t), "{t}");
    let keys = input_keys(&t);
    assert_eq!(keys.len(), 1, "{t}");
    let ask = &t["inputRequests"][&keys[0]];
    assert_eq!(ask["method"], "elicitation/create", "{t}");
    assert!(
        ask["params"].get("_meta").is_none(),
        "related-task _meta stripped: {t}"
    );
    s.ok(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {keys[0].clone(): {"action": "accept", "content": {"interpretation": "snake"}}}}),
        true,
    )
    .await;
    let t = s.poll(&id, terminal).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["ttlMs"], 300000, "the server overrides the ttl: {t}");
    assert!(
        text(&t["result"]).contains("Research Report: python (snake)"),
        "{t}"
    );
    assert!(
        t["result"]["_meta"]
            .get("io.modelcontextprotocol/related-task")
            .is_none(),
        "{t}"
    );

    // A plain tool whose elicitation comes directly on the open call:
    // an MRTR round, then the retry with the answer completes the call.
    let round = s
        .ok(
            "tools/call",
            json!({"name": "trigger-elicitation-request"}),
            true,
        )
        .await;
    assert_eq!(round["resultType"], "input_required", "{round}");
    let key = round["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .expect("one input request");
    let r = s
        .ok(
            "tools/call",
            json!({"name": "trigger-elicitation-request",
                "requestState": round["requestState"],
                "inputResponses": {key: {"action": "decline"}}}),
            true,
        )
        .await;
    assert_eq!(r["resultType"], "complete", "{r}");
    assert!(
        r["content"].to_string().contains("decline"),
        "the server saw the answer: {r}"
    );
    s.close().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sdk_task_server_behind_the_shim() {
    timeout(Duration::from_secs(40), sdk_flow())
        .await
        .expect("SDK task server flow timed out");
}

async fn sdk_flow() {
    let mut s = Raw::new(&[], &node("sdk_task_server.mjs", &[]));
    let d = s.ok("server/discover", json!({}), true).await;
    assert_eq!(
        d["capabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
        json!({}),
        "{d}"
    );
    let list = s.ok("tools/list", json!({}), true).await;
    assert!(
        list["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("execution").is_none()),
        "{list}"
    );
    let r = s
        .ok(
            "tools/call",
            json!({"name": "greet", "arguments": {"name": "W"}}),
            true,
        )
        .await;
    assert_eq!(text(&r), "Hello, W!", "{r}");

    // Queued elicitation (delivered on tasks/result), followed on a listen
    // stream as well as by polling.
    // The SDK server answers input_required at creation, before its
    // question is out: the client reads working, as tasks/get would say.
    let created = s
        .ok(
            "tools/call",
            json!({"name": "ask_task", "arguments": {}}),
            true,
        )
        .await;
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working", "{created}");
    let id = created["taskId"].as_str().expect("taskId").to_owned();
    let mut p = json!({"notifications": {"taskIds": [id]}});
    p["_meta"] = meta(true);
    let listen = s.request("subscriptions/listen", p).await;
    let t = s.poll(&id, has_input).await;
    let keys = input_keys(&t);
    assert_eq!(keys.len(), 1, "{t}");
    s.ok(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {keys[0].clone(): {"action": "accept", "content": {"name": "Ann"}}}}),
        true,
    )
    .await;
    let t = s.poll(&id, terminal).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(text(&t["result"]), "Hello, Ann!", "{t}");
    let done = s
        .next_matching(|v| v["method"] == "notifications/tasks" && terminal(&v["params"]))
        .await;
    assert_eq!(
        done["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        json!(listen),
        "{done}"
    );
    assert_eq!(text(&done["params"]["result"]), "Hello, Ann!", "{done}");
    assert!(
        s.received
            .iter()
            .any(|v| v["method"] == "notifications/tasks" && has_input(&v["params"])),
        "the question reached the stream"
    );

    // An elicitation tagged with the task but sent directly, not on the
    // tasks/result stream: after the task exists, and before its
    // CreateTaskResult is even written (the shim must not refuse it).
    for delay in [300, 0] {
        let id = s.create("direct_ask_task", json!({"delayMs": delay})).await;
        let t = s.poll(&id, |t| has_input(t) || terminal(t)).await;
        assert!(has_input(&t), "delay {delay}: {t}");
        let keys = input_keys(&t);
        s.ok(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {keys[0].clone(): {"action": "accept", "content": {"name": "Bo"}}}}),
            true,
        )
        .await;
        let t = s.poll(&id, terminal).await;
        assert_eq!(text(&t["result"]), "Hello, Bo!", "delay {delay}: {t}");
    }

    // The SDK stores `failed` with an isError result: modern says completed.
    let id = s.create("bad_task", json!({})).await;
    let t = s.poll(&id, terminal).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["result"]["isError"], true, "{t}");
    assert_eq!(text(&t["result"]), "the disk is full");

    // Cancel: ack, then cancelled; a second cancel is acked too.
    let id = s.create("slow_task", json!({"ms": 20000})).await;
    let ack = s.ok("tasks/cancel", json!({"taskId": id}), true).await;
    assert_eq!(ack, json!({"resultType": "complete"}));
    let t = s.poll(&id, terminal).await;
    assert_eq!(t["status"], "cancelled", "{t}");
    s.ok("tasks/cancel", json!({"taskId": id}), true).await;

    let e = s
        .err("tasks/get", json!({"taskId": "no-such-task"}), true)
        .await;
    assert_eq!(e["code"], -32602, "{e}");
    s.close().await;
}

/// A server that grants its tasks no ttl (`null`, "unlimited", as the
/// Python SDK's store does when asked for none): the shim keeps its record
/// of each for `--max-task-ttl`, not for good. Before, finished tasks
/// counted against `--max-tasks-per-client` for ever, and once at the cap
/// every later task call failed until the shim restarted. The client is
/// shown that bound as the task's `ttlMs`.
#[tokio::test(flavor = "multi_thread")]
async fn tasks_granted_no_ttl_do_not_fill_the_cap_for_good() {
    timeout(Duration::from_secs(40), async {
        let mut s = Raw::new(
            &["--max-tasks-per-client", "2", "--max-task-ttl", "1500ms"],
            &node("sdk_task_server.mjs", &["--no-ttl"]),
        );
        s.ok("server/discover", json!({}), true).await;
        let call = json!({"name": "slow_task", "arguments": {"ms": 10}});
        for _ in 0..2 {
            let created = s.ok("tools/call", call.clone(), true).await;
            assert_eq!(created["resultType"], "task", "{created}");
            // The client is told how long the shim keeps it, not "unlimited".
            assert_eq!(created["ttlMs"], 1500, "{created}");
            let id = created["taskId"].as_str().expect("taskId").to_owned();
            let got = s.ok("tasks/get", json!({"taskId": id}), true).await;
            assert_eq!(got["ttlMs"], 1500, "{got}");
        }
        let full = s.err("tools/call", call.clone(), true).await;
        assert!(
            full["message"]
                .as_str()
                .unwrap_or_default()
                .contains("task limit"),
            "{full}"
        );
        // Stays real: the child shim's own 1.5 s retention expiring is the point.
        tokio::time::sleep(Duration::from_millis(2000)).await;
        let again = s.ok("tools/call", call.clone(), true).await;
        assert_eq!(again["resultType"], "task", "{again}");
    })
    .await
    .expect("timed out");
}

/// The MRTR round of `ask_plain` on `s`: (requestState, its one key).
async fn plain_round(s: &mut Raw) -> (serde_json::Value, String) {
    let round = s
        .ok(
            "tools/call",
            json!({"name": "ask_plain", "arguments": {}}),
            true,
        )
        .await;
    assert_eq!(round["resultType"], "input_required", "{round}");
    let key = input_keys(&json!({"inputRequests": round["inputRequests"]}))
        .pop()
        .expect("one input request");
    (round["requestState"].clone(), key)
}

/// A question the server asks while a `prompts/get` is open is that
/// request's, not the parked tool round's: it is refused as outside any
/// tool call (the prompt says so), and the round still takes its own
/// answer. Before, it was added to the round under the tool's state, and
/// the `prompts/get` never got an answer.
#[tokio::test(flavor = "multi_thread")]
async fn a_prompts_question_does_not_join_a_parked_tool_round() {
    timeout(Duration::from_secs(40), async {
        let mut s = Raw::new(&[], &node("sdk_task_server.mjs", &[]));
        s.ok("server/discover", json!({}), true).await;
        let (state, key) = plain_round(&mut s).await;
        let prompt = s
            .ok("prompts/get", json!({"name": "ask_prompt"}), true)
            .await;
        let said = prompt["messages"][0]["content"]["text"].to_string();
        assert!(said.contains("refused"), "{prompt}");
        let done = s
            .ok(
                "tools/call",
                json!({"name": "ask_plain", "arguments": {}, "requestState": state,
                    "inputResponses": {key: {"action": "accept", "content": {"name": "Ann"}}}}),
                true,
            )
            .await;
        assert_eq!(text(&done), "Hello, Ann!", "{done}");
        s.close().await;
    })
    .await
    .expect("timed out");
}

/// A round whose upstream call ended while it was parked (here the
/// request timeout) takes no answers: the retry gets the call's outcome,
/// and what the user typed never reaches the server; the server's
/// question is cancelled for the client instead.
#[tokio::test(flavor = "multi_thread")]
async fn a_round_whose_call_timed_out_sends_the_server_no_answer() {
    let sent = modern_front_common::record_path("timed-out-round-sent");
    let got = modern_front_common::record_path("timed-out-round-got");
    let upstream =
        support::wire::recording_upstream(&node("sdk_task_server.mjs", &[]), &sent, &got);
    timeout(Duration::from_secs(40), async {
        let mut s = Raw::new(&["--request-timeout", "1s"], &upstream);
        s.ok("server/discover", json!({}), true).await;
        let (state, key) = plain_round(&mut s).await;
        // Stays real: the child shim's own 1 s --request-timeout firing is the point.
        tokio::time::sleep(Duration::from_millis(1600)).await;
        let e = s
            .err(
                "tools/call",
                json!({"name": "ask_plain", "arguments": {}, "requestState": state,
                    "inputResponses": {key: {"action": "accept", "content": {"name": "Secret"}}}}),
                true,
            )
            .await;
        assert_eq!(e["code"], -32603, "{e}");
        assert!(e["message"].to_string().contains("within"), "{e}");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        support::wire::recorded(&sent, deadline, |m| m["result"]["action"] == "cancel");
        let told = support::wire::read_jsonl(&sent);
        assert!(
            !told.iter().any(|m| m.to_string().contains("Secret")),
            "{told:#?}"
        );
        s.close().await;
    })
    .await
    .expect("timed out");
    let _ = std::fs::remove_file(&sent);
    let _ = std::fs::remove_file(&got);
}
