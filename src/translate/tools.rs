//! Tool rows: `tools/list` and `tools/call` params.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::error::ShimError;
use crate::wire::legacy::{TaskMetadata, TaskSupport};
use crate::wire::modern::result_type;
use crate::wire::to_value;

/// Which `execution.taskSupport` a legacy client is told per tool.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TaskPolicy {
    /// For tools not named in `per_tool`. `None` leaves it to the
    /// upstream: `optional` when it offers tasks, else `forbidden` (the
    /// engine settles it from `server/discover`).
    pub default: Option<TaskSupport>,
    /// Configured overrides.
    pub per_tool: HashMap<String, TaskSupport>,
}

impl TaskPolicy {
    /// Every tool `optional` unless configured otherwise.
    pub fn optional() -> Self {
        TaskPolicy {
            default: Some(TaskSupport::Optional),
            per_tool: HashMap::new(),
        }
    }

    /// The support for one tool.
    pub fn for_tool(&self, name: &str) -> TaskSupport {
        let default = self.default.unwrap_or(TaskSupport::Optional);
        self.per_tool.get(name).copied().unwrap_or(default)
    }

    /// Parses `TOOL=required|optional|forbidden`.
    pub fn parse_rule(rule: &str) -> Result<(String, TaskSupport), String> {
        let (tool, support) = rule
            .split_once('=')
            .ok_or_else(|| format!("expected TOOL=required|optional|forbidden, got {rule:?}"))?;
        if tool.is_empty() {
            return Err(format!("empty tool name in {rule:?}"));
        }
        Ok((tool.to_owned(), support.parse()?))
    }
}

/// Modern `tools/list` result → legacy: each tool gets
/// `execution.taskSupport` from the policy; modern-only result members
/// (`resultType`, cache hints) are dropped.
pub fn tools_list_to_legacy(result: &Value, policy: &TaskPolicy) -> Value {
    tools_list_to_legacy_owned(result.clone(), policy)
}

/// [`tools_list_to_legacy`] consuming the result (tools edited in place).
pub fn tools_list_to_legacy_owned(result: Value, policy: &TaskPolicy) -> Value {
    let mut out = super::session::result_to_legacy_owned(result, "tools/list");
    if let Some(tools) = out.get_mut("tools").and_then(Value::as_array_mut) {
        for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
            let support = policy.for_tool(name);
            let exec = tool.entry("execution").or_insert_with(|| json!({}));
            if !exec.is_object() {
                *exec = json!({});
            }
            exec["taskSupport"] = Value::from(support.as_str());
        }
    }
    out
}

/// Legacy `tools/list` result → modern: `execution` stripped (the modern
/// revision has no per-tool task flag), `resultType` and cache hints added.
/// Returns the rewritten result and each tool's legacy task support, which
/// the reverse bridge needs to decide how to call it.
pub fn tools_list_to_modern(result: &Value, ttl_ms: i64) -> (Value, HashMap<String, TaskSupport>) {
    tools_list_to_modern_owned(result.clone(), ttl_ms)
}

/// [`tools_list_to_modern`] consuming the result (tools edited in place).
pub fn tools_list_to_modern_owned(
    result: Value,
    ttl_ms: i64,
) -> (Value, HashMap<String, TaskSupport>) {
    let mut supports = HashMap::new();
    let mut out = super::session::result_to_modern_owned(result, "tools/list", ttl_ms);
    if let Some(tools) = out.get_mut("tools").and_then(Value::as_array_mut) {
        for tool in tools.iter_mut() {
            let support = TaskSupport::of_tool(tool);
            if let Some(obj) = tool.as_object_mut() {
                if let Some(name) = obj.get("name").and_then(Value::as_str) {
                    supports.insert(name.to_owned(), support);
                }
                obj.remove("execution");
            }
        }
    }
    (out, supports)
}

/// Legacy `tools/call` params → modern: `params.task` removed and returned
/// (the modern server decides on tasks itself). Stray `inputResponses` /
/// `requestState` members are dropped too: a 2025-11-25 client cannot mean
/// the 2026 MRTR members, and forwarding them would hand the server answers
/// or state nobody asked for (and break the 2026 schema, which types them).
/// The legacy front adds its own MRTR members after this. `_meta` injection
/// is [`super::session::request_to_modern`]'s job.
pub fn call_params_to_modern(params: &Value) -> (Value, Option<TaskMetadata>) {
    call_params_to_modern_owned(params.clone())
}

/// [`call_params_to_modern`] consuming the params.
pub fn call_params_to_modern_owned(params: Value) -> (Value, Option<TaskMetadata>) {
    let mut p = params;
    let task = p.as_object_mut().and_then(|m| {
        // One scan over the few members instead of hashing three keys that
        // are usually absent; only the present ones are removed.
        let (mut responses, mut state, mut task) = (false, false, false);
        for k in m.keys() {
            match k.as_str() {
                "inputResponses" => responses = true,
                "requestState" => state = true,
                "task" => task = true,
                _ => {}
            }
        }
        if responses {
            m.remove("inputResponses");
        }
        if state {
            m.remove("requestState");
        }
        if task { m.remove("task") } else { None }
    });
    (p, task.map(task_metadata))
}

/// `params.task` read as [`TaskMetadata`], or the default when it does not
/// read. The usual object (an integral or `null` `ttl`, other members kept
/// as `extra` in order) is taken apart by hand, with the result the serde
/// derive gives where serde reads the `ttl` at all; its `flatten` buffers
/// every member first, which cost more than the rest of the row. Anything
/// else goes through serde.
fn task_metadata(t: Value) -> TaskMetadata {
    match t {
        Value::Object(mut m) if ttl_reads(&m) => {
            let ttl = m.shift_remove("ttl").as_ref().and_then(ttl_ms);
            TaskMetadata { ttl, extra: m }
        }
        other => serde_json::from_value(other).unwrap_or_default(),
    }
}

/// Whether the task object's `ttl` is absent, `null`, or an integer as
/// [`ttl_ms`] reads it.
fn ttl_reads(task: &serde_json::Map<String, Value>) -> bool {
    task.get("ttl")
        .is_none_or(|v| v.is_null() || ttl_ms(v).is_some())
}

/// A `ttl` as JSON Schema's "integer" reads it: any number without a
/// fractional part (`60000.0` and `6e4` too). One beyond `i64` saturates:
/// asking for more than 292 million years means "as long as you keep
/// anything".
fn ttl_ms(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| {
        v.as_f64()
            .filter(|f| f.is_finite() && f.fract() == 0.0)
            .map(|f| f as i64)
    })
}

/// Modern `tools/call` params → legacy: an incoming `params.task` is ignored
/// (the 2026 spec says so), the shim's own `task` request is added when it
/// decided to run the call as a task. MRTR members are removed: the reverse
/// bridge consumes them.
pub fn call_params_to_legacy(
    params: &Value,
    task: Option<&TaskMetadata>,
) -> Result<Value, ShimError> {
    super::as_object("tools/call params", params)?;
    call_params_to_legacy_owned(params.clone(), task)
}

/// [`call_params_to_legacy`] consuming the params.
pub fn call_params_to_legacy_owned(
    params: Value,
    task: Option<&TaskMetadata>,
) -> Result<Value, ShimError> {
    let Value::Object(mut p) = params else {
        return Err(super::as_object("tools/call params", &params).unwrap_err());
    };
    p.remove("task");
    p.remove("inputResponses");
    p.remove("requestState");
    if let Some(t) = task {
        p.insert("task".into(), to_value(t));
    }
    Ok(Value::Object(p))
}

/// `params.name` of a `tools/call`.
pub fn tool_name(params: Option<&Value>) -> Result<&str, ShimError> {
    params
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .ok_or_else(|| ShimError::InvalidParams("tools/call needs params.name (a string)".into()))
}

/// Checks a 2025-11-25 `tools/call`'s `params.task`: an object whose
/// `ttl`, if given, is a positive integer number of milliseconds (an
/// integer in JSON Schema's sense: `60000.0` is one). One rule for every
/// value outside it: a `ttl` that is no number, has a fraction, or is zero
/// or less is refused with `-32602` naming the rule, and nothing starts. A
/// retention of zero or less would drop a result before the client could
/// read it, and granting something else instead hid the client's mistake.
/// A positive one is a request the receiver may lower (the shim lowers one
/// above `--max-task-ttl`, and says so in the answer), however large,
/// `1e308` too. A `null` `ttl` counts as none asked.
///
/// ```
/// use mcp_tasks_shim::translate::tools::check_task_param;
/// use serde_json::json;
/// assert!(check_task_param(Some(&json!({"name": "t", "task": {"ttl": 60000}}))).is_ok());
/// assert!(check_task_param(Some(&json!({"name": "t"}))).is_ok());
/// assert_eq!(check_task_param(Some(&json!({"name": "t", "task": 5}))).unwrap_err().code(), -32602);
/// assert!(check_task_param(Some(&json!({"name": "t", "task": {"ttl": 6e4}}))).is_ok());
/// assert!(check_task_param(Some(&json!({"name": "t", "task": {"ttl": 1e308}}))).is_ok());
/// assert!(check_task_param(Some(&json!({"name": "t", "task": {"ttl": 1.5}}))).is_err());
/// assert!(check_task_param(Some(&json!({"name": "t", "task": {"ttl": 0}}))).is_err());
/// assert!(check_task_param(Some(&json!({"name": "t", "task": {"ttl": -1}}))).is_err());
/// assert!(check_task_param(Some(&json!({"name": "t", "task": {"ttl": "1h"}}))).is_err());
/// assert!(check_task_param(Some(&json!({"name": "t", "task": null}))).is_err());
/// ```
pub fn check_task_param(params: Option<&Value>) -> Result<(), ShimError> {
    let ok = match params.and_then(|p| p.get("task")) {
        None => true,
        Some(Value::Object(t)) => t
            .get("ttl")
            .is_none_or(|v| v.is_null() || ttl_ms(v).is_some_and(|ms| ms > 0)),
        Some(_) => false,
    };
    if ok {
        Ok(())
    } else {
        Err(ShimError::InvalidParams(
            "params.task must be an object whose ttl, if given, is a positive integer \
             (milliseconds; one above the server's maximum is lowered to it)"
                .into(),
        ))
    }
}

/// True when a modern `tools/call` result says the server made a task.
pub fn is_task_result(result: &Value) -> bool {
    crate::wire::modern::result_type_of(result) == result_type::TASK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_metadata_by_hand_reads_like_serde() {
        for v in [
            json!({}),
            json!({"ttl": 60000}),
            json!({"ttl": null}),
            json!({"ttl": 1.5}),
            json!({"ttl": "soon"}),
            json!({"a": 1, "ttl": -3, "x": {"y": [1, 2.5, null]}, "b": "c"}),
            json!({"only": "extra"}),
            json!([1]),
        ] {
            let serde: TaskMetadata = serde_json::from_value(v.clone()).unwrap_or_default();
            let by_hand = task_metadata(v);
            assert_eq!(by_hand, serde);
            assert_eq!(
                by_hand.extra.keys().collect::<Vec<_>>(),
                serde.extra.keys().collect::<Vec<_>>()
            );
        }
    }

    /// Where serde's `i64` gives up (and the whole task read as the
    /// default), a ttl that JSON Schema calls an integer is still read.
    #[test]
    fn integral_ttls_beyond_serde_are_read() {
        for (v, want) in [
            (json!({"ttl": 60000.0, "k": 1}), 60000),
            (json!({"ttl": 6e4, "k": 1}), 60000),
            (json!({"ttl": u64::MAX, "k": 1}), i64::MAX),
            (json!({"ttl": 1e308, "k": 1}), i64::MAX),
        ] {
            let t = task_metadata(v.clone());
            assert_eq!(t.ttl, Some(want), "{v}");
            assert_eq!(t.extra.get("k"), Some(&json!(1)), "{v}");
            assert!(check_task_param(Some(&json!({"task": v}))).is_ok());
        }
    }

    /// One rule for every ttl outside "a positive integer": refused,
    /// whether it is too small, fractional or no number. Before, zero and
    /// negative ones were silently granted the default retention while a
    /// fractional one was refused.
    #[test]
    fn every_ttl_that_is_no_positive_integer_is_refused_alike() {
        for ttl in [
            json!(0),
            json!(-1),
            json!(-0.0),
            json!(-1e300),
            json!(i64::MIN),
            json!(1.5),
            json!(0.5),
            json!("60000"),
            json!(true),
            json!({}),
        ] {
            let e = check_task_param(Some(&json!({"name": "t", "task": {"ttl": ttl}})))
                .expect_err(&format!("ttl {ttl} accepted"));
            assert_eq!(e.code(), -32602, "ttl {ttl}");
            assert!(e.to_string().contains("positive integer"), "ttl {ttl}: {e}");
        }
        for ttl in [
            json!(1),
            json!(60000.0),
            json!(u64::MAX),
            json!(1e308),
            json!(null),
        ] {
            assert!(
                check_task_param(Some(&json!({"name": "t", "task": {"ttl": ttl}}))).is_ok(),
                "ttl {ttl} refused"
            );
        }
    }

    #[test]
    fn policy_rules_parse() {
        assert_eq!(
            TaskPolicy::parse_rule("slow=required").unwrap(),
            ("slow".into(), TaskSupport::Required)
        );
        assert!(TaskPolicy::parse_rule("slow").is_err());
        assert!(TaskPolicy::parse_rule("slow=maybe").is_err());
        assert!(TaskPolicy::parse_rule("=required").is_err());
    }

    #[test]
    fn tools_list_gets_task_support_and_loses_modern_members() {
        let modern = json!({"tools":[{"name":"a","inputSchema":{"type":"object"}},
                                     {"name":"b","inputSchema":{"type":"object"},"execution":{"x":1}}],
                            "resultType":"complete","ttlMs":0,"cacheScope":"private"});
        let mut policy = TaskPolicy::optional();
        policy.per_tool.insert("b".into(), TaskSupport::Required);
        let legacy = tools_list_to_legacy(&modern, &policy);
        assert_eq!(legacy["tools"][0]["execution"]["taskSupport"], "optional");
        assert_eq!(legacy["tools"][1]["execution"]["taskSupport"], "required");
        assert_eq!(legacy["tools"][1]["execution"]["x"], 1);
        assert!(legacy.get("resultType").is_none());
        assert!(legacy.get("cacheScope").is_none());
    }

    #[test]
    fn legacy_call_loses_stray_mrtr_members() {
        // Found by fuzzing: a legacy client's unknown `inputResponses`
        // string reached the modern server and broke its schema.
        let (modern, task) = call_params_to_modern(&json!({
            "name": "x", "task": {"ttl": 5}, "inputResponses": "x", "requestState": 1, "other": 2
        }));
        assert_eq!(modern, json!({"name": "x", "other": 2}));
        assert_eq!(task.and_then(|t| t.ttl), Some(5));
    }

    #[test]
    fn tools_list_to_modern_strips_execution_and_reports_support() {
        let legacy = json!({"tools":[{"name":"a","inputSchema":{"type":"object"},
                                      "execution":{"taskSupport":"required"}},
                                     {"name":"b","inputSchema":{"type":"object"}}]});
        let (modern, supports) = tools_list_to_modern(&legacy, 0);
        assert!(modern["tools"][0].get("execution").is_none());
        assert_eq!(modern["resultType"], "complete");
        assert_eq!(supports["a"], TaskSupport::Required);
        assert_eq!(supports["b"], TaskSupport::Forbidden);
    }

    #[test]
    fn call_params_task_moves() {
        let (p, t) = call_params_to_modern(&json!({"name":"x","task":{"ttl":5}}));
        assert!(p.get("task").is_none());
        assert_eq!(t.unwrap().ttl, Some(5));
        let l = call_params_to_legacy(
            &json!({"name":"x","task":{"ttl":1},"requestState":"s"}),
            Some(&TaskMetadata {
                ttl: Some(9),
                ..Default::default()
            }),
        )
        .unwrap();
        assert_eq!(l["task"]["ttl"], 9);
        assert!(l.get("requestState").is_none());
        let plain = call_params_to_legacy(&json!({"name":"x","task":{"ttl":1}}), None).unwrap();
        assert!(plain.get("task").is_none());
    }
}
