//! 2025-11-25 wire shapes of the legacy reference server.

use serde_json::{Value, json};

use super::tasks::{Outcome, TaskView};
use crate::error::ShimError;
use crate::revision::{LEGACY_VERSION, LEGACY_VERSIONS, META_RELATED_TASK};
use crate::wire::TaskStatus;
use crate::wire::legacy::Task;

/// The `initialize` answer: the client's version if we know it.
pub(crate) fn initialize(p: Option<&Value>) -> Value {
    let asked = p
        .and_then(|p| p.get("protocolVersion"))
        .and_then(Value::as_str);
    // Echo an older version we know; anything else gets our own.
    let version = asked
        .filter(|v| LEGACY_VERSIONS.contains(v))
        .unwrap_or(LEGACY_VERSION);
    json!({
        "protocolVersion": version,
        "capabilities": {
            "tools": {"listChanged": false},
            "logging": {},
            "resources": {"subscribe": true, "listChanged": false},
            "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
        },
        "serverInfo": super::server_info(),
        "instructions": "Reference MCP server (2025-11-25) of mcp-tasks-shim: a test fixture.",
    })
}

/// What `tasks/result` answers for a terminal task.
pub(crate) fn final_result(v: &TaskView) -> Outcome {
    match (&v.status, &v.outcome) {
        (TaskStatus::Cancelled, _) | (_, None) => Err(ShimError::TaskCancelled.to_error_object()),
        (_, Some(Err(e))) => Err(e.clone()),
        (_, Some(Ok(result))) => {
            let mut result = result.clone();
            if let Value::Object(m) = &mut result {
                let meta = m.entry("_meta").or_insert_with(|| json!({}));
                meta[META_RELATED_TASK] = json!({"taskId": v.task_id});
            }
            Ok(result)
        }
    }
}

/// A task in 2025-11-25 shape (`ttl`, `pollInterval`).
pub(crate) fn task_json(v: &TaskView) -> Value {
    crate::wire::to_value(&Task {
        task_id: v.task_id.clone(),
        status: v.status,
        status_message: v.status_message.clone(),
        created_at: v.created_at.clone(),
        last_updated_at: v.last_updated_at.clone(),
        ttl: v.ttl_ms,
        poll_interval: Some(v.poll_interval_ms),
        extra: Default::default(),
    })
}
