//! Fuzzing the pure translator rows (src/translate/{task,tools,session,
//! input,notify}.rs) and the wire readers they use. See docs/fuzzing.md.
//!
//! Properties:
//! - no row function panics, whatever JSON it is handed;
//! - the `*_owned` fast variants agree with the by-reference ones (value
//!   or error), and the moving wire readers agree with serde;
//! - a row fed a message that is schema-valid for its revision emits a
//!   message that is schema-valid for the other revision (checked against
//!   the official schemas, by method), and always valid JSON-RPC.

mod fuzz_gen;
mod support;

use std::collections::HashMap;
use std::sync::OnceLock;

use fuzz_gen::*;
use mcp_tasks_shim::jsonrpc::{Id, Message, Request};
use mcp_tasks_shim::translate::session::{self, LegacyClient};
use mcp_tasks_shim::translate::tools::{self, TaskPolicy};
use mcp_tasks_shim::translate::{input, notify, task};
use mcp_tasks_shim::wire::legacy::{self, TaskMetadata, TaskSupport};
use mcp_tasks_shim::wire::modern::{self, DetailedTask, Payload};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::schema::{Revision, validate};

// ---------------------------------------------------------------------------
// Rows as message → message, for the schema property
// ---------------------------------------------------------------------------

/// One corpus message with the method it carries or answers.
#[derive(Debug, Clone)]
struct Sample {
    legacy: bool,
    /// The request/notification method, or the method a response answers.
    method: String,
    msg: Value,
}

/// Corpus messages with their (answered) method, pairing responses with
/// requests per file and direction.
fn samples() -> &'static [Sample] {
    static S: OnceLock<Vec<Sample>> = OnceLock::new();
    S.get_or_init(|| {
        let mut out = Vec::new();
        for f in corpus() {
            let mut asked: HashMap<(String, String), String> = HashMap::new();
            for r in &f.records {
                let (Some(dir), Some(msg)) = (r.get("dir").and_then(Value::as_str), r.get("msg"))
                else {
                    continue;
                };
                let method = if let Some(m) = msg.get("method").and_then(Value::as_str) {
                    if let Some(id) = msg.get("id") {
                        asked.insert((dir.to_owned(), id.to_string()), m.to_owned());
                    }
                    m.to_owned()
                } else {
                    let other = if dir == "c2s" { "s2c" } else { "c2s" };
                    let id = msg.get("id").map(Value::to_string).unwrap_or_default();
                    match asked.get(&(other.to_owned(), id)) {
                        Some(m) => m.clone(),
                        None => continue,
                    }
                };
                out.push(Sample {
                    legacy: f.is_legacy(),
                    method,
                    msg: msg.clone(),
                });
            }
        }
        out
    })
}

fn client() -> LegacyClient {
    LegacyClient::from_initialize(Some(&json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {"form": {}}, "tasks": {"list": {}}},
        "clientInfo": {"name": "fuzz", "version": "1"}
    })))
    .unwrap()
}

fn response(msg: &Value, result: Value) -> Value {
    let mut out = json!({"jsonrpc": "2.0", "id": msg["id"], "result": result});
    if msg.get("id").is_none() {
        out.as_object_mut().unwrap().remove("id");
    }
    out
}

fn with_params(msg: &Value, params: Value) -> Value {
    let mut out = msg.clone();
    out["params"] = params;
    out
}

/// A translation row: which messages it takes, and how it rewrites one.
struct Row {
    name: &'static str,
    /// The source revision (the output is the other one).
    from_legacy: bool,
    /// The method the input carries or answers.
    method: &'static str,
    /// Responses (true) or requests/notifications (false).
    response: bool,
    /// The method the output carries or answers.
    out_method: &'static str,
    /// `None` when the row refuses the input.
    run: fn(&Value) -> Option<Value>,
}

fn result_of(msg: &Value) -> &Value {
    msg.get("result").unwrap_or(&Value::Null)
}

fn params_of(msg: &Value) -> Value {
    msg.get("params").cloned().unwrap_or(Value::Null)
}

const ROWS: &[Row] = &[
    Row {
        name: "tools/list result → modern",
        from_legacy: true,
        method: "tools/list",
        response: true,
        out_method: "tools/list",
        run: |m| {
            Some(response(
                m,
                tools::tools_list_to_modern(result_of(m), 1000).0,
            ))
        },
    },
    Row {
        name: "tools/list result → legacy",
        from_legacy: false,
        method: "tools/list",
        response: true,
        out_method: "tools/list",
        run: |m| {
            Some(response(
                m,
                tools::tools_list_to_legacy(result_of(m), &TaskPolicy::optional()),
            ))
        },
    },
    Row {
        name: "tools/call request → modern",
        from_legacy: true,
        method: "tools/call",
        response: false,
        out_method: "tools/call",
        run: |m| {
            let (params, _) = tools::call_params_to_modern(&params_of(m));
            let req = Request {
                id: serde_json::from_value(m.get("id")?.clone()).ok()?,
                method: "tools/call".into(),
                params: Some(params),
            };
            Some(Message::Request(session::request_to_modern(&req, &client())).to_value())
        },
    },
    Row {
        name: "tools/call request → legacy",
        from_legacy: false,
        method: "tools/call",
        response: false,
        out_method: "tools/call",
        run: |m| {
            let Message::Request(req) = Message::from_value(m.clone()).ok()? else {
                return None;
            };
            let (req, _meta) = session::request_to_legacy(&req).ok()?;
            let task = TaskMetadata {
                ttl: Some(60_000),
                ..Default::default()
            };
            let params = tools::call_params_to_legacy(req.params.as_ref()?, Some(&task)).ok()?;
            Some(with_params(m, params))
        },
    },
    Row {
        name: "initialize result → discover",
        from_legacy: true,
        method: "initialize",
        response: true,
        out_method: "server/discover",
        run: |m| {
            Some(response(
                m,
                session::initialize_to_discover(result_of(m), 0).ok()?,
            ))
        },
    },
    Row {
        name: "discover result → initialize",
        from_legacy: false,
        method: "server/discover",
        response: true,
        out_method: "initialize",
        run: |m| {
            Some(response(
                m,
                session::discover_to_initialize(result_of(m), &client()).ok()?,
            ))
        },
    },
    Row {
        name: "tasks/get result → legacy",
        from_legacy: false,
        method: "tasks/get",
        response: true,
        out_method: "tasks/get",
        run: |m| {
            let (t, _) = task::get_result_to_legacy(result_of(m)).ok()?;
            Some(response(m, t.into_value()))
        },
    },
    Row {
        name: "tasks/get result → modern",
        from_legacy: true,
        method: "tasks/get",
        response: true,
        out_method: "tasks/get",
        run: |m| {
            let t: legacy::Task = serde_json::from_value(result_of(m).clone()).ok()?;
            Some(response(
                m,
                task::get_result_to_modern(&t, &payload_for(&t)),
            ))
        },
    },
    Row {
        name: "creation result → legacy",
        from_legacy: false,
        method: "tools/call",
        response: true,
        out_method: "tools/call",
        run: |m| {
            if !tools::is_task_result(result_of(m)) {
                return None;
            }
            Some(response(
                m,
                task::create_result_to_legacy(result_of(m)).ok()?,
            ))
        },
    },
    Row {
        name: "creation result → modern",
        from_legacy: true,
        method: "tools/call",
        response: true,
        out_method: "tools/call",
        run: |m| {
            result_of(m).get("task")?;
            Some(response(
                m,
                task::create_result_to_modern(result_of(m)).ok()?,
            ))
        },
    },
    Row {
        name: "task status notification → legacy",
        from_legacy: false,
        method: "notifications/tasks",
        response: false,
        out_method: notify::LEGACY_STATUS,
        run: |m| {
            let (t, _) = notify::status_to_legacy(&params_of(m)).ok()?;
            Some(
                json!({"jsonrpc": "2.0", "method": notify::LEGACY_STATUS, "params": t.into_value()}),
            )
        },
    },
    Row {
        name: "task status notification → modern",
        from_legacy: true,
        method: notify::LEGACY_STATUS,
        response: false,
        out_method: notify::MODERN_STATUS,
        run: |m| {
            let t: legacy::Task = serde_json::from_value(params_of(m)).ok()?;
            let params = notify::status_to_modern(&t, &payload_for(&t), &Id::Num(3));
            Some(json!({"jsonrpc": "2.0", "method": notify::MODERN_STATUS, "params": params}))
        },
    },
    Row {
        name: "input request → legacy",
        from_legacy: false,
        method: "tasks/get",
        response: true,
        out_method: "elicitation/create",
        run: |m| {
            let inputs = result_of(m).get("inputRequests")?.as_object()?;
            let (key, first) = inputs.iter().next()?;
            if first.get("method")? != "elicitation/create" {
                return None;
            }
            let req = input::input_request_to_legacy(key, first, "task-1", Id::Num(7)).ok()?;
            Some(Message::Request(req).to_value())
        },
    },
];

/// What the engines fetch through `tasks/result` before they show a
/// modern client a finished legacy task: a row alone cannot invent it.
fn payload_for(t: &legacy::Task) -> Payload {
    match t.status {
        mcp_tasks_shim::wire::TaskStatus::Completed => {
            Payload::Result(json!({"content": [{"type": "text", "text": "done"}]}))
        }
        _ => Payload::None,
    }
}

/// The row and a (mutated) corpus message it takes.
fn arb_row_case() -> impl Strategy<Value = (usize, Value)> {
    (0..ROWS.len()).prop_flat_map(|i| {
        let row = &ROWS[i];
        let pool: Vec<Value> = samples()
            .iter()
            .filter(|s| s.legacy == row.from_legacy && s.method == row.method)
            .map(|s| s.msg.clone())
            .filter(|m| m.get("method").is_none() == row.response)
            .collect();
        let pool = if pool.is_empty() {
            vec![json!({"jsonrpc": "2.0", "id": 1, "result": {}})]
        } else {
            pool
        };
        (Just(i), mutated_from(pool, 3))
    })
}

/// True when every complaint is about content the shim relays verbatim
/// and the two schemas constrain differently (docs/fuzzing.md):
/// - a tool's `inputSchema` / `outputSchema` (looser in 2026-07-28);
/// - opaque JSON objects (capability entries, `_meta` values), which
///   2026-07-28 types as `JSONValue`: no `null`, no non-integer numbers,
///   while 2025-11-25 allows any JSON there.
fn only_relayed_schemas(report: &str) -> bool {
    let mut at = report
        .lines()
        .filter(|l| l.trim_start().starts_with("at /"))
        .peekable();
    at.peek().is_some()
        && at.all(|l| {
            l.contains("/inputSchema")
                || l.contains("/outputSchema")
                || l.contains("[schema /$defs/JSONValue")
                || l.contains("[schema /$defs/JSONObject")
        })
}

fn rev(legacy: bool) -> Revision {
    if legacy {
        Revision::Legacy
    } else {
        Revision::Modern
    }
}

proptest! {
    #![proptest_config(config(file!(), 600))]

    /// Valid in, valid out; anything in, JSON-RPC or a refusal out.
    #[test]
    fn rows_keep_schema_validity((i, msg) in arb_row_case()) {
        let row = &ROWS[i];
        // A mutated method makes it another row's message.
        if let Some(m) = msg.get("method") && m != row.method {
            return Ok(());
        }
        let answered = row.response.then_some(row.method);
        let input_valid = validate(rev(row.from_legacy), &msg, answered).is_ok();
        let Some(out) = (row.run)(&msg) else {
            return Ok(());
        };
        // The rows copy the envelope; a broken one in is a broken one out.
        if check_envelope(&msg).is_ok() {
            check_envelope(&out).map_err(TestCaseError::fail)?;
        }
        if input_valid {
            let answered = row.response.then_some(row.out_method);
            if let Err(e) = validate(rev(!row.from_legacy), &out, answered)
                && !only_relayed_schemas(&e)
            {
                prop_assert!(false, "{}: valid input\n{}\ngave invalid output\n{}\n{}",
                    row.name, msg, out, e);
            }
        }
    }

    /// The fast variants agree with the by-reference ones.
    #[test]
    fn owned_variants_agree(v in arb_payload(), ttl in -5i64..100_000, n in any::<u8>()) {
        owned_agree(&v, ttl, n)?;
    }

    /// The moving wire readers read what serde reads.
    #[test]
    fn wire_readers_agree_with_serde(v in arb_task_like()) {
        wire_agree(&v)?;
    }

    /// A request written with the session's `_meta` spliced in is, byte
    /// for byte, the request with the members merged into its params.
    #[test]
    fn spliced_meta_is_the_merged_request(
        params in prop_oneof![arb_payload(), arb_json()],
        own_meta in prop_oneof![arb_object(), arb_json()],
        overlap in any::<bool>(),
        with_meta in any::<bool>(),
        level in prop::option::of(arb_string()),
    ) {
        let mut client = LegacyClient::from_initialize(Some(&json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {"form": {}, "url": {}}, "sampling": {}},
            "clientInfo": {"name": "fuzz", "version": "1"}
        })))
        .expect("valid initialize");
        client.log_level = level;
        let meta = session::ModernMeta::for_client(&client);
        let mut params = params;
        if with_meta && let Value::Object(p) = &mut params {
            let mut own = own_meta;
            if overlap && let Value::Object(o) = &mut own {
                o.insert("io.modelcontextprotocol/clientInfo".into(), json!("the client's"));
            }
            p.insert("_meta".into(), own);
        }
        let id = Id::Num(41);
        let mut spliced = Vec::new();
        meta.write_request(&mut spliced, &id, "tools/call", Some(&params));
        let mut merged = Vec::new();
        Message::request(id, "tools/call", meta.merge_into(Some(params))).write_json(&mut merged);
        prop_assert_eq!(String::from_utf8(spliced).unwrap(), String::from_utf8(merged).unwrap());
    }

    /// A modern request made legacy reads its `_meta` as serde reads it,
    /// with the same members left behind in the same order, on valid
    /// `_meta` objects with arbitrary other members (and `null` or absent
    /// optional ones) and on anything at all.
    #[test]
    fn request_meta_is_taken_out_as_serde_reads_it(
        params in arb_object(),
        extra in arb_object(),
        info in prop_oneof![Just(None), Just(Some(Value::Null)), arb_json().prop_map(Some)],
        level in prop_oneof![Just(None), Just(Some(Value::Null)), Just(Some(json!("debug"))), arb_json().prop_map(Some)],
        valid in any::<bool>(),
        known_first in any::<bool>(),
        any_params in arb_payload(),
    ) {
        let mut p = params;
        let extra = extra.as_object().cloned().unwrap_or_default();
        // Where the members sit decides what a swapping removal reorders.
        let mut meta = if known_first { serde_json::Map::new() } else { extra.clone() };
        meta.insert("io.modelcontextprotocol/protocolVersion".into(), json!("2026-07-28"));
        meta.insert(
            "io.modelcontextprotocol/clientCapabilities".into(),
            json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
        );
        if let Some(info) = info {
            meta.insert("io.modelcontextprotocol/clientInfo".into(), info);
        }
        if let Some(level) = level {
            meta.insert("io.modelcontextprotocol/logLevel".into(), level);
        }
        if known_first {
            for (k, v) in extra {
                meta.entry(k).or_insert(v);
            }
        }
        if let Some(o) = p.as_object_mut() {
            o.insert("_meta".into(), Value::Object(meta));
        }
        let params = if valid { p } else { any_params };
        let req = Request { id: Id::Num(1), method: "tools/call".into(), params: Some(params) };
        // Compared as printed: `Map` equality ignores member order.
        prop_assert_eq!(
            format!("{:?}", session::request_to_legacy_owned(req.clone())),
            format!("{:?}", request_to_legacy_through_serde(&req))
        );
    }

    /// Every remaining row on arbitrary input: no panic, objects out.
    #[test]
    fn remaining_rows_never_panic(v in arb_payload(), w in arb_payload(), s in arb_string()) {
        other_rows(&v, &w, &s)?;
    }
}

/// What `request_to_legacy_owned` answered before it read the usual
/// `_meta` by hand: the check through serde, then each per-request member
/// removed in turn (`_meta` too once emptied).
fn request_to_legacy_through_serde(
    req: &Request,
) -> Result<(Request, modern::RequestMeta), mcp_tasks_shim::error::ShimError> {
    let meta = session::check_modern_meta(req.params.as_ref())?;
    let mut params = match req.params.clone() {
        Some(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    for key in [
        "io.modelcontextprotocol/protocolVersion",
        "io.modelcontextprotocol/clientCapabilities",
        "io.modelcontextprotocol/clientInfo",
        "io.modelcontextprotocol/logLevel",
    ] {
        if let Some(Value::Object(m)) = params.get_mut("_meta") {
            m.remove(key);
            if m.is_empty() {
                params.remove("_meta");
            }
        }
    }
    let params = (!params.is_empty() || req.params.is_some()).then_some(Value::Object(params));
    let legacy = Request {
        id: req.id.clone(),
        method: req.method.clone(),
        params,
    };
    Ok((legacy, meta))
}

/// Payload-shaped JSON: mutated corpus params/results, or anything.
fn arb_payload() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => mutated_from(corpus_payloads().to_vec(), 3),
        1 => arb_object(),
        1 => arb_json(),
    ]
}

/// Task-shaped objects with members retyped: what the fast readers must
/// judge exactly as serde does.
fn arb_task_like() -> impl Strategy<Value = Value> {
    let member = |k: &'static str, good: BoxedStrategy<Value>| {
        prop_oneof![
            4 => good.prop_map(Some),
            1 => Just(None),
            1 => arb_json().prop_map(Some),
        ]
        .prop_map(move |v| (k, v))
    };
    let s = || arb_string().prop_map(Value::from).boxed();
    let n = || prop_oneof![arb_number(), Just(Value::Null)].boxed();
    let status = prop::sample::select(vec![
        "working",
        "input_required",
        "completed",
        "failed",
        "cancelled",
        "Working",
        "",
    ])
    .prop_map(Value::from)
    .boxed();
    (
        member("taskId", s()),
        member("status", status),
        member("statusMessage", s()),
        member("createdAt", s()),
        member("lastUpdatedAt", s()),
        (
            member("ttl", n()),
            member("ttlMs", n()),
            // A `tasks/get` answer's own `_meta`, which its reader skips.
            member("_meta", arb_object().boxed()),
        ),
        (member("pollInterval", n()), member("pollIntervalMs", n())),
        prop::collection::vec((arb_string(), arb_json()), 0..3),
        prop::sample::select(vec![
            None,
            Some("result"),
            Some("error"),
            Some("inputRequests"),
        ]),
        arb_json(),
        any::<bool>(),
    )
        .prop_map(
            |(a, b, c, d, e, (f, g, meta), (h, i), extra, payload_key, payload, shuffle)| {
                let mut members: Vec<(String, Value)> = [a, b, c, d, e, f, g, meta, h, i]
                    .into_iter()
                    .filter_map(|(k, v)| v.map(|v| (k.to_owned(), v)))
                    .collect();
                members.extend(extra);
                if let Some(k) = payload_key {
                    members.push((k.to_owned(), payload));
                }
                if shuffle {
                    members.reverse();
                }
                Value::Object(members.into_iter().collect())
            },
        )
}

fn owned_agree(v: &Value, ttl: i64, n: u8) -> Result<(), TestCaseError> {
    let policy = TaskPolicy::optional();
    prop_assert_eq!(
        tools::tools_list_to_legacy(v, &policy),
        tools::tools_list_to_legacy_owned(v.clone(), &policy)
    );
    prop_assert_eq!(
        tools::tools_list_to_modern(v, ttl),
        tools::tools_list_to_modern_owned(v.clone(), ttl)
    );
    prop_assert_eq!(
        tools::call_params_to_modern(v),
        tools::call_params_to_modern_owned(v.clone())
    );
    let meta = TaskMetadata {
        ttl: Some(ttl),
        ..Default::default()
    };
    for t in [None, Some(&meta)] {
        prop_assert_eq!(
            tools::call_params_to_legacy(v, t),
            tools::call_params_to_legacy_owned(v.clone(), t)
        );
    }
    let method = METHODS[n as usize % METHODS.len()];
    prop_assert_eq!(
        session::result_to_modern(v, method, ttl),
        session::result_to_modern_owned(v.clone(), method, ttl)
    );
    prop_assert_eq!(
        session::result_to_legacy(v, method),
        session::result_to_legacy_owned(v.clone(), method)
    );
    let req = Request {
        id: Id::Num(ttl),
        method: method.to_owned(),
        params: (!n.is_multiple_of(4)).then(|| v.clone()),
    };
    prop_assert_eq!(
        session::request_to_modern(&req, &client()),
        session::request_to_modern_owned(req.clone(), &client())
    );
    prop_assert_eq!(
        session::request_to_legacy(&req),
        session::request_to_legacy_owned(req.clone())
    );
    prop_assert_eq!(
        task::create_result_to_legacy(v),
        task::create_result_to_legacy_owned(v.clone())
    );
    prop_assert_eq!(
        task::create_result_to_modern(v),
        task::create_result_to_modern_owned(v.clone())
    );
    prop_assert_eq!(
        task::get_result_to_legacy(v),
        task::get_result_to_legacy_owned(v.clone())
    );
    prop_assert_eq!(
        notify::status_to_legacy(v),
        notify::status_to_legacy_owned(v.clone())
    );
    prop_assert_eq!(
        input::input_request_to_legacy("k", v, "t", Id::Num(1)),
        input::input_request_to_legacy_owned("k", v.clone(), "t", Id::Num(1))
    );
    if let Ok(d) = DetailedTask::from_value(v) {
        prop_assert_eq!(
            task::detailed_to_legacy(&d),
            task::detailed_to_legacy_owned(d.clone()).0
        );
        let (lt, payload) = task::detailed_to_legacy_owned(d.clone());
        prop_assert_eq!(
            task::detailed_from_legacy(&lt, &payload),
            task::detailed_from_legacy_owned(&lt, payload.clone())
        );
        prop_assert_eq!(
            task::get_result_to_modern(&lt, &payload),
            task::get_result_to_modern_owned(&lt, payload.clone())
        );
        prop_assert_eq!(
            task::task_result_to_legacy("t", lt.status, &payload),
            task::task_result_to_legacy_owned("t", lt.status, payload.clone())
        );
        prop_assert_eq!(
            task::task_to_legacy(&d.task),
            task::task_to_legacy_owned(d.task.clone())
        );
        prop_assert_eq!(
            task::task_to_modern(&lt),
            task::task_to_modern_owned(lt.clone())
        );
        prop_assert_eq!(
            d.to_value(Some("complete")),
            d.clone().into_value(Some("complete"))
        );
    }
    Ok(())
}

fn wire_agree(v: &Value) -> Result<(), TestCaseError> {
    let Value::Object(m) = v else {
        return Ok(());
    };
    // modern Task: moving reader vs serde
    let serde_modern = serde_json::from_value::<modern::Task>(v.clone());
    if let Ok(t) = modern::Task::try_from_map(m.clone()) {
        prop_assert_eq!(Ok(&t), serde_modern.as_ref().map_err(|e| e.to_string()));
        prop_assert_eq!(t.clone().into_value(), serde_json::to_value(&t).unwrap());
    }
    let serde_legacy = serde_json::from_value::<legacy::Task>(v.clone());
    if let Ok(t) = legacy::Task::try_from_map(m.clone()) {
        prop_assert_eq!(Ok(&t), serde_legacy.as_ref().map_err(|e| e.to_string()));
        prop_assert_eq!(t.clone().into_value(), serde_json::to_value(&t).unwrap());
    }
    // DetailedTask: owned vs borrowed, and the task part vs serde
    let owned = DetailedTask::from_owned_value(v.clone());
    prop_assert_eq!(&owned, &DetailedTask::from_value(v));
    // Without a payload, the detailed reader is exactly the task reader.
    if !["result", "error", "inputRequests"]
        .iter()
        .any(|k| m.contains_key(*k))
    {
        prop_assert_eq!(
            owned.is_ok(),
            serde_modern.is_ok(),
            "detailed reader and serde disagree on {}",
            v
        );
    }
    // A `tasks/get` answer read from its bytes: exactly what the general
    // path (parse the message, then the task) reads, declining the same.
    let answer = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 3, "result": v})).unwrap();
    let general = match Message::parse(&answer) {
        Ok(Message::Response(r)) => DetailedTask::from_answer_result(r.result).ok(),
        _ => None,
    };
    prop_assert_eq!(modern::detailed_task_answer(&answer), general, "on {}", v);
    // CreateTaskResult: moving reader vs serde
    let wrapped = json!({"task": v, "_meta": {"k": 1}});
    let fast = legacy::CreateTaskResult::from_owned_value(wrapped.clone());
    let slow = serde_json::from_value::<legacy::CreateTaskResult>(wrapped);
    match (&fast, &slow) {
        (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
        (Err(_), Err(_)) => {}
        _ => prop_assert!(false, "fast {:?} vs serde {:?} on {}", fast, slow, v),
    }
    Ok(())
}

fn other_rows(v: &Value, w: &Value, s: &str) -> Result<(), TestCaseError> {
    let _ = session::LegacyClient::from_initialize(Some(v));
    for caps in [
        session::client_caps_to_modern(v),
        session::client_caps_to_legacy(v),
        session::server_caps_to_legacy(v),
        session::server_caps_to_modern(v),
    ] {
        prop_assert!(caps.is_object());
    }
    if let Ok(c) = session::LegacyClient::from_initialize(Some(v)) {
        let _ = c.negotiated_version();
        let _ = session::discover_to_initialize(w, &c);
        let meta = session::ModernMeta::for_client(&c);
        let req = Request {
            id: Id::Str(s.to_owned()),
            method: s.to_owned(),
            params: Some(meta.merge_into(Some(w.clone()))),
        };
        let out = Message::Request(req).to_value();
        check_jsonrpc(&out).map_err(TestCaseError::fail)?;
    }
    if let Ok(meta) = session::check_modern_meta(Some(v)) {
        prop_assert!(session::initialize_params_from_meta(&meta).is_object());
    }
    if let Ok(d) = session::initialize_to_discover(v, -1) {
        prop_assert!(d.is_object());
    }
    let _ = task::task_id_param(Some(v));
    let _ = tools::tool_name(Some(v));
    let _ = tools::is_task_result(v);
    let _ = TaskSupport::of_tool(v);
    let _ = task::strip_related_task(v.clone());
    let _ = task::tag_related_task(v.clone(), s);
    let _ = input::related_task_of(Some(v));
    let _ = input::legacy_answer_to_input_response(v);
    let _ = input::input_key(s, 3);
    let req = Request {
        id: Id::Num(1),
        method: s.to_owned(),
        params: Some(v.clone()),
    };
    let (iv, _) = input::legacy_request_to_input(&req);
    if let Ok(back) = input::input_request_to_legacy(s, &iv, "t", Id::Num(2)) {
        check_jsonrpc(&Message::Request(back).to_value()).map_err(TestCaseError::fail)?;
    }
    if let Ok(t) = serde_json::from_value::<legacy::Task>(v.clone()) {
        let c = task::cancelled_view(&t, s);
        prop_assert_eq!(c.status, mcp_tasks_shim::wire::TaskStatus::Cancelled);
        let page = task::list_page(&[t.clone(), c], Some(s.to_owned()));
        prop_assert!(page["tasks"].is_array());
        let n = notify::status_to_modern(&t, &Payload::Result(w.clone()), &Id::Str(s.into()));
        prop_assert!(n.is_object());
    }
    Ok(())
}
