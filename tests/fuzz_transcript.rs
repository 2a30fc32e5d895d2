//! Fuzzing the transcript translator (`translate::transcript`, behind
//! `mcp-tasks-shim translate`). See docs/fuzzing.md.
//!
//! Transcripts are corpus conversations with records mutated, dropped,
//! duplicated, swapped, or arbitrary records mixed in.
//!
//! Properties:
//! - reading records and translating them never panics, in either direction;
//! - every output record is a record the translator reads back, and every
//!   message in it is valid JSON-RPC;
//! - a conversation that is schema-valid for its revision translates into
//!   one that is schema-valid for the other.

mod fuzz_gen;
mod support;

use fuzz_gen::*;
use mcp_tasks_shim::revision::Revision;
use mcp_tasks_shim::translate::transcript::{Record, translate_transcript};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::schema::validate_conversation;

/// An edit of a transcript as a whole.
#[derive(Debug, Clone)]
enum Edit {
    /// Mutate the message of one record.
    Mutate(prop::sample::Index, Mutation),
    Drop(prop::sample::Index),
    Duplicate(prop::sample::Index),
    Swap(prop::sample::Index, prop::sample::Index),
    Insert(prop::sample::Index, Value),
}

fn arb_edit() -> impl Strategy<Value = Edit> {
    let i = any::<prop::sample::Index>;
    prop_oneof![
        4 => (i(), arb_mutation()).prop_map(|(i, m)| Edit::Mutate(i, m)),
        1 => i().prop_map(Edit::Drop),
        1 => i().prop_map(Edit::Duplicate),
        1 => (i(), i()).prop_map(|(a, b)| Edit::Swap(a, b)),
        1 => (i(), arb_record()).prop_map(|(i, r)| Edit::Insert(i, r)),
    ]
}

/// A record: mostly well formed, with any message.
fn arb_record() -> impl Strategy<Value = Value> {
    prop_oneof![
        6 => (prop::sample::select(vec!["c2s", "s2c"]), arb_message_value())
            .prop_map(|(dir, msg)| json!({"dir": dir, "msg": msg})),
        1 => (prop::sample::select(vec!["c2s", "s2c"]), arb_string())
            .prop_map(|(dir, note)| json!({"dir": dir, "note": note})),
        1 => arb_json(),
    ]
}

fn apply_edit(records: &mut Vec<Value>, e: &Edit) {
    if records.is_empty() {
        if let Edit::Insert(_, r) = e {
            records.push(r.clone());
        }
        return;
    }
    let n = records.len();
    match e {
        Edit::Mutate(i, m) => {
            let rec = &mut records[i.index(n)];
            match rec.get_mut("msg") {
                Some(msg) => apply(msg, m),
                None => apply(rec, m),
            }
        }
        Edit::Drop(i) => {
            records.remove(i.index(n));
        }
        Edit::Duplicate(i) => {
            let r = records[i.index(n)].clone();
            records.insert(i.index(n), r);
        }
        Edit::Swap(a, b) => records.swap(a.index(n), b.index(n)),
        Edit::Insert(i, r) => records.insert(i.index(n + 1), r.clone()),
    }
}

/// A corpus transcript (and its revision) with 0..`max` edits, and
/// whether the edits only moved whole records (see [`check`]).
fn arb_transcript(max: usize) -> impl Strategy<Value = (bool, bool, Vec<Value>)> {
    (
        0..corpus().len(),
        prop::collection::vec(arb_edit(), 0..=max),
    )
        .prop_map(|(f, edits)| {
            let file = &corpus()[f];
            let mut records = file.records.clone();
            for e in &edits {
                apply_edit(&mut records, e);
            }
            let moves_only = edits
                .iter()
                .all(|e| matches!(e, Edit::Drop(_) | Edit::Duplicate(_) | Edit::Swap(..)));
            (file.is_legacy(), moves_only, records)
        })
}

fn rev(legacy: bool) -> Revision {
    if legacy {
        Revision::Legacy
    } else {
        Revision::Modern
    }
}

/// `moves_only`: the schema property is checked only for transcripts whose
/// records were moved, not edited. Edited payloads can be valid in one
/// revision and not the other where the two schemas constrain relayed
/// content differently (a tool result inline in a modern `tasks/get` is
/// loosely typed; the same result from a legacy `tasks/result` must be a
/// `CallToolResult`), which the shim relays verbatim by design.
fn check(legacy: bool, moves_only: bool, raw: &[Value]) -> Result<(), TestCaseError> {
    // The CLI refuses a transcript with an unreadable record; the
    // translator only ever sees readable ones.
    let Ok(records) = raw
        .iter()
        .map(Record::from_value)
        .collect::<Result<Vec<_>, _>>()
    else {
        return Ok(());
    };
    let source_valid = validate_conversation(raw.iter().filter_map(|r| {
        Some((
            rev(legacy),
            r.get("dir")?.as_str()?.to_owned(),
            r.get("msg")?.clone(),
        ))
    }))
    .is_ok()
        && moves_only
        && raw.iter().all(|r| r.get("msg").is_some());
    for to in [Revision::Legacy, Revision::Modern] {
        let Ok(out) = translate_transcript(&records, to) else {
            continue;
        };
        let mut conversation = Vec::new();
        for rec in &out {
            let v = rec.to_value();
            let back = Record::from_value(&v);
            prop_assert!(
                back.is_ok(),
                "output record does not read back: {} ({:?})",
                v,
                back
            );
            if let Some(msg) = v.get("msg") {
                check_envelope(msg).map_err(|e| TestCaseError::fail(format!("to {to}: {e}")))?;
                conversation.push((to, v["dir"].as_str().unwrap_or("").to_owned(), msg.clone()));
            }
        }
        if source_valid
            && to != rev(legacy)
            && let Err(e) = validate_conversation(conversation)
        {
            let input: Vec<String> = raw.iter().map(Value::to_string).collect();
            prop_assert!(
                false,
                "valid {} transcript\n{}\ntranslated to {} invalidly:\n{}",
                rev(legacy),
                input.join("\n"),
                to,
                e
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(file!(), 200))]

    #[test]
    fn edited_corpus_transcripts_translate_cleanly((legacy, moves_only, records) in arb_transcript(4)) {
        check(legacy, moves_only, &records)?;
    }

    #[test]
    fn arbitrary_transcripts_translate_cleanly(
        legacy in any::<bool>(),
        records in prop::collection::vec(arb_record(), 0..12),
    ) {
        check(legacy, false, &records)?;
    }
}
