//! Task rows: fields, creation, `tasks/get`, `tasks/result`, cancel, list.

use serde_json::{Map, Value, json};

use super::{as_object, meta_mut, remove_meta_key};
use crate::error::ShimError;
use crate::jsonrpc::ErrorObject;
use crate::revision::META_RELATED_TASK;
use crate::wire::modern::{self, DetailedTask, Payload, result_type};
use crate::wire::{TaskStatus, legacy, to_value};

/// `ttlMs`/`pollIntervalMs` → `ttl`/`pollInterval`; everything else kept.
pub fn task_to_legacy(t: &modern::Task) -> legacy::Task {
    legacy_with_extra(t, without_shadows(t.extra.clone(), LEGACY_ONLY))
}

/// The members of `t` in 2025-11-25 shape, with `extra` as given.
fn legacy_with_extra(t: &modern::Task, extra: crate::wire::Extra) -> legacy::Task {
    legacy::Task {
        task_id: t.task_id.clone(),
        status: t.status,
        status_message: t.status_message.clone(),
        created_at: t.created_at.clone(),
        last_updated_at: t.last_updated_at.clone(),
        ttl: t.ttl_ms,
        poll_interval: t.poll_interval_ms,
        extra,
    }
}

/// [`task_to_legacy`] consuming the task (members moved, not copied).
pub fn task_to_legacy_owned(t: modern::Task) -> legacy::Task {
    legacy::Task {
        task_id: t.task_id,
        status: t.status,
        status_message: t.status_message,
        created_at: t.created_at,
        last_updated_at: t.last_updated_at,
        ttl: t.ttl_ms,
        poll_interval: t.poll_interval_ms,
        extra: without_shadows(t.extra, LEGACY_ONLY),
    }
}

/// `ttl`/`pollInterval` → `ttlMs`/`pollIntervalMs`; everything else kept.
pub fn task_to_modern(t: &legacy::Task) -> modern::Task {
    modern::Task {
        task_id: t.task_id.clone(),
        status: t.status,
        status_message: t.status_message.clone(),
        created_at: t.created_at.clone(),
        last_updated_at: t.last_updated_at.clone(),
        ttl_ms: t.ttl.map(js_safe),
        poll_interval_ms: t.poll_interval.map(js_safe),
        extra: without_shadows(t.extra.clone(), MODERN_ONLY),
    }
}

/// [`task_to_modern`] consuming the task (members moved, not copied).
pub fn task_to_modern_owned(t: legacy::Task) -> modern::Task {
    modern::Task {
        task_id: t.task_id,
        status: t.status,
        status_message: t.status_message,
        created_at: t.created_at,
        last_updated_at: t.last_updated_at,
        ttl_ms: t.ttl.map(js_safe),
        poll_interval_ms: t.poll_interval.map(js_safe),
        extra: without_shadows(t.extra, MODERN_ONLY),
    }
}

/// The 2026-07-28 schema bounds `ttlMs` / `pollIntervalMs` to JavaScript's
/// safe integers (±(2^53 − 1)); 2025-11-25 allows any integer. A legacy
/// value beyond is clamped: such a TTL or interval means "practically
/// forever" either way (found by fuzzing).
fn js_safe(ms: i64) -> i64 {
    const MAX_SAFE: i64 = (1 << 53) - 1;
    ms.clamp(-MAX_SAFE, MAX_SAFE)
}

/// Task members only one revision has, by the revision that has them.
const LEGACY_ONLY: [&str; 2] = ["ttl", "pollInterval"];
/// The members a flat 2026-07-28 task result gives meaning to: a member
/// of that name beside a 2025-11-25 result's `task` is not the task's,
/// and must not pass for it once flattened.
const FLAT_TASK_MEMBERS: [&str; 11] = [
    "taskId",
    "status",
    "statusMessage",
    "createdAt",
    "lastUpdatedAt",
    "ttlMs",
    "pollIntervalMs",
    "result",
    "error",
    "inputRequests",
    "resultType",
];
const MODERN_ONLY: [&str; 2] = ["ttlMs", "pollIntervalMs"];

/// `extra` without unknown members named like the target revision's own
/// task members (`names`). A legacy peer's stray `pollIntervalMs: null`
/// is just an unknown member in 2025-11-25, but kept as is it would
/// overwrite the translated `pollIntervalMs` (found by
/// tests/fuzz_translate.rs; the result was schema-invalid).
fn without_shadows(mut extra: crate::wire::Extra, names: [&str; 2]) -> crate::wire::Extra {
    for name in names {
        extra.shift_remove(name);
    }
    extra
}

/// True for a tool result that reports a tool-level error.
pub fn is_error_result(result: &Value) -> bool {
    result.get("isError").and_then(Value::as_bool) == Some(true)
}

/// The status a 2025-11-25 client should see for a detailed modern task.
///
/// 2025-11-25 counts a tool result with `isError: true` as `failed`;
/// 2026-07-28 ends such a task `completed` and keeps `failed` for JSON-RPC
/// errors only.
pub fn legacy_status(d: &DetailedTask) -> TaskStatus {
    match (&d.task.status, &d.payload) {
        (TaskStatus::Completed, Payload::Result(r)) if is_error_result(r) => TaskStatus::Failed,
        (s, _) => *s,
    }
}

/// A detailed modern task as a bare legacy task (payload left out: callers
/// cache it and serve it through `tasks/result`).
pub fn detailed_to_legacy(d: &DetailedTask) -> legacy::Task {
    let mut t = task_to_legacy(&d.task);
    t.status = legacy_status(d);
    t
}

/// [`detailed_to_legacy`] as the ledger keeps it: without the answer's
/// `_meta`, which describes that answer, not the task. It is skipped, not
/// copied and removed: a server's `_meta` (its `serverInfo`, say) can be
/// the larger part of the task.
pub fn detailed_to_legacy_record(d: &DetailedTask) -> legacy::Task {
    let extra = d
        .task
        .extra
        .iter()
        .filter(|(k, _)| k.as_str() != "_meta" && !LEGACY_ONLY.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut t = legacy_with_extra(&d.task, extra);
    t.status = legacy_status(d);
    t
}

/// Whether `known` is the legacy task [`detailed_to_legacy_record`] makes
/// of the bare task `seen` (no payload, no other member: its status is the
/// legacy one, its extra members none), with `ttl` for its `ttlMs` as
/// the caller keeps it. Compared in place: nothing copied out of the line.
pub fn bare_task_is(known: &legacy::Task, seen: &modern::BareTask<'_>, ttl: Option<i64>) -> bool {
    known.task_id == seen.task_id
        && known.status == seen.status
        && known.status_message.as_deref() == seen.status_message
        && known.created_at == seen.created_at
        && known.last_updated_at == seen.last_updated_at
        && known.ttl == ttl
        && known.poll_interval == seen.poll_interval_ms
        && known.extra.is_empty()
}

/// [`detailed_to_legacy`] consuming the task: the members are moved and
/// the payload handed back beside the legacy task.
pub fn detailed_to_legacy_owned(d: DetailedTask) -> (legacy::Task, Payload) {
    let status = legacy_status(&d);
    let mut t = task_to_legacy_owned(d.task);
    t.status = status;
    (t, d.payload)
}

/// A legacy task and what its `tasks/result` gave, as a detailed modern task.
///
/// Judgement calls (see docs/translation.md):
/// - legacy `failed` with a result (the `isError` case) → `completed` + result;
/// - `failed` without a known payload, or with a result that is no
///   `isError` one → `failed` with an `-32603` built from the status
///   message, since the modern schema requires `error`;
/// - `input_required` with no captured request yet → `working`, since a
///   modern client cannot act on an empty `inputRequests`.
pub fn detailed_from_legacy(t: &legacy::Task, payload: &Payload) -> DetailedTask {
    detailed_from_legacy_owned(t, payload.clone())
}

/// [`detailed_from_legacy`] taking the payload by value (moved, not copied).
pub fn detailed_from_legacy_owned(t: &legacy::Task, payload: Payload) -> DetailedTask {
    let mut task = task_to_modern(t);
    let payload = match (t.status, payload) {
        // Not the `isError` case: a server that failed the task and gave
        // no error (the Python SDK's `tasks/result` of a task whose tool
        // raised is an empty result). Completed, it read as a success.
        (TaskStatus::Failed, Payload::Result(r)) if !is_error_result(&r) => {
            Payload::Error(failure_of(t))
        }
        (TaskStatus::Completed | TaskStatus::Failed, Payload::Result(r)) => {
            task.status = TaskStatus::Completed;
            Payload::Result(r)
        }
        (TaskStatus::Failed | TaskStatus::Completed, Payload::Error(e)) => {
            task.status = TaskStatus::Failed;
            Payload::Error(e)
        }
        (TaskStatus::Failed, _) => Payload::Error(failure_of(t)),
        (TaskStatus::InputRequired, Payload::Input(i)) if !i.is_empty() => Payload::Input(i),
        (TaskStatus::InputRequired, _) => {
            task.status = TaskStatus::Working;
            Payload::None
        }
        _ => Payload::None,
    };
    DetailedTask { task, payload }
}

/// The error of a legacy `failed` task that gave none: `-32603` with its
/// status message.
fn failure_of(t: &legacy::Task) -> ErrorObject {
    ErrorObject::new(
        crate::error::codes::INTERNAL_ERROR,
        t.status_message
            .clone()
            .unwrap_or_else(|| "Task failed".into()),
    )
}

/// Modern flat creation result → legacy `{task: {…}}`; result `_meta` kept
/// beside `task`.
pub fn create_result_to_legacy(result: &Value) -> Result<Value, ShimError> {
    create_result_to_legacy_owned(result.clone())
}

/// [`create_result_to_legacy`] consuming the result (members moved).
pub fn create_result_to_legacy_owned(result: Value) -> Result<Value, ShimError> {
    let d = DetailedTask::from_owned_value(result)?;
    let mut t = d.task;
    let meta = t.extra.remove("_meta");
    let mut out = Map::new();
    out.insert("task".into(), task_to_legacy_owned(t).into_value());
    if let Some(m) = meta {
        out.insert("_meta".into(), m);
        // A 2026-07-28 result's server name has no place in 2025-11-25.
        super::remove_meta_key(&mut out, crate::revision::META_SERVER_INFO);
    }
    Ok(Value::Object(out))
}

/// Legacy `{task: {…}}` → modern flat creation result with `resultType: "task"`.
pub fn create_result_to_modern(result: &Value) -> Result<Value, ShimError> {
    create_result_to_modern_owned(result.clone())
}

/// [`create_result_to_modern`] consuming the result (members moved).
pub fn create_result_to_modern_owned(result: Value) -> Result<Value, ShimError> {
    let created = legacy::CreateTaskResult::from_owned_value(result)?;
    let mut v = task_to_modern_owned(created.task).into_value();
    if let Value::Object(m) = &mut v {
        // Flattened, the task's own members sit on the result, where
        // `_meta` must be an object (2025-11-25 lets a task carry any
        // extra member; found by fuzzing). The result's own `_meta`, if
        // any, replaces it below.
        if m.get("_meta").is_some_and(|meta| !meta.is_object()) {
            m.remove("_meta");
        }
        for (k, val) in created.extra {
            // The task's own members win: a stray `taskId` beside `task`
            // must not replace the task's id, nor a `statusMessage` object
            // become the task's missing one (both found by fuzzing). The
            // result's `_meta` is the result's, and stays.
            if k == "_meta" || !(m.contains_key(&k) || FLAT_TASK_MEMBERS.contains(&k.as_str())) {
                m.insert(k, val);
            }
        }
        m.insert("resultType".into(), Value::from(result_type::TASK));
    }
    Ok(v)
}

/// Modern `tasks/get` result → the legacy task a 2025 client sees, plus the
/// inline payload it no longer carries (for the caller to cache).
pub fn get_result_to_legacy(result: &Value) -> Result<(legacy::Task, Payload), ShimError> {
    get_result_to_legacy_owned(result.clone())
}

/// [`get_result_to_legacy`] consuming the result: the inline payload is
/// moved into the returned [`Payload`], not copied.
pub fn get_result_to_legacy_owned(result: Value) -> Result<(legacy::Task, Payload), ShimError> {
    Ok(detailed_to_legacy_owned(DetailedTask::from_owned_value(
        result,
    )?))
}

/// Legacy task + known payload → modern `tasks/get` result.
pub fn get_result_to_modern(t: &legacy::Task, payload: &Payload) -> Value {
    get_result_to_modern_owned(t, payload.clone())
}

/// [`get_result_to_modern`] taking the payload by value (moved, not copied).
pub fn get_result_to_modern_owned(t: &legacy::Task, payload: Payload) -> Value {
    detailed_from_legacy_owned(t, payload).into_value(Some(result_type::COMPLETE))
}

/// Payload of a finished modern task → what a 2025 `tasks/result` answers:
/// the original result tagged with related-task `_meta`, or the original
/// JSON-RPC error. A cancelled task has no result: an error says so.
pub fn task_result_to_legacy(
    task_id: &str,
    status: TaskStatus,
    payload: &Payload,
) -> Result<Value, ErrorObject> {
    match payload {
        Payload::Result(r) => Ok(tag_related_task(r.clone(), task_id)),
        Payload::Error(e) => Err(e.clone()),
        _ => task_result_to_legacy_owned(task_id, status, Payload::None),
    }
}

/// [`task_result_to_legacy`] taking the payload by value (moved, not copied).
pub fn task_result_to_legacy_owned(
    task_id: &str,
    status: TaskStatus,
    payload: Payload,
) -> Result<Value, ErrorObject> {
    match payload {
        Payload::Result(r) => Ok(tag_related_task(r, task_id)),
        Payload::Error(e) => Err(e),
        _ if status == TaskStatus::Cancelled => Err(ShimError::TaskCancelled.to_error_object()),
        _ => Err(
            ShimError::Internal(format!("task ended {status} without a result")).to_error_object(),
        ),
    }
}

/// Adds `_meta["io.modelcontextprotocol/related-task"] = {taskId}` to a result.
pub fn tag_related_task(mut result: Value, task_id: &str) -> Value {
    if let Value::Object(m) = &mut result {
        m.remove("resultType");
        let meta = meta_mut(m);
        // The 2026-07-28 server's name on its result: not 2025-11-25's.
        meta.remove(crate::revision::META_SERVER_INFO);
        meta.insert(META_RELATED_TASK.into(), json!({"taskId": task_id}));
    }
    result
}

/// Removes the related-task `_meta` from a result (it has no place inline
/// in a modern `tasks/get`), and gives it a `resultType`.
pub fn strip_related_task(mut result: Value) -> Value {
    if let Value::Object(m) = &mut result {
        remove_meta_key(m, META_RELATED_TASK);
        m.entry("resultType")
            .or_insert_with(|| Value::from(result_type::COMPLETE));
    }
    result
}

/// The modern answer to `tasks/cancel`: an empty acknowledgement.
pub fn cancel_result_to_modern() -> Value {
    json!({"resultType": result_type::COMPLETE})
}

/// The legacy answer to `tasks/cancel`: the task, now `cancelled`. Its
/// status message said how it was before ("Waiting for client input."),
/// so it goes: nothing else is known to say.
pub fn cancelled_view(t: &legacy::Task, now: &str) -> legacy::Task {
    let mut t = t.clone();
    if t.status != TaskStatus::Cancelled {
        t.status = TaskStatus::Cancelled;
        t.status_message = None;
        t.last_updated_at = now.to_owned();
    }
    t
}

/// `t` as a task its upstream lost (see [`ShimError::TaskLost`]): failed,
/// with the reason as its status message, unless it had already ended.
pub fn lost_view(t: &legacy::Task, reason: &ErrorObject, now: &str) -> legacy::Task {
    let mut t = t.clone();
    if !t.status.is_terminal() {
        t.status = TaskStatus::Failed;
        t.status_message = Some(reason.message.clone());
        t.last_updated_at = now.to_owned();
    }
    t
}

/// A `tasks/list` page.
pub fn list_page(tasks: &[legacy::Task], next_cursor: Option<String>) -> Value {
    to_value(&legacy::ListTasksResult {
        tasks: tasks.to_vec(),
        next_cursor,
        extra: Map::new(),
    })
}

/// `params.taskId` of a `tasks/*` request.
pub fn task_id_param(params: Option<&Value>) -> Result<&str, ShimError> {
    let p = params.ok_or_else(|| ShimError::InvalidParams("missing params".into()))?;
    as_object("params", p)?
        .get("taskId")
        .and_then(Value::as_str)
        .ok_or_else(|| ShimError::InvalidParams("params.taskId must be a string".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stray_members_beside_a_created_task_do_not_replace_its_fields() {
        let task = json!({"taskId": "t1", "status": "working", "createdAt": "c",
                          "lastUpdatedAt": "u"});
        let m = create_result_to_modern(&json!({"task": task, "taskId": {"x": 1},
                                                "status": "failed", "_meta": {"k": 1}, "other": 2}))
        .unwrap();
        assert_eq!(m["taskId"], "t1");
        assert_eq!(m["status"], "working");
        assert_eq!(m["_meta"], json!({"k": 1}));
        assert_eq!(m["other"], 2);
    }

    #[test]
    fn huge_legacy_durations_are_clamped_to_the_modern_bound() {
        let mut t: legacy::Task = serde_json::from_value(json!({
            "taskId": "t", "status": "working", "createdAt": "c", "lastUpdatedAt": "u",
            "ttl": 4_582_515_721_701_724_684_i64, "pollInterval": i64::MIN
        }))
        .unwrap();
        let m = task_to_modern(&t);
        assert_eq!(m.ttl_ms, Some((1 << 53) - 1));
        assert_eq!(m.poll_interval_ms, Some(-((1 << 53) - 1)));
        t.ttl = Some(60_000);
        assert_eq!(task_to_modern_owned(t).ttl_ms, Some(60_000));
    }
    use crate::wire::from_value;

    fn modern_task(status: &str) -> Value {
        json!({"taskId":"t1","status":status,"createdAt":"2026-01-01T00:00:00Z",
               "lastUpdatedAt":"2026-01-01T00:00:01Z","ttlMs":60000,"pollIntervalMs":500})
    }

    #[test]
    fn the_stored_task_is_the_translated_one_without_the_answers_meta() {
        let mut v = modern_task("completed");
        v["a"] = json!(1);
        v["_meta"] = json!({"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}});
        v["b"] = json!(2);
        v["ttl"] = json!(7); // shadows the translated member: dropped
        v["result"] = json!({"content": [], "isError": true});
        let d = DetailedTask::from_value(&v).unwrap();
        let stored = to_value(&detailed_to_legacy_record(&d));
        let mut expected = to_value(&detailed_to_legacy(&d));
        expected.as_object_mut().unwrap().shift_remove("_meta");
        assert_eq!(stored, expected);
        assert_eq!(stored["status"], "failed", "an error result fails the task");
        let keys: Vec<&str> = stored
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let (a, b) = (
            keys.iter().position(|k| *k == "a"),
            keys.iter().position(|k| *k == "b"),
        );
        assert!(a < b, "members keep their order: {keys:?}");
        assert_eq!(stored["ttl"], 60000);
    }

    #[test]
    fn fields_are_renamed_and_unknown_fields_kept() {
        let mut v = modern_task("working");
        v["x-vendor"] = json!({"keep": true});
        let (t, p) = get_result_to_legacy(&v).unwrap();
        let lv = to_value(&t);
        assert_eq!(lv["ttl"], 60000);
        assert_eq!(lv["pollInterval"], 500);
        assert!(lv.get("ttlMs").is_none());
        assert_eq!(lv["x-vendor"]["keep"], true);
        assert_eq!(p, Payload::None);
    }

    #[test]
    fn null_ttl_survives_both_ways() {
        let mut v = modern_task("working");
        v["ttlMs"] = Value::Null;
        let (t, _) = get_result_to_legacy(&v).unwrap();
        assert_eq!(to_value(&t)["ttl"], Value::Null);
        let back = get_result_to_modern(&t, &Payload::None);
        assert_eq!(back["ttlMs"], Value::Null);
        assert!(back.as_object().unwrap().contains_key("ttlMs"));
    }

    #[test]
    fn a_failed_task_whose_result_is_no_error_stays_failed() {
        let mut v = modern_task("working");
        v["statusMessage"] = json!("py_fail exploded");
        let (mut t, _) = get_result_to_legacy(&v).unwrap();
        t.status = TaskStatus::Failed;
        let empty = Payload::Result(
            json!({"_meta": {"io.modelcontextprotocol/related-task": {"taskId": "t"}}}),
        );
        let back = get_result_to_modern(&t, &empty);
        assert_eq!(back["status"], "failed", "{back}");
        assert_eq!(back["error"]["code"], -32603, "{back}");
        assert_eq!(back["error"]["message"], "py_fail exploded", "{back}");
        assert!(back.get("result").is_none(), "{back}");
    }

    #[test]
    fn is_error_results_fail_in_legacy_and_complete_in_modern() {
        let mut v = modern_task("completed");
        v["result"] = json!({"content":[],"isError":true});
        let (t, p) = get_result_to_legacy(&v).unwrap();
        assert_eq!(t.status, TaskStatus::Failed);
        let back = get_result_to_modern(&t, &p);
        assert_eq!(back["status"], "completed");
        assert_eq!(back["result"]["isError"], true);
    }

    #[test]
    fn legacy_failed_without_payload_gets_an_error() {
        let t: legacy::Task = from_value(
            "t",
            &json!({"taskId":"a","status":"failed",
            "createdAt":"x","lastUpdatedAt":"y","ttl":null,"statusMessage":"boom"}),
        )
        .unwrap();
        let v = get_result_to_modern(&t, &Payload::None);
        assert_eq!(v["status"], "failed");
        assert_eq!(v["error"]["message"], "boom");
    }

    #[test]
    fn creation_results_flatten_and_nest() {
        let modern = {
            let mut v = modern_task("working");
            v["resultType"] = json!("task");
            v
        };
        let legacy = create_result_to_legacy(&modern).unwrap();
        assert_eq!(legacy["task"]["ttl"], 60000);
        assert!(legacy.get("resultType").is_none());
        let back = create_result_to_modern(&legacy).unwrap();
        assert_eq!(back, modern);
    }

    #[test]
    fn task_result_is_tagged_or_errors() {
        let ok = task_result_to_legacy(
            "t1",
            TaskStatus::Completed,
            &Payload::Result(json!({"content":[],"resultType":"complete"})),
        )
        .unwrap();
        assert_eq!(ok["_meta"][META_RELATED_TASK]["taskId"], "t1");
        assert!(ok.get("resultType").is_none());
        assert_eq!(strip_related_task(ok)["_meta"], Value::Null);
        let err = task_result_to_legacy("t1", TaskStatus::Cancelled, &Payload::None).unwrap_err();
        assert_eq!(err.code, -32602);
    }

    #[test]
    fn unknown_members_never_shadow_the_translated_ones() {
        // Found by tests/fuzz_translate.rs.
        let legacy: legacy::Task = from_value(
            "t",
            &json!({"taskId":"a","status":"working","createdAt":"x","lastUpdatedAt":"y",
                "ttl":60000,"pollInterval":500,"pollIntervalMs":null,"ttlMs":"soon","k":1}),
        )
        .unwrap();
        let m = to_value(&task_to_modern(&legacy));
        assert_eq!(m["ttlMs"], 60000);
        assert_eq!(m["pollIntervalMs"], 500);
        assert_eq!(m["k"], 1);
        assert_eq!(to_value(&task_to_modern_owned(legacy)), m);

        let mut v = modern_task("working");
        v["ttl"] = json!(null);
        v["pollInterval"] = json!("fast");
        let (t, _) = get_result_to_legacy(&v).unwrap();
        let l = to_value(&t);
        assert_eq!(l["ttl"], 60000);
        assert_eq!(l["pollInterval"], 500);
    }

    #[test]
    fn cancelled_view_pins_status() {
        let t: legacy::Task = from_value(
            "t",
            &json!({"taskId":"a","status":"working",
            "createdAt":"x","lastUpdatedAt":"y","ttl":1,
            "statusMessage":"Waiting for client input."}),
        )
        .unwrap();
        let c = cancelled_view(&t, "now");
        assert_eq!(c.status, TaskStatus::Cancelled);
        assert_eq!(c.last_updated_at, "now");
        assert_eq!(c.status_message, None, "the old message is stale");
    }
}
