//! `mcp-tasks-shim http --record FILE` through the real binary: two
//! 2025-11-25 sessions in front of the 2026-07-28 reference server are
//! recorded both ways, under two labels, in a transcript `translate` reads.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::http::{HttpShim, greet_in_two_sessions};
use support::schema::{Revision, assert_valid};
use support::wire::{modern_reference, temp_path};

#[test]
fn two_sessions_are_recorded_both_ways_under_their_own_labels() {
    let path = temp_path("record-http.jsonl");
    let _ = std::fs::remove_file(&path);
    let mut shim = HttpShim::spawn(&["--record", path.to_str().unwrap()], &modern_reference());
    greet_in_two_sessions(&shim);
    shim.terminate(Duration::from_secs(10))
        .expect("the shim exits on SIGTERM");
    let text = std::fs::read_to_string(&path).expect("the transcript was written");
    let _ = std::fs::remove_file(&path);
    mcp_tasks_shim::testing::Transcript::parse(&text).expect("translate's format");
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut last_t = 0;
    let mut sessions = std::collections::BTreeSet::new();
    let mut seen = std::collections::BTreeSet::new();
    for l in &lines {
        let t = l["t"].as_u64().expect("t");
        assert!(t >= last_t, "t went back: {l}");
        last_t = t;
        let session = l["session"].as_str().expect("session").to_owned();
        assert!(session.starts_with("session-"), "{session}");
        sessions.insert(session.clone());
        let dir = l["dir"].as_str().unwrap();
        let msg = &l["msg"];
        if let Some(m) = msg["method"].as_str() {
            seen.insert((session.clone(), dir.to_owned(), m.to_owned()));
        }
        // Answers are validated as answers to the method of their kind.
        let method = msg["method"]
            .as_str()
            .or(if msg["result"]["serverInfo"].is_object() {
                Some("initialize")
            } else {
                Some("tools/call")
            });
        assert_valid(Revision::Legacy, msg, method);
    }
    assert_eq!(sessions.len(), 2, "{text}");
    for s in &sessions {
        for m in ["initialize", "tools/call"] {
            assert!(
                seen.contains(&(s.clone(), "c2s".into(), m.into())),
                "{s} {m}: {text}"
            );
        }
        let answers = lines
            .iter()
            .filter(|l| {
                l["session"] == s.as_str() && l["dir"] == "s2c" && l["msg"]["result"].is_object()
            })
            .count();
        assert!(answers >= 2, "{s}: both answers recorded: {text}");
    }
}
