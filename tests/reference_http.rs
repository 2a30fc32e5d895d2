//! The reference servers over Streamable HTTP (`/mcp`).
//!
//! Modern (2026-07-28): the request metadata headers and the HTTP status of
//! each modern error, a task polled to completion, a `subscriptions/listen`
//! SSE stream. Legacy (2025-11-25): sessions (minted, required, deleted),
//! and a task whose elicitation travels on the SSE stream of `tasks/result`.
//! Every JSON-RPC message the servers emit is validated against the schemas
//! of its revision.

mod support;

use std::time::Duration;

use base64::Engine;
use futures_util::StreamExt;
use reqwest::{Client, RequestBuilder, StatusCode};
use serde_json::{Value, json};
use support::schema::{Revision, assert_valid};
use tokio::time::timeout;

/// Bound on every single wait for the server.
const STEP: Duration = Duration::from_secs(15);
const BOTH: &str = "application/json, text/event-stream";
const EXT: &str = "io.modelcontextprotocol/tasks";

/// Serves `rev` in-process on a free loopback port; returns the endpoint URL.
async fn start(rev: Revision) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(mcp_tasks_shim::reference::serve_http_on(rev, listener));
    format!("http://{addr}/mcp")
}

fn client() -> Client {
    Client::builder().connect_timeout(STEP).build().unwrap()
}

/// Sends and reads a whole JSON answer: (status, body or Null, headers).
async fn send(req: RequestBuilder) -> (StatusCode, Value, reqwest::header::HeaderMap) {
    let resp = timeout(STEP, req.send()).await.expect("timed out").unwrap();
    let (status, headers) = (resp.status(), resp.headers().clone());
    let bytes = timeout(STEP, resp.bytes())
        .await
        .expect("timed out")
        .unwrap();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, body, headers)
}

/// Reads `message` events off an SSE response.
struct Sse {
    stream: futures_util::stream::BoxStream<'static, reqwest::Result<axum::body::Bytes>>,
    buf: String,
}

impl Sse {
    fn new(resp: reqwest::Response) -> Self {
        let ct = resp.headers()["content-type"].to_str().unwrap().to_owned();
        assert!(ct.starts_with("text/event-stream"), "not SSE: {ct}");
        Sse {
            stream: resp.bytes_stream().boxed(),
            buf: String::new(),
        }
    }

    /// The next JSON-RPC message, `None` once the stream ends.
    async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let data: Vec<&str> = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect();
                if !data.is_empty() {
                    return Some(serde_json::from_str(&data.join("\n")).unwrap());
                }
                continue; // a keep-alive comment
            }
            let chunk = timeout(STEP, self.stream.next())
                .await
                .expect("SSE timed out")?;
            self.buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        }
    }
}

// ---------------------------------------------------------------------------
// Modern
// ---------------------------------------------------------------------------

fn meta(ext: bool) -> Value {
    let caps = if ext {
        json!({"extensions": {EXT: {}}})
    } else {
        json!({})
    };
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "reference-http-test", "version": "0"}})
}

fn modern(id: i64, method: &str, mut params: Value, ext: bool) -> Value {
    params["_meta"] = meta(ext);
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A POST with the headers a conforming client derives from the body.
fn modern_post(c: &Client, url: &str, body: &Value) -> RequestBuilder {
    modern_post_with(c, url, body, &[])
}

/// [`modern_post`] with some headers replaced (`None` removes one).
fn modern_post_with(
    c: &Client,
    url: &str,
    body: &Value,
    overrides: &[(&'static str, Option<&str>)],
) -> RequestBuilder {
    use reqwest::header::{HeaderMap, HeaderValue};
    let method = body["method"].as_str().unwrap_or_default();
    let mut h = HeaderMap::new();
    h.insert("accept", HeaderValue::from_static(BOTH));
    h.insert(
        "mcp-protocol-version",
        HeaderValue::from_static("2026-07-28"),
    );
    h.insert("mcp-method", method.parse().unwrap());
    let name = match method {
        "tools/call" => body["params"]["name"].as_str(),
        "tasks/get" | "tasks/update" | "tasks/cancel" => body["params"]["taskId"].as_str(),
        _ => None,
    };
    if let Some(n) = name {
        h.insert("mcp-name", n.parse().unwrap());
    }
    for (k, v) in overrides {
        match v {
            Some(v) => h.insert(*k, v.parse().unwrap()),
            None => h.remove(*k),
        };
    }
    c.post(url).headers(h).json(body)
}

/// Posts, checks the status, validates the body; returns it.
async fn modern_call(c: &Client, url: &str, body: Value, want: StatusCode) -> Value {
    let (status, answer, _) = send(modern_post(c, url, &body)).await;
    assert_eq!(status, want, "{body} → {answer}");
    assert_valid(Revision::Modern, &answer, body["method"].as_str());
    answer
}

/// An error answer's code, after checking status and schema.
async fn modern_error(req: RequestBuilder, want: StatusCode, method: Option<&str>) -> i64 {
    let (status, body, _) = send(req).await;
    assert_eq!(status, want, "{body}");
    assert_valid(Revision::Modern, &body, method);
    body["error"]["code"].as_i64().expect("an error answer")
}

#[tokio::test]
async fn modern_header_checks_and_their_http_statuses() {
    let (url, c) = (start(Revision::Modern).await, client());
    let list = modern(1, "tools/list", json!({}), true);
    let greet = modern(
        2,
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "A"}}),
        true,
    );
    let bad = StatusCode::BAD_REQUEST;
    let bare = |b: &Value| c.post(&url).header("accept", BOTH).json(b);

    // Missing or mismatching Mcp-Method / Mcp-Name / MCP-Protocol-Version: -32020.
    let with = |b: &Value, o: &[(&'static str, Option<&str>)]| modern_post_with(&c, &url, b, o);
    let get = modern(3, "tasks/get", json!({"taskId": "abc"}), true);
    for (body, o) in [
        (&list, ("mcp-method", None)),
        (&list, ("mcp-method", Some("tools/call"))),
        (&list, ("mcp-protocol-version", None)),
        (&list, ("mcp-protocol-version", Some("2025-11-25"))),
        (&greet, ("mcp-name", None)),
        (&greet, ("mcp-name", Some("other"))),
        (&get, ("mcp-name", None)),
        (&get, ("mcp-name", Some("xyz"))),
    ] {
        assert_eq!(
            modern_error(with(body, &[o]), bad, None).await,
            -32020,
            "{o:?}"
        );
    }
    let twice = modern_post(&c, &url, &list).header("mcp-method", "tools/list");
    assert_eq!(modern_error(twice, bad, None).await, -32020);

    // The base64 sentinel form of Mcp-Name is decoded before comparing.
    let enc = format!(
        "=?base64?{}?=",
        base64::engine::general_purpose::STANDARD.encode("greet")
    );
    let (status, body, _) = send(with(&greet, &[("mcp-name", Some(&enc))])).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["content"][0]["text"], "Hello, A!");

    // Unsupported version (-32022), missing capability (-32021), missing _meta: 400.
    let mut old = modern(4, "tools/list", json!({}), true);
    old["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("1999-01-01");
    let req = with(&old, &[("mcp-protocol-version", Some("1999-01-01"))]);
    assert_eq!(modern_error(req, bad, None).await, -32022);
    let no_ext = modern(5, "tasks/get", json!({"taskId": "abc"}), false);
    assert_eq!(
        modern_error(modern_post(&c, &url, &no_ext), bad, None).await,
        -32021
    );
    let required = modern(
        6,
        "tools/call",
        json!({"name": "failing_job", "arguments": {}}),
        false,
    );
    assert_eq!(
        modern_error(modern_post(&c, &url, &required), bad, None).await,
        -32021
    );
    let no_meta = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}});
    assert_eq!(
        modern_error(modern_post(&c, &url, &no_meta), bad, None).await,
        -32602
    );

    // Unknown and removed methods: 404 + -32601.
    for (i, m) in ["tasks/result", "tasks/list", "no/such"]
        .into_iter()
        .enumerate()
    {
        let body = modern(10 + i as i64, m, json!({"taskId": "abc"}), true);
        assert_eq!(
            modern_error(modern_post(&c, &url, &body), StatusCode::NOT_FOUND, None).await,
            -32601
        );
    }
    // Unknown task: -32602 with 200 (a JSON-RPC error, not an HTTP one).
    let unknown = modern_call(
        &c,
        &url,
        modern(20, "tasks/get", json!({"taskId": "abc"}), true),
        StatusCode::OK,
    )
    .await;
    assert_eq!(unknown["error"]["code"], -32602);

    // No GET / DELETE in 2026-07-28; notifications are accepted; broken JSON is 400.
    for m in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let (status, ..) = send(c.request(m, &url).header("accept", BOTH)).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    }
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, ..) = send(bare(&note)).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let broken = bare(&json!(null)).body("{not json");
    assert_eq!(modern_error(broken, bad, None).await, -32700);
    let foreign = modern_post(&c, &url, &list).header("origin", "https://evil.example");
    assert_eq!(send(foreign).await.0, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn modern_task_polled_to_completion_and_ids_do_not_collide() {
    let (url, c) = (start(Revision::Modern).await, client());
    let d = modern_call(
        &c,
        &url,
        modern(1, "server/discover", json!({}), true),
        StatusCode::OK,
    )
    .await;
    assert!(d["result"]["capabilities"]["extensions"][EXT].is_object());

    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0.3, "label": "http"}});
    let created = modern_call(
        &c,
        &url,
        modern(2, "tools/call", call, true),
        StatusCode::OK,
    )
    .await;
    assert_eq!(created["result"]["resultType"], "task");
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    let done = poll(&c, &url, &task, "completed").await;
    assert!(
        done["result"]["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("http")
    );

    // Mid-task input: inputRequests in tasks/get, answered with tasks/update.
    let call = json!({"name": "confirm_delete", "arguments": {"filename": "a.txt"}});
    let created = modern_call(
        &c,
        &url,
        modern(3, "tools/call", call, true),
        StatusCode::OK,
    )
    .await;
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();
    let waiting = poll(&c, &url, &task, "input_required").await;
    let key = waiting["result"]["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let answer = json!({"taskId": task, "inputResponses": {key: {"action": "accept", "content": {"confirm": true}}}});
    modern_call(
        &c,
        &url,
        modern(4, "tasks/update", answer, true),
        StatusCode::OK,
    )
    .await;
    let done = poll(&c, &url, &task, "completed").await;
    assert_eq!(
        done["result"]["result"]["content"][0]["text"],
        "Deleted a.txt"
    );

    // Two clients using the same request id at once each get their own answer.
    let slow = modern(
        7,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0.5, "label": "x"}}),
        false,
    );
    let quick = modern(
        7,
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "B"}}),
        false,
    );
    let (a, b) = tokio::join!(
        modern_call(&c, &url, slow, StatusCode::OK),
        modern_call(&c, &url, quick, StatusCode::OK)
    );
    assert!(
        a["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("'x'"),
        "{a}"
    );
    assert_eq!(b["result"]["content"][0]["text"], "Hello, B!");
    assert_eq!((a["id"].clone(), b["id"].clone()), (json!(7), json!(7)));
}

/// Polls `tasks/get` until `status` (or a terminal one); returns the answer.
async fn poll(c: &Client, url: &str, task: &str, status: &str) -> Value {
    let what = format!("task {task} to reach {status}");
    support::poll::until_async(&what, Duration::from_secs(15), || async move {
        let id = 1000 + support::wire::unique() as i64;
        let get = modern(id, "tasks/get", json!({"taskId": task}), true);
        let v = modern_call(c, url, get, StatusCode::OK).await;
        let s = v["result"]["status"].as_str().unwrap();
        if s == status || ["completed", "failed", "cancelled"].contains(&s) {
            assert_eq!(s, status, "{v}");
            return Some(v);
        }
        None
    })
    .await
}

#[tokio::test]
async fn modern_listen_stream_delivers_task_notifications() {
    let (url, c) = (start(Revision::Modern).await, client());
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0.5, "label": "listen"}});
    let created = modern_call(
        &c,
        &url,
        modern(1, "tools/call", call, true),
        StatusCode::OK,
    )
    .await;
    let task = created["result"]["taskId"].as_str().unwrap().to_owned();

    let listen = modern(
        2,
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [task]}}),
        true,
    );
    let resp = timeout(STEP, modern_post(&c, &url, &listen).send())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut sse = Sse::new(resp);
    let ack = sse.next().await.expect("an acknowledgement");
    assert_valid(Revision::Modern, &ack, None);
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        2
    );
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([task]));
    loop {
        let n = sse.next().await.expect("notifications until the task ends");
        assert_valid(Revision::Modern, &n, None);
        assert_eq!(n["method"], "notifications/tasks");
        assert_eq!(n["params"]["taskId"], task.as_str());
        assert_eq!(
            n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            2
        );
        if n["params"]["status"] == "completed" {
            assert!(n["params"]["result"]["content"].is_array());
            break;
        }
    }
    // Listening for tasks without the extension: -32021 as a 400, no stream.
    let no_ext = modern(
        3,
        "subscriptions/listen",
        json!({"notifications": {"taskIds": [task]}}),
        false,
    );
    assert_eq!(
        modern_error(
            modern_post(&c, &url, &no_ext),
            StatusCode::BAD_REQUEST,
            None
        )
        .await,
        -32021
    );
}

#[tokio::test]
async fn modern_client_accepting_only_sse_gets_sse() {
    let (url, c) = (start(Revision::Modern).await, client());
    let body = modern(1, "tools/list", json!({}), false);
    let req = modern_post_with(&c, &url, &body, &[("accept", Some("text/event-stream"))]);
    let resp = timeout(STEP, req.send()).await.unwrap().unwrap();
    let mut sse = Sse::new(resp);
    let answer = sse.next().await.expect("the answer");
    assert_valid(Revision::Modern, &answer, Some("tools/list"));
    assert_eq!(answer["id"], 1);
    assert!(
        sse.next().await.is_none(),
        "the stream ends after the answer"
    );
}

// ---------------------------------------------------------------------------
// Legacy
// ---------------------------------------------------------------------------

fn initialize(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {"form": {}}},
        "clientInfo": {"name": "reference-http-test", "version": "0"}}})
}

fn legacy_post(c: &Client, url: &str, session: Option<&str>, body: &Value) -> RequestBuilder {
    let mut req = c.post(url).header("accept", BOTH).json(body);
    if let Some(s) = session {
        req = req
            .header("mcp-session-id", s)
            .header("mcp-protocol-version", "2025-11-25");
    }
    req
}

/// Opens a session; returns its id.
async fn open_session(c: &Client, url: &str) -> String {
    let (status, body, headers) = send(legacy_post(c, url, None, &initialize(1))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_valid(Revision::Legacy, &body, Some("initialize"));
    assert_eq!(body["result"]["protocolVersion"], "2025-11-25");
    let sid = headers["mcp-session-id"].to_str().unwrap().to_owned();
    assert_eq!(sid.len(), 32, "a 128-bit session id");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        send(legacy_post(c, url, Some(&sid), &note)).await.0,
        StatusCode::ACCEPTED
    );
    sid
}

#[tokio::test]
async fn legacy_sessions_are_minted_required_and_deleted() {
    let (url, c) = (start(Revision::Legacy).await, client());
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (status, body, _) = send(legacy_post(&c, &url, None, &list)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_valid(Revision::Legacy, &body, None);

    let sid = open_session(&c, &url).await;
    let other = open_session(&c, &url).await;
    assert_ne!(sid, other);
    let (status, body, _) = send(legacy_post(&c, &url, Some(&sid), &list)).await;
    assert_eq!(status, StatusCode::OK);
    assert_valid(Revision::Legacy, &body, Some("tools/list"));
    assert_eq!(
        body["result"]["tools"][1]["execution"]["taskSupport"],
        "optional"
    );

    let (status, ..) = send(legacy_post(&c, &url, Some("0123456789abcdef"), &list)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let bad_version = c
        .post(&url)
        .header("accept", BOTH)
        .header("mcp-session-id", &sid)
        .header("mcp-protocol-version", "1999-01-01")
        .json(&list);
    assert_eq!(send(bad_version).await.0, StatusCode::BAD_REQUEST);
    assert_eq!(
        send(c.get(&url).header("accept", "text/event-stream"))
            .await
            .0,
        StatusCode::BAD_REQUEST
    );

    let (status, ..) = send(c.delete(&url).header("mcp-session-id", &sid)).await;
    assert_eq!(status, StatusCode::OK);
    let (status, body, _) = send(legacy_post(&c, &url, Some(&sid), &list)).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, ..) = send(c.delete(&url).header("mcp-session-id", &sid)).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The other session lives on.
    assert_eq!(
        send(legacy_post(&c, &url, Some(&other), &list)).await.0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn legacy_task_elicitation_travels_on_the_tasks_result_stream() {
    let (url, c) = (start(Revision::Legacy).await, client());
    let sid = open_session(&c, &url).await;
    let get = c
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid);
    let mut unsolicited = Sse::new(timeout(STEP, get.send()).await.unwrap().unwrap());

    // A task-augmented call answers with its CreateTaskResult (as SSE).
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "confirm_delete", "arguments": {"filename": "b.txt"}, "task": {"ttl": 60000}}});
    let resp = timeout(STEP, legacy_post(&c, &url, Some(&sid), &call).send())
        .await
        .unwrap()
        .unwrap();
    let created = Sse::new(resp).next().await.expect("the CreateTaskResult");
    assert_valid(Revision::Legacy, &created, Some("tools/call"));
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();

    // tasks/result: the elicitation first, on the same stream…
    let result =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result", "params": {"taskId": task}});
    let resp = timeout(STEP, legacy_post(&c, &url, Some(&sid), &result).send())
        .await
        .unwrap()
        .unwrap();
    let mut stream = Sse::new(resp);
    let ask = stream.next().await.expect("an elicitation");
    assert_valid(Revision::Legacy, &ask, None);
    assert_eq!(ask["method"], "elicitation/create");
    assert_eq!(
        ask["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task.as_str()
    );
    let answer = json!({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"confirm": true}}});
    assert_valid(Revision::Legacy, &answer, Some("elicitation/create"));
    assert_eq!(
        send(legacy_post(&c, &url, Some(&sid), &answer)).await.0,
        StatusCode::ACCEPTED
    );

    // …then the final result, which ends the stream.
    let done = stream.next().await.expect("the final result");
    assert_valid(Revision::Legacy, &done, Some("tasks/result"));
    assert_eq!(done["id"], 3);
    assert_eq!(done["result"]["content"][0]["text"], "Deleted b.txt");
    assert_eq!(
        done["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
        task.as_str()
    );
    assert!(stream.next().await.is_none());

    // The GET stream saw the status changes, ending in completed.
    loop {
        let n = unsolicited.next().await.expect("status notifications");
        assert_valid(Revision::Legacy, &n, None);
        assert_eq!(n["method"], "notifications/tasks/status");
        if n["params"]["status"] == "completed" {
            break;
        }
    }
}

#[tokio::test]
async fn legacy_question_before_the_task_travels_on_the_tools_call_stream() {
    let (url, c) = (start(Revision::Legacy).await, client());
    let sid = open_session(&c, &url).await;
    let call = json!({"jsonrpc": "2.0", "id": "call-1", "method": "tools/call", "params": {
        "name": "test_tool_with_task", "arguments": {}, "task": {}}});
    let resp = timeout(STEP, legacy_post(&c, &url, Some(&sid), &call).send())
        .await
        .unwrap()
        .unwrap();
    let mut stream = Sse::new(resp);
    let ask = stream.next().await.expect("the name question");
    assert_valid(Revision::Legacy, &ask, None);
    assert_eq!(ask["method"], "elicitation/create");
    let answer = json!({"jsonrpc": "2.0", "id": ask["id"],
        "result": {"action": "accept", "content": {"name": "Ada"}}});
    assert_eq!(
        send(legacy_post(&c, &url, Some(&sid), &answer)).await.0,
        StatusCode::ACCEPTED
    );
    let created = stream.next().await.expect("the CreateTaskResult");
    assert_valid(Revision::Legacy, &created, Some("tools/call"));
    assert_eq!(created["id"], "call-1");
    let task = created["result"]["task"]["taskId"].as_str().unwrap();
    assert!(stream.next().await.is_none());

    let result =
        json!({"jsonrpc": "2.0", "id": 9, "method": "tasks/result", "params": {"taskId": task}});
    let mut stream = Sse::new(
        timeout(STEP, legacy_post(&c, &url, Some(&sid), &result).send())
            .await
            .unwrap()
            .unwrap(),
    );
    let done = stream.next().await.expect("the final result");
    assert_valid(Revision::Legacy, &done, Some("tasks/result"));
    assert!(
        done["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("Ada")
    );
}

#[tokio::test]
async fn cli_http_flag_serves_and_prints_the_url() {
    use tokio::io::AsyncBufReadExt;
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-tasks-shim"))
        .args([
            "reference-server",
            "--revision",
            "2026-07-28",
            "--http",
            "127.0.0.1:0",
        ])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = timeout(STEP, lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let url = line.split_whitespace().last().unwrap().to_owned();
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{line}"
    );
    let d = modern_call(
        &client(),
        &url,
        modern(1, "server/discover", json!({}), true),
        StatusCode::OK,
    )
    .await;
    assert_eq!(d["result"]["supportedVersions"], json!(["2026-07-28"]));
    child.kill().await.unwrap();
}
