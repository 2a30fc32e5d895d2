//! Shared by the `modern_front_*` tests: the shim binary in front of a
//! legacy server (`mcp-tasks-shim stdio -- <upstream>`), driven by a raw
//! line-level 2026-07-28 client whose every received message is checked
//! against the 2026-07-28 schemas.
#![allow(dead_code, unreachable_pub)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::timeout;

use crate::support::schema::{Revision, validate};

/// Bound on every single wait for the shim.
pub const STEP: Duration = Duration::from_secs(15);

pub const SHIM: &str = env!("CARGO_BIN_EXE_mcp-tasks-shim");

/// The legacy reference server, as an upstream command line.
pub fn legacy_reference() -> Vec<String> {
    vec![
        SHIM.into(),
        "reference-server".into(),
        "--revision".into(),
        "2025-11-25".into(),
    ]
}

/// `tests/peers`, failing loudly when its npm packages are not installed.
pub fn peers_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers");
    for package in [
        "@modelcontextprotocol/sdk",
        "@modelcontextprotocol/server-everything",
    ] {
        assert!(
            dir.join("node_modules").join(package).is_dir(),
            "tests/peers/node_modules/{package} is missing: run scripts/test.sh \
             (it runs `npm ci --prefix tests/peers` first)"
        );
    }
    dir
}

/// A fresh path for a `--record` transcript.
pub fn record_path(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "{name}-{}-{}.jsonl",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    let _ = std::fs::remove_file(&path);
    path
}

/// `mcp-tasks-shim stdio [shim_args] -- upstream…`, stdio piped.
pub fn spawn_shim(shim_args: &[&str], upstream: &[String]) -> Child {
    Command::new(SHIM)
        .arg("stdio")
        .args(shim_args)
        .arg("--")
        .args(upstream)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the shim")
}

/// The modern `_meta` of one request.
pub fn meta(with_tasks: bool) -> Value {
    meta_with(with_tasks, true)
}

pub fn meta_with(with_tasks: bool, elicitation: bool) -> Value {
    let mut caps = json!({});
    if with_tasks {
        caps["extensions"] = json!({"io.modelcontextprotocol/tasks": {}});
    }
    if elicitation {
        caps["elicitation"] = json!({"form": {}});
    }
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-modern-client", "version": "1"}})
}

/// A raw 2026-07-28 client of the shim. Every message the shim sends is
/// validated against the 2026-07-28 schemas as it arrives.
pub struct Raw {
    child: Child,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    /// Methods of the requests sent, by id (for result validation).
    sent: HashMap<String, String>,
    /// Messages received but not yet consumed by `call`/`next_matching`.
    backlog: Vec<Value>,
    next_id: i64,
    /// Everything the shim sent.
    pub received: Vec<Value>,
}

impl Raw {
    pub fn new(shim_args: &[&str], upstream: &[String]) -> Self {
        let mut child = spawn_shim(shim_args, upstream);
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Raw {
            child,
            lines,
            sent: HashMap::new(),
            backlog: Vec::new(),
            next_id: 100,
            received: Vec::new(),
        }
    }

    pub async fn send(&mut self, msg: Value) {
        if let (Some(id), Some(m)) = (msg.get("id"), msg["method"].as_str()) {
            self.sent.insert(id.to_string(), m.to_owned());
        }
        let stdin = self.child.stdin.as_mut().expect("shim stdin open");
        stdin
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// Sends a request with a fresh id; returns the id.
    pub async fn request(&mut self, method: &str, params: Value) -> i64 {
        self.next_id += 1;
        let id = self.next_id;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    async fn read(&mut self) -> Value {
        let line = timeout(STEP, self.lines.next_line())
            .await
            .expect("the shim answered in time")
            .expect("read the shim's output")
            .expect("the shim is alive");
        let v: Value = serde_json::from_str(&line).expect("the shim writes JSON lines");
        let answered = v
            .get("id")
            .filter(|_| v.get("method").is_none())
            .and_then(|id| self.sent.get(&id.to_string()))
            .cloned();
        if let Err(e) = validate(Revision::Modern, &v, answered.as_deref()) {
            panic!("the shim sent an invalid 2026-07-28 message: {e}\n{v}");
        }
        self.received.push(v.clone());
        v
    }

    /// The next received message that `pred` accepts; others stay queued.
    pub async fn next_matching(&mut self, pred: impl Fn(&Value) -> bool) -> Value {
        if let Some(i) = self.backlog.iter().position(&pred) {
            return self.backlog.remove(i);
        }
        loop {
            let v = self.read().await;
            if pred(&v) {
                return v;
            }
            self.backlog.push(v);
        }
    }

    /// The response to request `id`.
    pub async fn response(&mut self, id: i64) -> Value {
        self.next_matching(|v| v["id"] == id && v.get("method").is_none())
            .await
    }

    /// Sends a request and returns its whole response.
    pub async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params).await;
        self.response(id).await
    }

    /// `call` with the modern `_meta` added to `params`; returns the result,
    /// panicking on an error response.
    pub async fn ok(&mut self, method: &str, mut params: Value, with_tasks: bool) -> Value {
        params["_meta"] = meta(with_tasks);
        let r = self.call(method, params).await;
        assert!(r.get("error").is_none(), "{method}: {r}");
        r["result"].clone()
    }

    /// `call` with the modern `_meta`; returns the error object.
    pub async fn err(&mut self, method: &str, mut params: Value, with_tasks: bool) -> Value {
        params["_meta"] = meta(with_tasks);
        let r = self.call(method, params).await;
        assert!(
            r.get("result").is_none(),
            "{method}: expected an error, got {r}"
        );
        r["error"].clone()
    }

    /// Creates a task with `tools/call` (the extension declared).
    pub async fn create(&mut self, tool: &str, args: Value) -> String {
        let r = self
            .ok("tools/call", json!({"name": tool, "arguments": args}), true)
            .await;
        assert_eq!(r["resultType"], "task", "{tool}: {r}");
        assert!(r.get("task").is_none(), "flattened: {r}");
        r["taskId"].as_str().expect("taskId").to_owned()
    }

    /// Polls `tasks/get` until `done` accepts the result.
    pub async fn poll(&mut self, task_id: &str, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + STEP;
        loop {
            let t = self.ok("tasks/get", json!({"taskId": task_id}), true).await;
            assert_eq!(t["resultType"], "complete", "{t}");
            if done(&t) {
                return t;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "task {task_id} stuck: {t}"
            );
            let pause = t["pollIntervalMs"].as_u64().unwrap_or(100).min(250);
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }

    /// Closes the shim's stdin and waits for it to exit (it stops its
    /// upstream first, killing it after a grace period).
    pub async fn close(mut self) {
        drop(self.child.stdin.take());
        let status = timeout(Duration::from_secs(10), self.child.wait())
            .await
            .expect("the shim exits when its client goes away")
            .unwrap();
        assert!(status.success(), "shim exit status {status}");
    }
}

pub fn terminal(t: &Value) -> bool {
    matches!(
        t["status"].as_str(),
        Some("completed" | "failed" | "cancelled")
    )
}

pub fn has_input(t: &Value) -> bool {
    t["status"] == "input_required" && t["inputRequests"].is_object()
}

/// The keys of a task's `inputRequests`.
pub fn input_keys(t: &Value) -> Vec<String> {
    t["inputRequests"]
        .as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// The first text content of a result.
pub fn text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
