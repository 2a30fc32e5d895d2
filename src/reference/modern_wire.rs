//! 2026-07-28 wire shapes of the modern reference server: the `_meta`
//! check every request goes through, and how tasks and results are rendered.

use serde_json::{Value, json};

use super::tasks::TaskView;
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message};
use crate::revision::{
    META_CLIENT_CAPABILITIES, META_LOG_LEVEL, META_PROTOCOL_VERSION, META_SERVER_INFO,
    META_SUBSCRIPTION_ID, MODERN_VERSION, TASKS_EXTENSION,
};
use crate::wire::TaskStatus;
use crate::wire::modern::result_type;

/// What the server keeps of a request's `_meta` once checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CheckedMeta {
    tasks: bool,
}

impl CheckedMeta {
    /// True when the request declared the tasks extension.
    pub(crate) fn declares_tasks(self) -> bool {
        self.tasks
    }
}

/// The `_meta` every 2026-07-28 request must carry, checked where it lies:
/// reading it into a [`crate::wire::modern::RequestMeta`] would copy the
/// client's capabilities and info out of every request, to keep one bit.
pub(crate) fn check_meta(p: Option<&Value>) -> Result<CheckedMeta, ShimError> {
    let meta = p
        .and_then(|p| p.get("_meta"))
        .ok_or_else(|| ShimError::InvalidParams("params._meta is required in 2026-07-28".into()))?
        .as_object()
        .ok_or_else(|| ShimError::InvalidParams("params._meta must be an object".into()))?;
    // `null` reads as absent, as it does for every optional member.
    let string = |key: &str| match meta.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(_) => Err(ShimError::InvalidParams(format!(
            "_meta[{key:?}] must be a string"
        ))),
    };
    let version = string(META_PROTOCOL_VERSION)?;
    string(META_LOG_LEVEL)?;
    let version = version.ok_or_else(|| {
        ShimError::InvalidParams(
            "_meta[\"io.modelcontextprotocol/protocolVersion\"] is required".into(),
        )
    })?;
    let Some(caps @ Value::Object(_)) = meta.get(META_CLIENT_CAPABILITIES) else {
        return Err(ShimError::InvalidParams(
            "_meta[\"io.modelcontextprotocol/clientCapabilities\"] must be an object".into(),
        ));
    };
    if version != MODERN_VERSION {
        return Err(ShimError::unsupported_version(version));
    }
    let tasks = crate::revision::declares_tasks(caps);
    Ok(CheckedMeta { tasks })
}

pub(crate) fn discover() -> Value {
    json!({
        "supportedVersions": [MODERN_VERSION],
        "capabilities": {"tools": {"listChanged": false}, "extensions": {TASKS_EXTENSION: {}}},
        "instructions": "Reference MCP server (2026-07-28 + tasks extension) of mcp-tasks-shim: a test fixture.",
        "ttlMs": 0,
        "cacheScope": "public",
        "resultType": result_type::COMPLETE,
        "_meta": {META_SERVER_INFO: super::server_info()},
    })
}

/// Adds `resultType: "complete"` (unless set) and server info to a result.
pub(crate) fn finish_result(mut v: Value) -> Value {
    if let Value::Object(m) = &mut v {
        m.entry("resultType")
            .or_insert_with(|| json!(result_type::COMPLETE));
        let meta = m.entry("_meta").or_insert_with(|| json!({}));
        // `server/discover` has set the full one already.
        if let Value::Object(meta) = meta {
            meta.entry(META_SERVER_INFO)
                .or_insert_with(super::server_id);
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::error::codes;

    fn params(meta: Value) -> Value {
        json!({"name": "greet", "_meta": meta})
    }

    fn good() -> Value {
        json!({
            META_PROTOCOL_VERSION: MODERN_VERSION,
            META_CLIENT_CAPABILITIES: {"extensions": {TASKS_EXTENSION: {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
        })
    }

    #[test]
    fn a_complete_meta_passes_and_says_whether_tasks_were_declared() {
        let checked = check_meta(Some(&params(good()))).expect("valid");
        assert!(checked.declares_tasks());
        let mut bare = good();
        bare[META_CLIENT_CAPABILITIES] = json!({"elicitation": {}});
        let checked = check_meta(Some(&params(bare))).expect("valid");
        assert!(!checked.declares_tasks());
        let mut quiet = good();
        quiet[META_LOG_LEVEL] = Value::Null;
        assert!(
            check_meta(Some(&params(quiet))).is_ok(),
            "a null level is none"
        );
    }

    #[test]
    fn every_malformed_meta_is_invalid_params_and_a_wrong_version_is_unsupported() {
        let with = |key: &str, v: Value| {
            let mut m = good();
            m[key] = v;
            params(m)
        };
        let without = |key: &str| {
            let mut m = good();
            m.as_object_mut().unwrap().shift_remove(key);
            params(m)
        };
        let invalid = [
            json!({"name": "greet"}),
            params(json!([1])),
            without(META_PROTOCOL_VERSION),
            with(META_PROTOCOL_VERSION, json!(20260728)),
            without(META_CLIENT_CAPABILITIES),
            with(META_CLIENT_CAPABILITIES, json!("all")),
            with(META_LOG_LEVEL, json!(7)),
        ];
        for p in invalid {
            let e = check_meta(Some(&p)).expect_err("refused");
            assert_eq!(e.code(), codes::INVALID_PARAMS, "{p}: {e}");
        }
        assert_eq!(check_meta(None).unwrap_err().code(), codes::INVALID_PARAMS);
        let old = check_meta(Some(&with(META_PROTOCOL_VERSION, json!("2025-11-25"))));
        assert!(matches!(old, Err(ShimError::UnsupportedVersion { .. })));
    }
}
