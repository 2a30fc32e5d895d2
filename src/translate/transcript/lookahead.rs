//! Look-ahead scans: what the live shim would learn by asking upstream
//! before answering, read from later records of the transcript.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{Dir, Record};
use crate::jsonrpc::Message;
use crate::translate::{input, task, tools};
use crate::wire::TaskStatus;
use crate::wire::legacy::{self, TaskMetadata};
use crate::wire::modern::Payload;

/// A legacy server→client request tagged with a task: an `inputRequests`
/// entry in 2026-07-28.
pub(super) struct InputEntry {
    pub(super) task_id: String,
    pub(super) key: String,
    pub(super) input: Value,
    /// Record index of the client's answer, if any.
    answered_at: Option<usize>,
    asked_at: usize,
}

/// A legacy transcript, scanned ahead: task payloads from `tasks/result`
/// answers, and the tagged server→client requests with their keys.
pub(super) struct LegacyLookahead {
    /// What each task's `tasks/result` answered.
    payloads: HashMap<String, Payload>,
    /// Tagged server→client requests, in order.
    inputs: Vec<InputEntry>,
}

impl LegacyLookahead {
    pub(super) fn scan(records: &[Record], pairs: &HashMap<usize, usize>) -> LegacyLookahead {
        let mut payloads = HashMap::new();
        let mut inputs = Vec::new();
        let mut seq: HashMap<String, u64> = HashMap::new();
        for (i, rec) in records.iter().enumerate() {
            let Some(Message::Request(q)) = &rec.msg else {
                continue;
            };
            let answer = pairs.get(&i).and_then(|&j| records[j].msg.as_ref());
            if rec.dir == Dir::C2s && q.method == "tasks/result" {
                let Ok(id) = task::task_id_param(q.params.as_ref()) else {
                    continue;
                };
                let payload = match answer {
                    Some(Message::Response(r)) => {
                        Payload::Result(task::strip_related_task(r.result.clone()))
                    }
                    Some(Message::Error(e)) => Payload::Error(e.error.clone()),
                    _ => continue,
                };
                payloads.insert(id.to_owned(), payload);
            } else if rec.dir == Dir::S2c
                && input::INPUT_METHODS.contains(&q.method.as_str())
                && let Some(task_id) = input::related_task_of(q.params.as_ref())
            {
                let n = seq.entry(task_id.to_owned()).or_default();
                *n += 1;
                inputs.push(InputEntry {
                    task_id: task_id.to_owned(),
                    key: input::input_key(&q.method, *n),
                    input: input::legacy_request_to_input(q).0,
                    answered_at: pairs.get(&i).copied(),
                    asked_at: i,
                });
            }
        }
        LegacyLookahead { payloads, inputs }
    }

    /// The tagged request asked at record `i`.
    pub(super) fn asked_at(&self, i: usize) -> Option<&InputEntry> {
        self.inputs.iter().find(|e| e.asked_at == i)
    }

    /// The tagged request the record `i` answers.
    pub(super) fn answered_at(&self, i: usize) -> Option<&InputEntry> {
        self.inputs.iter().find(|e| e.answered_at == Some(i))
    }

    /// What a modern view of `t` carries inline at record `i`.
    pub(super) fn payload_for(&self, t: &legacy::Task, i: usize) -> Payload {
        match t.status {
            TaskStatus::InputRequired => {
                let open: Map<String, Value> = self
                    .inputs
                    .iter()
                    .filter(|e| e.task_id == t.task_id && e.answered_at.is_none_or(|a| a > i))
                    .map(|e| (e.key.clone(), e.input.clone()))
                    .collect();
                if open.is_empty() {
                    Payload::None
                } else {
                    Payload::Input(open)
                }
            }
            TaskStatus::Completed | TaskStatus::Failed => {
                self.payloads.get(&t.task_id).cloned().unwrap_or_default()
            }
            _ => Payload::None,
        }
    }
}

/// A modern transcript, scanned ahead: `tools/call` record index → the
/// `params.task` a legacy server needs, for calls the modern server answered
/// with a task (the legacy client decides what the modern server decided).
pub(super) fn task_calls(
    records: &[Record],
    pairs: &HashMap<usize, usize>,
) -> HashMap<usize, TaskMetadata> {
    let mut calls = HashMap::new();
    for (i, rec) in records.iter().enumerate() {
        let Some(Message::Request(q)) = &rec.msg else {
            continue;
        };
        if q.method != "tools/call" {
            continue;
        }
        if let Some(Message::Response(r)) = pairs.get(&i).and_then(|&j| records[j].msg.as_ref())
            && tools::is_task_result(&r.result)
        {
            let ttl = r.result.get("ttlMs").and_then(Value::as_i64);
            calls.insert(
                i,
                TaskMetadata {
                    ttl,
                    extra: Map::new(),
                },
            );
        }
    }
    calls
}
