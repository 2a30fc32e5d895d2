//! What an operator reads on the shim's stderr: JSON log lines a log
//! collector can take whole (no key twice in one object), one timestamp
//! format in text and JSON, and the start-up summary of what 2025-11-25
//! clients will be shown.

mod support;

use std::collections::HashSet;
use std::fmt;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Value, json};
use support::schema::{Revision, assert_valid};
use support::wire::{exited_within, modern_reference, shim_bin};

/// Generous: a failure guard on a busy 2-core machine, not a timing claim.
const WAIT: Duration = Duration::from_secs(30);

/// The summary's message (its fields carry the facts).
const SUMMARY: &str = "2025-11-25 clients see these tools with this taskSupport";

/// A JSON value read with every object's keys checked: a key given twice
/// is an error naming it (serde_json's `Value` keeps the last silently,
/// as jq does).
struct Unique;

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(UniqueVisitor)
    }
}

struct UniqueVisitor;

impl<'de> Visitor<'de> for UniqueVisitor {
    type Value = Unique;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_str<E>(self, _: &str) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_unit<E>(self) -> Result<Unique, E> {
        Ok(Unique)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Unique, A::Error> {
        while seq.next_element::<Unique>()?.is_some() {}
        Ok(Unique)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Unique, A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format!("key {key:?} appears twice")));
            }
            map.next_value::<Unique>()?;
        }
        Ok(Unique)
    }
}

/// Fails unless `line` is one JSON object with no key twice at any level.
#[track_caller]
fn assert_unique_keys(line: &str) {
    if let Err(e) = serde_json::from_str::<Unique>(line) {
        panic!("{e}: {line}");
    }
}

#[test]
fn the_duplicate_detector_catches_a_nested_duplicate() {
    assert_unique_keys(r#"{"fields":{"message":"a","upstream_message":"b"},"a":[{"x":1}]}"#);
    let twice = r#"{"fields":{"message":"a","message":"b"}}"#;
    assert!(serde_json::from_str::<Unique>(twice).is_err());
    assert!(serde_json::from_str::<Unique>(r#"[{"k":1,"k":2}]"#).is_err());
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`: RFC 3339, UTC, milliseconds.
fn is_iso_ms(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
    b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z'
}

/// Kills the child if a test fails before it exits.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Lines of `pipe`, read on a thread.
fn lines_of(pipe: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Lines from `rx` until one satisfies `done` (returned last) or `WAIT`
/// passes (a panic showing what came).
#[track_caller]
fn read_until(rx: &Receiver<String>, what: &str, done: impl Fn(&str) -> bool) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let last = done(&line);
        seen.push(line);
        if last {
            return seen;
        }
    }
    panic!("no {what} within {WAIT:?}; read: {seen:#?}");
}

/// A 2025-11-25 client that declared no sampling calls `summarize` as a
/// task in front of a 2026-07-28 server, which asks for sampling mid-task:
/// the shim fails the task and logs so (warn), with the reason. That event used
/// to carry a second `message` in `fields` (the reason), which JSON
/// readers silently dropped. Every stderr line is checked, and the summary
/// is read from the same run.
#[test]
fn json_log_lines_have_no_key_twice_and_the_summary_names_each_tools_task_support() {
    let mut shim = Killed(
        Command::new(shim_bin())
            .args(["--log-format", "json", "--log", "info", "stdio"])
            .args(["--task-support", "greet=required"])
            .args(["--max-task-ttl", "2m", "--"])
            .args(modern_reference())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the shim"),
    );
    let mut stdin = shim.0.stdin.take().expect("piped stdin");
    let out = lines_of(shim.0.stdout.take().expect("piped stdout"));
    let err = lines_of(shim.0.stderr.take().expect("piped stderr"));
    let mut send = |msg: Value| {
        writeln!(stdin, "{msg}").expect("write to the shim");
        stdin.flush().expect("flush");
    };
    send(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "ops-logs", "version": "1.0.0"}}}));
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "summarize", "arguments": {"text": "a long text"},
            "task": {"ttl": 60_000}}}));
    let methods = [(1, "initialize"), (2, "tools/call"), (3, "tasks/result")];
    let deadline = Instant::now() + WAIT;
    let mut result = None;
    while result.is_none() {
        assert!(Instant::now() < deadline, "no tasks/result within {WAIT:?}");
        let Ok(line) = out.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let msg: Value = serde_json::from_str(&line).expect("a JSON-RPC line");
        let answered = methods
            .iter()
            .find(|(id, _)| msg.get("method").is_none() && msg["id"] == *id)
            .map(|(_, method)| *method);
        assert_valid(Revision::Legacy, &msg, answered);
        match (answered, msg["method"].as_str()) {
            (Some("tools/call"), _) => {
                let task_id = msg["result"]["task"]["taskId"].clone();
                assert!(task_id.is_string(), "no task: {msg}");
                send(json!({"jsonrpc": "2.0", "id": 3, "method": "tasks/result",
                    "params": {"taskId": task_id}}));
            }
            (Some("tasks/result"), _) => result = Some(msg),
            _ => {}
        }
    }
    let result = result.expect("the loop ends on it");
    assert!(result.get("error").is_some(), "{result}");
    drop(stdin);
    exited_within(&mut shim.0, WAIT, "the shim after its client closed stdin");
    // Up to the end of stderr (the reading thread may lag the exit).
    let mut lines = Vec::new();
    while let Ok(line) = err.recv_timeout(WAIT) {
        lines.push(line);
    }
    let mut undeliverable = None;
    let mut summary = None;
    for line in &lines {
        assert_unique_keys(line);
        let v: Value = serde_json::from_str(line).expect("checked above");
        let timestamp = v["timestamp"].as_str().unwrap_or_default();
        assert!(is_iso_ms(timestamp), "timestamp {timestamp:?}: {line}");
        match v["fields"]["message"].as_str() {
            Some("input the client cannot give; failing the task") => undeliverable = Some(v),
            Some(SUMMARY) => summary = Some(v),
            _ => {}
        }
    }
    let undeliverable = undeliverable.unwrap_or_else(|| panic!("not logged: {lines:#?}"));
    assert!(
        undeliverable["fields"]["client_error"].is_string(),
        "{undeliverable}"
    );
    let summary = summary.unwrap_or_else(|| panic!("no summary: {lines:#?}"));
    let fields = &summary["fields"];
    let support = fields["task_support"].as_str().unwrap_or_default();
    // The reference server offers tasks: unnamed tools are optional.
    for expected in ["greet=required", "confirm_delete=optional"] {
        assert!(support.contains(expected), "{expected}: {summary}");
    }
    assert_eq!(fields["max_task_ttl_ms"], 120_000, "{summary}");
    assert_eq!(fields["upstream"], "2026-07-28", "{summary}");
    assert!(
        fields["principals"]
            .as_str()
            .unwrap_or_default()
            .contains("stdio"),
        "{summary}"
    );
}

/// `http` logs the summary too, in text, with the principal mode: how
/// many tokens (never a token) and the trusted header. Text and JSON log
/// lines carry the same timestamp format.
#[test]
fn the_http_summary_names_the_principal_mode_and_never_a_token() {
    let mut shim = Killed(
        Command::new(shim_bin())
            .args(["--log", "info", "http", "--listen", "127.0.0.1:0"])
            .args(["--token", "S3cretT0ken=alice", "--token", "0therT0ken=bob"])
            .args(["--principal-header", "X-User", "--"])
            .args(modern_reference())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn the shim"),
    );
    let err = lines_of(shim.0.stderr.take().expect("piped stderr"));
    let lines = read_until(&err, "summary", |l| l.contains(SUMMARY));
    let summary = lines.last().expect("read_until returns the match");
    let timestamp = summary.split(' ').next().unwrap_or_default();
    assert!(is_iso_ms(timestamp), "timestamp {timestamp:?}: {summary}");
    assert!(
        summary.contains("bearer tokens (2) and trusted header x-user"),
        "{summary}"
    );
    assert!(summary.contains("greet=optional"), "{summary}");
    assert!(summary.contains("max_task_ttl_ms=3600000"), "{summary}");
    for line in &lines {
        assert!(
            !line.contains("S3cretT0ken") && !line.contains("0therT0ken"),
            "{line}"
        );
    }
}
