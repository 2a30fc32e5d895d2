//! Running the npm test peers (`tests/peers/*.mjs`, the official TypeScript
//! SDK pinned in `tests/peers/package.json`).
//!
//! A missing install fails the test with "run scripts/test.sh": these tests
//! never skip.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The pinned `@modelcontextprotocol/sdk` version.
pub const SDK_VERSION: &str = "1.32.2";

/// `tests/peers`.
pub fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

/// Fails (never skips) when the npm peers are not installed.
#[track_caller]
pub fn require_peers() {
    let pkg = peers_dir().join("node_modules/@modelcontextprotocol/sdk/package.json");
    let text = std::fs::read_to_string(&pkg).unwrap_or_else(|_| {
        panic!(
            "{} is missing: the real-peer tests need the npm test peers. \
             Run `scripts/test.sh` (it runs `npm ci --prefix tests/peers`, then cargo test).",
            pkg.display()
        )
    });
    let v: Value = serde_json::from_str(&text).expect("SDK package.json is JSON");
    assert_eq!(
        v["version"], SDK_VERSION,
        "tests/peers has the wrong @modelcontextprotocol/sdk; run `scripts/test.sh`"
    );
}

/// Runs a command to completion with a deadline (killing it past the
/// deadline and failing); returns its status and stdout.
#[track_caller]
pub fn run_bounded(cmd: &mut Command, timeout: Duration) -> (ExitStatus, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("`node` must be on PATH for the real-peer tests (run scripts/test.sh)");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).ok();
        s
    });
    let status = super::wire::exited_within(&mut child, timeout, "the peer");
    (status, reader.join().unwrap_or_default())
}

/// Reads a `{"dir", "msg"}` JSONL transcript.
pub fn read_transcript(path: &Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("transcript {} not written: {e}", path.display()))
        .lines()
        .map(|l| {
            let rec: Value = serde_json::from_str(l).expect("transcript line is JSON");
            (
                rec["dir"].as_str().unwrap_or("?").to_owned(),
                rec["msg"].clone(),
            )
        })
        .collect()
}

/// The result of one run of `legacy_client.mjs`: its check lines.
#[derive(Debug)]
pub struct ScriptRun {
    /// Every JSON line the script printed.
    pub lines: Vec<Value>,
    /// The raw stdout, for failure messages.
    pub out: String,
}

impl ScriptRun {
    /// The names of the checks that ran (and passed).
    pub fn checks(&self) -> Vec<&str> {
        self.lines
            .iter()
            .filter(|l| l["ok"] == true)
            .filter_map(|l| l["check"].as_str())
            .collect()
    }

    /// Fails unless every check in `expected` ran and passed.
    #[track_caller]
    pub fn assert_checks(&self, expected: &[&str]) {
        let checks = self.checks();
        for name in expected {
            assert!(
                checks.contains(name),
                "check {name:?} did not pass:\n{}",
                self.out
            );
        }
    }

    /// The details line of one check.
    pub fn check(&self, name: &str) -> &Value {
        self.lines
            .iter()
            .find(|l| l["check"] == name)
            .unwrap_or_else(|| panic!("check {name:?} did not run:\n{}", self.out))
    }
}

/// The checks `legacy_client.mjs --profile shim` runs, whatever the
/// transport between the client and the shim.
pub const SHIM_PROFILE_CHECKS: &[&str] = &[
    "initialize",
    "tools/list taskSupport",
    "plain call",
    "plain call of an upstream task",
    "create + poll + result",
    "tasks/result blocks",
    "tool error ends failed",
    "protocol error",
    "elicitation during input_required",
    "callToolStream, task chosen by the SDK",
    "callToolStream, failed task",
    "two elicitations at once",
    "input before the task exists",
    "cancel",
    "unknown task id",
    "tasks/list pages",
    "status notifications",
];

/// The checks `legacy_client.mjs --profile reference` runs, whatever is
/// between the client and the 2025-11-25 reference server.
pub const REFERENCE_PROFILE_CHECKS: &[&str] = &[
    "initialize",
    "resource subscription",
    "create + poll + result",
    "tasks/result blocks",
    "elicitation during input_required",
    "two elicitations at once",
    "input before the task exists",
    "cancel",
    "unknown task id",
    "tasks/list pages",
    "taskSupport violations",
    "status notifications",
];

/// Runs `tests/peers/legacy_client.mjs` (the TypeScript SDK legacy client)
/// with `profile` against `command`, recording the client's view to
/// `transcript`; fails unless every check passed.
#[track_caller]
pub fn run_legacy_client<S: AsRef<str>>(
    profile: &str,
    transcript: &Path,
    command: &[S],
    timeout: Duration,
) -> ScriptRun {
    let mut target = vec!["--"];
    target.extend(command.iter().map(AsRef::as_ref));
    run_legacy_script(profile, transcript, &target, timeout)
}

/// Like [`run_legacy_client`], over Streamable HTTP: the script connects
/// to `url` with the SDK's `StreamableHTTPClientTransport` (`--http URL`).
#[track_caller]
pub fn run_legacy_client_http(
    profile: &str,
    transcript: &Path,
    url: &str,
    timeout: Duration,
) -> ScriptRun {
    run_legacy_script(profile, transcript, &["--http", url], timeout)
}

#[track_caller]
fn run_legacy_script(
    profile: &str,
    transcript: &Path,
    target: &[&str],
    timeout: Duration,
) -> ScriptRun {
    let transcript = transcript.to_string_lossy();
    let mut script_args = vec!["--profile", profile, "--transcript", &transcript];
    script_args.extend(target);
    run_peer_script("legacy_client.mjs", &script_args, timeout)
}

/// Runs the check script `script` of `tests/peers` (one JSON line per
/// check, a final `{"done":true}`) with `args`; fails unless every check
/// passed and the script finished.
#[track_caller]
pub fn run_peer_script(script: &str, args: &[&str], timeout: Duration) -> ScriptRun {
    require_peers();
    let mut cmd = Command::new("node");
    cmd.current_dir(peers_dir()).arg(script).args(args);
    let (status, out) = run_bounded(&mut cmd, timeout);
    let lines: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let failed: Vec<_> = lines.iter().filter(|l| l["ok"] == false).collect();
    assert!(
        status.success() && failed.is_empty(),
        "{script} failed ({status}):\n{out}"
    );
    assert_eq!(
        lines.last().map(|l| &l["done"]),
        Some(&Value::Bool(true)),
        "{script} did not finish:\n{out}"
    );
    ScriptRun { lines, out }
}

/// The checks of a `--profile shim` run of the TS SDK legacy client over
/// HTTP (through the CLI proxy or the layer alike): every check passed,
/// `tasks/list` paginated, `tasks/result` blocked, everything the client
/// saw is valid 2025-11-25, elicitations came as real server→client
/// requests (tagged with their task where one exists) and were each
/// answered, and status notifications arrived.
#[track_caller]
pub fn assert_shim_http_run(run: &ScriptRun, client_view: &Path) {
    run.assert_checks(SHIM_PROFILE_CHECKS);
    let pages = run.check("tasks/list pages")["pages"].as_i64().unwrap_or(0);
    assert!(pages > 1, "tasks/list paginated: {}", run.out);
    let waited = run.check("tasks/result blocks")["waitedMs"]
        .as_i64()
        .unwrap_or(0);
    assert!(waited >= 700, "tasks/result blocked: {}", run.out);

    let seen = read_transcript(client_view);
    let _ = std::fs::remove_file(client_view);
    assert!(seen.len() > 80, "transcript too short: {}", seen.len());
    super::schema::assert_conversation_valid(
        seen.iter()
            .map(|(dir, msg)| (super::schema::Revision::Legacy, dir.as_str(), msg)),
    );
    let asks: Vec<_> = seen
        .iter()
        .filter(|(d, m)| d == "s2c" && m["method"] == "elicitation/create")
        .collect();
    assert!(asks.len() >= 4, "elicitations seen: {}", asks.len());
    assert!(
        asks.iter().any(|(_, m)| {
            m["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"].is_string()
        }),
        "some elicitation carries related-task _meta"
    );
    for (_, ask) in &asks {
        assert!(
            seen.iter()
                .any(|(d, m)| d == "c2s" && m["id"] == ask["id"] && m.get("result").is_some()),
            "elicitation {} answered",
            ask["id"]
        );
    }
    assert!(
        seen.iter()
            .any(|(d, m)| d == "s2c" && m["method"] == "notifications/tasks/status"),
        "status notifications reached the client"
    );
}

/// `server-everything` in Streamable HTTP mode, killed on drop.
pub struct Everything {
    child: Child,
    /// Its MCP endpoint.
    pub url: String,
}

impl Everything {
    /// Starts it on a free loopback port.
    pub fn spawn() -> Everything {
        require_peers();
        let entry =
            peers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
        assert!(
            entry.exists(),
            "{} is missing: run `scripts/test.sh` (npm ci --prefix tests/peers)",
            entry.display()
        );
        // A free loopback port (the server takes its port from PORT only).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new("node")
            .arg(&entry)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .current_dir(peers_dir())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("`node` must be on PATH (run scripts/test.sh)");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("listening on port")
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(());
                }
                eprintln!("[everything] {line}");
            }
        });
        let everything = Everything {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        };
        rx.recv_timeout(super::http::STEP)
            .expect("server-everything did not start listening");
        everything
    }
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
