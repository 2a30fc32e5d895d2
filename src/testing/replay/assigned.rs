//! What a live server assigned where the recording had other values: learnt
//! by walking a recorded message and its live counterpart side by side,
//! then put into later client messages in place of the recorded values.

use std::collections::HashMap;

use serde_json::{Map, Value};

/// Keys whose values describe state, never a name the server hands out:
/// a task recorded `completed` and seen `working` says nothing about what
/// a later client message should carry.
const NOT_ASSIGNED: &[&str] = &[
    "status",
    "statusMessage",
    "resultType",
    "method",
    "jsonrpc",
    "type",
    "text",
    "mimeType",
    "role",
    "action",
    "protocolVersion",
    // The server's vocabulary (tool, prompt and field names), not names it
    // hands out: two servers' tool lists differ without assigning anything.
    "name",
    "title",
    "description",
    "version",
    "instructions",
];

/// The only objects whose member names a server invents: 2026-07-28
/// input-request keys (`inputRequests`, answered as `inputResponses`).
const ASSIGNED_KEYS_UNDER: &[&str] = &["inputRequests"];

/// Recorded value → live value, strings only (ids, keys, states).
#[derive(Debug, Default)]
pub(super) struct Assigned {
    map: HashMap<String, String>,
    /// Member names the server invented (input-request keys).
    keys: HashMap<String, String>,
}

impl Assigned {
    /// Learns from `recorded` beside `live` (the same message of two runs).
    pub(super) fn learn(&mut self, recorded: &Value, live: &Value) {
        self.walk(None, recorded, live);
    }

    fn note(&mut self, recorded: &str, live: &str) {
        note(&mut self.map, recorded, live);
    }

    fn walk(&mut self, key: Option<&str>, recorded: &Value, live: &Value) {
        match (recorded, live) {
            (Value::String(r), Value::String(l))
                if !key.is_some_and(|k| NOT_ASSIGNED.contains(&k)) =>
            {
                self.note(r, l);
            }
            (Value::Object(r), Value::Object(l)) => self.walk_objects(key, r, l),
            // Lists of different lengths are different lists, not the
            // same items renamed.
            (Value::Array(r), Value::Array(l)) if r.len() == l.len() => {
                for (r, l) in r.iter().zip(l) {
                    self.walk(key, r, l);
                }
            }
            _ => {}
        }
    }

    /// Members present on both sides are walked as they are; under
    /// `inputRequests` the keys only one side has (keys the server
    /// invents) pair up in order when both sides have as many.
    fn walk_objects(&mut self, key: Option<&str>, r: &Map<String, Value>, l: &Map<String, Value>) {
        for (k, rv) in r {
            if let Some(lv) = l.get(k) {
                self.walk(Some(k), rv, lv);
            }
        }
        if !key.is_some_and(|k| ASSIGNED_KEYS_UNDER.contains(&k)) {
            return;
        }
        let only_r: Vec<_> = r.iter().filter(|(k, _)| !l.contains_key(*k)).collect();
        let only_l: Vec<_> = l.iter().filter(|(k, _)| !r.contains_key(*k)).collect();
        if only_r.len() == only_l.len() {
            for ((rk, rv), (lk, lv)) in only_r.into_iter().zip(only_l) {
                note(&mut self.keys, rk, lk);
                self.walk(Some(rk), rv, lv);
            }
        }
    }

    /// `msg` with every recorded value (string or object key) that the
    /// live run assigned differently replaced by the live one.
    pub(super) fn apply(&self, msg: &mut Value) {
        if self.map.is_empty() && self.keys.is_empty() {
            return;
        }
        match msg {
            Value::String(s) => {
                if let Some(live) = self.map.get(s.as_str()) {
                    live.clone_into(s);
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.apply(v)),
            Value::Object(map) => {
                let old = std::mem::take(map);
                for (k, mut v) in old {
                    self.apply(&mut v);
                    let k = self.keys.get(&k).cloned().unwrap_or(k);
                    map.insert(k, v);
                }
            }
            _ => {}
        }
    }
}

fn note(map: &mut HashMap<String, String>, recorded: &str, live: &str) {
    if recorded != live && !recorded.is_empty() {
        // The first sighting wins: a task id keeps its meaning for the
        // task's life, and a later echo must not re-point it.
        map.entry(recorded.to_owned())
            .or_insert_with(|| live.to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_keys_and_states_carry_over_but_statuses_do_not() {
        let mut a = Assigned::default();
        a.learn(
            &json!({"result": {"taskId": "old", "status": "completed",
                "inputRequests": {"k-old": {"method": "elicitation/create"}},
                "requestState": "s-old"}}),
            &json!({"result": {"taskId": "new", "status": "working",
                "inputRequests": {"k-new": {"method": "elicitation/create"}},
                "requestState": "s-new"}}),
        );
        let mut later = json!({"params": {"taskId": "old", "inputResponses": {"k-old": {}},
            "requestState": "s-old", "note": "completed"}});
        a.apply(&mut later);
        assert_eq!(
            later,
            json!({"params": {"taskId": "new", "inputResponses": {"k-new": {}},
                "requestState": "s-new", "note": "completed"}})
        );
    }
}
