//! 2026-07-28 wire shapes of the modern reference server: the `_meta`
//! check every request goes through, and how tasks and results are rendered.

use serde_json::{Value, json};

use super::tasks::TaskView;
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message};
use crate::revision::{META_SERVER_INFO, META_SUBSCRIPTION_ID, MODERN_VERSION, TASKS_EXTENSION};
use crate::wire::modern::{RequestMeta, result_type};
use crate::wire::{TaskStatus, from_value};

/// The `_meta` every 2026-07-28 request must carry.
pub(crate) fn check_meta(p: Option<&Value>) -> Result<RequestMeta, ShimError> {
    let raw = p
        .and_then(|p| p.get("_meta"))
        .ok_or_else(|| ShimError::InvalidParams("params._meta is required in 2026-07-28".into()))?;
    let meta: RequestMeta = from_value("params._meta", raw)?;
    let version = meta.protocol_version.as_deref().ok_or_else(|| {
        ShimError::InvalidParams(
            "_meta[\"io.modelcontextprotocol/protocolVersion\"] is required".into(),
        )
    })?;
    if !meta
        .client_capabilities
        .as_ref()
        .is_some_and(Value::is_object)
    {
        return Err(ShimError::InvalidParams(
            "_meta[\"io.modelcontextprotocol/clientCapabilities\"] must be an object".into(),
        ));
    }
    if version != MODERN_VERSION {
        return Err(ShimError::unsupported_version(version));
    }
    Ok(meta)
}

pub(crate) fn discover() -> Value {
    json!({
        "supportedVersions": [MODERN_VERSION],
        "capabilities": {"tools": {"listChanged": false}, "extensions": {TASKS_EXTENSION: {}}},
        "instructions": "Reference MCP server (2026-07-28 + tasks extension) of mcp-tasks-shim: a test fixture.",
        "ttlMs": 0,
        "cacheScope": "public",
    })
}

/// Adds `resultType: "complete"` (unless set) and server info to a result.
pub(crate) fn finish_result(mut v: Value) -> Value {
    if let Value::Object(m) = &mut v {
        m.entry("resultType")
            .or_insert_with(|| json!(result_type::COMPLETE));
        let meta = m.entry("_meta").or_insert_with(|| json!({}));
        if meta.is_object() {
            meta[META_SERVER_INFO] = super::server_info();
        }
    }
    v
}

fn task_fields(v: &TaskView) -> Value {
    let mut t = json!({"taskId": v.task_id, "status": v.status.as_str(),
        "createdAt": v.created_at, "lastUpdatedAt": v.last_updated_at,
        "ttlMs": v.ttl_ms, "pollIntervalMs": v.poll_interval_ms});
    if let Some(m) = &v.status_message {
        t["statusMessage"] = json!(m);
    }
    t
}

/// The flat `CreateTaskResult`.
pub(crate) fn create_result(v: &TaskView) -> Value {
    let mut t = task_fields(v);
    t["resultType"] = json!(result_type::TASK);
    t
}

/// A `DetailedTask`: the task plus the payload its status calls for.
pub(crate) fn detailed(v: &TaskView) -> Value {
    let mut t = task_fields(v);
    match (v.status, &v.outcome) {
        (TaskStatus::Completed, Some(Ok(r))) => t["result"] = r.clone(),
        (TaskStatus::Failed, Some(Err(e))) => t["error"] = crate::wire::to_value(e),
        (TaskStatus::Failed, _) => {
            t["error"] =
                crate::wire::to_value(&ShimError::Internal("task failed".into()).to_error_object())
        }
        (TaskStatus::InputRequired, _) => {
            let map: serde_json::Map<_, _> = v.inputs.iter().cloned().collect();
            t["inputRequests"] = Value::Object(map);
        }
        _ => {}
    }
    t
}

pub(crate) fn task_notification(sub: &Id, v: &TaskView) -> Message {
    let mut params = detailed(v);
    params["_meta"] = json!({META_SUBSCRIPTION_ID: sub});
    Message::notification("notifications/tasks", params)
}
