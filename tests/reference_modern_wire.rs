//! The 2026-07-28 reference server on the raw wire: what an SDK client will
//! not send (no `_meta`, unknown versions, removed methods, invalid params,
//! broken JSON), a client without the tasks extension, and a
//! `subscriptions/listen` stream with `taskIds`. Every message the server
//! emits is validated against the 2026-07-28 schemas.

mod support;

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use support::schema::{Revision, assert_valid};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::timeout;

/// Bound on every single wait for the server.
const STEP: Duration = Duration::from_secs(15);

fn spawn_server() -> Child {
    Command::new(env!("CARGO_BIN_EXE_mcp-tasks-shim"))
        .args(["reference-server", "--revision", "2026-07-28"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the reference server")
}

/// A raw line-level client for what the SDK will not send.
struct Raw {
    child: Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    log: Vec<(String, Value)>,
}

impl Raw {
    fn new() -> Self {
        let mut child = spawn_server();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Raw {
            child,
            lines,
            log: Vec::new(),
        }
    }

    async fn send_line(&mut self, line: &str) {
        if let Ok(v) = serde_json::from_str::<Value>(line) {
            self.log.push(("c2s".into(), v));
        }
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = timeout(STEP, self.lines.next_line())
            .await
            .expect("server answered in time")
            .unwrap()
            .expect("server alive");
        let v: Value = serde_json::from_str(&line).expect("server writes JSON lines");
        self.log.push(("s2c".into(), v.clone()));
        v
    }

    /// Opens listen stream `id` asking `notifications` (the tasks extension
    /// declared) and returns its acknowledgement.
    async fn listen(&mut self, id: &str, notifications: Value) -> Value {
        self.send_line(
            &json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen",
            "params": {"notifications": notifications, "_meta": meta(true)}})
            .to_string(),
        )
        .await;
        let ack = self.next().await;
        assert_valid(Revision::Modern, &ack, None);
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );
        ack
    }

    /// Sends a request and returns its response; notifications seen on the
    /// way are kept in the log.
    async fn call(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send_line(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        )
        .await;
        loop {
            let v = self.next().await;
            if v["id"] == id {
                return v;
            }
        }
    }
}

fn meta(with_tasks: bool) -> Value {
    let caps = if with_tasks {
        json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
    } else {
        json!({})
    };
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}})
}

#[tokio::test(flavor = "multi_thread")]
async fn raw_wire_checks() {
    timeout(Duration::from_secs(60), raw_flow())
        .await
        .expect("raw flow timed out");
}

async fn raw_flow() {
    let mut s = Raw::new();
    let code = |v: &Value| v["error"]["code"].as_i64();

    // Without the extension: tasks/* is -32021 (before any lookup), a
    // task-required tool is -32021, an optional one runs plainly.
    for (i, m) in ["tasks/get", "tasks/cancel"].iter().enumerate() {
        let r = s
            .call(
                i as i64 + 1,
                m,
                json!({"taskId": "x", "_meta": meta(false)}),
            )
            .await;
        assert_eq!(code(&r), Some(-32021), "{r}");
        assert!(r["error"]["data"]["requiredCapabilities"]["extensions"]["io.modelcontextprotocol/tasks"].is_object());
    }
    let r = s
        .call(
            3,
            "tools/call",
            json!({"name": "failing_job", "arguments": {}, "_meta": meta(false)}),
        )
        .await;
    assert_eq!(code(&r), Some(-32021), "{r}");
    let r = s.call(4, "tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "sync"}, "_meta": meta(false)})).await;
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    assert!(r["result"].get("taskId").is_none());

    // Removed methods, missing _meta, unknown version, bad input.
    assert_eq!(
        code(
            &s.call(
                5,
                "tasks/result",
                json!({"taskId": "x", "_meta": meta(true)})
            )
            .await
        ),
        Some(-32601)
    );
    assert_eq!(
        code(&s.call(6, "tasks/list", json!({"_meta": meta(true)})).await),
        Some(-32601)
    );
    assert_eq!(
        code(&s.call(7, "tools/list", json!({})).await),
        Some(-32602)
    );
    let mut old = meta(true);
    old["io.modelcontextprotocol/protocolVersion"] = json!("2025-11-25");
    let r = s.call(8, "tools/list", json!({"_meta": old})).await;
    assert_eq!(code(&r), Some(-32022), "{r}");
    assert_eq!(r["error"]["data"]["supported"], json!(["2026-07-28"]));
    assert_eq!(
        code(
            &s.call(
                9,
                "tasks/get",
                json!({"taskId": "nope", "_meta": meta(true)})
            )
            .await
        ),
        Some(-32602)
    );
    assert_eq!(
        code(
            &s.call(
                10,
                "tools/call",
                json!({"name": "nope", "_meta": meta(true)})
            )
            .await
        ),
        Some(-32602)
    );
    assert_eq!(
        code(
            &s.call(
                11,
                "tools/call",
                json!({"name": "test_tool_with_task", "inputResponses": 5, "_meta": meta(true)})
            )
            .await
        ),
        Some(-32602)
    );
    s.send_line("{not json").await;
    let r = s.next().await;
    assert_eq!(code(&r), Some(-32700), "{r}");

    // A listen stream with taskIds: ack first, then full detailed tasks.
    let r = s.call(12, "tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 0.5, "label": "listen"}, "_meta": meta(true)})).await;
    let task_id = r["result"]["taskId"]
        .as_str()
        .expect("task created")
        .to_owned();
    let r = s
        .call(
            13,
            "subscriptions/listen",
            json!({"notifications": {"taskIds": [task_id]}, "_meta": meta(false)}),
        )
        .await;
    assert_eq!(
        code(&r),
        Some(-32021),
        "listen for tasks needs the extension: {r}"
    );
    let ack = s
        .listen("sub-1", json!({"taskIds": [task_id, "bogus"]}))
        .await;
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([task_id]));
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "sub-1"
    );
    loop {
        let n = s.next().await;
        assert_eq!(n["method"], "notifications/tasks", "{n}");
        assert_eq!(
            n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            "sub-1"
        );
        if n["params"]["status"] == "completed" {
            assert!(
                n["params"]["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap()
                    .contains("listen")
            );
            break;
        }
    }
    // The session survived everything above.
    let r = s
        .call(14, "server/discover", json!({"_meta": meta(true)}))
        .await;
    assert_eq!(r["result"]["supportedVersions"], json!(["2026-07-28"]));

    // Some requests above are invalid on purpose, so only what the server
    // emitted is held to the schema (each response against its request).
    let methods: std::collections::HashMap<String, String> = s
        .log
        .iter()
        .filter(|(d, m)| d == "c2s" && m.get("id").is_some())
        .map(|(_, m)| {
            (
                m["id"].to_string(),
                m["method"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    for (_, m) in s.log.iter().filter(|(d, _)| d == "s2c") {
        let answered = m
            .get("id")
            .and_then(|id| methods.get(&id.to_string()))
            .map(String::as_str);
        assert_valid(Revision::Modern, m, answered);
    }
}

/// At the end of its input the server answers the calls it was asked,
/// but does not wait for an open `subscriptions/listen` stream (which only
/// its client ends): it exits at once, so a shim stopping it is not held
/// for its grace period.
#[tokio::test(flavor = "multi_thread")]
async fn an_open_listen_stream_does_not_hold_the_exit() {
    let mut s = Raw::new();
    s.listen("sub-1", json!({"toolsListChanged": true})).await;
    drop(s.child.stdin.take());
    let started = std::time::Instant::now();
    let status = timeout(STEP, s.child.wait())
        .await
        .expect("the server exits")
        .unwrap();
    assert!(status.success(), "{status}");
    // Held by the stream, it would exit only at the end of its 3 s
    // drain, which begins after its input closed: anything short of that
    // is the exit at once (the widest bound that still tells).
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "took {:?}",
        started.elapsed()
    );
}

/// `external_job` (a fixture third-party suites call) always answers with
/// a task, which completes with a text naming the job; without the
/// extension it is -32021 like every task-only tool, and without `job_id`
/// it is -32602.
#[tokio::test(flavor = "multi_thread")]
async fn external_job_is_a_task_naming_its_job() {
    timeout(Duration::from_secs(60), async {
        let mut s = Raw::new();
        let tools = s
            .call(1, "tools/list", json!({"_meta": meta(true)}))
            .await;
        let tool = tools["result"]["tools"]
            .as_array()
            .and_then(|ts| ts.iter().find(|t| t["name"] == "external_job"))
            .cloned()
            .unwrap_or_else(|| panic!("external_job listed: {tools}"));
        assert_eq!(
            tool["inputSchema"],
            json!({"type": "object", "properties": {"job_id": {"type": "string"}},
                "required": ["job_id"]}),
            "{tool}"
        );
        let r = s
            .call(
                2,
                "tools/call",
                json!({"name": "external_job", "arguments": {"job_id": "j-7"}, "_meta": meta(false)}),
            )
            .await;
        assert_eq!(r["error"]["code"], -32021, "{r}");
        let r = s
            .call(
                3,
                "tools/call",
                json!({"name": "external_job", "arguments": {}, "_meta": meta(true)}),
            )
            .await;
        assert_eq!(r["error"]["code"], -32602, "{r}");
        let r = s
            .call(
                4,
                "tools/call",
                json!({"name": "external_job", "arguments": {"job_id": "j-7"}, "_meta": meta(true)}),
            )
            .await;
        assert_eq!(r["result"]["resultType"], "task", "{r}");
        let task_id = r["result"]["taskId"].as_str().expect("taskId").to_owned();
        s.listen("sub-1", json!({"taskIds": [task_id]})).await;
        let done = loop {
            let n = s.next().await;
            assert_eq!(n["method"], "notifications/tasks", "{n}");
            if n["params"]["status"] != "working" {
                break n;
            }
        };
        assert_eq!(done["params"]["status"], "completed", "{done}");
        assert_eq!(
            done["params"]["result"]["content"][0]["text"],
            "Job j-7 completed by the external worker",
            "{done}"
        );
        let methods: std::collections::HashMap<String, String> = s
            .log
            .iter()
            .filter(|(d, m)| d == "c2s" && m.get("id").is_some())
            .map(|(_, m)| (m["id"].to_string(), m["method"].as_str().unwrap_or("").to_owned()))
            .collect();
        for (_, m) in s.log.iter().filter(|(d, _)| d == "s2c") {
            let answered = m
                .get("id")
                .and_then(|id| methods.get(&id.to_string()))
                .map(String::as_str);
            assert_valid(Revision::Modern, m, answered);
        }
    })
    .await
    .expect("external_job flow timed out");
}
