//! The bench's MCP clients: one over a child process's stdio, one over
//! Streamable HTTP. Both speak either revision and know two hot-path
//! requests (`tools/call greet` and `tasks/get` of a long-running task).
//!
//! Setup messages are built as `Value`s and every one sent or received is
//! validated against the schema of the revision spoken; the hot-path
//! requests are pre-rendered once (only the id changes), validated once,
//! and their answers are only checked for the id and the absence of an
//! error, so the client costs the same, little, in every scenario.

use std::collections::VecDeque;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::schema::{self, Revision};

/// Bound on every single wait for an answer.
pub(crate) const STEP: Duration = Duration::from_secs(20);
const MODERN: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";
const EXT: &str = "io.modelcontextprotocol/tasks";
const BOTH: &str = "application/json, text/event-stream";

pub(crate) type Error = Box<dyn std::error::Error + Send + Sync>;
pub(crate) type Result<T> = std::result::Result<T, Error>;

/// One hot-path request, pre-rendered without its id.
#[derive(Debug, Clone)]
pub(crate) struct Op {
    pub(crate) method: &'static str,
    /// `Mcp-Name` (modern HTTP): the tool name or the task id.
    name: String,
    /// The message after `"id":N,`, up to (without) the closing brace.
    rest: String,
}

impl Op {
    fn new(method: &'static str, name: &str, params: &Value) -> Op {
        Op {
            method,
            name: name.to_owned(),
            rest: format!("\"method\":\"{method}\",\"params\":{params}"),
        }
    }

    fn line(&self, id: i64) -> String {
        format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},{}}}", self.rest)
    }
}

/// The per-request `_meta` a modern client sends, declaring the extension.
fn modern_meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "overhead-bench", "version": "0"},
    })
}

fn with_meta(rev: Revision, mut params: Value) -> Value {
    if rev == Revision::Modern {
        params["_meta"] = modern_meta();
    }
    params
}

/// `tools/call` of the reference servers' `greet`, under the name the
/// target lists it by (a gateway that namespaces its backends renames it).
fn greet_op(rev: Revision, tool: &str) -> Op {
    let p = with_meta(rev, json!({"name": tool, "arguments": {"name": "bench"}}));
    Op::new("tools/call", tool, &p)
}

fn get_op(rev: Revision, task_id: &str) -> Op {
    let p = with_meta(rev, json!({"taskId": task_id}));
    Op::new("tasks/get", task_id, &p)
}

/// The `tools/call` that starts a task that outlives the bench.
fn create_params(rev: Revision) -> Value {
    let mut p = json!({"name": "slow_compute",
        "arguments": {"seconds": 3600, "label": "overhead-bench"}});
    match rev {
        Revision::Modern => with_meta(rev, p),
        Revision::Legacy => {
            p["task"] = json!({"ttl": 3_600_000});
            p
        }
    }
}

fn task_id_of(rev: Revision, result: &Value) -> Result<String> {
    let id = match rev {
        Revision::Modern => result.get("taskId"),
        Revision::Legacy => result.pointer("/task/taskId"),
    };
    id.and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| format!("no task created: {result}").into())
}

fn initialize_params() -> Value {
    json!({"protocolVersion": LEGACY, "capabilities": {},
        "clientInfo": {"name": "overhead-bench", "version": "0"}})
}

/// Validates one message of `rev`; `answered` is the method of the
/// request a response answers.
fn check(rev: Revision, msg: &Value, answered: Option<&str>) -> Result<()> {
    schema::validate(rev, msg, answered).map_err(|e| format!("invalid {rev} message: {e}").into())
}

/// What the hot path reads of an answer.
#[derive(Deserialize)]
struct Reply {
    id: Option<i64>,
    method: Option<IgnoredAny>,
    error: Option<Value>,
}

/// Classifies one line: `Some(id)` for a successful answer, `None` for
/// traffic to skip (notifications), an error for an error answer.
fn reply_id(bytes: &[u8]) -> Result<Option<i64>> {
    let r: Reply = serde_json::from_slice(bytes).map_err(|e| {
        format!(
            "unreadable answer ({e}): {}",
            String::from_utf8_lossy(bytes)
        )
    })?;
    if r.method.is_some() {
        return Ok(None);
    }
    if let Some(e) = r.error {
        return Err(format!("error answer: {e}").into());
    }
    Ok(r.id)
}

/// The hot-path requests of a connected, set-up client.
#[derive(Debug, Clone)]
pub(crate) struct Ops {
    pub(crate) greet: Op,
    /// `None` for a target that is only measured on `tools/call` (a
    /// gateway that does not forward the tasks utility).
    pub(crate) get: Option<Op>,
}

// ---------------------------------------------------------------------------
// stdio
// ---------------------------------------------------------------------------

/// A client on a child process's stdin/stdout.
pub(crate) struct StdioPeer {
    child: Child,
    stdin: Option<ChildStdin>,
    out: BufReader<ChildStdout>,
    line: Vec<u8>,
    next_id: i64,
    rev: Revision,
}

impl StdioPeer {
    /// Spawns `cmd` (stderr inherited) and sets the session up.
    pub(crate) async fn start(
        cmd: &[String],
        envs: &[(&str, &str)],
        rev: Revision,
    ) -> Result<(StdioPeer, Ops)> {
        let (program, args) = cmd.split_first().ok_or("empty command")?;
        let mut child = Command::new(program)
            .args(args)
            .envs(envs.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {program}: {e}"))?;
        let stdin = child.stdin.take();
        let out = BufReader::with_capacity(64 * 1024, child.stdout.take().ok_or("no stdout")?);
        let mut peer = StdioPeer {
            child,
            stdin,
            out,
            line: Vec::with_capacity(4096),
            next_id: 1,
            rev,
        };
        let ops = peer.setup().await?;
        Ok((peer, ops))
    }

    async fn setup(&mut self) -> Result<Ops> {
        let rev = self.rev;
        if rev == Revision::Legacy {
            self.call("initialize", initialize_params()).await?;
            let n = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            check(rev, &n, None)?;
            self.write(&n.to_string()).await?;
        }
        let created = self.call("tools/call", create_params(rev)).await?;
        let task_id = task_id_of(rev, &created)?;
        let ops = Ops {
            greet: greet_op(rev, "greet"),
            get: Some(get_op(rev, &task_id)),
        };
        for op in [Some(&ops.greet), ops.get.as_ref()].into_iter().flatten() {
            self.call_op(op).await?;
        }
        Ok(ops)
    }

    /// A setup request: validated both ways; returns the result.
    async fn call(&mut self, method: &'static str, params: Value) -> Result<Value> {
        self.call_op(&Op::new(method, "", &params)).await
    }

    async fn call_op(&mut self, op: &Op) -> Result<Value> {
        let id = self.fresh_id();
        let line = op.line(id);
        let sent: Value = serde_json::from_str(&line)?;
        check(self.rev, &sent, None)?;
        self.write(&line).await?;
        loop {
            let msg: Value = serde_json::from_slice(self.read_line().await?)?;
            let answers = msg.get("method").is_none() && msg["id"] == json!(id);
            check(self.rev, &msg, answers.then_some(op.method))?;
            if answers {
                return msg
                    .get("result")
                    .cloned()
                    .ok_or_else(|| format!("{} failed: {msg}", op.method).into());
            }
        }
    }

    fn fresh_id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    async fn write(&mut self, line: &str) -> Result<()> {
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        stdin.write_all(&buf).await?;
        Ok(())
    }

    async fn read_line(&mut self) -> Result<&[u8]> {
        self.line.clear();
        let n = tokio::time::timeout(STEP, self.out.read_until(b'\n', &mut self.line))
            .await
            .map_err(|_| "no answer in time")??;
        if n == 0 {
            return Err("the peer closed its output".into());
        }
        Ok(&self.line)
    }

    /// Reads until the successful answer to `id`.
    async fn await_id(&mut self, id: i64) -> Result<()> {
        loop {
            if reply_id(self.read_line().await?)? == Some(id) {
                return Ok(());
            }
        }
    }

    /// `n` sequential requests; appends each round trip (µs) to `out`.
    pub(crate) async fn latency(&mut self, op: &Op, n: usize, out: &mut Vec<f64>) -> Result<()> {
        for _ in 0..n {
            let id = self.fresh_id();
            let line = op.line(id);
            let t = Instant::now();
            self.write(&line).await?;
            self.await_id(id).await?;
            out.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok(())
    }

    /// Keeps `window` requests outstanding for `span`; answers per second.
    pub(crate) async fn throughput(
        &mut self,
        op: &Op,
        window: usize,
        span: Duration,
    ) -> Result<f64> {
        let mut outstanding = VecDeque::with_capacity(window);
        for _ in 0..window {
            let id = self.fresh_id();
            self.write(&op.line(id)).await?;
            outstanding.push_back(id);
        }
        let start = Instant::now();
        let mut done = 0u64;
        while start.elapsed() < span {
            let Some(id) = self.next_answer().await? else {
                continue;
            };
            if outstanding.front() == Some(&id) {
                outstanding.pop_front();
            } else {
                outstanding.retain(|&o| o != id);
            }
            done += 1;
            let id = self.fresh_id();
            self.write(&op.line(id)).await?;
            outstanding.push_back(id);
        }
        let rate = done as f64 / start.elapsed().as_secs_f64();
        // Drain, so the next measurement starts from an idle pipe.
        while !outstanding.is_empty() {
            if let Some(id) = self.next_answer().await? {
                outstanding.retain(|&o| o != id);
            }
        }
        Ok(rate)
    }

    async fn next_answer(&mut self) -> Result<Option<i64>> {
        reply_id(self.read_line().await?)
    }

    /// Closes stdin and waits (bounded) for the exit; kills on timeout.
    pub(crate) async fn close(mut self) {
        self.stdin.take();
        if tokio::time::timeout(Duration::from_secs(5), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

// ---------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------

/// A client of a Streamable HTTP endpoint.
#[derive(Clone)]
pub(crate) struct HttpPeer {
    client: reqwest::Client,
    url: String,
    rev: Revision,
    session: Option<String>,
}

impl HttpPeer {
    /// Connects to `url` and sets the session up.
    pub(crate) async fn start(url: &str, rev: Revision) -> Result<(HttpPeer, Ops)> {
        Self::start_with(url, rev, None).await
    }

    /// Like [`HttpPeer::start`], for a target measured on `tools/call`
    /// only, that lists `greet` as `tool`: no task is created.
    pub(crate) async fn start_greet_only(
        url: &str,
        rev: Revision,
        tool: &str,
    ) -> Result<(HttpPeer, Ops)> {
        Self::start_with(url, rev, Some(tool)).await
    }

    async fn start_with(
        url: &str,
        rev: Revision,
        greet_only: Option<&str>,
    ) -> Result<(HttpPeer, Ops)> {
        let client = reqwest::Client::builder()
            .connect_timeout(STEP)
            .timeout(STEP)
            .build()?;
        let mut peer = HttpPeer {
            client,
            url: url.to_owned(),
            rev,
            session: None,
        };
        let ops = peer.setup(greet_only).await?;
        Ok((peer, ops))
    }

    async fn setup(&mut self, greet_only: Option<&str>) -> Result<Ops> {
        let rev = self.rev;
        if rev == Revision::Legacy {
            let (_, sid) = self
                .call_op(&Op::new("initialize", "", &initialize_params()))
                .await?;
            self.session = Some(sid.ok_or("initialize minted no Mcp-Session-Id")?);
            let n = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            check(rev, &n, None)?;
            let resp = self
                .post("notifications/initialized", "", n.to_string())
                .send()
                .await?;
            if resp.status() != reqwest::StatusCode::ACCEPTED {
                return Err(format!("notifications/initialized: HTTP {}", resp.status()).into());
            }
        }
        let ops = match greet_only {
            Some(tool) => Ops {
                greet: greet_op(rev, tool),
                get: None,
            },
            None => {
                let (created, _) = self
                    .call_op(&Op::new("tools/call", "slow_compute", &create_params(rev)))
                    .await?;
                let task_id = task_id_of(rev, &created)?;
                Ops {
                    greet: greet_op(rev, "greet"),
                    get: Some(get_op(rev, &task_id)),
                }
            }
        };
        for op in [Some(&ops.greet), ops.get.as_ref()].into_iter().flatten() {
            self.call_op(op).await?;
        }
        Ok(ops)
    }

    fn post(&self, method: &str, name: &str, body: String) -> reqwest::RequestBuilder {
        let mut req = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", BOTH);
        req = match self.rev {
            Revision::Modern => {
                let r = req
                    .header("mcp-protocol-version", MODERN)
                    .header("mcp-method", method);
                if name.is_empty() {
                    r
                } else {
                    r.header("mcp-name", name)
                }
            }
            Revision::Legacy => {
                let r = req.header("mcp-protocol-version", LEGACY);
                match &self.session {
                    Some(sid) => r.header("mcp-session-id", sid),
                    None => r,
                }
            }
        };
        req.body(body)
    }

    /// A setup request, validated both ways: (result, `Mcp-Session-Id`).
    async fn call_op(&self, op: &Op) -> Result<(Value, Option<String>)> {
        let line = op.line(1);
        let sent: Value = serde_json::from_str(&line)?;
        check(self.rev, &sent, None)?;
        let resp = self.post(op.method, &op.name, line).send().await?;
        let sid = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let status = resp.status();
        let body = resp.bytes().await?;
        let mut answer = None;
        for data in messages(&body) {
            let msg: Value = serde_json::from_str(data)?;
            let answers = msg.get("method").is_none() && msg["id"] == json!(1);
            check(self.rev, &msg, answers.then_some(op.method))?;
            if answers {
                answer = msg.get("result").cloned();
            }
        }
        match answer {
            Some(r) if status.is_success() => Ok((r, sid)),
            _ => Err(format!(
                "{}: HTTP {status}: {}",
                op.method,
                String::from_utf8_lossy(&body)
            )
            .into()),
        }
    }

    /// One hot-path exchange: the answer must be a success for `id`.
    async fn exchange(&self, op: &Op, id: i64) -> Result<()> {
        let resp = self.post(op.method, &op.name, op.line(id)).send().await?;
        if !resp.status().is_success() {
            return Err(format!("{}: HTTP {}", op.method, resp.status()).into());
        }
        let body = resp.bytes().await?;
        let msgs = messages(&body);
        let last = msgs.last().ok_or("an empty answer")?;
        match reply_id(last.as_bytes())? {
            Some(got) if got == id => Ok(()),
            other => Err(format!("answer to {other:?}, expected {id}").into()),
        }
    }

    /// `n` sequential requests; appends each round trip (µs) to `out`.
    pub(crate) async fn latency(&self, op: &Op, n: usize, out: &mut Vec<f64>) -> Result<()> {
        for id in 0..n as i64 {
            let t = Instant::now();
            self.exchange(op, id + 2).await?;
            out.push(t.elapsed().as_secs_f64() * 1e6);
        }
        Ok(())
    }

    /// `clients` concurrent request loops for `span`; answers per second.
    pub(crate) async fn throughput(&self, op: &Op, clients: usize, span: Duration) -> Result<f64> {
        let start = Instant::now();
        let loops = (0..clients).map(|c| async move {
            let mut done = 0u64;
            let mut id = 2 + (c as i64) * 1_000_000_000;
            while start.elapsed() < span {
                self.exchange(op, id).await?;
                id += 1;
                done += 1;
            }
            Ok::<u64, Error>(done)
        });
        let mut total = 0;
        for r in futures_util::future::join_all(loops).await {
            total += r?;
        }
        Ok(total as f64 / start.elapsed().as_secs_f64())
    }
}

/// The JSON-RPC messages of an answer body: the body itself (JSON), or the
/// `data` of each SSE event.
fn messages(body: &[u8]) -> Vec<&str> {
    let text = std::str::from_utf8(body).unwrap_or_default().trim();
    if text.starts_with('{') {
        return vec![text];
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .collect()
}
