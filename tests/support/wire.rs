//! A raw JSON-RPC line driver for the shim binary (`mcp-tasks-shim stdio`):
//! spawn it, write lines to its stdin, read lines from its stdout.
//!
//! - Every message the shim sends is validated against the schema of the
//!   revision the driver speaks ([`Wire::rev`]), with the method of the
//!   request it answers.
//! - Requests from the shim (elicitation) are answered automatically
//!   ([`Wire::auto_answer`]), unless a test takes them itself with
//!   [`Wire::next`].
//! - Every wait is bounded; a missed deadline fails the test.
//!
//! ```ignore
//! let mut shim = Wire::legacy_front(&["--page-size", "2"]);
//! shim.initialize();
//! let r = shim.call("tools/list", json!({}));
//! ```

use std::collections::{HashMap, VecDeque};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use wait_timeout::ChildExt;

use super::schema::{Revision, assert_valid};

/// How long one request may take before the test fails.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// Waits for `child` to exit, at most `within`: its status, or (the child
/// killed) a panic saying `what` was still running.
#[track_caller]
pub fn exited_within(child: &mut Child, within: Duration, what: &str) -> ExitStatus {
    if let Some(status) = child.wait_timeout(within).expect("wait for the child") {
        return status;
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("{what} was still running {within:?} later");
}

/// The shim binary under test.
pub fn shim_bin() -> &'static str {
    env!("CARGO_BIN_EXE_mcp-tasks-shim")
}

/// The modern reference server command.
pub fn modern_reference() -> Vec<String> {
    vec![
        shim_bin().to_owned(),
        "reference-server".into(),
        "--revision".into(),
        "2026-07-28".into(),
    ]
}

/// One thing read from the shim.
#[derive(Debug)]
enum Line {
    Json(Value),
    NotJson(String),
    Eof,
}

/// The driver.
pub struct Wire {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    /// The revision spoken (and validated against).
    pub rev: Revision,
    next_id: i64,
    /// Our request ids → method, for validating the answers.
    sent: HashMap<String, String>,
    /// Messages read but not yet consumed by a test.
    backlog: VecDeque<Value>,
    /// Every message the shim sent, in order.
    pub received: Vec<Value>,
    /// Answer requests from the shim automatically while waiting.
    pub auto_answer: bool,
    /// The requests the driver answered automatically.
    pub answered: Vec<Value>,
    eof: bool,
}

impl Wire {
    /// `mcp-tasks-shim stdio <flags> -- <modern reference server>`.
    pub fn legacy_front(flags: &[&str]) -> Wire {
        Wire::spawn(flags, &modern_reference())
    }

    /// `mcp-tasks-shim stdio <flags> -- <upstream…>`.
    pub fn spawn<S: AsRef<str>>(flags: &[&str], upstream: &[S]) -> Wire {
        let mut cmd = Command::new(shim_bin());
        cmd.arg("stdio").args(flags).arg("--");
        cmd.args(upstream.iter().map(AsRef::as_ref));
        cmd.env("RUST_LOG", "warn");
        Wire::from_command(cmd, Revision::Legacy)
    }

    /// Runs `cmd` with piped stdin/stdout (stderr inherited).
    pub fn from_command(mut cmd: Command, rev: Revision) -> Wire {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn the shim");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if line.trim().is_empty() {
                    continue;
                }
                let item = match serde_json::from_str(&line) {
                    Ok(v) => Line::Json(v),
                    Err(_) => Line::NotJson(line),
                };
                if tx.send(item).is_err() {
                    return;
                }
            }
            let _ = tx.send(Line::Eof);
        });
        Wire {
            stdin: child.stdin.take(),
            child,
            lines,
            rev,
            next_id: 1,
            sent: HashMap::new(),
            backlog: VecDeque::new(),
            received: Vec::new(),
            auto_answer: true,
            answered: Vec::new(),
            eof: false,
        }
    }

    /// The shim's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Writes one raw line (a newline is added).
    pub fn send_raw(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin still open");
        writeln!(stdin, "{line}").expect("write to the shim");
        stdin.flush().expect("flush to the shim");
    }

    /// Writes one message.
    pub fn send(&mut self, msg: &Value) {
        self.send_raw(&msg.to_string());
    }

    /// Sends a request with a fresh id; returns the id.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.sent.insert(id.to_string(), method.to_owned());
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            msg["params"] = params;
        }
        self.send(&msg);
        id
    }

    /// Sends a notification.
    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request and waits for its answer (the whole response message).
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.request(method, params);
        self.response(&id)
    }

    /// [`Wire::call`], expecting success; returns `result`.
    #[track_caller]
    pub fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        match r.get("result") {
            Some(result) => result.clone(),
            None => panic!("{method} failed: {r}"),
        }
    }

    /// [`Wire::call`], expecting an error; returns `error`.
    #[track_caller]
    pub fn err(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params);
        match r.get("error") {
            Some(e) => e.clone(),
            None => panic!("{method} succeeded, expected an error: {r}"),
        }
    }

    /// `initialize` (declaring elicitation) + `notifications/initialized`.
    pub fn initialize(&mut self) -> Value {
        let result = self.ok(
            "initialize",
            json!({"protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {"form": {}}},
                "clientInfo": {"name": "legacy-front-wire", "version": "1.0.0"}}),
        );
        self.notify("notifications/initialized", json!({}));
        result
    }

    /// Waits for the response to `id`, keeping everything else in the backlog.
    #[track_caller]
    pub fn response(&mut self, id: &Value) -> Value {
        let deadline = Instant::now() + REQUEST_TIMEOUT;
        if let Some(i) = self.backlog.iter().position(|m| is_answer_to(m, id)) {
            return self.backlog.remove(i).expect("index in range");
        }
        loop {
            let msg = self.read(deadline).unwrap_or_else(|| {
                panic!(
                    "no answer to request {id} within {REQUEST_TIMEOUT:?}; received: {:#?}",
                    self.received
                )
            });
            if is_answer_to(&msg, id) {
                return msg;
            }
            self.backlog.push_back(msg);
        }
    }

    /// The next message not yet consumed (from the backlog first), within
    /// `timeout`; `None` at end of output or on timeout.
    pub fn next(&mut self, timeout: Duration) -> Option<Value> {
        if let Some(m) = self.backlog.pop_front() {
            return Some(m);
        }
        let saved = std::mem::replace(&mut self.auto_answer, false);
        let m = self.read(Instant::now() + timeout);
        self.auto_answer = saved;
        m
    }

    /// Puts `msg` back in front of the backlog, for the next
    /// [`Wire::next`] or [`Wire::response`].
    pub fn unread(&mut self, msg: Value) {
        self.backlog.push_front(msg);
    }

    /// Drains the backlog (notifications and the like seen so far).
    pub fn take_backlog(&mut self) -> Vec<Value> {
        self.backlog.drain(..).collect()
    }

    /// Reads one message from the shim (validating it, answering it when it
    /// is a request and `auto_answer` is on); `None` at EOF or deadline.
    fn read(&mut self, deadline: Instant) -> Option<Value> {
        loop {
            if self.eof {
                return None;
            }
            let wait = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(wait) {
                Ok(l) => l,
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => Line::Eof,
            };
            let msg = match line {
                Line::Json(v) => v,
                Line::NotJson(l) => panic!("the shim wrote a line that is not JSON: {l}"),
                Line::Eof => {
                    self.eof = true;
                    return None;
                }
            };
            let answered = msg
                .get("id")
                .filter(|_| msg.get("method").is_none())
                .and_then(|id| self.sent.remove(&id.to_string()));
            assert_valid(self.rev, &msg, answered.as_deref());
            self.received.push(msg.clone());
            if self.auto_answer && msg.get("method").is_some() && msg.get("id").is_some() {
                let answer = auto_answer(&msg);
                self.answered.push(msg);
                self.send(&answer);
                continue;
            }
            return Some(msg);
        }
    }

    /// Closes the shim's stdin (the client goes away).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Waits for the shim to exit, reading (and validating) what it still
    /// writes; `None` if it is still running after `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        while let Some(m) = self.read(deadline) {
            self.backlog.push_back(m);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        self.child.wait_timeout(left).expect("wait for the shim")
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_answer_to(msg: &Value, id: &Value) -> bool {
    msg.get("method").is_none() && msg.get("id") == Some(id)
}

/// What a cooperative user answers: accept, filling every requested field
/// (`confirm` → true, `name` → "Alice", other booleans true, strings "x").
pub fn auto_answer(req: &Value) -> Value {
    let id = req["id"].clone();
    match req["method"].as_str() {
        Some("elicitation/create") => {
            let mut content = serde_json::Map::new();
            if let Some(props) = req
                .pointer("/params/requestedSchema/properties")
                .and_then(Value::as_object)
            {
                for (k, schema) in props {
                    let v = match (k.as_str(), schema["type"].as_str()) {
                        ("name", _) => json!("Alice"),
                        (_, Some("boolean")) => json!(true),
                        (_, Some("number" | "integer")) => json!(1),
                        _ => json!("x"),
                    };
                    content.insert(k.clone(), v);
                }
            }
            json!({"jsonrpc": "2.0", "id": id, "result": {"action": "accept", "content": content}})
        }
        Some("ping") => json!({"jsonrpc": "2.0", "id": id, "result": {}}),
        _ => json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32601, "message": "Method not found"}}),
    }
}

/// The first text content of a tool result.
pub fn text_of(result: &Value) -> &str {
    result
        .pointer("/content/0/text")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// A fresh path in the temp dir for this test process.
pub fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "mcp-tasks-shim-{}-{}-{name}",
        std::process::id(),
        unique()
    ))
}

/// A process-unique counter.
pub fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

/// `upstream…` behind `sh -c` with `tee`s: every line the shim writes to
/// it is appended to `sent`, every line it writes back to `got`. The
/// traffic stays unchanged; a test reads what the upstream was really told.
pub fn recording_upstream<S: AsRef<str>>(
    upstream: &[S],
    sent: &std::path::Path,
    got: &std::path::Path,
) -> Vec<String> {
    let inner = upstream
        .iter()
        .map(|a| format!("'{}'", a.as_ref()))
        .collect::<Vec<_>>()
        .join(" ");
    vec![
        "sh".into(),
        "-c".into(),
        format!(
            "tee -a '{}' | {inner} | tee -a '{}'",
            sent.display(),
            got.display()
        ),
    ]
}

/// The JSON lines of a file a [`recording_upstream`] writes (none yet: empty).
pub fn read_jsonl(path: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The first line in the upstream recording `path` that `pred` accepts,
/// waiting for it until `deadline`.
#[track_caller]
pub fn recorded(path: &std::path::Path, deadline: Instant, pred: impl Fn(&Value) -> bool) -> Value {
    let what = format!("a matching line in {}", path.display());
    let within = deadline.saturating_duration_since(Instant::now());
    super::poll::until(&what, within, || {
        read_jsonl(path).into_iter().find(|m| pred(m))
    })
}
