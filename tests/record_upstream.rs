//! `--record-upstream FILE` through the real binary: a 2025-11-25 client in
//! front of the 2026-07-28 reference server, with `--record` too. One run
//! gives both revisions of the same conversation: the client's
//! `tasks/result` in the front transcript, the `tasks/get`s that serve it
//! in the upstream one; each side valid against its own revision's schema.
//! Over HTTP: a 2026-07-28 URL upstream (one stateless label), a
//! 2025-11-25 child whose HTTP sessions each get a process (one label each),
//! and a 2025-11-25 URL whose relayed sessions and the bridge's own session
//! for 2026-07-28 clients share one numbering (a label each, never two
//! sessions under one).

mod support;

use std::time::Duration;

use mcp_tasks_shim::testing::Transcript;
use serde_json::{Value, json};
use support::schema::{Revision, assert_conversation_valid};
use support::wire::{Wire, modern_reference, read_jsonl, recording_upstream, temp_path};

/// The records of a transcript file, as JSON, and checked to parse as one.
fn records(path: &std::path::Path) -> Vec<Value> {
    Transcript::read(path).expect("a transcript `compare` and `translate` read");
    read_jsonl(path)
}

/// The methods of the requests and notifications recorded going `dir`.
fn methods<'a>(records: &'a [Value], dir: &str) -> Vec<&'a str> {
    records
        .iter()
        .filter(|r| r["dir"] == dir)
        .filter_map(|r| r["msg"]["method"].as_str())
        .collect()
}

/// `mcp-tasks-shim http` in front of `url`, recording its upstream side to
/// `path`.
fn url_shim_recording_upstream(url: &str, path: &std::path::Path) -> support::http::HttpShim {
    support::http::HttpShim::spawn::<&str>(
        &[
            "--upstream-url",
            url,
            "--record-upstream",
            path.to_str().unwrap(),
        ],
        &[],
    )
}

/// Validates every record of `records` against `rev`'s schema, pairing
/// answers with their requests.
#[track_caller]
fn assert_valid_as(rev: Revision, records: &[Value]) {
    assert_conversation_valid(
        records
            .iter()
            .map(|r| (rev, r["dir"].as_str().unwrap_or_default(), &r["msg"])),
    );
}

#[test]
fn stdio_records_the_legacy_side_and_the_modern_side_of_one_conversation() {
    let [front_path, up_path, sent, got] =
        ["front", "up", "sent", "got"].map(|n| temp_path(&format!("record-upstream-{n}.jsonl")));
    for p in [&front_path, &up_path, &sent, &got] {
        let _ = std::fs::remove_file(p);
    }
    let mut shim = Wire::spawn(
        &[
            "--record",
            front_path.to_str().unwrap(),
            "--record-upstream",
            up_path.to_str().unwrap(),
        ],
        // The bytes really exchanged, to check the recording against.
        &recording_upstream(&modern_reference(), &sent, &got),
    );
    shim.initialize();
    shim.ok("tools/list", json!({}));
    let created = shim.ok(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0.3, "label": "rec"},
               "task": {"ttl": 60_000}}),
    );
    let task = created["task"]["taskId"]
        .as_str()
        .expect("a task")
        .to_owned();
    let result = shim.ok("tasks/result", json!({"taskId": task}));
    assert_eq!(result["isError"], false, "{result}");
    shim.close_stdin();
    assert!(
        shim.wait_exit(Duration::from_secs(20))
            .is_some_and(|s| s.success()),
        "the shim exits once the client leaves"
    );

    let front = records(&front_path);
    let up = records(&up_path);
    assert_valid_as(Revision::Legacy, &front);
    assert_valid_as(Revision::Modern, &up);

    // The front side: what the client said, and no 2026-07-28 method.
    let client_said = methods(&front, "c2s");
    assert!(client_said.contains(&"tasks/result"), "{client_said:?}");
    assert!(!client_said.contains(&"tasks/get"), "{client_said:?}");
    // The upstream side: the probe, and the polls that served tasks/result,
    // which itself never went upstream.
    let shim_said = methods(&up, "c2s");
    for m in ["server/discover", "tools/list", "tools/call", "tasks/get"] {
        assert!(shim_said.contains(&m), "{m} not recorded: {shim_said:?}");
    }
    assert!(!shim_said.contains(&"tasks/result"), "{shim_said:?}");
    assert!(!shim_said.contains(&"initialize"), "{shim_said:?}");
    for r in &up {
        assert_eq!(r["session"], "upstream-1", "one child, one label: {r}");
        assert!(r["t"].is_u64(), "{r}");
    }
    for r in &front {
        assert_eq!(r["session"], "stdio", "{r}");
    }

    // Nothing that went over the child's pipes is missing or invented.
    let recorded = |dir: &str| -> Vec<Value> {
        up.iter()
            .filter(|r| r["dir"] == dir)
            .map(|r| r["msg"].clone())
            .collect()
    };
    assert_eq!(recorded("c2s"), read_jsonl(&sent), "shim→upstream");
    assert_eq!(recorded("s2c"), read_jsonl(&got), "upstream→shim");
    for p in [&front_path, &up_path, &sent, &got] {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn http_records_each_post_to_a_modern_url_and_what_came_back() {
    use support::http::{HttpReference, block_on, client, initialize, legacy, rpc, send};
    let up_path = temp_path("record-upstream-http.jsonl");
    let _ = std::fs::remove_file(&up_path);
    let server = HttpReference::start("2026-07-28", &[]);
    let mut shim = url_shim_recording_upstream(&server.url, &up_path);
    block_on(async {
        let c = client();
        let (sid, _) = initialize(&c, &shim.url, None).await;
        let call = rpc(
            1,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 0.3},
                   "task": {"ttl": 60_000}}),
        );
        let (_, body, _) = send(legacy(&c, &shim.url, Some(&sid), &call)).await;
        let task = body["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("a task: {body}"))
            .to_owned();
        let ask = rpc(2, "tasks/result", json!({"taskId": task}));
        let (_, body, _) = send(legacy(&c, &shim.url, Some(&sid), &ask)).await;
        assert_eq!(body["result"]["isError"], false, "{body}");
    });
    shim.terminate(Duration::from_secs(10))
        .expect("the shim exits on SIGTERM");
    let up = records(&up_path);
    let _ = std::fs::remove_file(&up_path);
    assert_valid_as(Revision::Modern, &up);
    let shim_said = methods(&up, "c2s");
    for m in ["server/discover", "tools/call", "tasks/get"] {
        assert!(shim_said.contains(&m), "{m} not recorded: {shim_said:?}");
    }
    assert!(!shim_said.contains(&"tasks/result"), "{shim_said:?}");
    // Every request has its answer recorded, under the stateless label; a
    // listen stream is ended by closing it, unanswered.
    let answered: std::collections::BTreeSet<String> = up
        .iter()
        .filter(|r| r["dir"] == "s2c" && r["msg"]["method"].is_null())
        .map(|r| r["msg"]["id"].to_string())
        .collect();
    for r in &up {
        assert_eq!(r["session"], "upstream", "{r}");
        if r["dir"] == "c2s"
            && r["msg"]["id"].is_number()
            && r["msg"]["method"] != "subscriptions/listen"
        {
            assert!(answered.contains(&r["msg"]["id"].to_string()), "{r}");
        }
    }
}

#[test]
fn http_records_each_relayed_session_process_under_its_own_label() {
    use support::http::{HttpShim, greet_in_two_sessions};
    let up_path = temp_path("record-upstream-relay.jsonl");
    let _ = std::fs::remove_file(&up_path);
    let legacy_server = [
        support::wire::shim_bin(),
        "reference-server",
        "--revision",
        "2025-11-25",
    ];
    let mut shim = HttpShim::spawn(
        &["--record-upstream", up_path.to_str().unwrap()],
        &legacy_server,
    );
    greet_in_two_sessions(&shim);
    shim.terminate(Duration::from_secs(10))
        .expect("the shim exits on SIGTERM");
    let up = records(&up_path);
    let _ = std::fs::remove_file(&up_path);
    // The probe's child, then one process per 2025-11-25 session.
    let by_label = |label: &str| -> Vec<Value> {
        up.iter()
            .filter(|r| r["session"] == label)
            .cloned()
            .collect()
    };
    assert!(methods(&by_label("upstream-1"), "c2s").contains(&"server/discover"));
    for (label, who) in [("session-1", "A"), ("session-2", "B")] {
        let session = by_label(label);
        assert_valid_as(Revision::Legacy, &session);
        let said = methods(&session, "c2s");
        assert!(
            said.starts_with(&["initialize", "notifications/initialized", "tools/call"]),
            "{label}: {said:?}"
        );
        let greeted = session.iter().any(|r| {
            r["dir"] == "s2c"
                && r["msg"]["result"]["content"][0]["text"] == format!("Hello, {who}!")
        });
        assert!(greeted, "{label}: the answer is recorded: {session:?}");
    }
}

#[test]
fn http_records_relayed_and_bridged_sessions_of_one_url_apart() {
    use support::http::{self as h, greet_in_two_sessions};
    let server = h::HttpReference::start(h::LEGACY, &[]);
    let up_path = temp_path("record-upstream-url-relay.jsonl");
    let _ = std::fs::remove_file(&up_path);
    let mut shim = url_shim_recording_upstream(&server.url, &up_path);
    // A 2026-07-28 client first: the bridge opens its own upstream session.
    h::block_on(async {
        let c = h::client();
        let call = json!({"name": "greet", "arguments": {"name": "M"}});
        let (status, body, _) = h::send(h::modern(&c, &shim.url, 1, "tools/call", call)).await;
        assert!(status.is_success(), "{body}");
        support::schema::assert_valid(Revision::Modern, &body, Some("tools/call"));
    });
    greet_in_two_sessions(&shim);
    shim.terminate(Duration::from_secs(10))
        .expect("the shim exits on SIGTERM");
    let up = records(&up_path);
    let _ = std::fs::remove_file(&up_path);
    let mut labels: Vec<&str> = up.iter().filter_map(|r| r["session"].as_str()).collect();
    labels.sort_unstable();
    labels.dedup();
    let sessions: Vec<&str> = labels
        .iter()
        .copied()
        .filter(|l| l.starts_with("session-"))
        .collect();
    assert_eq!(
        sessions.len(),
        3,
        "the bridge's session and two relayed: {labels:?}"
    );
    for label in sessions {
        let session: Vec<Value> = up
            .iter()
            .filter(|r| r["session"] == label)
            .cloned()
            .collect();
        assert_valid_as(Revision::Legacy, &session);
        let opened = methods(&session, "c2s")
            .into_iter()
            .filter(|m| *m == "initialize")
            .count();
        assert_eq!(opened, 1, "{label} is one upstream session: {session:?}");
    }
    for who in ["M", "A", "B"] {
        let greeted = up.iter().any(|r| {
            r["dir"] == "s2c"
                && r["msg"]["result"]["content"][0]["text"] == format!("Hello, {who}!")
        });
        assert!(greeted, "{who}'s answer is recorded");
    }
}
