//! The snapshot corpus: every transcript in `tests/corpus/` (and the real-SDK
//! recordings in `tests/corpus/recorded/`) is translated
//! into the other revision; originals and translations are validated
//! against their revision's JSON Schema, and translations are snapshotted.

mod support;

use std::path::{Path, PathBuf};

use mcp_tasks_shim::jsonrpc::Message;
use mcp_tasks_shim::translate::transcript::{Dir, Record, translate_grouped, translate_transcript};
use serde_json::Value;
use support::schema::{Revision, validate_conversation};

const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/corpus");

fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    files
}

fn load(path: &Path) -> Vec<Record> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            let v: Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), n + 1));
            Record::from_value(&v).unwrap_or_else(|e| panic!("{}:{}: {e}", path.display(), n + 1))
        })
        .collect()
}

/// A transcript is legacy if its client opens with `initialize` (or
/// answers a server request, which only legacy clients do); else modern.
fn source_revision(records: &[Record]) -> Revision {
    let legacy = records.iter().any(|r| {
        r.dir.as_str() == "c2s"
            && match &r.msg {
                Some(Message::Request(q)) => q.method == "initialize",
                Some(Message::Response(_) | Message::Error(_)) => true,
                _ => false,
            }
    });
    if legacy {
        Revision::Legacy
    } else {
        Revision::Modern
    }
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Schema-validates every message record of a conversation in `rev`.
fn validate(rev: Revision, records: &[Record]) -> Result<(), String> {
    validate_conversation(
        records
            .iter()
            .filter_map(|r| r.msg.as_ref().map(|m| (rev, r.dir.as_str(), m.to_value()))),
    )
}

fn snapshot_settings() -> insta::Settings {
    let mut s = insta::Settings::clone_current();
    s.set_snapshot_path("../snapshots");
    s.set_prepend_module_to_snapshot(false);
    s
}

/// Translates every file of `dir`, validating both sides, and snapshots the
/// translations if asked. Returns how many files were checked.
fn check_dir(dir: &Path, snapshot: bool) -> usize {
    let files = jsonl_files(dir);
    let mut failures = Vec::new();
    let mut snapshots = Vec::new();
    for path in &files {
        let records = load(path);
        let from = source_revision(&records);
        let name = stem(path);
        if let Err(e) = validate(from, &records) {
            failures.push(format!("{name} (original, {from}):\n{e}"));
        }
        let out = match translate_transcript(&records, from.other()) {
            Ok(out) => out,
            Err(e) => {
                failures.push(format!("{name}: translation failed: {e}"));
                continue;
            }
        };
        if let Err(e) = validate(from.other(), &out) {
            failures.push(format!("{name} (translated to {}):\n{e}", from.other()));
        }
        let values: Vec<Value> = out.iter().map(Record::to_value).collect();
        snapshots.push((format!("{name}-to-{}", from.other()), values));
    }
    // Schema violations first: they explain a snapshot change better.
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    if snapshot {
        for (name, values) in snapshots {
            snapshot_settings().bind(|| insta::assert_json_snapshot!(name, values));
        }
    }
    files.len()
}

#[test]
fn corpus_translations_are_valid_and_match_snapshots() {
    let n = check_dir(Path::new(CORPUS), true);
    assert!(n >= 10, "expected the corpus in {CORPUS}, found {n} files");
}

#[test]
fn corpus_covers_both_revisions() {
    let revs: Vec<Revision> = jsonl_files(Path::new(CORPUS))
        .iter()
        .map(|p| source_revision(&load(p)))
        .collect();
    assert!(revs.contains(&Revision::Legacy) && revs.contains(&Revision::Modern));
}

/// The real-SDK recordings `tests/corpus/recorded/` holds, by file stem, with
/// the revision each speaks. A recording added there must be named here too,
/// so a folder that lost its files (or a checkout without them) cannot pass
/// by translating nothing.
const RECORDED: &[(&str, Revision)] = &[
    ("rmcp-modern", Revision::Modern),
    ("ts-sdk-legacy", Revision::Legacy),
];

/// Real-SDK recordings (TypeScript SDK, rmcp). They carry random task ids
/// and are re-recorded when the SDKs change, so they are validated, not
/// snapshotted.
#[test]
fn recorded_transcripts_translate_validly() {
    let dir = Path::new(CORPUS).join("recorded");
    let found: Vec<(String, Revision, usize)> = jsonl_files(&dir)
        .iter()
        .map(|p| {
            let records = load(p);
            (stem(p), source_revision(&records), records.len())
        })
        .collect();
    let expected: Vec<(String, Revision)> = RECORDED
        .iter()
        .map(|(name, rev)| ((*name).to_owned(), *rev))
        .collect();
    let read: Vec<(String, Revision)> = found
        .iter()
        .map(|(name, rev, _)| (name.clone(), *rev))
        .collect();
    assert_eq!(
        read,
        expected,
        "the recordings in {} (name, revision) are not the expected ones",
        dir.display()
    );
    for (name, _, len) in &found {
        assert!(
            *len > 0,
            "{name}.jsonl in {} holds no records",
            dir.display()
        );
    }
    let checked = check_dir(&dir, false);
    assert_eq!(checked, RECORDED.len(), "check_dir skipped a recording");
}

/// What the modern revision cannot carry, removed before comparing a
/// legacy message with its legacy→modern→legacy round trip.
/// Ids of the client's task-augmented `tools/call`s that the server
/// answered without creating a task.
fn answered_without_a_task(records: &[Record]) -> Vec<mcp_tasks_shim::jsonrpc::Id> {
    let asked: Vec<_> = records
        .iter()
        .filter_map(|r| match (&r.dir, &r.msg) {
            (Dir::C2s, Some(Message::Request(q)))
                if q.method == "tools/call"
                    && q.params.as_ref().is_some_and(|p| p.get("task").is_some()) =>
            {
                Some(q.id.clone())
            }
            _ => None,
        })
        .collect();
    records
        .iter()
        .filter_map(|r| match (&r.dir, &r.msg) {
            (Dir::S2c, Some(Message::Response(a)))
                if asked.contains(&a.id) && a.result.get("task").is_none() =>
            {
                Some(a.id.clone())
            }
            (Dir::S2c, Some(Message::Error(e))) => e.id.clone().filter(|id| asked.contains(id)),
            _ => None,
        })
        .collect()
}

fn normalise(answered: Option<&str>, mut msg: Value) -> Value {
    // Client-hosted tasks have no 2026-07-28 capability.
    if let Some(caps) = msg
        .pointer_mut("/params/capabilities")
        .and_then(Value::as_object_mut)
    {
        caps.remove("tasks");
    }
    match answered {
        // No per-tool task flag in 2026-07-28: the shim re-adds "optional".
        Some("tools/list") => {
            if let Some(tools) = msg
                .pointer_mut("/result/tools")
                .and_then(Value::as_array_mut)
            {
                tools
                    .iter_mut()
                    .filter_map(Value::as_object_mut)
                    .for_each(|t| {
                        t.remove("execution");
                    });
            }
        }
        // The modern ack of a cancel carries no task: the legacy answer is
        // rebuilt from the last view (status and id are what matter).
        Some("tasks/cancel") if msg.get("result").is_some() => {
            let r = &msg["result"];
            msg["result"] = serde_json::json!({"taskId": r["taskId"], "status": r["status"]});
        }
        _ => {}
    }
    msg
}

fn same_slot(a: &Record, b: &Record) -> bool {
    let (Some(x), Some(y)) = (&a.msg, &b.msg) else {
        return false;
    };
    let kind = |m: &Message| std::mem::discriminant(m);
    a.dir == b.dir && kind(x) == kind(y) && x.id() == y.id()
}

#[test]
fn legacy_round_trip_preserves_messages_with_counterparts() {
    let mut failures = Vec::new();
    let mut compared = 0;
    for path in jsonl_files(Path::new(CORPUS)) {
        let orig = load(&path);
        if source_revision(&orig) != Revision::Legacy {
            continue;
        }
        let to_modern = translate_grouped(&orig, Revision::Modern).expect("to modern");
        let modern: Vec<Record> = to_modern.iter().flatten().cloned().collect();
        let back = translate_grouped(&modern, Revision::Legacy).expect("back to legacy");
        let mut back_groups = back.into_iter();
        let mut methods = std::collections::HashMap::new();
        let plain = answered_without_a_task(&orig);
        for (rec, group) in orig.iter().zip(&to_modern) {
            let back: Vec<Record> = back_groups.by_ref().take(group.len()).flatten().collect();
            let Some(msg) = &rec.msg else { continue };
            if let Message::Request(q) = msg {
                methods.insert((rec.dir, q.id.clone()), q.method.clone());
            }
            let answered = msg
                .id()
                .and_then(|id| methods.get(&(rec.dir.other(), id.clone())))
                .cloned();
            if !group.iter().any(|m| same_slot(rec, m)) {
                continue; // no counterpart in 2026-07-28: a note
            }
            compared += 1;
            let mut want = normalise(answered.as_deref(), msg.to_value());
            // A server that ignored `params.task` (it does no tasks for
            // that call) answered plainly; 2026-07-28 has no way to say
            // the client had asked, so the wish is not restored.
            if let Message::Request(q) = msg
                && plain.contains(&q.id)
                && let Some(params) = want.get_mut("params").and_then(Value::as_object_mut)
            {
                params.remove("task");
            }
            match back.iter().find(|b| same_slot(rec, b)) {
                Some(b) => {
                    let got = normalise(
                        answered.as_deref(),
                        b.msg.as_ref().map(Message::to_value).unwrap_or_default(),
                    );
                    if got != want {
                        failures.push(format!(
                            "{}: round trip changed\n  {want}\n→ {got}",
                            stem(&path)
                        ));
                    }
                }
                None => failures.push(format!("{}: {want} lost in the round trip", stem(&path))),
            }
        }
    }
    assert!(compared > 50, "only {compared} messages compared");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
