//! 2026-07-28 shapes: per-request `_meta` and the
//! `io.modelcontextprotocol/tasks` extension.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Extra, TaskStatus};
use crate::jsonrpc::{ErrorObject, Id};

revision_task! {
    /// A task as the extension describes it (`ttlMs`, `pollIntervalMs`).
    ttl: ttl_ms = "ttlMs",
    poll: poll_interval_ms = "pollIntervalMs",
}

/// The payload a detailed task carries beside its status.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Payload {
    /// `working` / `cancelled`: nothing inline.
    #[default]
    None,
    /// `completed`: the original request's result.
    Result(Value),
    /// `failed`: the JSON-RPC error the request ended with.
    Error(ErrorObject),
    /// `input_required`: outstanding server-to-client requests by key.
    Input(InputRequests),
}

/// Outstanding input requests: key → `{method, params}`.
pub type InputRequests = Map<String, Value>;
/// Answers to input requests: key → result.
pub type InputResponses = Map<String, Value>;

/// A task with its inline payload (`tasks/get` result, `notifications/tasks`).
#[derive(Debug, Clone, PartialEq)]
pub struct DetailedTask {
    /// The task fields.
    pub task: Task,
    /// The inline payload.
    pub payload: Payload,
}

impl DetailedTask {
    /// Reads a detailed task from a `tasks/get` result or notification params.
    /// `result`, `error` and `inputRequests` are lifted out of `extra`.
    pub fn from_value(v: &Value) -> Result<DetailedTask, crate::error::ShimError> {
        Self::from_owned_value(v.clone())
    }

    /// [`DetailedTask::from_value`] for an owned value: the inline payload
    /// is moved, not copied.
    pub fn from_owned_value(v: Value) -> Result<DetailedTask, crate::error::ShimError> {
        let task: Task = match v {
            Value::Object(m) => match Task::try_from_map(m) {
                Ok(t) => t,
                Err(m) => super::from_value("task", &Value::Object(m))?,
            },
            other => super::from_value("task", &other)?,
        };
        Self::from_task(task)
    }

    /// The task of a `tasks/get` result, without the result's own `_meta`
    /// (see [`detailed_task_answer`], which reads the same from bytes).
    pub fn from_answer_result(v: Value) -> Result<DetailedTask, crate::error::ShimError> {
        let mut d = Self::from_owned_value(v)?;
        d.task.extra.shift_remove("_meta");
        Ok(d)
    }

    /// Lifts the inline payload out of a task read with its payload among
    /// the unknown members.
    fn from_task(mut task: Task) -> Result<DetailedTask, crate::error::ShimError> {
        // One scan over the few unknown members instead of hashing up to
        // four keys that are mostly absent; only present ones are removed
        // (the same removals, in the same order, as unconditionally).
        let (mut result, mut error, mut input, mut rtype) = (false, false, false, false);
        for k in task.extra.keys() {
            match k.as_str() {
                "result" => result = true,
                "error" => error = true,
                "inputRequests" => input = true,
                "resultType" => rtype = true,
                _ => {}
            }
        }
        let payload = if let Some(r) = result.then(|| task.extra.remove("result")).flatten() {
            Payload::Result(r)
        } else if let Some(e) = error.then(|| task.extra.remove("error")).flatten() {
            Payload::Error(super::from_value("task error", &e)?)
        } else if let Some(Value::Object(i)) =
            input.then(|| task.extra.remove("inputRequests")).flatten()
        {
            Payload::Input(i)
        } else {
            Payload::None
        };
        if rtype {
            task.extra.remove("resultType");
        }
        Ok(DetailedTask { task, payload })
    }

    /// The wire form; `result_type` is added when given.
    pub fn to_value(&self, result_type: Option<&str>) -> Value {
        self.clone().into_value(result_type)
    }

    /// [`DetailedTask::to_value`] consuming the task: the payload is moved.
    pub fn into_value(self, result_type: Option<&str>) -> Value {
        let mut v = self.task.into_value();
        if let Value::Object(m) = &mut v {
            match self.payload {
                Payload::None => {}
                Payload::Result(r) => {
                    m.insert("result".into(), r);
                }
                Payload::Error(e) => {
                    m.insert("error".into(), super::to_value(&e));
                }
                Payload::Input(i) => {
                    m.insert("inputRequests".into(), Value::Object(i));
                }
            }
            if let Some(rt) = result_type {
                m.insert("resultType".into(), Value::from(rt));
            }
        }
        v
    }
}

/// `resultType` values.
pub mod result_type {
    /// A final result.
    pub const COMPLETE: &str = "complete";
    /// MRTR: the server needs input before it can answer.
    pub const INPUT_REQUIRED: &str = "input_required";
    /// Tasks extension: the server created a task.
    pub const TASK: &str = "task";
}

/// The `resultType` of a modern result; absent means `complete`.
pub fn result_type_of(result: &Value) -> &str {
    result
        .get("resultType")
        .and_then(Value::as_str)
        .unwrap_or(result_type::COMPLETE)
}

/// The `_meta` every modern request carries.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RequestMeta {
    /// Required protocol version.
    #[serde(
        rename = "io.modelcontextprotocol/protocolVersion",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub protocol_version: Option<String>,
    /// Required client capabilities for this request.
    #[serde(
        rename = "io.modelcontextprotocol/clientCapabilities",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_capabilities: Option<Value>,
    /// Recommended client info.
    #[serde(
        rename = "io.modelcontextprotocol/clientInfo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_info: Option<Value>,
    /// Optional per-request log level.
    #[serde(
        rename = "io.modelcontextprotocol/logLevel",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub log_level: Option<String>,
    /// Other `_meta` members (progress tokens, vendor keys).
    #[serde(flatten)]
    pub extra: Extra,
}

impl RequestMeta {
    /// True when the request declared the tasks extension: its settings
    /// object is present (`null` is no declaration).
    pub fn declares_tasks(&self) -> bool {
        self.client_capabilities
            .as_ref()
            .is_some_and(crate::revision::declares_tasks)
    }

    /// True when the request's client can take server→client request
    /// `method` with `params` (see [`crate::translate::input::can_take`]).
    pub fn takes(&self, method: &str, params: Option<&Value>) -> bool {
        crate::translate::input::can_take(self.client_capabilities.as_ref(), method, params)
    }
}

/// `server/discover` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// Versions the server speaks.
    pub supported_versions: Vec<String>,
    /// Server capabilities.
    pub capabilities: Value,
    /// Optional instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Always `complete`.
    #[serde(default = "complete")]
    pub result_type: String,
    /// Cache freshness of this answer (not a task ttl).
    #[serde(default)]
    pub ttl_ms: i64,
    /// `public` or `private`.
    #[serde(default = "private")]
    pub cache_scope: String,
    /// `_meta` (server info) and unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

fn complete() -> String {
    result_type::COMPLETE.to_owned()
}

fn private() -> String {
    "private".to_owned()
}

impl DiscoverResult {
    /// True when the server offers the tasks extension.
    pub fn has_tasks(&self) -> bool {
        crate::revision::declares_tasks(&self.capabilities)
    }

    /// `_meta["io.modelcontextprotocol/serverInfo"]`.
    pub fn server_info(&self) -> Option<&Value> {
        self.extra
            .get("_meta")
            .and_then(|m| m.get(crate::revision::META_SERVER_INFO))
    }
}

/// `tasks/update` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTaskParams {
    /// The task answered.
    pub task_id: String,
    /// Answers by input-request key.
    pub input_responses: InputResponses,
    /// `_meta` and unknown members.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A successful JSON-RPC answer whose result is a task (a `tasks/get`
/// answer), read from its bytes straight into a [`DetailedTask`]: the
/// task's own members are typed as they are read, instead of being built
/// as a JSON tree first and moved out of it. A legacy client's `tasks/get`
/// reads one per request, so this is on the translating path's clock.
///
/// The answer's own `_meta` is skipped unread: it describes the answer
/// (the server's `serverInfo`, say), not the task, and building it was
/// half the cost of reading a task.
///
/// `None` for anything else (an error answer, a repeated member, a member
/// of an unexpected shape): read it with
/// [`Message::parse`](crate::jsonrpc::Message::parse) and
/// [`DetailedTask::from_answer_result`], which give the same task for
/// every answer this accepts, and word what is wrong with the others.
///
/// ```
/// use mcp_tasks_shim::wire::modern::detailed_task_answer;
/// let answer = br#"{"jsonrpc":"2.0","id":7,"result":{"taskId":"t1","status":"completed",
///     "createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:01Z",
///     "ttlMs":null,"resultType":"complete","result":{"content":[]},
///     "_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1"}}}}"#;
/// let d = detailed_task_answer(answer).unwrap();
/// assert_eq!(d.task.task_id, "t1");
/// assert!(d.task.extra.is_empty());
/// assert!(detailed_task_answer(br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"x"}}"#).is_none());
/// ```
pub fn detailed_task_answer(bytes: &[u8]) -> Option<DetailedTask> {
    detailed_task_answer_with_id(bytes).map(|(_, task)| task)
}

/// [`detailed_task_answer`], with the id of the request it answers.
pub fn detailed_task_answer_with_id(bytes: &[u8]) -> Option<(Id, DetailedTask)> {
    // One UTF-8 check for the whole line, not one per string read.
    let TaskAnswer(id, TaskParts { known, extra }) =
        serde_json::from_str(std::str::from_utf8(bytes).ok()?).ok()?;
    let task = Task {
        task_id: known.task_id,
        status: known.status,
        status_message: known.status_message,
        created_at: known.created_at,
        last_updated_at: known.last_updated_at,
        ttl_ms: known.ttl_ms,
        poll_interval_ms: known.poll_interval_ms,
        extra,
    };
    Some((id, DetailedTask::from_task(task).ok()?))
}

/// A `tasks/get` answer whose task is bare: no inline payload, no member
/// the shim does not know; its strings borrowed from the answer's line.
/// What a poll of a working task mostly reads, to be compared with what
/// is known of the task without being copied out of the line.
pub type BareTask<'a> = KnownMembers<&'a str>;

/// The members of a task the shim knows, its strings as `S`: owned, or
/// borrowed from the line ([`BareTask`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KnownMembers<S> {
    /// `taskId`.
    pub task_id: S,
    /// `status`.
    pub status: TaskStatus,
    /// `statusMessage`.
    pub status_message: Option<S>,
    /// `createdAt`.
    pub created_at: S,
    /// `lastUpdatedAt`.
    pub last_updated_at: S,
    /// `ttlMs`.
    pub ttl_ms: Option<i64>,
    /// `pollIntervalMs`.
    pub poll_interval_ms: Option<i64>,
}

/// The answer's task as a [`BareTask`], read as [`detailed_task_answer`]
/// reads it. `None` for any answer that is not one: that one did not
/// read, has a payload (`result`, `error`, `inputRequests`) or another
/// member, or a string with an escape in it (a borrowed string cannot
/// unescape). [`detailed_task_answer`] reads those.
///
/// ```
/// use mcp_tasks_shim::wire::{TaskStatus, modern::bare_task_answer};
/// let poll = r#"{"jsonrpc":"2.0","id":7,"result":{"taskId":"t1","status":"working",
///     "createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:01Z",
///     "ttlMs":60000,"resultType":"task","_meta":{"io.modelcontextprotocol/serverInfo":{}}}}"#;
/// let seen = bare_task_answer(poll).unwrap();
/// assert_eq!((seen.task_id, seen.status), ("t1", TaskStatus::Working));
/// let done = poll.replace(r#""ttlMs""#, r#""result":{"content":[]},"ttlMs""#);
/// assert!(bare_task_answer(&done).is_none());
/// ```
pub fn bare_task_answer(line: &str) -> Option<BareTask<'_>> {
    let TaskAnswer(_, TaskParts { known, extra }) =
        serde_json::from_str::<TaskAnswer<&str>>(line).ok()?;
    extra.is_empty().then_some(known)
}

/// See [`detailed_task_answer`]; fails on any shape it does not take. Its
/// strings are `S`: owned, or borrowed from the line ([`bare_task_answer`]).
struct TaskAnswer<S = String>(Id, TaskParts<S>);

/// A member name of the answer or of its task, read without allocating
/// for the known ones.
enum Member {
    Jsonrpc,
    Id,
    Result,
    TaskId,
    Status,
    StatusMessage,
    CreatedAt,
    LastUpdatedAt,
    TtlMs,
    PollIntervalMs,
    /// The answer's own `_meta` when read in its task: it describes the
    /// answer (the server's `serverInfo`, say), not the task.
    Meta,
    /// The answer's `resultType`, which [`DetailedTask::from_task`] drops.
    ResultType,
    Other(String),
}

impl<'de> Deserialize<'de> for Member {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl serde::de::Visitor<'_> for KeyVisitor {
            type Value = Member;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a member name")
            }
            fn visit_str<E: serde::de::Error>(self, k: &str) -> Result<Member, E> {
                Ok(match k {
                    "jsonrpc" => Member::Jsonrpc,
                    "id" => Member::Id,
                    "result" => Member::Result,
                    "taskId" => Member::TaskId,
                    "status" => Member::Status,
                    "statusMessage" => Member::StatusMessage,
                    "createdAt" => Member::CreatedAt,
                    "lastUpdatedAt" => Member::LastUpdatedAt,
                    "ttlMs" => Member::TtlMs,
                    "pollIntervalMs" => Member::PollIntervalMs,
                    "_meta" => Member::Meta,
                    "resultType" => Member::ResultType,
                    other => Member::Other(other.to_owned()),
                })
            }
        }
        d.deserialize_identifier(KeyVisitor)
    }
}

/// Sets a member read once; a repeated one is left to the general path,
/// whose JSON tree keeps the last.
fn once<T, E: serde::de::Error>(slot: &mut Option<T>, v: T) -> Result<(), E> {
    match slot.replace(v) {
        None => Ok(()),
        Some(_) => Err(E::custom("repeated member")),
    }
}

impl<'de, S: Deserialize<'de>> Deserialize<'de> for TaskAnswer<S> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        struct AnswerVisitor<S>(std::marker::PhantomData<S>);
        impl<'de, S: Deserialize<'de>> serde::de::Visitor<'de> for AnswerVisitor<S> {
            type Value = TaskAnswer<S>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON-RPC answer carrying a task")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<TaskAnswer<S>, A::Error> {
                let (mut version, mut id, mut task) = (None, None, None);
                while let Some(key) = map.next_key::<Member>()? {
                    match key {
                        Member::Jsonrpc => {
                            let v: &str = map.next_value()?;
                            if v != "2.0" {
                                return Err(A::Error::custom("not JSON-RPC 2.0"));
                            }
                            once(&mut version, ())?;
                        }
                        // Integers and strings only, as the general path.
                        Member::Id => once(&mut id, map.next_value::<Id>()?)?,
                        Member::Result => once(&mut task, map.next_value::<TaskParts<S>>()?)?,
                        _ => return Err(A::Error::custom("not a plain answer")),
                    }
                }
                match (version, id, task) {
                    (Some(()), Some(id), Some(task)) => Ok(TaskAnswer(id, task)),
                    _ => Err(A::Error::custom("not a plain answer")),
                }
            }
        }
        d.deserialize_map(AnswerVisitor(std::marker::PhantomData))
    }
}

/// A task object read member by member, its strings as `S`; its unknown
/// members (the inline payload among them) kept in order as
/// [`Task::try_from_map`] keeps them.
struct TaskParts<S> {
    known: KnownMembers<S>,
    extra: Map<String, Value>,
}

/// Reads the value of unknown member `k` into `extra`.
fn unknown<'de, A: serde::de::MapAccess<'de>>(
    map: &mut A,
    extra: &mut Map<String, Value>,
    k: String,
) -> Result<(), A::Error> {
    let v: Value = map.next_value()?;
    match extra.insert(k, v) {
        None => Ok(()),
        Some(_) => Err(serde::de::Error::custom("repeated member")),
    }
}

impl<'de, S: Deserialize<'de>> Deserialize<'de> for TaskParts<S> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        struct TaskVisitor<S>(std::marker::PhantomData<S>);
        impl<'de, S: Deserialize<'de>> serde::de::Visitor<'de> for TaskVisitor<S> {
            type Value = TaskParts<S>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a task")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<TaskParts<S>, A::Error> {
                let (mut task_id, mut status, mut status_message) = (None, None, None);
                let (mut created_at, mut last_updated_at) = (None, None);
                let (mut ttl, mut poll) = (None, None);
                let mut extra = Map::new();
                while let Some(key) = map.next_key::<Member>()? {
                    match key {
                        Member::TaskId => once(&mut task_id, map.next_value::<S>()?)?,
                        Member::Status => once(&mut status, map.next_value::<TaskStatus>()?)?,
                        Member::StatusMessage => {
                            once(&mut status_message, map.next_value::<Option<S>>()?)?
                        }
                        Member::CreatedAt => once(&mut created_at, map.next_value::<S>()?)?,
                        Member::LastUpdatedAt => {
                            once(&mut last_updated_at, map.next_value::<S>()?)?
                        }
                        Member::TtlMs => once(&mut ttl, map.next_value::<Option<i64>>()?)?,
                        Member::PollIntervalMs => {
                            once(&mut poll, map.next_value::<Option<i64>>()?)?
                        }
                        Member::Meta | Member::ResultType => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                        Member::Other(k) => unknown(&mut map, &mut extra, k)?,
                        // Names the answer has too are unknown members here
                        // (`result` is the inline payload).
                        Member::Result => unknown(&mut map, &mut extra, "result".into())?,
                        Member::Id => unknown(&mut map, &mut extra, "id".into())?,
                        Member::Jsonrpc => unknown(&mut map, &mut extra, "jsonrpc".into())?,
                    }
                }
                let (Some(task_id), Some(status), Some(created_at), Some(last_updated_at)) =
                    (task_id, status, created_at, last_updated_at)
                else {
                    return Err(A::Error::custom("a required member is missing"));
                };
                let known = KnownMembers {
                    task_id,
                    status,
                    status_message: status_message.flatten(),
                    created_at,
                    last_updated_at,
                    ttl_ms: ttl.flatten(),
                    poll_interval_ms: poll.flatten(),
                };
                Ok(TaskParts { known, extra })
            }
        }
        d.deserialize_map(TaskVisitor(std::marker::PhantomData))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the bytes reader leaves to the general path: JSON it cannot
    /// judge member by member (a repeated member, whose last copy the
    /// general path keeps), an error answer, a request.
    #[test]
    fn the_answer_reader_declines_what_it_does_not_take() {
        let task = r#""status":"working","createdAt":"a","lastUpdatedAt":"b","ttlMs":1"#;
        let repeated =
            format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"taskId":"x","taskId":"y",{task}}}}}"#);
        assert!(detailed_task_answer(repeated.as_bytes()).is_none());
        let general = match crate::jsonrpc::Message::parse(repeated.as_bytes()).unwrap() {
            crate::jsonrpc::Message::Response(r) => DetailedTask::from_owned_value(r.result),
            other => panic!("{other:?}"),
        };
        assert_eq!(general.unwrap().task.task_id, "y");
        for other in [
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown task"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{}}"#,
            r#"{"jsonrpc":"1.0","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":null,"result":{}}"#,
            r#"[]"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"taskId":"x"}"#,
        ] {
            assert!(detailed_task_answer(other.as_bytes()).is_none(), "{other}");
        }
        let ok = format!(
            r#"{{"jsonrpc":"2.0","id":"s","result":{{"taskId":"x",{task},"_meta":{{"k":1}},"inputRequests":{{"q":{{}}}},"resultType":"task"}}}}"#
        );
        let d = detailed_task_answer(ok.as_bytes()).expect("a plain answer");
        assert_eq!(d.task.ttl_ms, Some(1));
        assert!(matches!(d.payload, Payload::Input(_)));
        // The answer's `_meta` is not the task's.
        assert!(d.task.extra.is_empty());
    }
}
