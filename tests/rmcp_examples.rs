//! Issue 28's rmcp examples (feature `rmcp`), driven by the official
//! TypeScript SDK 1.32.2 legacy client (`tests/peers/legacy_client.mjs
//! --profile rmcp`):
//!
//! - `examples/rmcp_stdio_in_process`: the rmcp reference server on a duplex
//!   pair behind the shim, the binary's own stdin/stdout the 2025-11-25
//!   client side. The client launches the binary like any stdio server.
//! - `examples/rmcp_layer`: rmcp's `StreamableHttpService` on axum behind
//!   `TasksCompatLayer`, on 127.0.0.1:0; the client speaks Streamable HTTP
//!   (`StreamableHTTPClientTransport`) and is served by the layer's legacy
//!   front, whose upstream is the rmcp service in the same process. (Its
//!   2026-07-28 pass-through is what `scripts/conformance.sh rmcp-layer`
//!   checks: 44/44.)
//!
//! The profile checks the server's declared `taskSupport` (greet forbidden,
//! slow_compute optional, the task-only tools required, refusals of each
//! misuse), task calls completing through blocking `tasks/result`,
//! `isError` → `failed`, a JSON-RPC error, elicitation while
//! `input_required` (confirm_delete) and before the task exists
//! (test_tool_with_task, rmcp's MRTR), two questions at once, cancel,
//! `tasks/list` and status notifications. Everything the example emitted
//! to the client validates against the 2025-11-25 schema.
//!
//! The examples are built by `cargo test --features rmcp` (all targets);
//! when running this file alone, build them first:
//! `cargo build --features rmcp --examples`.
//! Needs Node and `tests/peers/node_modules`: run `scripts/test.sh`.

mod support;

use std::io::BufRead;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use support::peers::{read_transcript, run_legacy_client, run_legacy_client_http};
use support::schema::{Revision, assert_conversation_valid};
use support::wire::temp_path;

/// The script bounds itself at 60 s; this is the backstop.
const TIMEOUT: Duration = Duration::from_secs(90);

/// The checks `legacy_client.mjs --profile rmcp` runs.
const RMCP_PROFILE_CHECKS: &[&str] = &[
    "initialize",
    "tools/list taskSupport",
    "plain call",
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
    "taskSupport violations",
    "status notifications",
];

/// `target/<profile>/examples/<name>`, next to this test's `deps/`.
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps/<test>");
    let path = profile_dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build --features rmcp --example {name}` \
         (a plain `cargo test --features rmcp` builds it too)",
        path.display()
    );
    path
}

/// The `taskSupport` the rmcp reference server declares for each tool.
fn declared_support() -> Value {
    json!({
        "greet": "forbidden",
        "slow_compute": "optional",
        "failing_job": "required",
        "protocol_error_job": "required",
        "confirm_delete": "required",
        "multi_input": "required",
        "test_tool_with_task": "required",
        "summarize": "required",
        "external_job": "required",
    })
}

/// What a legacy client saw: schema-valid 2025-11-25 only, no modern
/// member leaking through, and the confirm_delete question tagged with its
/// task.
fn check_client_view(seen: &[(String, Value)]) {
    assert!(seen.len() > 50, "transcript too short: {}", seen.len());
    assert_conversation_valid(
        seen.iter()
            .map(|(dir, msg)| (Revision::Legacy, dir.as_str(), msg)),
    );
    let s2c: Vec<&Value> = seen
        .iter()
        .filter(|(d, _)| d == "s2c")
        .map(|(_, m)| m)
        .collect();
    for m in &s2c {
        let text = m.to_string();
        for modern in ["resultType", "ttlMs", "pollIntervalMs", "inputRequests"] {
            assert!(
                !text.contains(&format!("\"{modern}\"")),
                "modern field {modern} sent to a legacy client: {m}"
            );
        }
    }
    let confirm = s2c
        .iter()
        .find(|m| {
            m["method"] == "elicitation/create" && m["params"]["message"] == "Delete notes.txt?"
        })
        .unwrap_or_else(|| panic!("confirm_delete's question was sent: {s2c:#?}"));
    assert!(
        confirm
            .pointer("/params/_meta/io.modelcontextprotocol~1related-task/taskId")
            .is_some(),
        "{confirm}"
    );
}

#[test]
fn ts_sdk_legacy_client_against_the_rmcp_stdio_example() {
    let bin = example("rmcp_stdio_in_process");
    let view = temp_path("rmcp-stdio-client-view.jsonl");
    let run = run_legacy_client("rmcp", &view, &[bin.to_string_lossy()], TIMEOUT);
    run.assert_checks(RMCP_PROFILE_CHECKS);
    assert_eq!(
        run.check("tools/list taskSupport")["support"],
        declared_support(),
        "{}",
        run.out
    );
    let seen = read_transcript(&view);
    let _ = std::fs::remove_file(&view);
    check_client_view(&seen);
}

/// The `rmcp_layer` example on a free loopback port, killed on drop.
struct LayerExample {
    child: Child,
    url: String,
}

impl LayerExample {
    fn start() -> LayerExample {
        let mut child = Command::new(example("rmcp_layer"))
            .args(["--listen", "127.0.0.1:0"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start the rmcp_layer example");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        // The example says where it listens once it accepts connections;
        // the rest of its stderr is drained so it never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(url) = line.strip_prefix("listening on ") {
                    let _ = tx.send(url.to_owned());
                } else {
                    eprintln!("rmcp_layer: {line}");
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("rmcp_layer printed its address within 30 s");
        LayerExample { child, url }
    }
}

impl Drop for LayerExample {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn ts_sdk_legacy_client_against_the_rmcp_layer_example_over_http() {
    let server = LayerExample::start();
    let view = temp_path("rmcp-layer-client-view.jsonl");
    let run = run_legacy_client_http("rmcp", &view, &server.url, TIMEOUT);
    run.assert_checks(RMCP_PROFILE_CHECKS);
    assert_eq!(
        run.check("tools/list taskSupport")["support"],
        declared_support(),
        "{}",
        run.out
    );
    let seen = read_transcript(&view);
    let _ = std::fs::remove_file(&view);
    check_client_view(&seen);
}
