//! Mid-task input rows: 2026 `inputRequests` / `tasks/update` versus
//! 2025 server→client JSON-RPC requests tagged with the related task.

use serde_json::{Map, Value, json};

use super::{as_object, meta_mut, remove_meta_key};
use crate::error::ShimError;
use crate::jsonrpc::{Id, Request};
use crate::revision::META_RELATED_TASK;

/// Server→client methods that can carry mid-task input.
pub const INPUT_METHODS: &[&str] = &["elicitation/create", "sampling/createMessage", "roots/list"];

/// The client capability a server→client method needs.
pub fn capability_for(method: &str) -> Option<&'static str> {
    match method {
        "elicitation/create" => Some("elicitation"),
        "sampling/createMessage" => Some("sampling"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

/// Whether a client that declared `capabilities` can take a server→client
/// request `method` with `params`. Elicitation has two modes, declared
/// apart (`elicitation.form`, `elicitation.url`); a request names its mode
/// (`params.mode`, `form` when absent), and an empty `elicitation: {}` is
/// form only (the spec's backwards-compatible reading). Other requests
/// need their capability by name.
///
/// ```
/// use mcp_tasks_shim::translate::input::can_take;
/// use serde_json::json;
/// let url_only = json!({"elicitation": {"url": {}}});
/// let form = json!({"mode": "form", "message": "Sure?", "requestedSchema": {}});
/// assert!(!can_take(Some(&url_only), "elicitation/create", Some(&form)));
/// assert!(can_take(Some(&json!({"elicitation": {}})), "elicitation/create", Some(&form)));
/// assert!(!can_take(Some(&json!({"elicitation": {}})), "sampling/createMessage", None));
/// ```
pub fn can_take(capabilities: Option<&Value>, method: &str, params: Option<&Value>) -> bool {
    let Some(declared) = capability_for(method).and_then(|c| capabilities?.get(c)) else {
        return false;
    };
    if method != "elicitation/create" {
        return true;
    }
    let mode = params
        .and_then(|p| p.get("mode"))
        .and_then(Value::as_str)
        .unwrap_or("form");
    match declared.as_object() {
        Some(modes) if modes.contains_key("form") || modes.contains_key("url") => {
            modes.contains_key(mode)
        }
        // `{}` (or a bare value): form only.
        _ => mode == "form",
    }
}

/// Why a client that [`can_take`] said no to cannot be asked `method`
/// with `params`: the elicitation mode it lacks, or the capability.
pub fn not_declared(method: &str, params: Option<&Value>) -> String {
    if method == "elicitation/create" {
        let mode = params
            .and_then(|p| p.get("mode"))
            .and_then(Value::as_str)
            .unwrap_or("form");
        return format!("the client did not declare elicitation in {mode} mode");
    }
    format!("the client did not declare {method}")
}

/// The task a legacy server→client request belongs to
/// (`params._meta["io.modelcontextprotocol/related-task"].taskId`).
pub fn related_task_of(params: Option<&Value>) -> Option<&str> {
    params?
        .get("_meta")?
        .get(META_RELATED_TASK)?
        .get("taskId")?
        .as_str()
}

/// One modern input request (`{method, params}`) → the legacy JSON-RPC
/// request the shim sends the client, tagged with the related task.
///
/// URL-mode elicitation lost `elicitationId` in 2026-07-28 but 2025-11-25
/// requires it: one is derived from the task id and the input key, which
/// are unique for the task's life.
pub fn input_request_to_legacy(
    key: &str,
    input: &Value,
    task_id: &str,
    id: Id,
) -> Result<Request, ShimError> {
    as_object("input request", input)?;
    input_request_to_legacy_owned(key, input.clone(), task_id, id)
}

/// [`input_request_to_legacy`] consuming the input request (params moved).
pub fn input_request_to_legacy_owned(
    key: &str,
    input: Value,
    task_id: &str,
    id: Id,
) -> Result<Request, ShimError> {
    let obj = match input {
        Value::Object(m) => m,
        other => return Err(as_object("input request", &other).unwrap_err()),
    };
    // Moved out, not copied, in one walk instead of a hashed lookup each;
    // the rest of the input object is dropped.
    let (mut method, mut params) = (None, None);
    for (k, v) in obj {
        match k.as_str() {
            "method" => method = Some(v),
            "params" => params = Some(v),
            _ => {}
        }
    }
    let Some(Value::String(method)) = method else {
        return Err(ShimError::InvalidParams(format!(
            "input request {key:?} has no method"
        )));
    };
    let mut params = match params {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    let (mut url_mode, mut has_elicitation_id, mut has_meta) = (false, false, false);
    for (k, v) in &params {
        match k.as_str() {
            "mode" => url_mode = v.as_str() == Some("url"),
            "elicitationId" => has_elicitation_id = true,
            "_meta" => has_meta = true,
            _ => {}
        }
    }
    if method == "elicitation/create" && url_mode && !has_elicitation_id {
        params.insert(
            "elicitationId".into(),
            Value::from(format!("{task_id}/{key}")),
        );
    }
    let mut related = Map::with_capacity(1);
    related.insert("taskId".into(), Value::from(task_id));
    let related = Value::Object(related);
    if has_meta {
        meta_mut(&mut params).insert(META_RELATED_TASK.into(), related);
    } else {
        // The usual case: `_meta` made whole and added once, instead of
        // added empty, looked up again and grown.
        let mut meta = Map::with_capacity(1);
        meta.insert(META_RELATED_TASK.into(), related);
        params.insert("_meta".into(), Value::Object(meta));
    }
    Ok(Request {
        id,
        method,
        params: Some(Value::Object(params)),
    })
}

/// A legacy server→client request → one modern input request: the
/// related-task `_meta` goes (the key ties it to the task now), and a URL
/// elicitation's `elicitationId` is returned separately for the caller to
/// keep (2026-07-28 has no field for it).
pub fn legacy_request_to_input(req: &Request) -> (Value, Option<String>) {
    let mut params = req
        .params
        .as_ref()
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    remove_meta_key(&mut params, META_RELATED_TASK);
    let elicitation_id = if req.method == "elicitation/create" {
        params
            .remove("elicitationId")
            .and_then(|v| v.as_str().map(str::to_owned))
    } else {
        None
    };
    let mut out = Map::new();
    out.insert("method".into(), Value::from(req.method.clone()));
    out.insert("params".into(), Value::Object(params));
    (Value::Object(out), elicitation_id)
}

/// `tasks/update` params for answers collected from a legacy client.
pub fn update_params(task_id: &str, responses: Map<String, Value>) -> Value {
    json!({"taskId": task_id, "inputResponses": responses})
}

/// A legacy client's answer (a JSON-RPC result) → the modern input
/// response: the same object, minus the related-task `_meta` some clients echo.
pub fn legacy_answer_to_input_response(result: &Value) -> Value {
    let mut out = result.as_object().cloned().unwrap_or_default();
    remove_meta_key(&mut out, META_RELATED_TASK);
    Value::Object(out)
}

/// Whether a client's answer to `elicitation/create` is an ElicitResult:
/// an object whose `action` is `accept`, `decline` or `cancel` (with
/// `content`, if any, an object).
///
/// ```
/// use mcp_tasks_shim::translate::input::is_elicit_result;
/// use serde_json::json;
/// assert!(is_elicit_result(&json!({"action": "accept", "content": {"ok": true}})));
/// assert!(is_elicit_result(&json!({"action": "decline"})));
/// assert!(!is_elicit_result(&json!("yes")));
/// assert!(!is_elicit_result(&json!({"action": "maybe"})));
/// assert!(!is_elicit_result(&json!({"action": "accept", "content": 42})));
/// ```
pub fn is_elicit_result(answer: &Value) -> bool {
    let action_ok = matches!(
        answer.get("action").and_then(Value::as_str),
        Some("accept" | "decline" | "cancel")
    );
    action_ok && answer.get("content").is_none_or(Value::is_object)
}

/// A modern client's `inputResponses`, checked before any answer goes to a
/// legacy server: each value becomes the `result` of a JSON-RPC answer
/// there, and a result must be an object (`InputResponse` is one of three
/// result objects), so a string or a number is refused here rather than
/// forwarded as an invalid answer the server cannot use.
///
/// ```
/// use mcp_tasks_shim::translate::input::input_responses;
/// use serde_json::json;
/// let ok = json!({"inputResponses": {"elicit-1": {"action": "accept", "content": {}}}});
/// assert_eq!(input_responses(Some(&ok)).unwrap().unwrap().len(), 1);
/// let bad = json!({"inputResponses": {"elicit-1": "yes"}});
/// assert!(input_responses(Some(&bad)).is_err());
/// assert!(input_responses(None).unwrap().is_none());
/// ```
pub fn input_responses(params: Option<&Value>) -> Result<Option<&Map<String, Value>>, ShimError> {
    let Some(responses) = params.and_then(|p| p.get("inputResponses")) else {
        return Ok(None);
    };
    let map = responses
        .as_object()
        .ok_or_else(|| ShimError::InvalidParams("inputResponses must be an object".into()))?;
    if let Some((key, _)) = map.iter().find(|(_, answer)| !answer.is_object()) {
        return Err(ShimError::InvalidParams(format!(
            "inputResponses.{key} must be an object (the result of the input request)"
        )));
    }
    Ok(Some(map))
}

/// Checks one input response against the request it answers (`method`):
/// the members its result type requires, so that a legacy server is never
/// handed an answer it cannot read as the result of its request (an
/// elicitation answered `{"action": "bogus"}` would leave its task waiting
/// for good). Members beyond those are left to the server.
///
/// ```
/// use mcp_tasks_shim::translate::input::check_input_response;
/// use serde_json::json;
/// assert!(check_input_response("elicitation/create", &json!({"action": "decline"})).is_ok());
/// assert!(check_input_response("elicitation/create", &json!({"action": "bogus"})).is_err());
/// assert!(check_input_response("roots/list", &json!({"roots": []})).is_ok());
/// ```
pub fn check_input_response(method: &str, answer: &Value) -> Result<(), String> {
    let has = |member: &str, ok: fn(&Value) -> bool| answer.get(member).is_some_and(ok);
    let fine = match method {
        "elicitation/create" => {
            let action = answer.get("action").and_then(Value::as_str);
            matches!(action, Some("accept" | "decline" | "cancel"))
                && answer.get("content").is_none_or(Value::is_object)
        }
        "sampling/createMessage" => {
            has("model", Value::is_string)
                && has("role", |r| matches!(r.as_str(), Some("user" | "assistant")))
                && has("content", |c| c.is_object() || c.is_array())
        }
        "roots/list" => has("roots", Value::is_array),
        _ => true,
    };
    if fine {
        Ok(())
    } else {
        Err(match method {
            "elicitation/create" => {
                "an elicitation answer needs action accept, decline or cancel (and content, if any, an object)"
            }
            "sampling/createMessage" => "a sampling answer needs role, content and model",
            _ => "a roots answer needs roots (an array)",
        }
        .to_owned())
    }
}

/// Input keys the shim assigns (reverse bridge): unique for a task's life
/// because `seq` never repeats within a task.
pub fn input_key(method: &str, seq: u64) -> String {
    let short = method.rsplit('/').next().unwrap_or(method);
    format!("{short}-{seq}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refusal names what is missing: the elicitation mode asked for, or
    /// the capability.
    #[test]
    fn refusals_name_the_missing_mode() {
        let url = json!({"mode": "url", "url": "https://example.com", "message": "m", "elicitationId": "e"});
        assert_eq!(
            not_declared("elicitation/create", Some(&url)),
            "the client did not declare elicitation in url mode"
        );
        assert_eq!(
            not_declared("elicitation/create", Some(&json!({"message": "m"}))),
            "the client did not declare elicitation in form mode"
        );
        assert_eq!(
            not_declared("sampling/createMessage", None),
            "the client did not declare sampling/createMessage"
        );
    }

    #[test]
    fn input_request_round_trip() {
        let input = json!({"method":"elicitation/create",
                           "params":{"mode":"form","message":"ok?","requestedSchema":{"type":"object","properties":{}}}});
        let req = input_request_to_legacy("k1", &input, "t1", Id::Num(9)).unwrap();
        assert_eq!(related_task_of(req.params.as_ref()), Some("t1"));
        let (back, eid) = legacy_request_to_input(&req);
        assert_eq!(back, input);
        assert_eq!(eid, None);
    }

    #[test]
    fn url_elicitation_ids_are_synthesised_and_stashed() {
        let input = json!({"method":"elicitation/create",
                           "params":{"mode":"url","message":"go","url":"https://example.com/x"}});
        let req = input_request_to_legacy("k2", &input, "t1", Id::Num(1)).unwrap();
        assert_eq!(req.params.as_ref().unwrap()["elicitationId"], "t1/k2");
        let (back, eid) = legacy_request_to_input(&req);
        assert_eq!(eid.as_deref(), Some("t1/k2"));
        assert!(back["params"].get("elicitationId").is_none());
    }

    #[test]
    fn input_without_method_is_refused() {
        assert_eq!(
            input_request_to_legacy("k", &json!({"params":{}}), "t", Id::Num(1))
                .unwrap_err()
                .code(),
            -32602
        );
    }

    #[test]
    fn keys_are_readable_and_distinct() {
        assert_eq!(input_key("elicitation/create", 1), "create-1");
        assert_ne!(input_key("roots/list", 1), input_key("roots/list", 2));
    }
}
