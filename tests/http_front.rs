//! The shim's Streamable HTTP front through the real binary
//! (`mcp-tasks-shim http --listen 127.0.0.1:0 …`): the HTTP status and
//! JSON-RPC error of every error path of both revisions, principals and
//! task scopes, `/metrics`, and shutdown on SIGTERM.
//!
//! Every JSON-RPC body the shim answers is validated against the schema of
//! its revision.

mod support;

use std::time::{Duration, Instant};

use base64::Engine;
use reqwest::StatusCode;
use serde_json::{Value, json};
use support::http::{
    HttpShim, LEGACY, MODERN, STEP, Sse, alive, children_of, client, initialize, is_sse, legacy,
    modern, modern_meta, rpc, send, set_header,
};
use support::schema::{Revision, assert_valid};
use support::wire::{modern_reference, recorded, recording_upstream, shim_bin, temp_path};

/// The legacy reference server command.
fn legacy_reference() -> Vec<String> {
    vec![
        shim_bin().to_owned(),
        "reference-server".into(),
        "--revision".into(),
        LEGACY.into(),
    ]
}

/// Asserts an error answer: HTTP status, JSON-RPC code, schema-valid body.
#[track_caller]
fn expect_error(
    what: &str,
    got: &(StatusCode, Value),
    status: StatusCode,
    code: i64,
    method: &str,
) {
    let (s, body) = got;
    assert_eq!(*s, status, "{what}: HTTP status (body {body})");
    assert_eq!(
        body["error"]["code"], code,
        "{what}: JSON-RPC code ({body})"
    );
    assert_valid(Revision::Modern, body, Some(method));
}

/// Every modern error path, against a shim in front of `upstream`.
async fn modern_error_paths(upstream: Vec<String>) {
    let shim = HttpShim::spawn(&["--max-body-bytes", "4096"], &upstream);
    let c = client();
    let url = shim.url.as_str();
    let s2 = |r: (StatusCode, Value, _)| (r.0, r.1);

    // The happy paths the error paths are variations of.
    let ok = s2(send(modern(&c, url, 1, "server/discover", json!({}))).await);
    assert_eq!(ok.0, StatusCode::OK, "discover: {}", ok.1);
    assert_valid(Revision::Modern, &ok.1, Some("server/discover"));
    let greet = json!({"name": "greet", "arguments": {"name": "HTTP"}});
    let ok = s2(send(modern(&c, url, 2, "tools/call", greet.clone())).await);
    assert_eq!(ok.0, StatusCode::OK, "greet: {}", ok.1);
    assert_valid(Revision::Modern, &ok.1, Some("tools/call"));
    assert_eq!(ok.1["result"]["content"][0]["text"], "Hello, HTTP!");

    // Mcp-Name in the base64 sentinel form is accepted.
    let enc = format!(
        "=?base64?{}?=",
        base64::engine::general_purpose::STANDARD.encode("greet")
    );
    let ok = s2(send(set_header(
        modern(&c, url, 3, "tools/call", greet.clone()),
        "mcp-name",
        Some(&enc),
    ))
    .await);
    assert_eq!(ok.0, StatusCode::OK, "base64 Mcp-Name: {}", ok.1);
    assert_eq!(ok.1["result"]["content"][0]["text"], "Hello, HTTP!");

    // Missing Mcp-Method: 400 + -32020.
    let mut p = json!({"_meta": modern_meta(true)});
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": p.take()});
    let r = s2(send(
        c.post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("mcp-protocol-version", MODERN)
            .body(body.to_string()),
    )
    .await);
    expect_error(
        "missing Mcp-Method",
        &r,
        StatusCode::BAD_REQUEST,
        -32020,
        "tools/list",
    );

    // Mcp-Method naming another method: 400 + -32020.
    let r = s2(send(set_header(
        modern(&c, url, 5, "tools/list", json!({})),
        "mcp-method",
        Some("prompts/list"),
    ))
    .await);
    expect_error(
        "mismatched Mcp-Method",
        &r,
        StatusCode::BAD_REQUEST,
        -32020,
        "tools/list",
    );

    // Mcp-Name naming another tool: 400 + -32020.
    let r = s2(send(set_header(
        modern(&c, url, 6, "tools/call", greet.clone()),
        "mcp-name",
        Some("other"),
    ))
    .await);
    expect_error(
        "mismatched Mcp-Name",
        &r,
        StatusCode::BAD_REQUEST,
        -32020,
        "tools/call",
    );

    // Mcp-Name missing on tools/call: 400 + -32020.
    let r = s2(send(set_header(
        modern(&c, url, 7, "tools/call", greet.clone()),
        "mcp-name",
        None,
    ))
    .await);
    expect_error(
        "missing Mcp-Name",
        &r,
        StatusCode::BAD_REQUEST,
        -32020,
        "tools/call",
    );

    // MCP-Protocol-Version header disagreeing with the body: 400 + -32020.
    let r = s2(send(set_header(
        modern(&c, url, 8, "tools/list", json!({})),
        "mcp-protocol-version",
        Some("2099-01-01"),
    ))
    .await);
    expect_error(
        "header/body version",
        &r,
        StatusCode::BAD_REQUEST,
        -32020,
        "tools/list",
    );

    // An unsupported version in header and body alike: 400 + -32022.
    let mut meta = modern_meta(true);
    meta["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let r = s2(send(set_header(
        modern(&c, url, 9, "tools/list", json!({"_meta": meta})),
        "mcp-protocol-version",
        Some("2099-01-01"),
    ))
    .await);
    expect_error(
        "unsupported version",
        &r,
        StatusCode::BAD_REQUEST,
        -32022,
        "tools/list",
    );
    assert!(
        r.1["error"]["data"]["supported"]
            .as_array()
            .is_some_and(|v| v.contains(&json!(MODERN))),
        "-32022 names the supported versions: {}",
        r.1
    );

    // No _meta at all (the headers alone say modern): 400 + -32602.
    let body = json!({"jsonrpc": "2.0", "id": 10, "method": "tools/list", "params": {}});
    let r = s2(send(
        c.post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", "tools/list")
            .body(body.to_string()),
    )
    .await);
    expect_error(
        "missing _meta",
        &r,
        StatusCode::BAD_REQUEST,
        -32602,
        "tools/list",
    );

    // tasks/* without the extension declared: 400 + -32021, before the lookup.
    let p = json!({"taskId": "no-such-task", "_meta": modern_meta(false)});
    let r = s2(send(modern(&c, url, 11, "tasks/get", p)).await);
    expect_error(
        "tasks/get without the extension",
        &r,
        StatusCode::BAD_REQUEST,
        -32021,
        "tasks/get",
    );
    assert_eq!(
        r.1["error"]["data"]["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"],
        json!({}),
        "{}",
        r.1
    );

    // With the extension, an unknown task is a plain -32602 (HTTP 200).
    let r = s2(send(modern(
        &c,
        url,
        12,
        "tasks/get",
        json!({"taskId": "no-such-task"}),
    ))
    .await);
    expect_error("unknown task", &r, StatusCode::OK, -32602, "tasks/get");

    // Unknown method, tasks/list, tasks/result: 404 + -32601.
    let r = s2(send(modern(&c, url, 13, "no/such", json!({}))).await);
    expect_error(
        "unknown method",
        &r,
        StatusCode::NOT_FOUND,
        -32601,
        "no/such",
    );
    let r = s2(send(modern(&c, url, 14, "tasks/list", json!({}))).await);
    expect_error(
        "tasks/list",
        &r,
        StatusCode::NOT_FOUND,
        -32601,
        "tasks/list",
    );
    let r = s2(send(modern(&c, url, 15, "tasks/result", json!({"taskId": "x"}))).await);
    expect_error(
        "tasks/result",
        &r,
        StatusCode::NOT_FOUND,
        -32601,
        "tasks/result",
    );

    // The other requests 2026-07-28 lacks are the shim's to refuse, in
    // front of either server: relayed to a modern upstream, `ping` or
    // `logging/setLevel` would reach the session every client shares.
    for (n, method) in ["ping", "logging/setLevel", "resources/subscribe"]
        .into_iter()
        .enumerate()
    {
        let r = s2(send(modern(&c, url, 30 + n as i64, method, json!({}))).await);
        expect_error(method, &r, StatusCode::NOT_FOUND, -32601, method);
        assert_eq!(
            r.1["error"]["message"],
            format!("Method not found: {method} is not a 2026-07-28 method"),
            "{}",
            r.1
        );
    }

    // A 2026-07-28 request with a stray `Mcp-Session-Id` (which its
    // transport ignores) is served, not refused as an unknown session.
    let (s, body, _) =
        send(modern(&c, url, 18, "tools/list", json!({})).header("mcp-session-id", "left-over"))
            .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_valid(Revision::Modern, &body, Some("tools/list"));
    assert!(body["result"]["tools"].is_array(), "{body}");

    // `initialize` from a client whose header says 2026-07-28: what a
    // 2026-07-28 server answers (404 + -32601), not a legacy session.
    let init = json!({"protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "confused", "version": "0"}});
    let (s, body, h) = send(modern(&c, url, 16, "initialize", init)).await;
    expect_error(
        "initialize with a 2026-07-28 header",
        &(s, body.clone()),
        StatusCode::NOT_FOUND,
        -32601,
        "initialize",
    );
    assert!(
        h.get("mcp-session-id").is_none(),
        "no session opened: {body}"
    );
    // ...and one naming no version the shim speaks: 400.
    let init = json!({"protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "future", "version": "0"}});
    let (s, body, h) = send(set_header(
        legacy(&c, url, None, &rpc(17, "initialize", init)),
        "mcp-protocol-version",
        Some("2099-01-01"),
    ))
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert_valid(Revision::Legacy, &body, Some("initialize"));
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert!(
        h.get("mcp-session-id").is_none(),
        "no session opened: {body}"
    );

    // GET / DELETE without a session: 405, Allow: POST.
    for m in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let (s, _, h) = send(
            c.request(m.clone(), url)
                .header("accept", "text/event-stream"),
        )
        .await;
        assert_eq!(s, StatusCode::METHOD_NOT_ALLOWED, "{m} without a session");
        assert_eq!(h.get("allow").map(|v| v.to_str().unwrap()), Some("POST"));
    }

    // A body over --max-body-bytes: 413, with a JSON-RPC error saying so.
    let big = json!({"name": "greet", "arguments": {"name": "x".repeat(8192)}});
    let r = s2(send(modern(&c, url, 16, "tools/call", big)).await);
    expect_error(
        "oversized body",
        &r,
        StatusCode::PAYLOAD_TOO_LARGE,
        -32600,
        "tools/call",
    );

    // Not JSON at all: 400 + -32700.
    let (s, body, _) = send(
        c.post(url)
            .header("content-type", "application/json")
            .body("{not json"),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "parse error: {body}");
    assert_eq!(body["error"]["code"], -32700, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn modern_error_paths_in_front_of_a_legacy_server() {
    modern_error_paths(legacy_reference()).await;
    // A listen the bridge refuses is refused like any request: JSON with
    // the error's status, not an SSE stream that starts with the error.
    let shim = HttpShim::spawn::<String>(&[], &legacy_reference());
    let c = client();
    let p = json!({"notifications": {"taskIds": ["x"]}, "_meta": modern_meta(false)});
    let (s, body, h) = send(modern(&c, &shim.url, 1, "subscriptions/listen", p)).await;
    assert!(!is_sse(&h), "{h:?}");
    expect_error(
        "listen without the extension",
        &(s, body),
        StatusCode::BAD_REQUEST,
        -32021,
        "subscriptions/listen",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn modern_error_paths_in_front_of_a_modern_server() {
    modern_error_paths(modern_reference()).await;
    // Pass-through relays a listen stream to a stdio child too, its filter
    // cut to the caller's own tasks: "x" is no one's, so none is asked for.
    let shim = HttpShim::spawn::<String>(&[], &modern_reference());
    let c = client();
    let p = json!({"notifications": {"taskIds": ["x"]}});
    let resp = tokio::time::timeout(
        STEP,
        modern(&c, &shim.url, 1, "subscriptions/listen", p).send(),
    )
    .await
    .expect("timed out opening the listen stream")
    .expect("listen request failed");
    assert_eq!(resp.status(), StatusCode::OK);
    let ack = Sse::new(resp).next().await.expect("an acknowledgement");
    assert_valid(Revision::Modern, &ack, None);
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([]),
        "{ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 1,
        "{ack}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn legacy_session_paths_and_metrics() {
    let shim = HttpShim::spawn(&[], &modern_reference());
    let c = client();
    let url = shim.url.as_str();

    // No session, not initialize: 400.
    let (s, body, _) = send(legacy(&c, url, None, &rpc(1, "tools/list", json!({})))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert_valid(Revision::Legacy, &body, Some("tools/list"));

    // Unknown session: 404 (POST, GET and DELETE).
    let (s, body, _) = send(legacy(
        &c,
        url,
        Some("nope"),
        &rpc(2, "tools/list", json!({})),
    ))
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{body}");
    assert_valid(Revision::Legacy, &body, None);
    assert_eq!(body["id"], 2, "the error answers the request: {body}");
    for m in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let (s, _, _) = send(c.request(m.clone(), url).header("mcp-session-id", "nope")).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{m} of an unknown session");
    }

    let (sid, init) = initialize(&c, url, None).await;
    assert_eq!(init["protocolVersion"], LEGACY);
    assert!(
        sid.len() >= 22,
        "session id is long enough to be unguessable: {sid}"
    );
    let (s, body, _) = send(legacy(
        &c,
        url,
        Some(&sid),
        &rpc(3, "tools/list", json!({})),
    ))
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_valid(Revision::Legacy, &body, Some("tools/list"));
    let (s, body, _) = send(legacy(&c, url, Some(&sid), &rpc(4, "ping", json!({})))).await;
    assert_eq!(s, StatusCode::OK);
    assert_valid(Revision::Legacy, &body, Some("ping"));
    // A call that asks the client nothing is answered as plain JSON even
    // when the client takes SSE: a stream opens only for a message that
    // comes before the answer (http_legacy_ts covers that side).
    let greet = json!({"name": "greet", "arguments": {"name": "Ada"}});
    let (s, body, h) = send(legacy(&c, url, Some(&sid), &rpc(40, "tools/call", greet))).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert!(!is_sse(&h), "a plain answer on an SSE stream: {h:?}");
    assert_valid(Revision::Legacy, &body, Some("tools/call"));
    assert!(body.to_string().contains("Ada"), "{body}");

    // An unsupported MCP-Protocol-Version: 400 (the 2025-11-25 transport's MUST).
    for v in ["1999-01-01", "2026-07-28"] {
        let (s, body, _) = send(set_header(
            legacy(&c, url, Some(&sid), &rpc(41, "ping", json!({}))),
            "mcp-protocol-version",
            Some(v),
        ))
        .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "version {v}: {body}");
        assert_eq!(body["error"]["code"], -32600, "{body}");
        assert_valid(Revision::Legacy, &body, Some("ping"));
    }

    // DELETE ends it; every later use is 404.
    let (s, _, _) = send(c.delete(url).header("mcp-session-id", &sid)).await;
    assert_eq!(s, StatusCode::OK);
    let (s, body, _) = send(legacy(
        &c,
        url,
        Some(&sid),
        &rpc(5, "tools/list", json!({})),
    ))
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND, "after DELETE: {body}");
    let (s, _, _) = send(c.delete(url).header("mcp-session-id", &sid)).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "second DELETE");

    // A modern request on the same endpoint, then /metrics counts both.
    let (s, body, _) = send(modern(&c, url, 6, "server/discover", json!({}))).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let (s, text, h) = {
        let resp = tokio::time::timeout(
            support::http::STEP,
            c.get(format!("{}/metrics", shim.base)).send(),
        )
        .await
        .unwrap()
        .unwrap();
        let (s, h) = (resp.status(), resp.headers().clone());
        (s, resp.text().await.unwrap(), h)
    };
    assert_eq!(s, StatusCode::OK);
    assert!(
        h["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    for line in [
        r#"mcp_shim_requests_total{revision="2025-11-25",method="initialize"} 1"#,
        r#"mcp_shim_requests_total{revision="2025-11-25",method="tools/list"} 3"#,
        r#"mcp_shim_requests_total{revision="2025-11-25",method="DELETE"} 3"#,
        r#"mcp_shim_requests_total{revision="2026-07-28",method="server/discover"} 1"#,
    ] {
        assert!(text.contains(line), "/metrics lacks {line}:\n{text}");
    }
}

/// A legacy task of `seconds` created in session `sid`, by the bearer of
/// `token` if given.
async fn create_task(
    c: &reqwest::Client,
    url: &str,
    sid: &str,
    token: Option<&str>,
    seconds: u64,
    label: &str,
) -> String {
    let params = json!({"name": "slow_compute", "arguments": {"seconds": seconds, "label": label},
        "task": {"ttl": 60000}});
    let mut req = legacy(c, url, Some(sid), &rpc(10, "tools/call", params));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let (s, body, _) = send(req).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_valid(Revision::Legacy, &body, Some("tools/call"));
    let id = body["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {body}"))
        .to_owned();
    assert_eq!(body["result"]["task"]["status"], "working");
    id
}

/// The task ids `tasks/list` shows in session `sid`.
async fn listed(c: &reqwest::Client, url: &str, sid: &str, token: Option<&str>) -> Vec<String> {
    let mut req = legacy(c, url, Some(sid), &rpc(11, "tasks/list", json!({})));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let (s, body, _) = send(req).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_valid(Revision::Legacy, &body, Some("tasks/list"));
    body["result"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["taskId"].as_str().unwrap().to_owned())
        .collect()
}

/// `text` (a JSON answer, or the one event of an SSE answer) to a legacy
/// `what` is a schema-valid `-32603` whose message contains `cause`.
#[track_caller]
fn assert_internal_error(what: &str, text: &str, cause: &str) {
    let body: Value = text
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .map_or_else(
            || serde_json::from_str(text),
            |d| serde_json::from_str(d.trim()),
        )
        .unwrap_or_else(|e| panic!("{what}: {e}: {text}"));
    assert_valid(Revision::Legacy, &body, Some(what));
    assert_eq!(body["error"]["code"], -32603, "{what}: {body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(cause), "{what}: names {cause:?}: {body}");
}

/// A legacy session with a 30 s task, and two requests of it left waiting:
/// a blocking `tasks/result` of that task answered as JSON, and a plain
/// call the upstream runs as a task (the shim drives it) taking SSE. Each
/// wait ends with its HTTP status and body, or `None` if its connection
/// was cut.
async fn two_waits(
    c: &reqwest::Client,
    url: &str,
) -> (
    String,
    [tokio::task::JoinHandle<Option<(StatusCode, String)>>; 2],
) {
    let (sid, _) = initialize(c, url, None).await;
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "x"},
        "task": {"ttl": 60000}});
    let (s, body, _) = send(legacy(c, url, Some(&sid), &rpc(1, "tools/call", call))).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let task = body["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let waiting = |id: i64, method: &'static str, params: Value, accept: &'static str| {
        let (c, url, sid) = (c.clone(), url.to_owned(), sid.clone());
        tokio::spawn(async move {
            let req = legacy(&c, &url, Some(&sid), &rpc(id, method, params));
            let resp = set_header(req, "accept", Some(accept)).send().await.ok()?;
            Some((resp.status(), resp.text().await.ok()?))
        })
    };
    let result = waiting(
        2,
        "tasks/result",
        json!({"taskId": task}),
        "application/json",
    );
    let driven = waiting(
        3,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "y"}}),
        "application/json, text/event-stream",
    );
    (sid, [result, driven])
}

/// Waits (bounded) until `n` client requests of the shim at `base` wait
/// on watched tasks (`/metrics`): the waits of [`two_waits`] have reached
/// it. Counted as waiters, not as watched tasks: one task's poller and
/// listen stream already make two watches, so a count of watches could be
/// reached before a second request arrived.
async fn waiting_on_tasks(base: &str, n: u64) {
    let (c, url) = (&client(), format!("{base}/metrics"));
    let url = url.as_str();
    let what = format!("{n} requests waiting on tasks");
    support::poll::until_async(&what, Duration::from_secs(20), || async move {
        let text = c.get(url).send().await.ok()?.text().await.ok()?;
        let waiting = text
            .lines()
            .find_map(|l| l.strip_prefix("mcp_shim_task_waiters "))
            .and_then(|v| v.trim().parse::<u64>().ok());
        waiting.is_some_and(|w| w >= n).then_some(())
    })
    .await;
}

/// A DELETE ends the session's waits too: a blocking `tasks/result` and a
/// call whose task the shim drives get an error naming the DELETE at once,
/// instead of waiting out their 30 s tasks to learn "Task not found".
#[tokio::test(flavor = "multi_thread")]
async fn waits_end_with_the_session_that_deleted_them() {
    let shim = HttpShim::spawn(&[], &modern_reference());
    let c = client();
    let url = shim.url.as_str();
    let (sid, [result, driven]) = two_waits(&c, url).await;
    waiting_on_tasks(&shim.base, 2).await;
    assert!(!result.is_finished() && !driven.is_finished(), "both wait");
    let deleted = Instant::now();
    let (s, _, _) = send(c.delete(url).header("mcp-session-id", &sid)).await;
    assert_eq!(s, StatusCode::OK);
    for (what, task) in [("tasks/result", result), ("tools/call", driven)] {
        // Half the tasks' 30 s: an answer by then is the DELETE's.
        let (status, text) = tokio::time::timeout(Duration::from_secs(15), task)
            .await
            .unwrap_or_else(|_| panic!("{what} still waits after the DELETE"))
            .unwrap()
            .unwrap_or_else(|| panic!("{what}: the connection was cut without an answer"));
        assert_eq!(status, StatusCode::OK, "{what}: {text}");
        assert_internal_error(what, &text, "deleted");
    }
    assert!(deleted.elapsed() < Duration::from_secs(15));
}

#[tokio::test(flavor = "multi_thread")]
async fn principals_see_only_their_own_tasks() {
    let shim = HttpShim::spawn(
        &["--token", "alice-secret=alice", "--token", "bob-secret=bob"],
        &modern_reference(),
    );
    let c = client();
    let url = shim.url.as_str();
    let (a1, _) = initialize(&c, url, Some("alice-secret")).await;
    let (a2, _) = initialize(&c, url, Some("alice-secret")).await;
    let (b1, _) = initialize(&c, url, Some("bob-secret")).await;
    let (anon, _) = initialize(&c, url, None).await;

    let alice_task = create_task(&c, url, &a1, Some("alice-secret"), 30, "alice").await;
    let bob_task = create_task(&c, url, &b1, Some("bob-secret"), 30, "bob").await;

    // The principal is the scope: alice's second session lists her task.
    assert_eq!(
        listed(&c, url, &a1, Some("alice-secret")).await,
        vec![alice_task.as_str()]
    );
    assert_eq!(
        listed(&c, url, &a2, Some("alice-secret")).await,
        vec![alice_task.as_str()]
    );
    assert_eq!(
        listed(&c, url, &b1, Some("bob-secret")).await,
        vec![bob_task.as_str()]
    );
    assert!(listed(&c, url, &anon, None).await.is_empty());

    // alice's task is, to bob, exactly an unknown id.
    let random = "0123456789abcdef0123456789abcdef";
    for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
        let mut errors = Vec::new();
        for id in [alice_task.as_str(), random] {
            let (s, body, _) = send(
                legacy(&c, url, Some(&b1), &rpc(20, method, json!({"taskId": id})))
                    .bearer_auth("bob-secret"),
            )
            .await;
            assert_eq!(s, StatusCode::OK, "{method} {id}: {body}");
            assert_valid(Revision::Legacy, &body, Some(method));
            errors.push(body);
        }
        assert_eq!(
            errors[0]["error"]["code"], -32602,
            "{method}: {}",
            errors[0]
        );
        assert_eq!(
            errors[0], errors[1],
            "{method}: foreign id differs from unknown id"
        );
        // Same for a session without a principal.
        let (_, body, _) = send(legacy(
            &c,
            url,
            Some(&anon),
            &rpc(20, method, json!({"taskId": alice_task})),
        ))
        .await;
        assert_eq!(body, errors[1], "{method} (anonymous)");
    }

    // bob's failed cancel left alice's task alone; she can still cancel it.
    let (_, body, _) = send(
        legacy(
            &c,
            url,
            Some(&a2),
            &rpc(21, "tasks/get", json!({"taskId": alice_task})),
        )
        .bearer_auth("alice-secret"),
    )
    .await;
    assert_eq!(body["result"]["status"], "working", "{body}");
    for (sid, token, id) in [
        (&a2, "alice-secret", &alice_task),
        (&b1, "bob-secret", &bob_task),
    ] {
        let (_, body, _) = send(
            legacy(
                &c,
                url,
                Some(sid),
                &rpc(22, "tasks/cancel", json!({"taskId": id})),
            )
            .bearer_auth(token),
        )
        .await;
        assert_eq!(body["result"]["status"], "cancelled", "{body}");
    }

    // Principal-scoped tasks outlive the session that created them (which
    // only its principal may end).
    let (s, _, _) = send(c.delete(url).header("mcp-session-id", &a1)).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "DELETE without alice's token");
    let (s, _, _) = send(
        c.delete(url)
            .header("mcp-session-id", &a1)
            .bearer_auth("alice-secret"),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(
        listed(&c, url, &a2, Some("alice-secret")).await,
        vec![alice_task.as_str()]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn require_principal_refuses_anonymous_tasks_list() {
    let shim = HttpShim::spawn(
        &["--require-principal", "--token", "alice-secret=alice"],
        &modern_reference(),
    );
    let c = client();
    let url = shim.url.as_str();
    let (anon, _) = initialize(&c, url, None).await;
    let (s, body, _) = send(legacy(
        &c,
        url,
        Some(&anon),
        &rpc(1, "tasks/list", json!({})),
    ))
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert_valid(Revision::Legacy, &body, Some("tasks/list"));
    // A wrong token is refused outright.
    let (s, _, _) =
        send(legacy(&c, url, Some(&anon), &rpc(2, "tasks/list", json!({}))).bearer_auth("wrong"))
            .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (alice, _) = initialize(&c, url, Some("alice-secret")).await;
    assert!(
        listed(&c, url, &alice, Some("alice-secret"))
            .await
            .is_empty()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_stops_the_shim_and_its_upstream() {
    let mut shim = HttpShim::spawn(&[], &modern_reference());
    let c = client();
    let url = shim.url.clone();
    let (s, _, _) = send(modern(&c, &url, 1, "server/discover", json!({}))).await;
    assert_eq!(s, StatusCode::OK);
    let upstream = children_of(shim.pid());
    assert_eq!(upstream.len(), 1, "one upstream child: {upstream:?}");
    assert!(alive(upstream[0]));

    // A call still running when the signal arrives: a legacy plain call of
    // a tool the upstream runs as a task, driven to its end by the shim.
    let (sid, _) = initialize(&c, &url, None).await;
    // And an open GET stream, which would never end by itself.
    let get = tokio::time::timeout(
        support::http::STEP,
        c.get(&url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &sid)
            .send(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(get.status(), StatusCode::OK);
    let pending = tokio::spawn({
        let c = c.clone();
        let url = url.clone();
        async move {
            let params =
                json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "late"}});
            let req = legacy(&c, &url, Some(&sid), &rpc(2, "tools/call", params));
            match set_header(req, "accept", Some("application/json"))
                .send()
                .await
            {
                Ok(resp) => Some((resp.status(), resp.text().await.unwrap_or_default())),
                Err(_) => None,
            }
        }
    });
    // The shim drives the call's task: it is in flight.
    waiting_on_tasks(&shim.base, 1).await;

    let start = Instant::now();
    let status = tokio::task::spawn_blocking(move || {
        let st = shim.terminate(Duration::from_secs(20));
        (st, shim)
    })
    .await
    .unwrap();
    let (status, _shim) = status;
    let status = status.expect("the shim exits within 20 s of SIGTERM");
    let took = start.elapsed();
    // Half the pending call's 30 s: the shim did not wait for it.
    assert!(took < Duration::from_secs(15), "SIGTERM took {took:?}");
    assert!(status.success(), "clean exit on SIGTERM: {status}");
    let pid = upstream[0];
    let gone = tokio::task::spawn_blocking(move || {
        support::http::gone_within(pid, Duration::from_secs(10))
    });
    assert!(gone.await.unwrap(), "the upstream child is gone");
    // The pending call was answered with an error naming the shutdown,
    // not cut off with an empty reply.
    let answer = tokio::time::timeout(Duration::from_secs(5), pending)
        .await
        .expect("the pending call ended")
        .unwrap();
    let (status, body) = answer.expect("the pending call got an answer, not a closed connection");
    let body: Value = serde_json::from_str(&body).expect("a JSON-RPC answer");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["error"]["code"], -32603,
        "pending call answered with an error: {body}"
    );
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("shutting down")),
        "{body}"
    );
    assert_valid(Revision::Legacy, &body, Some("tools/call"));
}

/// In front of a 2026-07-28 server over HTTP, a legacy client's method
/// that no such server can have (its name cannot travel in `Mcp-Method`)
/// is unknown, as any other unknown method: not a 2026-only header error
/// (`-32020`), not "upstream unreachable" (`-32603`).
#[tokio::test(flavor = "multi_thread")]
async fn unsendable_method_names_are_unknown_methods() {
    let upstream = support::http::HttpReference::start(MODERN, &[]);
    let shim = HttpShim::spawn::<&str>(&["--upstream-url", &upstream.url], &[]);
    let c = client();
    let url = shim.url.as_str();
    let (sid, _) = initialize(&c, url, None).await;
    for (i, method) in ["nope/é", "a\nb", "a\u{1}b", " ", "nope/x"]
        .into_iter()
        .enumerate()
    {
        let (s, body, _) = send(legacy(
            &c,
            url,
            Some(&sid),
            &rpc(50 + i as i64, method, json!({})),
        ))
        .await;
        assert_eq!(s, StatusCode::OK, "{method:?}: {body}");
        assert_eq!(body["error"]["code"], -32601, "{method:?}: {body}");
        assert_valid(Revision::Legacy, &body, None);
    }
    // The session goes on.
    let (s, body, _) = send(legacy(&c, url, Some(&sid), &rpc(60, "ping", json!({})))).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_valid(Revision::Legacy, &body, Some("ping"));
}

/// On SIGTERM, a legacy client's blocking `tasks/result` and a call the
/// shim drives, both waiting on tasks of an HTTP upstream (which nothing
/// fails when the shim stops), are answered `-32603` naming the shutdown,
/// as JSON and as SSE, instead of having their connections cut.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_answers_the_waits_on_an_http_upstream() {
    let upstream = support::http::HttpReference::start(MODERN, &[]);
    let mut shim = HttpShim::spawn::<&str>(&["--upstream-url", &upstream.url], &[]);
    let c = client();
    let (_, [result, driven]) = two_waits(&c, &shim.url).await;
    let waits = [("tasks/result", result), ("tools/call", driven)];
    waiting_on_tasks(&shim.base, 2).await;
    let status = tokio::task::spawn_blocking(move || shim.terminate(Duration::from_secs(20)))
        .await
        .unwrap()
        .expect("the shim exits within 20 s of SIGTERM");
    assert!(status.success(), "{status}");
    for (what, wait) in waits {
        let (status, text) = tokio::time::timeout(Duration::from_secs(15), wait)
            .await
            .unwrap_or_else(|_| panic!("{what} still waits"))
            .unwrap()
            .unwrap_or_else(|| panic!("{what}: the connection was cut without an answer"));
        assert_eq!(status, StatusCode::OK, "{what}: {text}");
        assert_internal_error(what, &text, "shutting down");
    }
}

/// An `--upstream-url` nobody answers at start ends the shim with an
/// error naming it, within the probe's time, instead of a shim that
/// believes it is a 2025-11-25 server for the rest of its run.
#[test]
fn an_unreachable_upstream_url_at_start_is_an_error() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let out = tempfile::NamedTempFile::new().unwrap();
    let mut child = std::process::Command::new(shim_bin())
        .args(["http", "--listen", "127.0.0.1:0", "--upstream-url", &url])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(out.reopen().unwrap())
        .spawn()
        .unwrap();
    let status = support::wire::exited_within(
        &mut child,
        Duration::from_secs(10),
        "the shim with an unreachable upstream",
    );
    let stderr = std::fs::read_to_string(out.path()).unwrap();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot probe") && stderr.contains(&url),
        "{stderr}"
    );
    assert!(!stderr.contains("listening on"), "{stderr}");
}

/// A 2026-07-28 client over HTTP cancels a request by closing its
/// response (the transport's "Cancellation": no `notifications/cancelled`
/// is sent there). In front of a 2025-11-25 server, the shim then cancels
/// the upstream call under its own id, as it does for a relayed one.
#[tokio::test(flavor = "multi_thread")]
async fn a_modern_client_hanging_up_cancels_its_call_upstream() {
    let (sent, got) = (temp_path("hangup-sent"), temp_path("hangup-got"));
    let shim = HttpShim::spawn(&[], &recording_upstream(&legacy_reference(), &sent, &got));
    let c = client();
    let url = shim.url.as_str();
    // A plain call (no tasks extension) that works for 20 s; the client
    // gives up after half a second, which drops its connection.
    let call = modern(
        &c,
        url,
        7,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 20, "label": "gone"},
               "_meta": modern_meta(false)}),
    )
    .timeout(Duration::from_millis(500));
    assert!(call.send().await.is_err(), "the call answered within 0.5 s");
    let deadline = Instant::now() + Duration::from_secs(5);
    let upstream_call = recorded(&sent, deadline, |m| {
        m["method"] == "tools/call" && m["params"]["arguments"]["label"] == "gone"
    });
    let cancel = recorded(&sent, deadline, |m| {
        m["method"] == "notifications/cancelled"
    });
    assert_eq!(
        cancel["params"]["requestId"], upstream_call["id"],
        "{cancel}"
    );
    // The shim serves on.
    let (s, body, _) = send(modern(&c, url, 8, "tools/list", json!({}))).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_valid(Revision::Modern, &body, Some("tools/list"));
    let _ = std::fs::remove_file(&sent);
    let _ = std::fs::remove_file(&got);
}

/// Under `--log-format json` every stderr line is one JSON object: the
/// log events, the address the shim listens on, and the upstream child's
/// own stderr (here a line of plain text), which used to be copied as is.
#[test]
fn json_logs_are_one_object_per_line_upstream_stderr_included() {
    use std::io::{BufRead, BufReader};
    let inner = modern_reference()
        .iter()
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut shim = Killed(
        std::process::Command::new(shim_bin())
            .args([
                "--log-format",
                "json",
                "--log",
                "info",
                "http",
                "--listen",
                "127.0.0.1:0",
                "--",
            ])
            .args([
                "sh",
                "-c",
                &format!("echo 'plain upstream complaint' >&2; exec {inner}"),
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn the shim"),
    );
    let stderr = shim.0.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut lines = Vec::new();
    let (mut listening, mut complaint) = (false, false);
    while !(listening && complaint) && Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {line}"));
        let message = v["fields"]["message"].as_str().unwrap_or_default();
        listening |= message.starts_with("listening on http://127.0.0.1:");
        complaint |= message == "plain upstream complaint";
        lines.push(v);
    }
    assert!(listening && complaint, "{lines:#?}");
}

/// The same over an `--upstream-url` 2025-11-25 server: a dropped HTTP
/// connection is no cancel to it (its transport says so), so the shim
/// sends `notifications/cancelled` for the call it abandoned, which the
/// server acts on (it logs the cancel).
#[tokio::test(flavor = "multi_thread")]
async fn a_modern_client_hanging_up_cancels_its_call_on_a_url_upstream() {
    use std::io::{BufRead, BufReader};
    let mut server = Killed(
        std::process::Command::new(shim_bin())
            .args(["--log", "info", "reference-server", "--revision", LEGACY])
            .args(["--http", "127.0.0.1:0"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start the reference server"),
    );
    let (tx, rx) = std::sync::mpsc::channel();
    for pipe in [
        Box::new(server.0.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
        Box::new(server.0.stderr.take().unwrap()),
    ] {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
    }
    let wait_for = |what: &str| -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(line) = rx.recv_timeout(Duration::from_millis(100))
                && line.contains(what)
            {
                return line;
            }
        }
        panic!("the reference server never said {what:?}");
    };
    let listening = wait_for("listening on http://");
    let url = listening
        .split("listening on ")
        .nth(1)
        .unwrap()
        .trim()
        .to_owned();
    let shim = HttpShim::spawn::<&str>(&["--upstream-url", &url], &[]);
    let c = client();
    let call = modern(
        &c,
        &shim.url,
        7,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 20, "label": "gone"},
               "_meta": modern_meta(false)}),
    )
    .timeout(Duration::from_millis(500));
    assert!(call.send().await.is_err(), "the call answered within 0.5 s");
    wait_for("request cancelled by the client");
}

/// A child process killed when the test ends, passed or not.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Reads what the server sends on `s` until it closes the connection or
/// `within` passes; `None` if it was still open then.
fn read_until_closed(s: &mut std::net::TcpStream, within: Duration) -> Option<String> {
    use std::io::Read;
    let deadline = std::time::Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return None;
        }
        s.set_read_timeout(Some(left.min(Duration::from_millis(200))))
            .unwrap();
        match s.read(&mut buf) {
            Ok(0) => return Some(String::from_utf8_lossy(&got).into_owned()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(String::from_utf8_lossy(&got).into_owned()),
        }
    }
}

/// How long a test waits for the shim to close a connection its timeout or
/// cap should close: a failure guard, not a measurement. It is well short of
/// hyper's own 30 s header read timeout and of the 60 s read timeout of the
/// capped shim below, so a close within it is the configured limit at work,
/// yet long enough for a busy 2-core machine.
const CUT_WITHIN: Duration = Duration::from_secs(15);

/// Slow clients cannot hold the shim's connections: headers trickled past
/// `--read-timeout` close the connection, a body trickled past it gets
/// 408 (in JSON-RPC), and past `--max-connections` new connections are
/// closed as they come. Before, all of these stayed open indefinitely.
#[test]
fn slow_clients_are_cut_off() {
    use std::io::Write;
    use std::net::TcpStream;
    // The cap, on a shim whose read timeout (60 s) cannot close anything
    // while the test looks: the three connections hold every slot.
    let capped = HttpShim::spawn(
        &["--read-timeout", "60s", "--max-connections", "3"],
        &legacy_reference(),
    );
    let addr = capped.base.trim_start_matches("http://").to_owned();
    let held: Vec<TcpStream> = (0..3)
        .map(|_| {
            let mut s = TcpStream::connect(&addr).unwrap();
            s.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\n").unwrap();
            s
        })
        .collect();
    // The shim accepts in connection order and takes a slot as it accepts,
    // so the fourth is over the cap however late the first three were seen.
    let mut fourth = TcpStream::connect(&addr).unwrap();
    let refused = read_until_closed(&mut fourth, CUT_WITHIN);
    assert_eq!(
        refused.as_deref(),
        Some(""),
        "the fourth connection is closed at once, not held to the read timeout"
    );
    drop(held);
    drop(capped);

    let shim = HttpShim::spawn(&["--read-timeout", "1s"], &legacy_reference());
    let addr = shim.base.trim_start_matches("http://").to_owned();
    // Half a request head, then nothing.
    let mut head = TcpStream::connect(&addr).unwrap();
    head.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\n")
        .unwrap();
    // A whole head, then 3 of 100 body bytes.
    let mut body = TcpStream::connect(&addr).unwrap();
    body.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"j").unwrap();
    let answer = read_until_closed(&mut body, CUT_WITHIN).expect("answered and closed");
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("did not arrive within"), "{answer}");
    // The body is a JSON-RPC error (no id: the request never arrived).
    let refusal: Value = answer
        .split_once("\r\n\r\n")
        .and_then(|(_, b)| serde_json::from_str(b).ok())
        .unwrap_or_else(|| panic!("a JSON-RPC body: {answer}"));
    assert_valid(Revision::Legacy, &refusal, None);
    assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
    let cut = read_until_closed(&mut head, CUT_WITHIN);
    assert!(cut.is_some(), "a trickled head is cut off");

    // The shim still serves.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = client();
        let (status, _, _) = send(modern(&c, &shim.url, 1, "tools/list", json!({}))).await;
        assert_eq!(status, StatusCode::OK);
    });

    // A keep-alive connection left idle after its request holds its slot
    // no longer than the read timeout either.
    let mut idle = TcpStream::connect(&addr).unwrap();
    idle.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let served = read_until_closed(&mut idle, CUT_WITHIN).expect("served, then closed when idle");
    assert!(served.starts_with("HTTP/1.1 200"), "{served}");
}

/// One whole HTTP response read from `s` (head, and a body of its
/// `content-length`), or `None` if it has not all arrived within `within`.
fn read_response(s: &mut std::net::TcpStream, within: Duration) -> Option<String> {
    use std::io::Read;
    let deadline = std::time::Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if body.len() >= len {
                return Some(text);
            }
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return None;
        }
        s.set_read_timeout(Some(left.min(Duration::from_millis(200))))
            .unwrap();
        match s.read(&mut buf) {
            Ok(0) => return Some(text),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(text),
        }
    }
}

/// A request whose declared `Content-Length` is above `--max-body-bytes`
/// is answered 413 from its head alone. Before, the shim waited for the
/// body it would refuse, and a client that sent none held the request
/// until the read timeout (here a minute: far past the guard).
#[test]
fn a_declared_body_over_the_limit_is_refused_before_it_is_sent() {
    use std::io::Write;
    let shim = HttpShim::spawn(
        &["--max-body-bytes", "4096", "--read-timeout", "60s"],
        &legacy_reference(),
    );
    let addr = shim.base.trim_start_matches("http://").to_owned();
    for mcp_headers in [
        "",
        "Mcp-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\n",
    ] {
        let mut s = std::net::TcpStream::connect(&addr).unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\n{mcp_headers}\
             Content-Length: 10000000\r\n\r\n"
        );
        s.write_all(head.as_bytes()).unwrap();
        // No body byte is ever sent.
        let answer = read_response(&mut s, Duration::from_secs(10))
            .expect("answered without the body (not at the 60 s read timeout)");
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        let refusal: Value = answer
            .split_once("\r\n\r\n")
            .and_then(|(_, b)| serde_json::from_str(b).ok())
            .unwrap_or_else(|| panic!("a JSON-RPC body: {answer}"));
        assert_valid(Revision::Legacy, &refusal, None);
        assert_valid(Revision::Modern, &refusal, None);
        assert_eq!(refusal["error"]["code"], -32600, "{refusal}");
        let message = refusal["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("--max-body-bytes"), "{refusal}");
    }
}

/// A 2026-07-28 task created through `url` with `slow_compute`; its id.
async fn modern_task(c: &reqwest::Client, url: &str) -> String {
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "named"}});
    let (s, body, _) = send(modern(c, url, 1, "tools/call", call)).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_valid(Revision::Modern, &body, Some("tools/call"));
    assert_eq!(body["result"]["resultType"], "task", "{body}");
    body["result"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {body}"))
        .to_owned()
}

/// `tasks/get` of `task` with `Mcp-Name` set to `name` (`None`: left out).
async fn get_named(
    c: &reqwest::Client,
    url: &str,
    task: &str,
    name: Option<&str>,
) -> (StatusCode, Value) {
    let req = modern(c, url, 2, "tasks/get", json!({"taskId": task}));
    let (s, body, _) = send(set_header(req, "mcp-name", name)).await;
    assert_valid(Revision::Modern, &body, Some("tasks/get"));
    (s, body)
}

/// A widely used 2026-07-28 client leaves `Mcp-Name` out of `tasks/get`.
/// By default that is `-32020`, as SEP-2243 says; with
/// `--accept-missing-mcp-name` the request is served (the body names the
/// task), counted in `/metrics`, and the first of the caller is logged at
/// warn. A mismatched `Mcp-Name` is refused either way. Both paths the
/// check guards: translating (a 2025-11-25 upstream) and relaying (a
/// 2026-07-28 one).
async fn missing_mcp_name(upstream: Vec<String>) {
    let c = client();
    let strict = HttpShim::spawn::<String>(&[], &upstream);
    let task = modern_task(&c, &strict.url).await;
    let (s, body) = get_named(&c, &strict.url, &task, None).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], -32020, "{body}");
    let (s, body) = get_named(&c, &strict.url, &task, Some(&task)).await;
    assert_eq!(s, StatusCode::OK, "{body}");

    let lenient = HttpShim::spawn(&["--accept-missing-mcp-name"], &upstream);
    let url = lenient.url.as_str();
    let task = modern_task(&c, url).await;
    for _ in 0..2 {
        let (s, body) = get_named(&c, url, &task, None).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        assert_eq!(body["result"]["taskId"], task.as_str(), "{body}");
    }
    let (s, body) = get_named(&c, url, &task, Some("another-task")).await;
    assert_eq!(
        s,
        StatusCode::BAD_REQUEST,
        "a mismatch is still refused: {body}"
    );
    assert_eq!(body["error"]["code"], -32020, "{body}");
    let cancel = set_header(
        modern(&c, url, 3, "tasks/cancel", json!({"taskId": task})),
        "mcp-name",
        None,
    );
    let (s, body, _) = send(cancel).await;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_valid(Revision::Modern, &body, Some("tasks/cancel"));

    let text = tokio::time::timeout(
        support::http::STEP,
        c.get(format!("{}/metrics", lenient.base)).send(),
    )
    .await
    .expect("metrics in time")
    .expect("metrics")
    .text()
    .await
    .expect("metrics body");
    assert!(
        text.lines()
            .any(|l| l == "mcp_shim_missing_mcp_name_total 3"),
        "{text}"
    );
    let warned = lenient
        .wait_logged("without the Mcp-Name header", support::http::STEP)
        .await;
    assert_eq!(
        warned.len(),
        1,
        "only the caller's first is logged: {warned:?}"
    );
    assert!(warned[0].contains("WARN"), "{warned:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_mcp_name_in_front_of_a_legacy_server() {
    missing_mcp_name(legacy_reference()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_mcp_name_in_front_of_a_modern_server() {
    missing_mcp_name(modern_reference()).await;
}

/// A legacy client polling `tasks/get` in front of an HTTP server hears
/// the same upstream answer while the task works (the shim answers those
/// from its memo of the last one, unread), and still hears the task end
/// when the upstream says so. No sleep: the polls follow one another until
/// the end or a bound.
#[tokio::test]
async fn polls_that_hear_nothing_new_still_hear_the_end() {
    let upstream = support::http::HttpReference::start(MODERN, &[]);
    let shim = HttpShim::spawn::<&str>(&["--upstream-url", &upstream.url], &[]);
    let c = client();
    let url = shim.url.as_str();
    let (sid, init) = initialize(&c, url, None).await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "result": init});
    assert_valid(Revision::Legacy, &init, Some("initialize"));
    // Long enough for several polls on a busy machine, short for a test.
    let task_id = create_task(&c, url, &sid, None, 2, "polled").await;
    let started = Instant::now();
    let mut working = 0;
    let last = loop {
        let poll = rpc(11 + working, "tasks/get", json!({"taskId": task_id}));
        let (s, body, _) = send(legacy(&c, url, Some(&sid), &poll)).await;
        assert_eq!(s, StatusCode::OK, "{body}");
        assert_valid(Revision::Legacy, &body, Some("tasks/get"));
        let status = body["result"]["status"].clone();
        if status != "working" || started.elapsed() > STEP {
            break status;
        }
        working += 1;
    };
    assert!(working >= 3, "polls while the task works: {working}");
    assert_eq!(last, "completed", "after {working} polls of a working task");
}
