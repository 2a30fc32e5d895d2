//! `mcp-tasks-shim translate` and `demo`, run as the real binary.

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_mcp-tasks-shim");
const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus");

fn run(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mcp-tasks-shim");
    let mut pipe = child.stdin.take().expect("stdin");
    if let Some(input) = stdin {
        pipe.write_all(input.as_bytes()).expect("write stdin");
    }
    drop(pipe);
    child.wait_with_output().expect("wait")
}

fn jsonl(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad output line {l}: {e}")))
        .collect()
}

#[test]
fn a_good_file_translates_to_valid_jsonl() {
    let file = format!("{CORPUS}/legacy-completed.jsonl");
    let out = run(&["translate", "--to", "2026-07-28", &file], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = jsonl(&out.stdout);
    assert!(records.len() > 20);
    for r in &records {
        assert!(r["dir"] == "c2s" || r["dir"] == "s2c", "{r}");
        assert!(
            r.get("msg").is_some() || (r.get("note").is_some() && r.get("original").is_some()),
            "{r}"
        );
        assert!(r.get("t").is_some(), "extra keys are kept: {r}");
    }
    assert_eq!(records[0]["msg"]["method"], "server/discover");
}

#[test]
fn stdin_is_read_with_a_dash() {
    let input = std::fs::read_to_string(format!("{CORPUS}/modern-input.jsonl")).expect("corpus");
    let out = run(&["translate", "--to", "2025-11-25", "-"], Some(&input));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let records = jsonl(&out.stdout);
    assert_eq!(records[0]["msg"]["method"], "initialize");
    assert!(records.iter().any(|r| r["msg"]["method"] == "tasks/result"));
}

#[test]
fn a_bad_third_line_fails_with_its_number_and_no_output() {
    let good = concat!(
        r#"{"dir":"c2s","msg":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}"#,
        "\n",
        r#"{"dir":"s2c","msg":{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}}"#,
        "\n"
    );
    let cases = [
        ("{not json", "invalid JSON"),
        ("[1,2]", "object"),
        (
            r#"{"dir":"up","msg":{"jsonrpc":"2.0","method":"x"}}"#,
            "dir",
        ),
        (r#"{"dir":"c2s"}"#, "msg"),
        (
            r#"{"dir":"c2s","msg":{"jsonrpc":"1.0","id":2,"method":"ping"}}"#,
            "JSON-RPC",
        ),
        (
            r#"{"dir":"c2s","msg":{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{}}}"#,
            "2025-11-25",
        ),
    ];
    for (bad, why) in cases {
        let plain = format!("{good}{bad}\n");
        // An empty line before the bad one: numbering counts input lines.
        let spaced = plain.replacen('\n', "\n\n", 1);
        for (input, line) in [(plain, "line 3:"), (spaced, "line 4:")] {
            let out = run(&["translate", "--to", "2026-07-28"], Some(&input));
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{bad} was accepted");
            assert!(out.stdout.is_empty(), "partial output for {bad}");
            assert!(stderr.contains(line), "{bad}: {stderr} should name {line}");
            assert!(stderr.contains(why), "{bad}: {stderr} should say {why}");
        }
    }
}

/// A transcript already in the target revision is named as such, with
/// the way to translate it, not reported as a broken file.
#[test]
fn a_transcript_already_in_the_target_revision_says_so() {
    let file = format!("{CORPUS}/legacy-completed.jsonl");
    let out = run(&["translate", "--to", "2025-11-25", &file], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    assert!(stderr.contains("line 1:"), "{stderr}");
    assert!(
        stderr.contains("looks like 2025-11-25 already") && stderr.contains("--to 2026-07-28"),
        "{stderr}"
    );
}

#[test]
fn demo_shows_both_revisions_side_by_side() {
    let out = run(&["demo"], None);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "2025-11-25",
        "2026-07-28",
        "tools/call",
        "tasks/get",
        "server/discover",
        "C→S",
        "S→C",
    ] {
        assert!(text.contains(needle), "demo output lacks {needle}");
    }
}

/// `--to` (and `reference-server --revision`) take exactly the two
/// revisions the shim writes: an older legacy date is refused, naming them.
#[test]
fn only_the_two_written_revisions_are_accepted() {
    for args in [
        &["translate", "--to", "2024-11-05", "-"][..],
        &["translate", "--to", "2025-06-18", "-"][..],
        &["reference-server", "--revision", "2024-11-05"][..],
    ] {
        let out = run(args, Some(""));
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("2025-11-25") && stderr.contains("2026-07-28"),
            "{args:?}: {stderr}"
        );
    }
}

/// Every per-line error names its input, the file or stdin, as a line
/// that is not UTF-8 always did: with several files in a script, a bare
/// "line 3" points nowhere.
#[test]
fn every_line_error_names_the_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let good = r#"{"dir":"c2s","msg":{"jsonrpc":"2.0","id":1,"method":"tools/list"}}"#;
    let cases: [(&str, &[u8]); 4] = [
        ("bin.jsonl", b"{\"a\": \"\xff\"}\n"),
        ("json.jsonl", b"{not json\n"),
        ("record.jsonl", b"[1,2]\n"),
        (
            "revision.jsonl",
            br#"{"dir":"c2s","msg":{"jsonrpc":"2.0","id":2,"method":"server/discover","params":{}}}"#,
        ),
    ];
    for (name, bad) in cases {
        let path = dir.path().join(name);
        let mut bytes = format!("{good}\n").into_bytes();
        bytes.extend_from_slice(bad);
        std::fs::write(&path, &bytes).expect("write input");
        let file = path.to_str().expect("utf-8 path");
        let out = run(&["translate", "--to", "2026-07-28", file], None);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}");
        assert!(
            stderr.contains(&format!("{file}: line 2: ")),
            "{name}: {stderr}"
        );
        let out = run(
            &["translate", "--to", "2026-07-28"],
            Some(&String::from_utf8_lossy(&bytes)),
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        if name != "bin.jsonl" {
            assert!(stderr.contains("stdin: line 2: "), "{name}: {stderr}");
        }
    }
}
