//! Typed task shapes of each revision, kept apart on purpose.
//!
//! [`legacy`] holds 2025-11-25 shapes, [`modern`] the 2026-07-28 core and
//! tasks-extension shapes. Nothing here mixes the two; conversions live in
//! [`crate::translate`]. Every struct keeps unknown members in `extra`, so a
//! field the shim does not understand survives a round trip.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Declares a revision's `Task` in the module that invokes it. Both specs
/// define the same task members but for the names of two:
/// retention and polling interval (`ttl`/`pollInterval` in 2025-11-25,
/// `ttlMs`/`pollIntervalMs` in 2026-07-28). One list keeps the members
/// (and the moving reader and writer) from drifting apart, while each
/// revision still gets a type of its own with its own member names.
macro_rules! revision_task {
    ($(#[$doc:meta])* ttl: $ttl:ident = $ttl_key:literal, poll: $poll:ident = $poll_key:literal $(,)?) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        pub struct Task {
            /// Unguessable task id.
            pub task_id: String,
            /// Current status.
            pub status: TaskStatus,
            /// Optional human-readable status text.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub status_message: Option<String>,
            /// ISO 8601 creation time.
            pub created_at: String,
            /// ISO 8601 time of the last status change.
            pub last_updated_at: String,
            /// Retention in ms; `null` means unlimited. Required on the wire.
            #[serde(default)]
            pub $ttl: Option<i64>,
            /// Suggested polling interval in ms.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub $poll: Option<i64>,
            /// Unknown members.
            #[serde(flatten)]
            pub extra: Extra,
        }

        impl Task {
            /// The wire name of the retention member.
            pub(crate) const TTL_KEY: &'static str = $ttl_key;
            /// The wire name of the polling-interval member.
            pub(crate) const POLL_KEY: &'static str = $poll_key;

            /// Reads a task from an owned object, moving its members (no
            /// copy of unknown members such as an inline result). The
            /// object comes back untouched when serde must judge it (a
            /// member of an unexpected shape).
            pub fn try_from_map(m: Map<String, Value>) -> Result<Task, Map<String, Value>> {
                if !super::task_fields_ok(&m, Self::TTL_KEY, Self::POLL_KEY) {
                    return Err(m);
                }
                let f = super::take_task_fields(m, Self::TTL_KEY, Self::POLL_KEY);
                Ok(Task {
                    task_id: f.task_id,
                    status: f.status,
                    status_message: f.status_message,
                    created_at: f.created_at,
                    last_updated_at: f.last_updated_at,
                    $ttl: f.ttl,
                    $poll: f.poll_interval,
                    extra: f.extra,
                })
            }

            /// The wire form, equal to [`super::to_value`] of the task,
            /// built by moving the members instead of serialising them.
            pub fn into_value(self) -> Value {
                super::TaskFields {
                    task_id: self.task_id,
                    status: self.status,
                    status_message: self.status_message,
                    created_at: self.created_at,
                    last_updated_at: self.last_updated_at,
                    ttl: self.$ttl,
                    poll_interval: self.$poll,
                    extra: self.extra,
                }
                .into_value(Self::TTL_KEY, Self::POLL_KEY)
            }
        }
    };
}

pub mod legacy;
pub mod modern;

/// RFC 5424 severities, least severe first: the `LoggingLevel` of both
/// revisions (`logging/setLevel` in 2025-11-25, the per-request
/// `io.modelcontextprotocol/logLevel` in 2026-07-28).
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Unknown members of a wire object, kept verbatim.
pub type Extra = Map<String, Value>;

/// Task status: the same five values in both revisions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// The task is running.
    Working,
    /// The task waits for input from the client.
    InputRequired,
    /// The task ended with a result.
    Completed,
    /// The task ended with an error.
    Failed,
    /// The task was cancelled.
    Cancelled,
}

impl TaskStatus {
    /// Terminal states never change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled
        )
    }

    /// The wire string.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Working => "working",
            TaskStatus::InputRequired => "input_required",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl TaskStatus {
    /// The status named by a wire string, if it is one of the five.
    pub(crate) fn from_wire(s: &str) -> Option<TaskStatus> {
        Some(match s {
            "working" => TaskStatus::Working,
            "input_required" => TaskStatus::InputRequired,
            "completed" => TaskStatus::Completed,
            "failed" => TaskStatus::Failed,
            "cancelled" => TaskStatus::Cancelled,
            _ => return None,
        })
    }
}

/// The members both revisions' `Task` share, taken out of an owned object
/// without a serde round trip (which would copy every unknown member,
/// inline results included). Only [`task_fields_ok`] objects are read
/// this way; anything else goes through serde, so the outcome (value or
/// error) is the same either way.
pub(crate) struct TaskFields {
    pub(crate) task_id: String,
    pub(crate) status: TaskStatus,
    pub(crate) status_message: Option<String>,
    pub(crate) created_at: String,
    pub(crate) last_updated_at: String,
    pub(crate) ttl: Option<i64>,
    pub(crate) poll_interval: Option<i64>,
    pub(crate) extra: Extra,
}

/// True when every known task member of `m` has exactly the shape the
/// serde derive reads without error (`ttl_key`/`poll_key` name the
/// revision's retention and polling members).
pub(crate) fn task_fields_ok(m: &Map<String, Value>, ttl_key: &str, poll_key: &str) -> bool {
    // One pass over the members (no hashing); each required member sets a bit.
    let mut required = 0u8;
    for (k, v) in m {
        let ok = match k.as_str() {
            "taskId" => {
                required |= 1;
                v.is_string()
            }
            "status" => {
                required |= 2;
                v.as_str().and_then(TaskStatus::from_wire).is_some()
            }
            "statusMessage" => v.is_null() || v.is_string(),
            "createdAt" => {
                required |= 4;
                v.is_string()
            }
            "lastUpdatedAt" => {
                required |= 8;
                v.is_string()
            }
            k if k == ttl_key || k == poll_key => v.is_null() || v.as_i64().is_some(),
            _ => true,
        };
        if !ok {
            return false;
        }
    }
    required == 0b1111
}

/// Moves the task members out of a [`task_fields_ok`] object; the other
/// members become `extra`, in their original order.
pub(crate) fn take_task_fields(
    mut m: Map<String, Value>,
    ttl_key: &str,
    poll_key: &str,
) -> TaskFields {
    let mut f = TaskFields {
        task_id: String::new(),
        status: TaskStatus::Working,
        status_message: None,
        created_at: String::new(),
        last_updated_at: String::new(),
        ttl: None,
        poll_interval: None,
        extra: Map::new(),
    };
    fn take_string(v: &mut Value) -> String {
        match std::mem::take(v) {
            Value::String(s) => s,
            _ => String::new(),
        }
    }
    let is_known = |k: &str| {
        matches!(
            k,
            "taskId" | "status" | "statusMessage" | "createdAt" | "lastUpdatedAt"
        ) || k == ttl_key
            || k == poll_key
    };
    // Known members are moved out in place; the rest of the map (its
    // allocation and cached hashes included) becomes `extra`, in order.
    for (k, v) in m.iter_mut() {
        match k.as_str() {
            "taskId" => f.task_id = take_string(v),
            "status" => {
                f.status = v
                    .as_str()
                    .and_then(TaskStatus::from_wire)
                    .unwrap_or(TaskStatus::Working);
            }
            "statusMessage" => f.status_message = v.is_string().then(|| take_string(v)),
            "createdAt" => f.created_at = take_string(v),
            "lastUpdatedAt" => f.last_updated_at = take_string(v),
            k if k == ttl_key => f.ttl = v.as_i64(),
            k if k == poll_key => f.poll_interval = v.as_i64(),
            _ => {}
        }
    }
    m.retain(|k, _| !is_known(k));
    f.extra = m;
    f
}

impl TaskFields {
    /// The wire object, exactly as serde serialises either `Task`: known
    /// members in declaration order (optional ones left out when absent,
    /// the retention member always present), then `extra` in order.
    pub(crate) fn into_value(self, ttl_key: &str, poll_key: &str) -> Value {
        let mut m = Map::with_capacity(7 + self.extra.len());
        m.insert("taskId".into(), Value::String(self.task_id));
        m.insert("status".into(), Value::from(self.status.as_str()));
        if let Some(s) = self.status_message {
            m.insert("statusMessage".into(), Value::String(s));
        }
        m.insert("createdAt".into(), Value::String(self.created_at));
        m.insert("lastUpdatedAt".into(), Value::String(self.last_updated_at));
        m.insert(ttl_key.into(), self.ttl.map_or(Value::Null, Value::from));
        if let Some(p) = self.poll_interval {
            m.insert(poll_key.into(), Value::from(p));
        }
        for (k, v) in self.extra {
            m.insert(k, v);
        }
        Value::Object(m)
    }
}

/// Parses a typed shape out of a JSON value, naming the shape on failure.
pub fn from_value<T: serde::de::DeserializeOwned>(
    what: &str,
    v: &Value,
) -> Result<T, crate::error::ShimError> {
    T::deserialize(v).map_err(|e| crate::error::ShimError::InvalidParams(format!("{what}: {e}")))
}

/// Serialises a typed shape; our shapes always serialise.
pub fn to_value<T: Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Objects the moving reader must read exactly as serde does, or hand
    /// back untouched for serde to judge.
    fn task_shapes(ttl: &str, poll: &str) -> Vec<Value> {
        let base = json!({"x-first": 0, "taskId": "t", "status": "working",
            "createdAt": "a", "lastUpdatedAt": "b", ttl: 1000, poll: 50,
            "result": {"content": [], "z": 1, "a": 2}, "_meta": {"k": 1}});
        let with = |k: &str, v: Value| {
            let mut o = base.clone();
            o[k] = v;
            o
        };
        let without = |k: &str| {
            let mut o = base.clone();
            o.as_object_mut().unwrap().shift_remove(k);
            o
        };
        vec![
            base.clone(),
            with("statusMessage", json!("s")),
            with("statusMessage", Value::Null),
            with("statusMessage", json!(1)),
            with(ttl, Value::Null),
            without(ttl),
            without(poll),
            with(poll, json!(1.5)),
            with(ttl, json!(u64::MAX)),
            with(ttl, json!(-3)),
            with("status", json!("input_required")),
            with("status", json!("paused")),
            with("status", json!({"working": null})),
            with("taskId", json!(7)),
            without("createdAt"),
            without("taskId"),
        ]
    }

    type Reader<T> = fn(Map<String, Value>) -> Result<T, Map<String, Value>>;

    fn same_as_serde<T>(ttl: &str, poll: &str, read: Reader<T>, write: fn(T) -> Value)
    where
        T: serde::de::DeserializeOwned + Serialize + Clone + PartialEq + std::fmt::Debug,
    {
        for v in task_shapes(ttl, poll) {
            let by_serde: Result<T, _> = from_value("task", &v);
            match read(v.as_object().unwrap().clone()) {
                Ok(t) => {
                    assert_eq!(Some(&t), by_serde.as_ref().ok(), "{v}");
                    // Same members in the same order.
                    assert_eq!(
                        write(t.clone()).to_string(),
                        to_value(&t).to_string(),
                        "{v}"
                    );
                }
                Err(back) => assert_eq!(Value::Object(back).to_string(), v.to_string()),
            }
        }
    }

    #[test]
    fn moving_task_reader_and_writer_match_serde() {
        same_as_serde(
            "ttlMs",
            "pollIntervalMs",
            modern::Task::try_from_map,
            modern::Task::into_value,
        );
        same_as_serde(
            "ttl",
            "pollInterval",
            legacy::Task::try_from_map,
            legacy::Task::into_value,
        );
    }

    #[test]
    fn moving_creation_reader_matches_serde() {
        for task in task_shapes("ttl", "pollInterval") {
            for v in [
                json!({"task": task.clone(), "_meta": {"m": 1}, "z": 2}),
                json!({"z": 2, "task": task.clone()}),
                json!({"task": "nope"}),
                json!([]),
            ] {
                let by_serde: Result<legacy::CreateTaskResult, _> =
                    from_value("CreateTaskResult", &v);
                let moved = legacy::CreateTaskResult::from_owned_value(v.clone());
                assert_eq!(moved, by_serde, "{v}");
                if let Ok(c) = moved {
                    assert_eq!(
                        to_value(&c).to_string(),
                        to_value(&by_serde.unwrap()).to_string()
                    );
                }
            }
        }
    }
}
