//! `reference-server --seed N`: two runs of one conversation read the same,
//! task ids and timestamps included, so a transcript of it can be a
//! snapshot; without a seed the ids differ from run to run.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// Runs one conversation against the reference server of `revision` (its
/// task still working when it is read, so nothing depends on timing) and
/// returns every line it wrote.
fn conversation(revision: &str, seed: Option<&str>) -> Vec<Value> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcp-tasks-shim"));
    cmd.args(["reference-server", "--revision", revision]);
    if let Some(seed) = seed {
        cmd.args(["--seed", seed]);
    }
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the reference server");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut seen = Vec::new();
    let mut ask = |id: i64, method: &str, params: Value| -> Value {
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(stdin, "{req}").unwrap();
        loop {
            let line = lines.next().expect("an answer").expect("readable");
            let v: Value = serde_json::from_str(&line).expect("JSON");
            seen.push(v.clone());
            if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    };
    let (meta, task_of): (Value, fn(&Value) -> Value) = if revision == "2025-11-25" {
        ask(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "seed-test", "version": "0"}}),
        );
        (json!(null), |r| r["result"]["task"]["taskId"].clone())
    } else {
        (
            json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities":
                    {"extensions": {"io.modelcontextprotocol/tasks": {}}}}),
            |r| r["result"]["taskId"].clone(),
        )
    };
    let with_meta = |mut p: Value| {
        if !meta.is_null() {
            p["_meta"] = meta.clone();
        }
        p
    };
    let mut call = json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "seeded"}});
    if revision == "2025-11-25" {
        call["task"] = json!({"ttl": 60000});
    }
    let created = ask(1, "tools/call", with_meta(call));
    let task = task_of(&created);
    assert!(task.is_string(), "{created}");
    ask(2, "tasks/get", with_meta(json!({"taskId": task})));
    drop(stdin);
    let _ = child.wait();
    seen
}

#[test]
fn a_seed_makes_ids_and_timestamps_reproducible() {
    for revision in ["2025-11-25", "2026-07-28"] {
        let a = conversation(revision, Some("7"));
        let b = conversation(revision, Some("7"));
        assert_eq!(a, b, "{revision}: two seeded runs");
        let text = serde_json::to_string(&a).unwrap();
        assert!(text.contains("2026-01-01T00:00:00"), "{revision}: {text}");
        let other = conversation(revision, Some("8"));
        assert_ne!(a, other, "{revision}: another seed, other ids");
        let unseeded = (conversation(revision, None), conversation(revision, None));
        assert_ne!(
            unseeded.0, unseeded.1,
            "{revision}: random ids without a seed"
        );
    }
}
