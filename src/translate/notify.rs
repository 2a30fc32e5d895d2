//! Status notification rows: 2026 `notifications/tasks` (detailed task on
//! a listen stream) versus 2025 `notifications/tasks/status` (task only).

use serde_json::Value;

use super::task::{detailed_from_legacy, detailed_to_legacy_owned};
use crate::error::ShimError;
use crate::jsonrpc::Id;
use crate::revision::META_SUBSCRIPTION_ID;
use crate::wire::legacy;
use crate::wire::modern::{DetailedTask, Payload};

/// Legacy `notifications/tasks/status` method name.
pub const LEGACY_STATUS: &str = "notifications/tasks/status";
/// Modern `notifications/tasks` method name.
pub const MODERN_STATUS: &str = "notifications/tasks";

/// Modern `notifications/tasks` params → the legacy status params and the
/// payload they cannot carry (for the caller to cache). The subscription
/// `_meta` is dropped: legacy notifications are not tied to a stream.
pub fn status_to_legacy(params: &Value) -> Result<(legacy::Task, Payload), ShimError> {
    status_to_legacy_owned(params.clone())
}

/// [`status_to_legacy`] consuming the params (the payload is moved).
pub fn status_to_legacy_owned(params: Value) -> Result<(legacy::Task, Payload), ShimError> {
    let mut d = DetailedTask::from_owned_value(params)?;
    d.task.extra.remove("_meta");
    Ok(detailed_to_legacy_owned(d))
}

/// Legacy status params (+ known payload) → modern `notifications/tasks`
/// params on the listen stream `subscription`.
pub fn status_to_modern(task: &legacy::Task, payload: &Payload, subscription: &Id) -> Value {
    let mut t = task.clone();
    t.extra.remove("_meta");
    let mut v = detailed_from_legacy(&t, payload).to_value(None);
    if let Value::Object(m) = &mut v {
        let meta = super::meta_mut(m);
        meta.insert(
            META_SUBSCRIPTION_ID.into(),
            serde_json::to_value(subscription).unwrap_or(Value::Null),
        );
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn status_notifications_both_ways() {
        let modern = json!({"taskId":"t","status":"completed","createdAt":"a","lastUpdatedAt":"b",
                            "ttlMs":null,"result":{"content":[],"isError":true,"resultType":"complete"},
                            "_meta":{META_SUBSCRIPTION_ID: 4}});
        let (t, p) = status_to_legacy(&modern).unwrap();
        assert_eq!(t.status.as_str(), "failed");
        assert!(t.extra.is_empty());
        let back = status_to_modern(&t, &p, &Id::Num(4));
        assert_eq!(back["status"], "completed");
        assert_eq!(back["_meta"][META_SUBSCRIPTION_ID], 4);
    }
}
