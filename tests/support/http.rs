//! Driving `mcp-tasks-shim http` (the real binary) over loopback HTTP.
//!
//! - [`HttpShim::spawn`] starts it on `127.0.0.1:0` and reads the bound
//!   address from its "listening on" line, so ports never collide; the
//!   process (and with it its upstream child) is killed on drop.
//! - [`modern`] builds a 2026-07-28 POST (headers and `_meta`), [`legacy`]
//!   a 2025-11-25 one; [`send`] and [`Sse`] read answers with bounded waits.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::{Client, RequestBuilder, StatusCode, header::HeaderMap};
use serde_json::{Value, json};
use tokio::time::timeout;
use wait_timeout::ChildExt;

use super::wire::shim_bin;

/// Bound on every single wait for the shim.
pub const STEP: Duration = Duration::from_secs(15);
/// `Accept` of a client taking JSON or SSE.
pub const BOTH: &str = "application/json, text/event-stream";
/// The tasks extension id.
pub const EXT: &str = "io.modelcontextprotocol/tasks";
/// The modern revision.
pub const MODERN: &str = "2026-07-28";
/// The legacy revision.
pub const LEGACY: &str = "2025-11-25";

/// A running `mcp-tasks-shim http`.
#[derive(Debug)]
pub struct HttpShim {
    child: Option<Child>,
    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Every stderr line the shim wrote so far (besides the address).
    pub log: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    /// Bumped after each line is added to `log`, for [`HttpShim::wait_logged`].
    logged_lines: tokio::sync::watch::Receiver<usize>,
}

impl HttpShim {
    /// `mcp-tasks-shim http --listen 127.0.0.1:0 <flags> [-- <upstream…>]`
    /// (no `--` when `upstream` is empty: pass `--upstream-url` in `flags`).
    #[track_caller]
    pub fn spawn<S: AsRef<str>>(flags: &[&str], upstream: &[S]) -> HttpShim {
        Self::spawn_until(flags, upstream, "listening on ")
    }

    /// [`HttpShim::spawn`], returning as soon as the port is open ("port
    /// open on" line), before the upstream is probed; its "listening on"
    /// line then lands in [`HttpShim::log`].
    #[track_caller]
    pub fn spawn_starting<S: AsRef<str>>(flags: &[&str], upstream: &[S]) -> HttpShim {
        let mut shim = Self::spawn_until(flags, upstream, "port open on ");
        shim.base = shim.base.split(';').next().unwrap_or_default().to_owned();
        shim.url = format!("{}/mcp", shim.base);
        shim
    }

    #[track_caller]
    fn spawn_until<S: AsRef<str>>(
        flags: &[&str],
        upstream: &[S],
        marker: &'static str,
    ) -> HttpShim {
        let mut cmd = Command::new(shim_bin());
        cmd.args(["http", "--listen", "127.0.0.1:0"]).args(flags);
        if !upstream.is_empty() {
            cmd.arg("--").args(upstream.iter().map(AsRef::as_ref));
        }
        cmd.env("MCP_SHIM_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::inherit())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn mcp-tasks-shim http");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = channel();
        let log = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let kept = log.clone();
        let (lines_tx, logged_lines) = tokio::sync::watch::channel(0);
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.split(marker).nth(1)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(url.trim().to_owned());
                    continue;
                }
                eprintln!("[shim] {line}");
                kept.lock().unwrap_or_else(|p| p.into_inner()).push(line);
                lines_tx.send_modify(|n| *n += 1);
            }
        });
        let mut shim = HttpShim {
            child: Some(child),
            url: String::new(),
            base: String::new(),
            log,
            logged_lines,
        };
        let url = rx
            .recv_timeout(STEP)
            .unwrap_or_else(|_| panic!("mcp-tasks-shim http did not start within {STEP:?}"));
        shim.base = url.trim_end_matches("/mcp").to_owned();
        shim.url = url;
        shim
    }

    /// The stderr lines so far that contain `needle`.
    pub fn logged(&self, needle: &str) -> Vec<String> {
        let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
        log.iter().filter(|l| l.contains(needle)).cloned().collect()
    }

    /// Waits (at most `within`) for a stderr line containing `needle`;
    /// the lines that do (empty if none came in time). The log is read on
    /// another thread: this waits on each line it adds, not on a timer.
    pub async fn wait_logged(&self, needle: &str, within: Duration) -> Vec<String> {
        let mut lines = self.logged_lines.clone();
        let _ = timeout(within, lines.wait_for(|_| !self.logged(needle).is_empty())).await;
        self.logged(needle)
    }

    /// The shim's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// Sends SIGTERM and waits (bounded) for the exit; `None` on timeout.
    pub fn terminate(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let child = self.child.as_mut()?;
        let ok = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill -TERM failed");
        let status = child.wait_timeout(within).expect("wait for the shim")?;
        self.child = None;
        Some(status)
    }
}

impl Drop for HttpShim {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The direct children of `pid` (Linux `/proc`).
pub fn children_of(pid: u32) -> Vec<u32> {
    // `children` lists what each *thread* forked: the shim spawns its
    // upstream from whichever runtime worker runs the session.
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    threads
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Whether `pid` is alive (exists and is not a zombie).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|state| state != "Z" && state != "X"),
        Err(_) => false,
    }
}

/// Waits (at most `within`) for process `pid`, not necessarily a child
/// of ours, to end; whether it did. Waits on a pidfd, which becomes
/// readable when the process exits.
pub fn gone_within(pid: u32, within: Duration) -> bool {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use rustix::process::{Pid, PidfdFlags, pidfd_open};
    let fd = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok());
    let Some(fd) = fd else {
        // ESRCH: it is gone already.
        return !alive(pid);
    };
    let deadline = Instant::now() + within;
    while alive(pid) {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        let left = Timespec::try_from(left).expect("a short wait");
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        let _ = poll(&mut fds, Some(&left));
    }
    true
}

/// A reqwest client with bounded connects.
pub fn client() -> Client {
    Client::builder().connect_timeout(STEP).build().unwrap()
}

/// The modern per-request `_meta` (with the tasks extension when `ext`).
pub fn modern_meta(ext: bool) -> Value {
    let caps = if ext {
        json!({"extensions": {EXT: {}}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "http-test", "version": "0"},
    })
}

/// The value `Mcp-Name` mirrors for `method`.
fn name_of(method: &str, params: &Value) -> Option<String> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    params.get(key)?.as_str().map(str::to_owned)
}

/// A correct 2026-07-28 POST of `method` (`_meta` added, declaring the
/// tasks extension), with `Mcp-Method`, `MCP-Protocol-Version` and (when
/// the method routes on one) `Mcp-Name`.
pub fn modern(c: &Client, url: &str, id: i64, method: &str, mut params: Value) -> RequestBuilder {
    if params.get("_meta").is_none() {
        params["_meta"] = modern_meta(true);
    }
    let mut req = c
        .post(url)
        .header("content-type", "application/json")
        .header("accept", BOTH)
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", method);
    if let Some(name) = name_of(method, &params) {
        req = req.header("mcp-name", name);
    }
    req.body(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string())
}

/// A 2025-11-25 POST of `body` in session `sid` (none: no header).
pub fn legacy(c: &Client, url: &str, sid: Option<&str>, body: &Value) -> RequestBuilder {
    let mut req = c
        .post(url)
        .header("content-type", "application/json")
        .header("accept", BOTH)
        .header("mcp-protocol-version", LEGACY);
    if let Some(sid) = sid {
        req = req.header("mcp-session-id", sid);
    }
    req.body(body.to_string())
}

/// A legacy JSON-RPC request body.
pub fn rpc(id: i64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// Sends and reads the whole answer: (status, JSON body or Null, headers).
/// An SSE answer is read to its end and its last `message` event returned.
pub async fn send(req: RequestBuilder) -> (StatusCode, Value, HeaderMap) {
    let resp = timeout(STEP, req.send())
        .await
        .expect("timed out sending")
        .expect("HTTP request failed");
    let (status, headers) = (resp.status(), resp.headers().clone());
    if is_sse(&headers) {
        let mut sse = Sse::new(resp);
        let mut last = Value::Null;
        while let Some(m) = sse.next().await {
            last = m;
        }
        return (status, last, headers);
    }
    let bytes = timeout(STEP, resp.bytes())
        .await
        .expect("timed out reading")
        .expect("read body");
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (status, body, headers)
}

/// Whether a response is an SSE stream.
pub fn is_sse(headers: &HeaderMap) -> bool {
    headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"))
}

/// Opens a legacy session with `initialize`; returns its id and result.
pub async fn initialize(c: &Client, url: &str, token: Option<&str>) -> (String, Value) {
    let body = rpc(
        0,
        "initialize",
        json!({
            "protocolVersion": LEGACY,
            "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "http-test", "version": "0"},
        }),
    );
    let mut req = legacy(c, url, None, &body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let (status, body, headers) = send(req).await;
    assert_eq!(status, StatusCode::OK, "initialize: {body}");
    let sid = headers
        .get("mcp-session-id")
        .expect("initialize mints Mcp-Session-Id")
        .to_str()
        .unwrap()
        .to_owned();
    let mut note = legacy(
        c,
        url,
        Some(&sid),
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    );
    if let Some(t) = token {
        note = note.bearer_auth(t);
    }
    let (status, _, _) = send(note).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    (sid, body["result"].clone())
}

/// Reads `message` events off an SSE response, each wait bounded.
pub struct Sse {
    events: futures_util::stream::BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>,
}

impl std::fmt::Debug for Sse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sse").finish_non_exhaustive()
    }
}

impl Sse {
    /// Wraps an SSE response.
    pub fn new(resp: reqwest::Response) -> Self {
        assert!(is_sse(resp.headers()), "not SSE: {:?}", resp.headers());
        Sse {
            events: sse_stream::SseByteStream::new(resp.bytes_stream()).boxed(),
        }
    }

    /// The next JSON message, or `None` when the stream ended.
    pub async fn next(&mut self) -> Option<Value> {
        loop {
            match timeout(STEP, self.events.next())
                .await
                .expect("timed out waiting on the SSE stream")
            {
                Some(Ok(event)) => {
                    // Comments and keep-alives carry no data.
                    if let Some(data) = event.data {
                        return Some(serde_json::from_str(&data).expect("SSE data is JSON"));
                    }
                }
                Some(Err(e)) => panic!("SSE stream failed: {e}"),
                None => return None,
            }
        }
    }
}

/// `rb` with header `name` replaced by `value` (removed when `None`).
pub fn set_header(rb: RequestBuilder, name: &'static str, value: Option<&str>) -> RequestBuilder {
    let (c, req) = rb.build_split();
    let mut req = req.expect("a valid request");
    req.headers_mut().remove(name);
    if let Some(v) = value {
        req.headers_mut()
            .insert(name, v.parse().expect("header value"));
    }
    RequestBuilder::from_parts(c, req)
}

/// `mcp-tasks-shim reference-server --revision REV --http 127.0.0.1:0
/// FLAGS…`: a long-lived HTTP upstream for a shim under test, killed on
/// drop.
pub struct HttpReference {
    child: Child,
    /// Where it listens.
    pub addr: std::net::SocketAddr,
    /// Its MCP endpoint, for `--upstream-url`.
    pub url: String,
}

impl HttpReference {
    /// Starts one and waits (bounded by [`STEP`]) for its address.
    pub fn start(revision: &str, flags: &[&str]) -> HttpReference {
        Self::start_at(revision, flags, "127.0.0.1:0".parse().expect("an address"))
    }

    /// [`HttpReference::start`] on `addr` (say, where one ran before: a
    /// server restarted in place).
    pub fn start_at(revision: &str, flags: &[&str], addr: std::net::SocketAddr) -> HttpReference {
        let mut child = Command::new(shim_bin())
            .args(["reference-server", "--revision", revision])
            .args(["--http", &addr.to_string()])
            .args(flags)
            .env("MCP_SHIM_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the HTTP reference server");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let _ = tx.send(rest.trim_end_matches("/mcp").trim().to_owned());
                }
            }
        });
        let addr: std::net::SocketAddr = rx
            .recv_timeout(STEP)
            .expect("the reference server printed its address")
            .parse()
            .expect("an address");
        HttpReference {
            child,
            addr,
            url: format!("http://{addr}/mcp"),
        }
    }
}

impl Drop for HttpReference {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `f` on a fresh two-worker runtime, failing the test after 90 s.
pub fn block_on<F: std::future::Future<Output = ()>>(f: F) {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            tokio::time::timeout(std::time::Duration::from_secs(90), f)
                .await
                .expect("the test finished within 90 s");
        });
}

/// Two 2025-11-25 sessions (`A`, `B`) through `shim`, each calling `greet`
/// once: the smallest conversation with two session labels.
pub fn greet_in_two_sessions(shim: &HttpShim) {
    block_on(async {
        let c = client();
        for who in ["A", "B"] {
            let (sid, _) = initialize(&c, &shim.url, None).await;
            let call = rpc(
                1,
                "tools/call",
                serde_json::json!({"name": "greet", "arguments": {"name": who}}),
            );
            let (status, body, _) = send(legacy(&c, &shim.url, Some(&sid), &call)).await;
            assert!(status.is_success(), "{body}");
        }
    });
}
