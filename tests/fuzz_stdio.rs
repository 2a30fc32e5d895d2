//! Fuzzing a real `mcp-tasks-shim stdio` child with damaged lines: random
//! bytes, truncated and bit-flipped messages, invalid UTF-8, batches, deep
//! nesting, an oversized line. See docs/fuzzing.md.
//!
//! Properties:
//! - the shim never crashes or goes quiet: after every damaged line a
//!   sentinel `ping` is still answered;
//! - every line it writes is one valid JSON-RPC message (schema-valid for
//!   the client's revision when it is an error);
//! - a line the parser refuses is answered with exactly one error (with
//!   the request id when it can be read); a line that parses as a request
//!   is answered exactly once; notifications and stray responses get
//!   nothing.

mod fuzz_gen;
mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use fuzz_gen::*;
use mcp_tasks_shim::jsonrpc::{Message, salvage_id};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::schema::{Revision, validate};
use support::wire::shim_bin;

/// Per sentinel: how long the shim may take to answer a `ping`.
const ANSWER: Duration = Duration::from_secs(20);

struct Shim {
    child: Child,
    stdin: ChildStdin,
    lines: Receiver<Option<Vec<u8>>>,
    rev: Revision,
}

impl Drop for Shim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Shim {
    /// A shim whose client speaks `rev`, in front of the other revision's
    /// reference server, with the session's revision already settled.
    fn start(rev: Revision) -> Shim {
        let upstream = match rev {
            Revision::Legacy => "2026-07-28",
            Revision::Modern => "2025-11-25",
        };
        let mut child = Command::new(shim_bin())
            .args(["stdio", "--probe-timeout", "3s", "--"])
            .args([shim_bin(), "reference-server", "--revision", upstream])
            .env("RUST_LOG", "off")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn the shim");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            loop {
                let mut buf = Vec::new();
                match r.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => {
                        let _ = tx.send(None);
                        return;
                    }
                    Ok(_) => {
                        if tx.send(Some(buf)).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let stdin = child.stdin.take().unwrap();
        let mut shim = Shim {
            child,
            stdin,
            lines,
            rev,
        };
        let first = match rev {
            Revision::Legacy => json!({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "fuzz", "version": "1"}}}),
            Revision::Modern => mcp_tasks_shim::revision::probe_request(
                "init".into(),
                &json!({"name": "fuzz", "version": "1"}),
            )
            .to_value(),
        };
        shim.write(first.to_string().as_bytes());
        let got = shim
            .until_answer(&json!("init"))
            .expect("the shim answers its first request");
        assert!(got.iter().all(|m| m.get("error").is_none()), "{got:?}");
        shim
    }

    fn write(&mut self, line: &[u8]) {
        self.stdin.write_all(line).expect("write to the shim");
        self.stdin.write_all(b"\n").expect("write to the shim");
        self.stdin.flush().expect("flush");
    }

    /// The next message before `until` (`None` on timeout), checked, with
    /// the shim's own requests answered the way a cooperative client would.
    fn next(&mut self, until: Instant) -> Result<Option<Value>, String> {
        let wait = until.saturating_duration_since(Instant::now());
        let line = match self.lines.recv_timeout(wait) {
            Ok(Some(l)) => l,
            Ok(None) | Err(RecvTimeoutError::Disconnected) => {
                let status = self.child.try_wait().ok().flatten();
                return Err(format!("the shim closed its output (exit: {status:?})"));
            }
            Err(RecvTimeoutError::Timeout) => return Ok(None),
        };
        let v: Value = serde_json::from_slice(&line).map_err(|e| {
            format!(
                "a line that is not JSON ({e}): {}",
                String::from_utf8_lossy(&line)
            )
        })?;
        check_jsonrpc(&v)?;
        if v.get("error").is_some() || v.get("method").is_some() {
            validate(self.rev, &v, None)?;
        }
        if v.get("method").is_some() && v.get("id").is_some() {
            let a = support::wire::auto_answer(&v);
            self.write(a.to_string().as_bytes());
        }
        Ok(Some(v))
    }

    /// Every message up to and including the answer to `id`.
    fn until_answer(&mut self, id: &Value) -> Result<Vec<Value>, String> {
        let deadline = Instant::now() + ANSWER;
        let mut got = Vec::new();
        loop {
            let Some(v) = self.next(deadline)? else {
                return Err(format!("no answer to {id} within {ANSWER:?}; got {got:?}"));
            };
            let done = v.get("method").is_none() && v.get("id") == Some(id);
            got.push(v);
            if done {
                return Ok(got);
            }
        }
    }
}

/// What one damaged line must produce, predicted with the library parser.
fn expected(line: &[u8]) -> Expect {
    // The driver trims ASCII whitespace and skips blank lines.
    let trimmed = line.trim_ascii();
    if trimmed.is_empty() {
        return Expect::Nothing;
    }
    match Message::parse(trimmed) {
        Ok(Message::Request(r)) => Expect::Answer(r.id),
        Ok(_) => Expect::Nothing,
        Err(_) => Expect::Refusal(salvage_id(trimmed)),
    }
}

#[derive(Debug)]
enum Expect {
    Nothing,
    Answer(mcp_tasks_shim::jsonrpc::Id),
    Refusal(Option<mcp_tasks_shim::jsonrpc::Id>),
}

/// Damaged lines, one message each (no raw newline inside).
fn arb_line() -> impl Strategy<Value = Vec<u8>> {
    arb_wire_bytes().prop_map(|mut b| {
        b.retain(|&c| c != b'\n');
        b
    })
}

fn run(rev: Revision, lines: Vec<Vec<u8>>) -> Result<(), TestCaseError> {
    let mut shim = Shim::start(rev);
    let mut later: HashMap<String, usize> = HashMap::new();
    let mut seen: Vec<Value> = Vec::new();
    for (n, line) in lines.iter().enumerate() {
        let mut line = line.clone();
        // Keep requests the line might start quick and harmless: a
        // damaged `slow_compute` could otherwise ask for an hour.
        if let Ok(mut v) = serde_json::from_slice::<Value>(&line)
            && v.pointer("/params/arguments/seconds").is_some()
        {
            v["params"]["arguments"]["seconds"] = json!(0.1);
            line = v.to_string().into_bytes();
        }
        let want = expected(&line);
        shim.write(&line);
        let sentinel = json!(format!("sentinel-{n}"));
        let ping = match rev {
            Revision::Legacy => json!({"jsonrpc": "2.0", "id": sentinel, "method": "ping"}),
            Revision::Modern => {
                let mut p = mcp_tasks_shim::revision::probe_request(
                    "x".into(),
                    &json!({"name": "fuzz", "version": "1"}),
                )
                .to_value();
                p["id"] = sentinel.clone();
                p
            }
        };
        shim.write(ping.to_string().as_bytes());
        let got = shim.until_answer(&sentinel).map_err(|e| {
            TestCaseError::fail(format!(
                "after line {:?}: {e}",
                String::from_utf8_lossy(&line)
            ))
        })?;
        let before: Vec<&Value> = got[..got.len() - 1].iter().collect();
        seen.extend(before.iter().map(|v| (*v).clone()));
        if let Expect::Refusal(id) = &want {
            // The refusal is written before the sentinel is even read.
            let id = id.as_ref().map(|i| serde_json::to_value(i).unwrap());
            let refusals = before
                .iter()
                .filter(|v| v.get("error").is_some() && v.get("id") == id.as_ref())
                .count();
            prop_assert_eq!(
                refusals,
                1,
                "line {:?} got {:?}",
                String::from_utf8_lossy(&line),
                before
            );
        }
        // Every answer carrying an id is counted below, refusals included.
        if let Expect::Answer(id) | Expect::Refusal(Some(id)) = want {
            *later
                .entry(serde_json::to_value(&id).unwrap().to_string())
                .or_default() += 1;
        }
    }
    // Requests among the lines: each answered exactly once, eventually.
    let answered = |seen: &[Value], id: &str| {
        seen.iter()
            .filter(|v| {
                v.get("method").is_none()
                    && v.get("id").map(Value::to_string).as_deref() == Some(id)
            })
            .count()
    };
    let deadline = Instant::now() + ANSWER;
    while later.iter().any(|(id, n)| answered(&seen, id) < *n) {
        match shim.next(deadline).map_err(TestCaseError::fail)? {
            Some(v) => seen.push(v),
            None => break,
        }
    }
    for (id, n) in &later {
        let a = answered(&seen, id);
        // Two pending requests with one id are the client's mistake; each
        // still gets an answer, but which is which cannot be told.
        prop_assert!(
            a == *n || (*n > 1 && a >= 1 && a <= *n),
            "request id {} sent {} time(s), answered {} time(s)",
            id,
            n,
            a
        );
    }
    prop_assert!(shim.child.try_wait().unwrap().is_none(), "the shim exited");
    Ok(())
}

proptest! {
    #![proptest_config(config(file!(), 12))]

    #[test]
    fn legacy_client_lines(lines in prop::collection::vec(arb_line(), 1..16)) {
        run(Revision::Legacy, lines)?;
    }

    #[test]
    fn modern_client_lines(lines in prop::collection::vec(arb_line(), 1..16)) {
        run(Revision::Modern, lines)?;
    }
}

/// A line over the 16 MiB bound is refused with `-32600` under its id (read
/// from the line's start) and skipped; the session goes on.
#[test]
fn an_oversized_line_is_refused_and_the_session_goes_on() {
    let mut shim = Shim::start(Revision::Legacy);
    let mut line = br#"{"jsonrpc":"2.0","id":"big","method":"ping","params":{"pad":""#.to_vec();
    line.extend(std::iter::repeat_n(b'x', 17 << 20));
    line.extend_from_slice(br#""}}"#);
    shim.write(&line);
    shim.write(br#"{"jsonrpc":"2.0","id":"after","method":"ping"}"#);
    let got = shim.until_answer(&json!("after")).unwrap();
    let refusal = got
        .iter()
        .find(|v| v.get("error").is_some())
        .expect("a refusal");
    assert_eq!(refusal["error"]["code"], -32600);
    assert_eq!(
        refusal["id"], "big",
        "the refusal answers the request: {refusal}"
    );
}
