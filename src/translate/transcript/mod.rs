//! Whole-transcript translation: a recorded conversation rewritten as the
//! other revision would carry it.
//!
//! Input records are `{"dir":"c2s"|"s2c","msg":<JSON-RPC message>, …}`
//! (c2s = client→server); other keys (timestamps such as `"t"`) are kept.
//! The translator is pure but stateful over the conversation: it pairs each
//! response with its request (per direction) to know what it answers, keeps
//! the legacy client's declaration from `initialize`, and the last seen
//! view of every task. It may also look *ahead* in the transcript, because
//! the shim it models fetches upstream what it needs before answering (the
//! payload of a terminal task, the input requests of an `input_required`
//! task): that look-ahead is what the live shim learns by asking.
//!
//! Every input record yields one or more output records:
//! - `{"dir", "msg"}`: the counterpart message;
//! - `{"dir", "msg", "note"}`: a message the shim synthesises (an
//!   acknowledgement, a held `tasks/result`, …) or one whose delivery
//!   differs, with the reason;
//! - `{"dir", "note", "original"}`: no counterpart; the note says how the
//!   shim emulates it. Nothing is dropped silently.
//!
//! Ids and timestamps come from the input; synthesised ids are derived from
//! task ids and input keys, so the output is deterministic.

mod lookahead;
mod notes;
mod record;
mod to_legacy;
mod to_modern;

use std::collections::HashMap;

pub use record::{Dir, Record, RecordError};

use crate::error::ShimError;
use crate::jsonrpc::{Id, Message};
use crate::revision::{ClientSignal, Revision, detect_client};

/// Why a transcript could not be translated; `index` is the 0-based record.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum TranscriptError {
    /// The record is not a well-formed transcript record.
    #[error("record {index}: {source}")]
    Record {
        /// Which record.
        index: usize,
        /// What is wrong with it.
        source: RecordError,
    },
    /// The message already belongs to the target revision (or to none).
    #[error("record {index}: not a {source_revision} message: {why}")]
    WrongRevision {
        /// Which record.
        index: usize,
        /// The revision the transcript should be in.
        source_revision: Revision,
        /// How that was detected.
        why: String,
    },
    /// A message of the right revision whose content cannot be translated.
    #[error("record {index}: {source}")]
    Translate {
        /// Which record.
        index: usize,
        /// The row function's complaint.
        source: ShimError,
    },
}

impl TranscriptError {
    /// What is wrong, without the record index (callers that number
    /// lines differently, like the CLI, add their own position).
    pub fn reason(&self) -> String {
        match self {
            TranscriptError::Record { source, .. } => source.to_string(),
            TranscriptError::WrongRevision {
                source_revision,
                why,
                ..
            } => {
                format!("not a {source_revision} message: {why}")
            }
            TranscriptError::Translate { source, .. } => source.to_string(),
        }
    }

    /// The 0-based index of the offending record.
    pub fn index(&self) -> usize {
        match self {
            TranscriptError::Record { index, .. }
            | TranscriptError::WrongRevision { index, .. }
            | TranscriptError::Translate { index, .. } => *index,
        }
    }
}

/// Translates a transcript of the other revision into revision `to`.
pub fn translate_transcript(
    records: &[Record],
    to: Revision,
) -> Result<Vec<Record>, TranscriptError> {
    Ok(translate_grouped(records, to)?
        .into_iter()
        .flatten()
        .collect())
}

/// [`translate_transcript`], keeping which output records came from which
/// input record (one group per input record, in order).
pub fn translate_grouped(
    records: &[Record],
    to: Revision,
) -> Result<Vec<Vec<Record>>, TranscriptError> {
    let pairs = pair_responses(records);
    match to {
        Revision::Modern => translate_each(
            to_modern::ToModern::new(records, &pairs),
            records,
            &pairs,
            to,
        ),
        Revision::Legacy => translate_each(
            to_legacy::ToLegacy::new(records, &pairs),
            records,
            &pairs,
            to,
        ),
    }
}

/// What one record becomes in the other revision.
type Translated = Result<Vec<Record>, ShimError>;

/// One direction of transcript translation (to 2026-07-28 or to
/// 2025-11-25), fed every record of a transcript in order.
trait Translator {
    /// Record `i`, whose message is `msg`, in the target revision.
    fn record(&mut self, i: usize, rec: &Record, msg: &Message) -> Translated;
}

/// Every record of `records` through `t`, into revision `to`, refusals
/// settled; one group per input record.
fn translate_each(
    mut t: impl Translator,
    records: &[Record],
    pairs: &HashMap<usize, usize>,
    to: Revision,
) -> Result<Vec<Vec<Record>>, TranscriptError> {
    let mut refusals = Refusals::new(records, pairs);
    let mut out = Vec::with_capacity(records.len());
    for (index, rec) in records.iter().enumerate() {
        let translated = step(index, rec, to, |msg| t.record(index, rec, msg));
        out.push(refusals.settle(index, rec, to, translated)?);
    }
    Ok(out)
}

/// Requests the server refused with an error. A recording holds the
/// client's mistakes too (an unknown protocol version, a missing `_meta`),
/// which the server answered with an error: such a request that cannot be
/// translated becomes a note, and so does its error answer, instead of
/// making the whole recording untranslatable.
struct Refusals {
    /// Request index → its error answer's index.
    refused: HashMap<usize, usize>,
    /// Error answers whose request became a note.
    noted_answers: std::collections::HashSet<usize>,
}

impl Refusals {
    fn new(records: &[Record], pairs: &HashMap<usize, usize>) -> Self {
        let refused = pairs
            .iter()
            .filter(|(req, answer)| {
                records[**req].dir == Dir::C2s
                    && matches!(records[**answer].msg, Some(Message::Error(_)))
            })
            .map(|(req, answer)| (*req, *answer))
            .collect();
        Refusals {
            refused,
            noted_answers: std::collections::HashSet::new(),
        }
    }

    /// `translated` (record `index`'s translation), or the notes that
    /// replace a refused request that could not be translated and its
    /// answer.
    fn settle(
        &mut self,
        index: usize,
        rec: &Record,
        to: Revision,
        translated: Result<Vec<Record>, TranscriptError>,
    ) -> Result<Vec<Record>, TranscriptError> {
        if self.noted_answers.remove(&index) {
            return Ok(vec![rec.noted(format!(
                "the server's refusal of the request above, which has no {to} form"
            ))]);
        }
        match translated {
            Err(
                e @ (TranscriptError::WrongRevision { .. } | TranscriptError::Translate { .. }),
            ) => {
                let Some(answer) = self.refused.get(&index) else {
                    return Err(e);
                };
                self.noted_answers.insert(*answer);
                let why = match e {
                    TranscriptError::WrongRevision { why, .. } => why,
                    TranscriptError::Translate { source, .. } => source.to_string(),
                    TranscriptError::Record { source, .. } => source.to_string(),
                };
                Ok(vec![rec.noted(format!(
                    "a request the server refused, with no {to} form ({why})"
                ))])
            }
            other => other,
        }
    }
}

/// One record: note-only records (an earlier translation's output) pass
/// through untouched; messages are checked for their revision, then translated.
fn step(
    index: usize,
    rec: &Record,
    to: Revision,
    mut translate: impl FnMut(&Message) -> Translated,
) -> Result<Vec<Record>, TranscriptError> {
    let Some(msg) = &rec.msg else {
        return Ok(vec![rec.clone()]);
    };
    if let Some(why) = wrong_revision(to, rec.dir, msg) {
        return Err(TranscriptError::WrongRevision {
            index,
            source_revision: to.other(),
            why,
        });
    }
    translate(msg).map_err(|source| TranscriptError::Translate { index, source })
}

/// Detects a message that cannot be in a `to.other()` transcript.
fn wrong_revision(to: Revision, dir: Dir, msg: &Message) -> Option<String> {
    let source = to.other();
    match dir {
        Dir::C2s => match detect_client(msg) {
            ClientSignal::Is(r) if r != source => Some(match msg.method() {
                Some(m) => format!("client {m} signals {r}"),
                None => format!("client responses only exist in {r}"),
            }),
            ClientSignal::UnknownVersion(v) => Some(format!("unknown protocol version {v:?}")),
            _ => None,
        },
        Dir::S2c => match (source, msg) {
            (Revision::Modern, Message::Request(r)) => Some(format!(
                "server→client request {} (2026-07-28 has none)",
                r.method
            )),
            (Revision::Modern, Message::Notification(n))
                if n.method == crate::translate::notify::LEGACY_STATUS =>
            {
                Some(format!("{} is 2025-11-25", n.method))
            }
            (Revision::Legacy, Message::Notification(n))
                if n.method == crate::translate::notify::MODERN_STATUS =>
            {
                Some(format!("{} is 2026-07-28", n.method))
            }
            _ => None,
        },
    }
}

/// Request record index → index of the record answering it. Requests are
/// keyed by sender and id; an id may be reused once answered.
fn pair_responses(records: &[Record]) -> HashMap<usize, usize> {
    let mut pending: HashMap<(Dir, Id), usize> = HashMap::new();
    let mut pairs = HashMap::new();
    for (i, rec) in records.iter().enumerate() {
        match &rec.msg {
            Some(Message::Request(r)) => {
                pending.insert((rec.dir, r.id.clone()), i);
            }
            Some(m @ (Message::Response(_) | Message::Error(_))) => {
                if let Some(id) = m.id()
                    && let Some(req) = pending.remove(&(rec.dir.other(), id.clone()))
                {
                    pairs.insert(req, i);
                }
            }
            _ => {}
        }
    }
    pairs
}

/// A request still waiting for its answer, as the translator saw it.
#[derive(Debug, Clone, Default)]
struct Pending {
    /// Its method.
    method: String,
    /// Became a note: its answer becomes a note too.
    noted: bool,
    /// Legacy `tools/call` carried `params.task`.
    task_augmented: bool,
    /// `params.taskId` of `tasks/*`.
    task_id: Option<String>,
}

impl Pending {
    fn of(req: &crate::jsonrpc::Request) -> Pending {
        Pending {
            method: req.method.clone(),
            task_id: crate::translate::task::task_id_param(req.params.as_ref())
                .ok()
                .map(str::to_owned),
            ..Pending::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn rec(v: Value) -> Record {
        Record::from_value(&v).unwrap()
    }

    #[test]
    fn messages_of_the_target_revision_are_refused_with_their_index() {
        let modern = rec(
            json!({"dir":"c2s","msg":{"jsonrpc":"2.0","id":1,"method":"server/discover",
            "params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
                               "io.modelcontextprotocol/clientCapabilities":{}}}}}),
        );
        let ping = rec(json!({"dir":"c2s","msg":{"jsonrpc":"2.0","id":2,"method":"ping"}}));
        let e =
            translate_transcript(&[ping.clone(), modern.clone()], Revision::Modern).unwrap_err();
        assert_eq!(e.index(), 1);
        assert!(e.reason().contains("2025-11-25"), "{e}");
        // And the other way round: a legacy-only message in a modern transcript.
        let e = translate_transcript(&[modern, ping], Revision::Legacy).unwrap_err();
        assert_eq!(e.index(), 1);
        let s2c = rec(json!({"dir":"s2c","msg":{"jsonrpc":"2.0","id":0,"method":"ping"}}));
        assert!(translate_transcript(&[s2c], Revision::Legacy).is_err());
    }

    /// A recording keeps the client's mistakes and the server's refusals:
    /// those requests become notes (their error answers too), the rest of
    /// the recording is translated. A mistake the server did not refuse
    /// still stops the run.
    #[test]
    fn requests_the_server_refused_become_notes() {
        let meta = |version: &str| {
            json!({"io.modelcontextprotocol/protocolVersion": version,
                   "io.modelcontextprotocol/clientCapabilities": {}})
        };
        let ask = |id: i64, method: &str, version: &str| {
            rec(
                json!({"dir":"c2s","msg":{"jsonrpc":"2.0","id":id,"method":method,
                "params":{"_meta": meta(version)}}}),
            )
        };
        let refuse = |id: i64, code: i64| {
            rec(json!({"dir":"s2c","msg":{"jsonrpc":"2.0","id":id,
                "error":{"code":code,"message":"refused"}}}))
        };
        let no_caps = rec(
            json!({"dir":"c2s","msg":{"jsonrpc":"2.0","id":4,"method":"tools/list",
            "params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}}),
        );
        let records = [
            ask(1, "tools/list", "2025-06-18"),
            refuse(1, -32022),
            ask(2, "ping", "2026-07-28"),
            refuse(2, -32601),
            no_caps,
            refuse(4, -32602),
            ask(3, "tools/list", "2026-07-28"),
            rec(json!({"dir":"s2c","msg":{"jsonrpc":"2.0","id":3,
                "result":{"tools":[],"resultType":"complete"}}})),
        ];
        let out = translate_transcript(&records, Revision::Legacy).expect("translated");
        let notes: Vec<_> = out.iter().filter(|r| r.msg.is_none()).collect();
        assert_eq!(notes.len(), 6, "{out:#?}");
        let note = |i: usize| notes[i].note.clone().unwrap_or_default();
        assert!(note(0).contains("2025-06-18"), "{}", note(0));
        assert!(note(1).contains("refusal"), "{}", note(1));
        assert!(note(2).contains("not a 2026-07-28 method"), "{}", note(2));
        assert!(note(4).contains("refused"), "{}", note(4));
        let last = out
            .last()
            .and_then(|r| r.msg.as_ref())
            .expect("the good answer");
        assert_eq!(last.id(), Some(&Id::Num(3)));
        // Not refused by the server: still an error with its index.
        let e = translate_transcript(&records[..1], Revision::Legacy).unwrap_err();
        assert_eq!(e.index(), 0);
    }

    /// A second `server/discover` is answered from the legacy session
    /// already open (no second `initialize`), and a `tasks/update` the
    /// server refused reads as refused, not acknowledged.
    #[test]
    fn a_second_discover_and_a_refused_update_read_as_the_shim_makes_them() {
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}});
        let ask = |id: i64, method: &str, mut params: Value| {
            params["_meta"] = meta.clone();
            rec(
                json!({"dir":"c2s","msg":{"jsonrpc":"2.0","id":id,"method":method,"params":params}}),
            )
        };
        let discovered = rec(json!({"dir":"s2c","msg":{"jsonrpc":"2.0","id":1,"result":{
            "supportedVersions":["2026-07-28"],"capabilities":{},
            "serverInfo":{"name":"s","version":"1"},"resultType":"complete"}}}));
        let mut again = discovered.to_value();
        again["msg"]["id"] = json!(2);
        let records = [
            ask(1, "server/discover", json!({})),
            discovered,
            ask(2, "server/discover", json!({})),
            rec(again),
            ask(
                3,
                "tasks/update",
                json!({"taskId": "t", "inputResponses": {}}),
            ),
            rec(json!({"dir":"s2c","msg":{"jsonrpc":"2.0","id":3,
                "error":{"code":-32602,"message":"Unknown task: t"}}})),
        ];
        let out = translate_transcript(&records, Revision::Legacy).expect("translated");
        let inits = out
            .iter()
            .filter(|r| r.msg.as_ref().and_then(Message::method) == Some("initialize"))
            .count();
        assert_eq!(inits, 1, "{out:#?}");
        let last = out.last().and_then(|r| r.note.clone()).unwrap_or_default();
        assert!(last.contains("refused tasks/update"), "{last}");
        assert!(last.contains("Unknown task"), "{last}");
    }

    #[test]
    fn notes_pass_through_and_extra_keys_stay() {
        let note =
            rec(json!({"t":1,"dir":"c2s","note":"n","original":{"jsonrpc":"2.0","method":"x"}}));
        let out = translate_transcript(std::slice::from_ref(&note), Revision::Legacy).unwrap();
        assert_eq!(out, vec![note]);
        let init = rec(
            json!({"t":7,"dir":"c2s","msg":{"jsonrpc":"2.0","id":"a","method":"initialize",
            "params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}}),
        );
        let out = translate_transcript(&[init], Revision::Modern).unwrap();
        let v = out[0].to_value();
        assert_eq!(v["t"], 7);
        assert_eq!(v["msg"]["id"], "a");
        assert_eq!(v["msg"]["method"], "server/discover");
    }

    #[test]
    fn a_task_creation_is_recognised_by_its_request() {
        // The same `{task}`-shaped result is a creation only if the request
        // carried `params.task`.
        let call = |task: bool| {
            let mut p = json!({"name":"slow"});
            if task {
                p["task"] = json!({"ttl": 5});
            }
            vec![
                rec(
                    json!({"dir":"c2s","msg":{"jsonrpc":"2.0","id":1,"method":"tools/call","params":p}}),
                ),
                rec(
                    json!({"dir":"s2c","msg":{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t",
                    "status":"working","createdAt":"a","lastUpdatedAt":"a","ttl":5}}}}),
                ),
            ]
        };
        let created = translate_transcript(&call(true), Revision::Modern).unwrap();
        let result = created[1].to_value();
        assert_eq!(result["msg"]["result"]["resultType"], "task");
        assert_eq!(result["msg"]["result"]["ttlMs"], 5);
        let plain = translate_transcript(&call(false), Revision::Modern).unwrap();
        assert_eq!(
            plain[1].to_value()["msg"]["result"]["resultType"],
            "complete"
        );
        assert!(plain[1].to_value()["msg"]["result"]["task"].is_object());
    }
}
