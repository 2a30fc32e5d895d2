//! Issue 5, modern clients against a legacy server over HTTP on both sides:
//! the official `@modelcontextprotocol/server-everything` 2026.8.31 (a
//! 2025-11-25 server, `node dist/index.js streamableHttp`, port from `PORT`)
//! sits behind `mcp-tasks-shim http --upstream-url http://127.0.0.1:PORT/mcp`;
//! a 2026-07-28 client (raw POSTs with the modern headers and `_meta`) runs
//! `server/discover`, `tools/list`, a plain tool, and
//! `simulate-research-query {ambiguous: true}` as a task: created, polled
//! with `tasks/get` until it asks for input (`inputRequests`, carried from
//! the upstream's `tasks/result` stream), answered with `tasks/update`,
//! polled to `completed` with the result inline. Every answer is validated
//! against the 2026-07-28 schema.
//!
//! Needs Node and `tests/peers/node_modules`: run `scripts/test.sh`.

mod support;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::http::{EXT, HttpShim, MODERN, client, modern, send};
use support::peers::Everything;
use support::schema::{Revision, assert_valid};

/// Modern `_meta` declaring the tasks extension and form elicitation.
fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {
            "extensions": {EXT: {}},
            "elicitation": {"form": {}},
        },
        "io.modelcontextprotocol/clientInfo": {"name": "http-everything-test", "version": "0"},
    })
}

/// POSTs `method` and returns its schema-valid result.
async fn ok(c: &reqwest::Client, url: &str, id: i64, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    let (status, body, _) = send(modern(c, url, id, method, params)).await;
    assert_eq!(status, StatusCode::OK, "{method}: {body}");
    assert_valid(Revision::Modern, &body, Some(method));
    assert!(body.get("result").is_some(), "{method}: {body}");
    body["result"].clone()
}

/// Polls `tasks/get` until `done` holds (bounded).
async fn poll(c: &reqwest::Client, url: &str, task: &str, done: impl Fn(&Value) -> bool) -> Value {
    let what = format!("task {task} to be done");
    let done = &done;
    support::poll::until_async(&what, Duration::from_secs(20), || async move {
        let id = 100 + support::wire::unique() as i64;
        let t = ok(c, url, id, "tasks/get", json!({"taskId": task})).await;
        assert_eq!(t["resultType"], "complete", "{t}");
        done(&t).then_some(t)
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn modern_client_through_the_shim_against_server_everything_over_http() {
    let everything = Everything::spawn();
    let upstream = format!("--upstream-url={}", everything.url);
    let shim = HttpShim::spawn::<&str>(&[&upstream], &[]);
    let c = client();
    let url = shim.url.as_str();

    // server/discover, built from the legacy InitializeResult.
    let d = ok(&c, url, 1, "server/discover", json!({})).await;
    assert!(
        d["supportedVersions"]
            .as_array()
            .unwrap()
            .contains(&json!(MODERN)),
        "{d}"
    );
    assert_eq!(d["capabilities"]["extensions"][EXT], json!({}), "{d}");
    assert_eq!(
        d["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "mcp-servers/everything"
    );

    // tools/list: no legacy `execution` left; the task tool is there.
    let tools = ok(&c, url, 2, "tools/list", json!({})).await;
    let names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    for want in ["echo", "get-sum", "simulate-research-query"] {
        assert!(names.contains(&want), "{want} listed: {names:?}");
    }
    assert!(
        tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t.get("execution").is_none()),
        "execution stripped"
    );

    // A plain tool.
    let r = ok(
        &c,
        url,
        3,
        "tools/call",
        json!({"name": "echo", "arguments": {"message": "over HTTP"}}),
    )
    .await;
    assert_eq!(r["content"][0]["text"], "Echo: over HTTP", "{r}");
    assert_ne!(r["resultType"], "task");

    // The task, with a question in the middle.
    let created = ok(
        &c,
        url,
        4,
        "tools/call",
        json!({"name": "simulate-research-query",
               "arguments": {"topic": "python", "ambiguous": true}}),
    )
    .await;
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working");
    assert!(created.get("ttlMs").is_some(), "ttl renamed: {created}");
    assert!(created.get("task").is_none(), "flattened: {created}");
    let task = created["taskId"].as_str().unwrap().to_owned();

    let asking = poll(&c, url, &task, |t| {
        t["status"] == "input_required" && t["inputRequests"].is_object()
    })
    .await;
    let requests = asking["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "one question: {asking}");
    let (key, ask) = requests.iter().next().unwrap();
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert!(
        ask["params"]["message"]
            .as_str()
            .unwrap()
            .contains("multiple interpretations"),
        "{ask}"
    );
    assert!(
        ask["params"]["_meta"]
            .get("io.modelcontextprotocol/related-task")
            .is_none(),
        "related-task _meta stripped: {ask}"
    );

    let ack = ok(
        &c,
        url,
        5,
        "tasks/update",
        json!({"taskId": task, "inputResponses": {
            key: {"action": "accept", "content": {"interpretation": "snake"}}}}),
    )
    .await;
    assert_eq!(ack["resultType"], "complete", "{ack}");

    let done = poll(&c, url, &task, |t| {
        !matches!(t["status"].as_str(), Some("working" | "input_required"))
    })
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    let text = done["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(
        text.contains("Research Report: python (snake)"),
        "the answer reached the tool: {text}"
    );
    assert!(
        done["result"]["_meta"]
            .get("io.modelcontextprotocol/related-task")
            .is_none(),
        "related-task _meta stripped from the inline result"
    );

    // Unknown ids are -32602; tasks/list does not exist in 2026-07-28.
    let mut params = json!({"taskId": "no-such-task"});
    params["_meta"] = meta();
    let (s, body, _) = send(modern(&c, url, 6, "tasks/get", params)).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(body["error"]["code"], -32602, "{body}");
    assert_valid(Revision::Modern, &body, Some("tasks/get"));
    let (s, body, _) = send(modern(&c, url, 7, "tasks/list", json!({}))).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{body}");
    assert_valid(Revision::Modern, &body, Some("tasks/list"));
}
