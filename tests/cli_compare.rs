//! `mcp-tasks-shim compare`: a recorded TS SDK conversation against
//! itself, against the same conversation with its ids, task ids and
//! timestamps changed (equal once masked), and against one whose result
//! text changed (a difference, exit 1); errors exit 2.

use std::process::Command;

use serde_json::Value;

const RECORDED: &str = "tests/corpus/recorded/ts-sdk-legacy.jsonl";

fn compare(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-tasks-shim"))
        .arg("compare")
        .args(args)
        .output()
        .expect("run mcp-tasks-shim compare");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The recording with `change` applied to each message.
fn rewritten(dir: &tempfile::TempDir, name: &str, change: impl Fn(&mut Value)) -> String {
    let text = std::fs::read_to_string(RECORDED).expect("the recording");
    let lines: Vec<String> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            change(&mut v["msg"]);
            v.to_string()
        })
        .collect();
    let path = dir.path().join(name);
    std::fs::write(&path, lines.join("\n")).unwrap();
    path.to_str().unwrap().to_owned()
}

/// Every string value under a key named `key`, rewritten by `f`.
fn each(v: &mut Value, key: &str, f: &dyn Fn(&str) -> String) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                match child {
                    Value::String(s) if k == key => *s = f(s),
                    _ => each(child, key, f),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|c| each(c, key, f)),
        _ => {}
    }
}

#[test]
fn what_differs_by_nature_is_equal_and_a_changed_result_is_not() {
    let (code, out, err) = compare(&[RECORDED, RECORDED]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("0 difference(s)"), "{out}");

    let dir = tempfile::tempdir().unwrap();
    let rerun = rewritten(&dir, "rerun.jsonl", |m| {
        each(m, "taskId", &|s| s.chars().rev().collect());
        each(m, "createdAt", &|_| "2030-01-01T00:00:00Z".into());
        each(m, "lastUpdatedAt", &|_| "2030-01-01T00:00:01Z".into());
        if let Some(id) = m.get("id").and_then(Value::as_i64) {
            m["id"] = Value::from(id + 1000);
        }
    });
    let (code, out, err) = compare(&[RECORDED, &rerun]);
    assert_eq!(code, 0, "masked differences only: {out}{err}");

    let changed = rewritten(&dir, "changed.jsonl", |m| {
        each(m, "text", &|s| s.replace("Hello", "Goodbye"));
    });
    let (code, out, _) = compare(&["--color", "never", RECORDED, &changed]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("/content/0/text") && out.contains("Goodbye"),
        "{out}"
    );

    // Kept ids differ again.
    let (code, out, _) = compare(&["--keep", "$..taskId", RECORDED, &rerun]);
    assert_eq!(code, 1, "{out}");
}

#[test]
fn errors_exit_2_naming_the_problem() {
    let (code, _, err) = compare(&[RECORDED, "no/such/file.jsonl"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no/such/file.jsonl"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"dir\":\"c2s\",\"msg\":{}}\nnot json\n").unwrap();
    let (code, _, err) = compare(&[RECORDED, bad.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("line 1"), "{err}");
    let (code, _, err) = compare(&["--mask", "taskId", RECORDED, RECORDED]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("must start with $"), "{err}");
    let (code, _, err) = compare(&["--keep", "$..nothing", RECORDED, RECORDED]);
    assert_eq!(code, 2, "{err}");
}

/// `--normalize` is stable enough for a snapshot: the same conversation
/// with other ids and times normalizes to the same text.
#[test]
fn normalize_prints_a_stable_masked_form() {
    let dir = tempfile::tempdir().unwrap();
    let rerun = rewritten(&dir, "rerun.jsonl", |m| {
        each(m, "taskId", &|s| format!("x{s}"));
        each(m, "createdAt", &|_| "2030-01-01T00:00:00Z".into());
    });
    let (code, a, _) = compare(&["--normalize", RECORDED]);
    assert_eq!(code, 0);
    let (_, b, _) = compare(&["--normalize", &rerun]);
    assert_eq!(a, b);
    let first: Value =
        serde_json::from_str(a.lines().find(|l| l.contains("taskId")).unwrap()).unwrap();
    assert!(first.to_string().contains("<task-1>"), "{first}");
    insta::with_settings!({snapshot_path => "../snapshots"}, {
        insta::assert_snapshot!("compare_normalize_ts_sdk_legacy", a);
    });
}
