//! Issue 29, `replay`: sessions of the real TypeScript SDK 1.32.2 client
//! (`tests/peers/replay_client.mjs`) recorded with `mcp-tasks-shim stdio
//! --record` in front of 2025-11-25 servers, then replayed with the library
//! (`testing::replay`) and compared with `testing::compare`.
//!
//! - Against its own server (server-everything, the SDK-built task server)
//!   a replay shows no difference under the default masks.
//! - Through the shim against the 2026-07-28 reference server, what differs
//!   is only what [`DOCUMENTED`] lists (the new server's identity and tool
//!   surface, and what the bridge reports differently), plus, for the
//!   servers whose tools the reference server does not have, the fallout of
//!   calling a tool that is not there ([`MISSING_TOOL_FALLOUT`]).
//! - A message that cannot be placed is named with its line by the CLI,
//!   which exits 1.
//! - Every message the replayer sends validates against the transcript
//!   revision's schema.
//!
//! Documented differences (2025-11-25 client, old 2025-11-25 server versus
//! the shim in front of a 2026-07-28 server), by message and JSON pointer:
//!
//! | message | pointer | why |
//! |---|---|---|
//! | answer to `initialize` | `/result/capabilities` | built from the new server's `server/discover` (`tasks.{list,cancel,requests.tools.call}` from the tasks extension; no `logging`, `resources`, `prompts` it does not offer) |
//! | answer to `initialize` | `/result/serverInfo` | the new server's identity |
//! | answer to `initialize` | `/result/instructions` | the new server's instructions |
//! | answer to `tools/list` | `/result/tools` | the new server's tools; each tool's `execution.taskSupport` is `"optional"` (the upstream decides per call which calls become tasks) |
//! | answer to `tools/call` | `/result/isError` | the new server states `isError: false` |
//! | answer to `tools/call` | `/result/task/ttl` | the new server grants its own retention, not the requested `ttl` |
//! | `notifications/tasks/status`, answer to `tasks/get` | `…/ttl` | the same retention |
//! | `notifications/tasks/status`, answer to `tasks/get` | `…/statusMessage` | the new server's own status text, absent when it sends none |
//! | `notifications/tasks/status` | (whole message) | not compared: through the bridge the shim reports the status changes it sees upstream, and one the final result overtakes (`completed` right after an answered question) may never be sent; read the status with `tasks/get` |

mod support;

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use mcp_tasks_shim::reference::ReferenceServer;
use mcp_tasks_shim::testing::replay::{Replay, Replayed};
use mcp_tasks_shim::testing::{Comparison, Difference, Dir, Masks, Transcript, compare};
use mcp_tasks_shim::upstream::{Link, channel};
use serde_json::Value;
use support::peers::{peers_dir, require_peers, run_bounded};
use support::schema::{Revision, validate};
use support::wire::{Wire, shim_bin};

/// Differences that a replay through the shim against the 2026-07-28
/// reference server may show: (message kind, JSON pointer prefix, why).
const DOCUMENTED: &[(&str, &str, &str)] = &[
    (
        "s2c answer to initialize",
        "/result/capabilities",
        "built from the new server's server/discover",
    ),
    (
        "s2c answer to initialize",
        "/result/serverInfo",
        "the new server's identity",
    ),
    (
        "s2c answer to initialize",
        "/result/instructions",
        "the new server's instructions",
    ),
    (
        "s2c answer to tools/list",
        "/result/tools",
        "the new server's tools, each with taskSupport \"optional\"",
    ),
    (
        "s2c answer to tools/call",
        "/result/isError",
        "isError: false stated",
    ),
    (
        "s2c answer to tools/call",
        "/result/task/ttl",
        "the new server's retention",
    ),
    (
        "s2c notifications/tasks/status",
        "/params/ttl",
        "the new server's retention",
    ),
    (
        "s2c answer to tasks/get",
        "/result/ttl",
        "the new server's retention",
    ),
    (
        "s2c notifications/tasks/status",
        "/params/statusMessage",
        "the new server's own status text",
    ),
    (
        "s2c answer to tasks/get",
        "/result/statusMessage",
        "the new server's own status text",
    ),
];

/// What calling a tool the new server does not have leaves behind: its
/// answers become errors (`-32602` unknown tool, then unknown task), and
/// the questions and status notifications of its task never come. The
/// request ids after such a gap are labelled apart (`/id`), since the
/// masks number ids by first appearance.
const MISSING_TOOL_FALLOUT: &[&str] = &[
    "s2c answer to tools/call",
    "s2c answer to tasks/result",
    "s2c answer to tasks/get",
    "s2c error to tools/call",
    "s2c error to tasks/result",
    "s2c error to tasks/get",
    "s2c elicitation/create",
    "c2s answer to elicitation/create",
    "s2c notifications/tools/list_changed",
];

const TIMEOUT: Duration = Duration::from_secs(10);
/// For replays that are expected to wait in vain (the questions of tools
/// the server does not have): each such wait costs this much. The replies
/// that do come take milliseconds, so 2 s still tells the two apart on a
/// loaded machine.
const MISSING_TOOL_TIMEOUT: Duration = Duration::from_secs(2);

fn everything_entry() -> PathBuf {
    peers_dir().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
}

/// The server a plan is recorded against, as (program, args).
fn server(plan: &str) -> (String, Vec<String>) {
    let s = |v: &[&str]| v.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
    match plan {
        "everything" => (
            "node".into(),
            vec![everything_entry().display().to_string(), "stdio".into()],
        ),
        "sdk" => (
            "node".into(),
            vec![
                peers_dir()
                    .join("sdk_task_server.mjs")
                    .display()
                    .to_string(),
            ],
        ),
        "reference" => (
            shim_bin().into(),
            s(&["reference-server", "--revision", "2025-11-25"]),
        ),
        other => unreachable!("no plan {other}"),
    }
}

fn modern_reference() -> (String, Vec<String>) {
    (
        shim_bin().into(),
        vec![
            "reference-server".into(),
            "--revision".into(),
            "2026-07-28".into(),
        ],
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("shim-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let _ = std::fs::remove_file(&path);
    path
}

/// Records one run of `replay_client.mjs --plan PLAN` through
/// `mcp-tasks-shim stdio --record` in front of the plan's server.
fn record(plan: &str, tag: &str) -> Transcript {
    require_peers();
    let file = scratch(&format!("{plan}-{tag}.jsonl"));
    let (program, args) = server(plan);
    let mut cmd = Command::new("node");
    cmd.current_dir(peers_dir())
        .args([
            "replay_client.mjs",
            "--plan",
            plan,
            "--",
            shim_bin(),
            "stdio",
        ])
        .arg("--record")
        .arg(&file)
        .arg("--")
        .arg(program)
        .args(args);
    let (status, out) = run_bounded(&mut cmd, Duration::from_secs(60));
    assert!(status.success(), "the recording run failed: {out}");
    assert!(out.contains("\"done\":true"), "{out}");
    Transcript::read(&file).unwrap()
}

/// The recording of `plan`, made once for all the tests that replay it
/// (runs of one plan differ only in timing and ids, which the replay and
/// the masks absorb): server-everything's research task alone takes
/// seconds a run.
fn recording(plan: &str) -> Transcript {
    type Made = Mutex<HashMap<String, Arc<OnceLock<Transcript>>>>;
    static MADE: OnceLock<Made> = OnceLock::new();
    let once = MADE
        .get_or_init(Made::default)
        .lock()
        .unwrap()
        .entry(plan.to_owned())
        .or_default()
        .clone();
    once.get_or_init(|| record(plan, "shared")).clone()
}

async fn replay(
    recorded: &Transcript,
    (program, args): (String, Vec<String>),
    timeout: Duration,
) -> Replayed {
    let run = Replay::new(recorded.clone())
        .fast(true)
        .timeout(timeout)
        .against_command(&program, &args);
    // Bounded beyond the replayer's own per-message timeouts.
    tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the replay ends")
        .expect("the replay runs")
}

/// Every client message the replayer sent is valid 2025-11-25 (answers
/// to the server's requests checked against the request they answer).
fn assert_sent_valid(t: &Transcript) {
    let mut asked = std::collections::HashMap::new();
    for (line, r) in &t.records {
        let msg = r.msg.as_ref().unwrap().to_value();
        match r.dir {
            Dir::S2c => {
                if let (Some(id), Some(m)) = (msg.get("id"), msg["method"].as_str()) {
                    asked.insert(id.to_string(), m.to_owned());
                }
            }
            Dir::C2s => {
                let answered = msg
                    .get("id")
                    .filter(|_| msg.get("method").is_none())
                    .and_then(|id| asked.get(&id.to_string()))
                    .map(String::as_str);
                if let Err(e) = validate(Revision::Legacy, &msg, answered) {
                    panic!("replayed line {line} is not valid 2025-11-25: {e}");
                }
            }
        }
    }
}

fn c2s_count(t: &Transcript) -> usize {
    t.records.iter().filter(|(_, r)| r.dir == Dir::C2s).count()
}

/// The differences neither documented nor (when `missing_tools`) the
/// fallout of calling a tool the new server lacks.
fn undocumented(cmp: &Comparison, missing_tools: bool) -> Vec<String> {
    let documented = |what: &str, pointer: &str| {
        DOCUMENTED
            .iter()
            .any(|(w, p, _)| what == *w && pointer.starts_with(p))
            || (missing_tools && (MISSING_TOOL_FALLOUT.contains(&what) || pointer == "/id"))
    };
    let mut left = Vec::new();
    for d in &cmp.differences {
        match d {
            Difference::Unpaired { side, line, what } => {
                if !(missing_tools && MISSING_TOOL_FALLOUT.contains(&what.as_str())) {
                    left.push(format!("only in {side} line {line}: {what}"));
                }
            }
            Difference::Changed { what, lines, at } => {
                for (pointer, a, b) in at {
                    if !documented(what, pointer) {
                        left.push(format!("{what} {lines:?} {pointer}: {a:?} → {b:?}"));
                    }
                }
            }
        }
    }
    left
}

async fn against_its_own_server(plan: &str) {
    let recorded = recording(plan);
    let replayed = replay(&recorded, server(plan), TIMEOUT).await;
    assert!(replayed.unplaced.is_empty(), "{:?}", replayed.unplaced);
    assert_eq!(c2s_count(&replayed.transcript), c2s_count(&recorded));
    assert_sent_valid(&replayed.transcript);
    let cmp = compare(&recorded, &replayed.transcript, &Masks::default());
    assert!(cmp.is_equal(), "{}", cmp.render(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_replayed_against_itself_shows_no_difference() {
    against_its_own_server("everything").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_task_server_replayed_against_itself_shows_no_difference() {
    against_its_own_server("sdk").await;
}

/// Replays `plan`'s recording through the shim against the 2026-07-28
/// reference server; returns the comparison with the recording. The
/// recorded status notifications are not awaited (see [`STATUS`]): one
/// that never comes would hold the replay's end for the whole `timeout`.
async fn through_the_shim(plan: &str, timeout: Duration) -> (Transcript, Replayed, Comparison) {
    let recorded = recording(plan);
    let replayed = replay(&without(&recorded, STATUS), modern_reference(), timeout).await;
    let (replayed, cmp) = judged(&recorded, replayed);
    (recorded, replayed, cmp)
}

/// Checks what a replay through the bridge sent, and compares it with the
/// recording (status notifications left out, see [`STATUS`]).
fn judged(recorded: &Transcript, mut replayed: Replayed) -> (Replayed, Comparison) {
    assert_eq!(
        c2s_count(&replayed.transcript) + client_answers_unplaced(recorded, &replayed),
        c2s_count(recorded),
        "every client message sent, or reported: {:?}",
        replayed.unplaced
    );
    assert_sent_valid(&replayed.transcript);
    // Status notifications through the bridge are what the shim saw
    // upstream: one overtaken by the final result may never be sent.
    replayed
        .unplaced
        .retain(|u| method_at(recorded, u.line) != Some(STATUS.into()));
    let cmp = compare(
        &without(recorded, STATUS),
        &without(&replayed.transcript, STATUS),
        &Masks::default(),
    );
    (replayed, cmp)
}

/// Not compared through the bridge: see [`through_the_shim`].
const STATUS: &str = "notifications/tasks/status";

fn method_at(t: &Transcript, line: usize) -> Option<String> {
    let (_, r) = t.records.iter().find(|(l, _)| *l == line)?;
    r.msg.as_ref()?.method().map(str::to_owned)
}

fn without(t: &Transcript, method: &str) -> Transcript {
    Transcript {
        records: t
            .records
            .iter()
            .filter(|(_, r)| r.msg.as_ref().and_then(|m| m.method()) != Some(method))
            .cloned()
            .collect(),
    }
}

fn client_answers_unplaced(recorded: &Transcript, replayed: &Replayed) -> usize {
    let line_dir = |line: usize| {
        recorded
            .records
            .iter()
            .find(|(l, _)| *l == line)
            .map(|(_, r)| r.dir)
    };
    replayed
        .unplaced
        .iter()
        .filter(|u| line_dir(u.line) == Some(Dir::C2s))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_reference_through_the_shim_differs_only_where_documented() {
    let (_, replayed, cmp) = through_the_shim("reference", TIMEOUT).await;
    assert!(replayed.unplaced.is_empty(), "{:?}", replayed.unplaced);
    let left = undocumented(&cmp, false);
    assert!(left.is_empty(), "{left:#?}\n{}", cmp.render(false));
    // The bridge's own differences are there to see, not masked away.
    assert!(!cmp.is_equal());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdk_task_server_through_the_shim_differs_only_where_documented() {
    let (recorded, replayed, cmp) = through_the_shim("sdk", MISSING_TOOL_TIMEOUT).await;
    let left = undocumented(&cmp, true);
    assert!(left.is_empty(), "{left:#?}\n{}", cmp.render(false));
    // `greet` exists on both servers: its answer pairs, differing only in
    // the documented isError.
    assert_same_greeting(&recorded, &replayed.transcript);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_through_the_shim_differs_only_where_documented() {
    let (_, replayed, cmp) = through_the_shim("everything", MISSING_TOOL_TIMEOUT).await;
    let left = undocumented(&cmp, true);
    assert!(left.is_empty(), "{left:#?}\n{}", cmp.render(false));
    // What the reference server lacks is reported, not dropped.
    assert!(!replayed.unplaced.is_empty());
}

fn greeting(t: &Transcript) -> Option<Value> {
    t.records.iter().find_map(|(_, r)| {
        let msg = r.msg.as_ref()?.to_value();
        let text = msg.pointer("/result/content/0/text")?.as_str()?;
        text.starts_with("Hello, Ada").then(|| Value::from(text))
    })
}

fn assert_same_greeting(recorded: &Transcript, replayed: &Transcript) {
    let before = greeting(recorded).expect("the recording greets Ada");
    assert_eq!(greeting(replayed), Some(before));
}

/// A recorded answer to a server request that was never made cannot be
/// placed: the CLI names its line on stderr and exits 1, and still writes
/// the new transcript.
#[test]
fn an_unplaceable_message_is_named_with_its_line() {
    let file = scratch("unplaceable.jsonl");
    let lines = [
        r#"{"t":0,"session":"s","dir":"c2s","msg":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}}"#,
        r#"{"t":5,"session":"s","dir":"s2c","msg":{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"s","version":"1"}}}}"#,
        r#"{"t":6,"session":"s","dir":"c2s","msg":{"jsonrpc":"2.0","method":"notifications/initialized"}}"#,
        r#"{"t":7,"session":"s","dir":"c2s","msg":{"jsonrpc":"2.0","id":41,"result":{"action":"decline"}}}"#,
        r#"{"t":8,"session":"s","dir":"c2s","msg":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}"#,
    ];
    std::fs::write(&file, lines.join("\n")).unwrap();
    let out = scratch("unplaceable-out.jsonl");
    let mut cmd = Command::new(shim_bin());
    // Paced by the records' `t` (a few ms), not --fast.
    cmd.arg("replay")
        .arg(&file)
        .stdout(std::process::Stdio::null())
        .args(["--timeout", "5s", "-o"])
        .arg(&out)
        .args([
            "--",
            shim_bin(),
            "reference-server",
            "--revision",
            "2025-11-25",
        ]);
    let output = run_with_stderr(&mut cmd);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let named = format!("{}:4: not placed", file.display());
    assert!(stderr.contains(&named), "{stderr}");
    assert!(
        stderr.contains("answers the server's request 41"),
        "{stderr}"
    );
    let replayed = Transcript::read(&out).unwrap();
    assert!(
        replayed
            .records
            .iter()
            .any(|(_, r)| r.msg.as_ref().and_then(|m| m.method()) == Some("tools/list")),
        "the rest was replayed: {}",
        replayed.to_jsonl()
    );
}

/// Runs `cmd` (stdout as the caller set it up) to its end, bounded.
fn run_with_stderr(cmd: &mut Command) -> std::process::Output {
    let child = cmd.stderr(std::process::Stdio::piped()).spawn().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("replay ends in time")
        .unwrap()
}

/// The library against a server in this process: the 2026-07-28 reference
/// server on `upstream::channel`, probed, replayed through the bridge with
/// `against_link`. The differences are the documented ones, snapshotted
/// (without line numbers, which follow the timing of status notifications).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_replays_against_an_in_process_server() {
    let recorded = recording("reference");
    let (conn, events, mut server_end) = channel::pair(Duration::from_secs(30));
    let server = ReferenceServer::new(Revision::Modern, server_end.to_shim.clone());
    tokio::spawn(async move {
        while let Some(msg) = server_end.from_shim.recv().await {
            server.handle(msg);
        }
    });
    let link = Link::probe(conn, events, Duration::from_secs(5)).await;
    assert_eq!(link.revision(), Revision::Modern);
    // Status notifications are not awaited, as in `through_the_shim`.
    let run = Replay::new(without(&recorded, STATUS))
        .fast(true)
        .timeout(TIMEOUT)
        .against_link(link);
    let replayed = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the replay ends")
        .expect("the replay runs");
    let (replayed, cmp) = judged(&recorded, replayed);
    assert!(replayed.unplaced.is_empty(), "{:?}", replayed.unplaced);
    let left = undocumented(&cmp, false);
    assert!(left.is_empty(), "{left:#?}\n{}", cmp.render(false));
    let seen: Vec<Value> = cmp
        .differences
        .iter()
        .map(|d| match d {
            Difference::Changed { what, at, .. } => serde_json::json!({
                "what": what,
                "at": at.iter().map(|(p, a, b)| serde_json::json!([p, a, b])).collect::<Vec<_>>(),
            }),
            Difference::Unpaired { side, what, .. } => {
                serde_json::json!({"only in": side.to_string(), "what": what})
            }
        })
        .collect();
    insta::with_settings!({snapshot_path => "../snapshots"}, {
        insta::assert_json_snapshot!("replay_legacy_reference_through_the_shim", seen);
    });
}

/// A 2026-07-28 session (a raw client on `mcp-tasks-shim stdio --record`
/// in front of the modern reference server) replayed directly against a
/// fresh modern reference server: the task id the live server assigns
/// reaches the later `tasks/get` and `tasks/update`, and what the replayer
/// sends is valid 2026-07-28.
#[test]
fn a_modern_session_replays_with_the_live_task_id() {
    let (recorded, task) = record_modern();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let replayed = rt.block_on(replay(&recorded, modern_reference(), TIMEOUT));
    // Every read is answered, whatever status it finds (the statuses of
    // a fast replay's reads are timing, not compared here).
    assert!(replayed.unplaced.is_empty(), "{:?}", replayed.unplaced);
    assert_eq!(c2s_count(&replayed.transcript), c2s_count(&recorded));
    let live_task = replayed
        .transcript
        .records
        .iter()
        .find_map(|(_, r)| {
            let m = r.msg.as_ref()?.to_value();
            (r.dir == Dir::S2c).then(|| m.pointer("/result/taskId")?.as_str().map(str::to_owned))?
        })
        .expect("the live server created a task");
    assert_ne!(live_task, task, "a fresh server assigns a fresh id");
    for (line, r) in &replayed.transcript.records {
        let m = r.msg.as_ref().unwrap().to_value();
        if r.dir == Dir::C2s
            && m["method"]
                .as_str()
                .is_some_and(|x| x.starts_with("tasks/"))
        {
            assert_eq!(
                m["params"]["taskId"],
                live_task.as_str(),
                "line {line}: {m}"
            );
        }
    }
    support::schema::assert_conversation_valid(
        replayed
            .transcript
            .records
            .iter()
            .filter(|(_, r)| r.dir == Dir::C2s)
            .map(|(_, r)| (Revision::Modern, "c2s", r.msg.as_ref().unwrap().to_value())),
    );
}

/// Records a 2026-07-28 task with one question (`confirm_delete`), read
/// with `tasks/get` and answered with `tasks/update`; returns the
/// transcript and the recorded task id.
fn record_modern() -> (Transcript, String) {
    let file = scratch("modern.jsonl");
    let mut cmd = Command::new(shim_bin());
    cmd.arg("stdio").arg("--record").arg(&file).arg("--");
    cmd.args(support::wire::modern_reference());
    let mut w = Wire::from_command(cmd, Revision::Modern);
    let meta = serde_json::json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}},
            "extensions": {"io.modelcontextprotocol/tasks": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "replay-modern", "version": "1"}});
    w.ok("server/discover", serde_json::json!({"_meta": meta}));
    let created = w.ok(
        "tools/call",
        serde_json::json!({"name": "confirm_delete", "arguments": {"filename": "a.txt"}, "_meta": meta}),
    );
    let task = created["taskId"].as_str().expect("a task").to_owned();
    let get = serde_json::json!({"taskId": task, "_meta": meta});
    let asked = (0..200)
        .map(|_| w.ok("tasks/get", get.clone()))
        .find(|t| t["status"] == "input_required")
        .expect("the task asks within 200 reads");
    let key = asked["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let answer = serde_json::json!({"action": "accept", "content": {"confirm": true}});
    w.ok(
        "tasks/update",
        serde_json::json!({"taskId": task, "inputResponses": {key: answer}, "_meta": meta}),
    );
    let done = (0..200)
        .map(|_| w.ok("tasks/get", get.clone()))
        .find(|t| t["status"] == "completed");
    assert!(done.is_some(), "the task completes within 200 reads");
    w.close_stdin();
    w.wait_exit(Duration::from_secs(20))
        .expect("the shim exits");
    (Transcript::read(&file).unwrap(), task)
}

/// The CLI against a Streamable HTTP server (`--url`): the 2026-07-28
/// reference server on 127.0.0.1, bridged; the new transcript on stdout.
#[test]
fn the_cli_replays_against_a_url() {
    let recorded = recording("reference");
    let mut server = Command::new(shim_bin())
        .args([
            "reference-server",
            "--revision",
            "2026-07-28",
            "--http",
            "127.0.0.1:0",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = server.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("the server listens");
    let url = line.split_whitespace().last().expect("a URL").to_owned();
    let file = scratch("url-recorded.jsonl");
    std::fs::write(&file, recorded.to_jsonl()).unwrap();
    let mut cmd = Command::new(shim_bin());
    cmd.arg("replay")
        .arg(&file)
        .args(["--fast", "--url", &url])
        .stdout(std::process::Stdio::piped());
    let output = run_with_stderr(&mut cmd);
    let _ = server.kill();
    let _ = server.wait();
    let stderr = String::from_utf8_lossy(&output.stderr);
    // Only a status notification may be left unplaced (see STATUS).
    for l in stderr.lines().filter(|l| l.contains("not placed")) {
        assert!(l.contains(STATUS), "{stderr}");
    }
    assert!(matches!(output.status.code(), Some(0 | 1)), "{stderr}");
    let text = String::from_utf8(output.stdout).unwrap();
    let replayed = Replayed {
        transcript: Transcript::parse(&text).unwrap(),
        unplaced: Vec::new(),
    };
    let (_, cmp) = judged(&recorded, replayed);
    let left = undocumented(&cmp, false);
    assert!(left.is_empty(), "{left:#?}\n{}", cmp.render(false));
}

/// What stops a replay before it starts is an error (exit 2), named: a
/// transcript whose client never tells its revision, a server that cannot
/// be started.
#[test]
fn a_replay_that_cannot_start_exits_2_and_says_why() {
    let vague = scratch("vague.jsonl");
    std::fs::write(
        &vague,
        r#"{"dir":"c2s","msg":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}"#,
    )
    .unwrap();
    let good = scratch("good.jsonl");
    std::fs::write(
        &good,
        r#"{"dir":"c2s","msg":{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}}"#,
    )
    .unwrap();
    let cases: [(&PathBuf, &str, &str); 2] = [
        (&vague, shim_bin(), "tells its revision"),
        (&good, "/nonexistent/mcp-server", "cannot start upstream"),
    ];
    for (file, server, why) in cases {
        let mut cmd = Command::new(shim_bin());
        cmd.arg("replay")
            .arg(file)
            .args(["--fast", "--", server])
            .stdout(std::process::Stdio::null());
        let output = run_with_stderr(&mut cmd);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(why), "{why}: {stderr}");
    }
}
