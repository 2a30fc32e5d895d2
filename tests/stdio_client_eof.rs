//! A stdio client closing its side (stdin) while the session still has
//! work: the real shim binary over real pipes, in front of the reference
//! server as a real child process.
//!
//! - Whatever the child answers after the client closed is still relayed,
//!   and the shim then exits 0 (pass-through, both revisions; translating,
//!   for a call already sent upstream, in front of a server that finishes
//!   its work at end of input: `fault_relay.py drain`).
//! - A question the shim put to the client (`elicitation/create`) that the
//!   client leaves unanswered does not keep the shim alive: the request
//!   waiting on it is answered with an error and the shim exits 0.
//!
//! Every wait is bounded.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use support::schema::{Revision, assert_valid};
use support::wire::{
    REQUEST_TIMEOUT, Wire, read_jsonl, recorded, recording_upstream, shim_bin, temp_path,
};

/// How long the shim may take to exit once its client has closed stdin
/// (the guide: the child gets 3 s before it is killed).
const EXIT: Duration = Duration::from_secs(6);

/// `mcp-tasks-shim stdio <flags> -- <upstream…>` with piped stdin and
/// stdout; the lines it writes arrive on the receiver as it writes them.
fn spawn_stdio(flags: &[&str], upstream: &[&str]) -> (Child, Receiver<String>) {
    let mut child = Command::new(shim_bin())
        .arg("stdio")
        .args(flags)
        .arg("--")
        .args(upstream)
        .env("RUST_LOG", "off")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the shim");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}

/// The shim's exit status, or a panic (the shim killed) if it is still
/// running [`EXIT`] after its client closed stdin.
fn exited(child: &mut Child) -> std::process::ExitStatus {
    support::wire::exited_within(child, EXIT, "the shim (its client closed stdin)")
}

fn json_line(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

/// Runs `mcp-tasks-shim stdio <flags> -- <reference server of revision
/// rev>`, writes `lines` and closes its stdin at once; returns the shim's
/// exit status and every line it wrote, or panics if it is still running
/// after [`EXIT`].
fn write_and_close(
    rev: &str,
    flags: &[&str],
    lines: &[Value],
) -> (std::process::ExitStatus, Vec<Value>) {
    let (mut child, rx) = spawn_stdio(flags, &[shim_bin(), "reference-server", "--revision", rev]);
    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut all = String::new();
    for line in lines {
        all.push_str(&format!("{line}\n"));
    }
    stdin.write_all(all.as_bytes()).expect("write to the shim");
    drop(stdin);
    let status = exited(&mut child);
    let mut written = Vec::new();
    loop {
        match rx.recv_timeout(EXIT) {
            Ok(line) => written.push(json_line(&line)),
            Err(RecvTimeoutError::Disconnected) => break,
            Err(RecvTimeoutError::Timeout) => panic!("the shim's stdout outlived it"),
        }
    }
    (status, written)
}

/// Sends `lines` (requests with ids `ids`) and closes stdin, 20 times:
/// each time, every request is answered (schema-valid) and the shim
/// exits 0.
fn every_answer_arrives(rev: &str, flags: &[&str], lines: &[Value], ids: &[i64]) {
    for round in 1..=20 {
        let (status, written) = write_and_close(rev, flags, lines);
        let mut answered: Vec<i64> = written.iter().filter_map(|m| m["id"].as_i64()).collect();
        answered.sort_unstable();
        assert_eq!(
            answered, ids,
            "round {round}: answers lost after the client closed stdin; got {written:#?}"
        );
        let schema = if rev == "2025-11-25" {
            Revision::Legacy
        } else {
            Revision::Modern
        };
        for m in &written {
            assert!(m.get("result").is_some(), "round {round}: {m}");
            let asked = lines.iter().find(|l| l["id"] == m["id"]);
            assert_valid(schema, m, asked.and_then(|l| l["method"].as_str()));
        }
        assert!(status.success(), "round {round}: exit status {status}");
    }
}

fn legacy_init_and_ping() -> [Value; 2] {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "eof", "version": "1"}}});
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    [init, ping]
}

#[test]
fn legacy_pass_through_relays_every_answer_after_the_client_closes() {
    every_answer_arrives("2025-11-25", &[], &legacy_init_and_ping(), &[0, 1]);
}

/// With a transcript, answers take the driver's way instead of the
/// reader thread's.
#[test]
fn recorded_pass_through_relays_every_answer_after_the_client_closes() {
    let record = support::wire::temp_path("eof-record.jsonl");
    let record_arg = record.to_string_lossy().into_owned();
    every_answer_arrives(
        "2025-11-25",
        &["--record", &record_arg],
        &legacy_init_and_ping(),
        &[0, 1],
    );
    let _ = std::fs::remove_file(&record);
}

/// A call that takes a while, sent just before the client closes: the
/// reference server answers what it was asked before its input ended, and
/// the shim relays it. (The server used to exit 200 ms after the end of
/// its input, and the call was answered "upstream exited".)
#[test]
fn a_slow_call_sent_before_the_client_closes_is_answered() {
    let [init, _] = legacy_init_and_ping();
    let slow = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "slow_compute", "arguments": {"seconds": 1}}});
    for round in 1..=3 {
        let (status, written) = write_and_close("2025-11-25", &[], &[init.clone(), slow.clone()]);
        let answer = written
            .iter()
            .find(|m| m["id"] == 2)
            .unwrap_or_else(|| panic!("round {round}: no answer to the call: {written:#?}"));
        assert_valid(Revision::Legacy, answer, Some("tools/call"));
        let said = answer["result"]["content"][0]["text"].to_string();
        assert!(
            said.contains("finished after 1 s"),
            "round {round}: {answer}"
        );
        assert!(status.success(), "round {round}: exit status {status}");
    }
}

#[test]
fn modern_pass_through_relays_every_answer_after_the_client_closes() {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "eof", "version": "1"},
    });
    let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
        "params": {"_meta": meta}});
    let tools = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list",
        "params": {"_meta": meta}});
    every_answer_arrives("2026-07-28", &[], &[discover, tools], &[1, 2]);
}

/// Translating (a 2026-07-28 client, a 2025-11-25 server that finishes
/// its work when its input ends): the answer to a call the shim had sent
/// upstream before the client closed still comes back, instead of an
/// error saying the client left.
#[test]
fn a_translating_session_relays_the_answer_of_a_call_in_flight() {
    let relay = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/fault_relay.py");
    let relay = relay.to_string_lossy();
    let drain = [
        "python3",
        &relay,
        "drain",
        "--",
        shim_bin(),
        "reference-server",
        "--revision",
        "2025-11-25",
    ];
    let (sent, got) = (
        temp_path("eof-drain-sent.jsonl"),
        temp_path("eof-drain-got.jsonl"),
    );
    let recording = recording_upstream(&drain, &sent, &got);
    let upstream: Vec<&str> = recording.iter().map(String::as_str).collect();
    let (mut child, rx) = spawn_stdio(&[], &upstream);
    let next = || -> Value { json_line(&rx.recv_timeout(REQUEST_TIMEOUT).expect("an answer")) };
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "eof", "version": "1"},
    });
    let mut stdin = child.stdin.take().expect("piped stdin");
    // Answered first: the upstream is up before the call goes out.
    let tools =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}});
    writeln!(stdin, "{tools}").expect("write");
    assert_eq!(next()["id"], 1);
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "slow_compute", "arguments": {"seconds": 2, "label": "late"}, "_meta": meta}});
    writeln!(stdin, "{call}").expect("write");
    // The client leaves once the call has reached the server, before its
    // 2 s are up (and well inside the 3 s a stopping upstream is given).
    let upstream_call = recorded(&sent, Instant::now() + REQUEST_TIMEOUT, |m| {
        m["method"] == "tools/call"
    });
    drop(stdin);
    assert!(
        !read_jsonl(&got)
            .iter()
            .any(|m| m["id"] == upstream_call["id"] && m.get("method").is_none()),
        "the server answered before the client left"
    );
    let answer = next();
    assert_eq!(answer["id"], 2, "{answer}");
    assert!(
        answer.get("result").is_some(),
        "the call's own answer: {answer}"
    );
    assert_valid(Revision::Modern, &answer, Some("tools/call"));
    let status = exited(&mut child);
    assert!(status.success(), "exit status {status}");
    let _ = std::fs::remove_file(&sent);
    let _ = std::fs::remove_file(&got);
}

/// Legacy client, modern upstream: the client is asked to confirm and
/// leaves instead of answering, while `waiting` (sent by `start`) waits
/// for that answer.
fn leaving_with_an_elicitation_unanswered(start: impl FnOnce(&mut Wire) -> Value) {
    let mut shim = Wire::legacy_front(&[]);
    shim.initialize();
    shim.auto_answer = false;
    let waiting = start(&mut shim);
    let deadline = Instant::now() + REQUEST_TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let m = shim
            .next(left)
            .expect("the shim asks the client to confirm");
        if m["method"] == "elicitation/create" {
            break;
        }
    }
    shim.close_stdin();
    let status = shim
        .wait_exit(EXIT)
        .expect("the shim exits after its client closed stdin, question unanswered");
    assert!(status.success(), "exit status {status}");
    let answer = shim
        .take_backlog()
        .into_iter()
        .find(|m| m["id"] == waiting && m.get("method").is_none())
        .expect("the waiting request is answered");
    assert_eq!(answer["error"]["code"], -32603, "{answer}");
}

#[test]
fn an_unanswered_elicitation_in_a_call_does_not_keep_the_shim_alive() {
    leaving_with_an_elicitation_unanswered(|shim| {
        shim.request(
            "tools/call",
            json!({"name": "confirm_delete", "arguments": {"filename": "x"}}),
        )
    });
}

#[test]
fn an_unanswered_elicitation_in_a_blocking_tasks_result_does_not_keep_the_shim_alive() {
    leaving_with_an_elicitation_unanswered(|shim| {
        let created = shim.ok(
            "tools/call",
            json!({"name": "confirm_delete", "arguments": {"filename": "x"},
                "task": {"ttl": 60_000}}),
        );
        let id = created["task"]["taskId"].clone();
        assert!(id.is_string(), "{created}");
        shim.request("tasks/result", json!({"taskId": id}))
    });
}
