//! The 2025-11-25 reference server against a real third-party peer: the
//! official TypeScript SDK client (`@modelcontextprotocol/sdk` 1.32.2, pinned
//! in `tests/peers/package.json`), driven by `tests/peers/legacy_client.mjs`.
//!
//! The script checks the task surface (create, poll, blocking result,
//! elicitation while `input_required`, list with cursors, cancel, double
//! cancel, unknown ids) and records the conversation; this test then
//! validates every recorded message against the 2025-11-25 schema.
//!
//! Needs Node and `tests/peers/node_modules`: run `scripts/test.sh`.
//! Set `MCP_SHIM_RECORD=1` to refresh `tests/corpus/recorded/ts-sdk-legacy.jsonl`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::schema::{Revision, assert_conversation_valid};

const SDK_VERSION: &str = "1.32.2";
/// The script bounds itself at 60 s; this is the backstop.
const TIMEOUT: Duration = Duration::from_secs(90);

fn peers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

/// Fails (never skips) when the npm peers are not installed.
fn require_peers() {
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

/// Runs a command to completion with a deadline; returns (status, stdout).
fn run_bounded(cmd: &mut Command, timeout: Duration) -> (std::process::ExitStatus, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("`node` must be on PATH for the real-peer tests");
    let mut stdout = child.stdout.take().expect("piped stdout");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).ok();
        s
    });
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for node") {
            break status;
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!("peer script timed out after {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    (status, reader.join().unwrap_or_default())
}

fn read_transcript(path: &Path) -> Vec<(String, Value)> {
    std::fs::read_to_string(path)
        .expect("transcript written")
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

#[test]
fn ts_sdk_client_drives_the_legacy_reference_server() {
    require_peers();
    let transcript = std::env::temp_dir().join(format!(
        "mcp-tasks-shim-ts-legacy-{}.jsonl",
        std::process::id()
    ));
    let (status, out) = run_bounded(
        Command::new("node")
            .current_dir(peers_dir())
            .arg("legacy_client.mjs")
            .arg(env!("CARGO_BIN_EXE_mcp-tasks-shim"))
            .arg(&transcript),
        TIMEOUT,
    );
    let lines: Vec<Value> = out
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let failed: Vec<_> = lines.iter().filter(|l| l["ok"] == false).collect();
    assert!(
        status.success() && failed.is_empty(),
        "peer script failed ({status}):\n{out}"
    );
    assert_eq!(
        lines.last().map(|l| &l["done"]),
        Some(&Value::Bool(true)),
        "{out}"
    );

    let checks: Vec<&str> = lines.iter().filter_map(|l| l["check"].as_str()).collect();
    for expected in [
        "initialize",
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
    ] {
        assert!(
            checks.contains(&expected),
            "check {expected:?} did not run:\n{out}"
        );
    }

    let conversation = read_transcript(&transcript);
    if std::env::var_os("MCP_SHIM_RECORD").is_some() {
        let dest =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/recorded/ts-sdk-legacy.jsonl");
        std::fs::copy(&transcript, dest).expect("store the recorded transcript");
    }
    let _ = std::fs::remove_file(&transcript);
    assert!(
        conversation.len() > 50,
        "transcript too short: {}",
        conversation.len()
    );
    // Every message either side sent is valid 2025-11-25.
    assert_conversation_valid(
        conversation
            .iter()
            .map(|(dir, msg)| (Revision::Legacy, dir.as_str(), msg)),
    );
    // The elicitation sent on the tasks/result path names its task.
    assert!(conversation.iter().any(|(dir, m)| {
        dir == "s2c"
            && m["method"] == "elicitation/create"
            && m.pointer("/params/_meta/io.modelcontextprotocol~1related-task/taskId")
                .is_some()
    }));
}
