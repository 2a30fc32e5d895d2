//! Per-message translation cost versus plain `serde_json`.
//!
//! For every message kind the bench times two things on the same bytes, in
//! the same run, alternating in short slices inside every batch:
//!
//! - **baseline**: `serde_json::from_slice::<Value>` + `serde_json::to_writer`
//!   (what any JSON proxy pays to look at a message at all);
//! - **translate**: what the shim does per message on the hot path:
//!   [`Message::parse`], the translate row function, and
//!   [`Message::write_json`] of every message the shim emits for it.
//!
//! It prints the median ns/msg of several batches and the ratio
//! translate / baseline (median of the per-batch ratios) against the target
//! of 1.5×. Run it with `cargo bench --bench translate` (no criterion: the
//! build stays light); a trailing argument keeps only the kinds whose name
//! contains it. `TRANSLATE_BENCH_MS=<ms per batch>` changes the batch length;
//! `TRANSLATE_BENCH_PROFILE=<n>` runs each side `n` times without timing,
//! for `valgrind --tool=callgrind --toggle-collect='translate::baseline'`
//! (or `translate::tr_*`), whose instruction counts do not depend on the
//! load of the machine.

use std::hint::black_box;
use std::time::{Duration, Instant};

use mcp_tasks_shim::jsonrpc::{Id, Message, Notification, Request, Response};
use mcp_tasks_shim::revision::{
    META_PROTOCOL_VERSION, META_RELATED_TASK, META_SUBSCRIPTION_ID, MODERN_VERSION,
};
use mcp_tasks_shim::translate::session::{LegacyClient, ModernMeta};
use mcp_tasks_shim::translate::tools::TaskPolicy;
use mcp_tasks_shim::translate::{input, notify, task, tools};
use mcp_tasks_shim::wire::legacy::TaskSupport;
use mcp_tasks_shim::wire::modern::Payload;
use mcp_tasks_shim::wire::{from_value, legacy};
use serde_json::{Value, json};

/// Target: translation may cost at most this many times the baseline.
const TARGET_RATIO: f64 = 1.5;
/// Batches per side; the median is reported.
const BATCHES: usize = 15;
/// Slices per batch, alternating baseline and translate.
const SLICES: u64 = 20;

/// One message kind: its bytes and the shim's work on them.
struct Case {
    name: &'static str,
    bytes: Vec<u8>,
    /// Parses `bytes`, translates, writes every emitted message into `out`.
    translate: fn(&Ctx, &[u8], &mut Vec<u8>),
}

/// Per-session state the row functions take as arguments.
struct Ctx {
    /// The session's modern `_meta`, built once per session, as the
    /// legacy front holds it.
    modern_meta: ModernMeta,
    policy: TaskPolicy,
}

#[inline(never)]
fn baseline(bytes: &[u8], out: &mut Vec<u8>) {
    let v: Value = serde_json::from_slice(bytes).expect("valid JSON");
    out.clear();
    serde_json::to_writer(&mut *out, &v).expect("serialises");
}

fn response(msg: Message) -> (Id, Value) {
    match msg {
        Message::Response(Response { id, result }) => (id, result),
        other => panic!("expected a response, got {other:?}"),
    }
}

fn request(msg: Message) -> Request {
    match msg {
        Message::Request(r) => r,
        other => panic!("expected a request, got {other:?}"),
    }
}

fn notification(msg: Message) -> Notification {
    match msg {
        Message::Notification(n) => n,
        other => panic!("expected a notification, got {other:?}"),
    }
}

fn emit(msg: &Message, out: &mut Vec<u8>) {
    msg.write_json(out);
    out.push(b'\n');
}

// ---- the shim's per-message work, one function per kind ------------------

/// Upstream modern `tasks/get` answer → legacy `tasks/get` answer.
#[inline(never)]
fn tr_get_small(_: &Ctx, bytes: &[u8], out: &mut Vec<u8>) {
    let (id, result) = response(Message::parse(bytes).expect("parses"));
    let (t, payload) = task::get_result_to_legacy_owned(result).expect("translates");
    black_box(&payload);
    out.clear();
    emit(&Message::response(id, t.into_value()), out);
}

/// Upstream modern creation result → legacy `{task}`.
#[inline(never)]
fn tr_create_to_legacy(_: &Ctx, bytes: &[u8], out: &mut Vec<u8>) {
    let (id, result) = response(Message::parse(bytes).expect("parses"));
    let legacy = task::create_result_to_legacy_owned(result).expect("translates");
    out.clear();
    emit(&Message::response(id, legacy), out);
}

/// Upstream legacy `{task}` → modern flat creation result.
#[inline(never)]
fn tr_create_to_modern(_: &Ctx, bytes: &[u8], out: &mut Vec<u8>) {
    let (id, result) = response(Message::parse(bytes).expect("parses"));
    let modern = task::create_result_to_modern_owned(result).expect("translates");
    out.clear();
    emit(&Message::response(id, modern), out);
}

/// Downstream legacy `tools/call` with `params.task` → upstream modern
/// request (`task` removed, modern `_meta` written in, as the upstream
/// connections write it: `ModernMeta::write_request`).
#[inline(never)]
fn tr_call_request(ctx: &Ctx, bytes: &[u8], out: &mut Vec<u8>) {
    let mut req = request(Message::parse(bytes).expect("parses"));
    let (params, task_meta) =
        tools::call_params_to_modern_owned(req.params.take().expect("has params"));
    black_box(&task_meta);
    out.clear();
    ctx.modern_meta
        .write_request(out, &req.id, &req.method, Some(&params));
    out.push(b'\n');
}

/// Upstream modern `notifications/tasks` → legacy `notifications/tasks/status`.
#[inline(never)]
fn tr_status(_: &Ctx, bytes: &[u8], out: &mut Vec<u8>) {
    let n = notification(Message::parse(bytes).expect("parses"));
    let (t, payload) =
        notify::status_to_legacy_owned(n.params.expect("has params")).expect("translates");
    black_box(&payload);
    out.clear();
    emit(
        &Message::notification(notify::LEGACY_STATUS, t.into_value()),
        out,
    );
}

/// Upstream modern `tools/list` (20 tools) → legacy with `execution.taskSupport`.
#[inline(never)]
fn tr_tools_list(ctx: &Ctx, bytes: &[u8], out: &mut Vec<u8>) {
    let (id, result) = response(Message::parse(bytes).expect("parses"));
    let legacy = tools::tools_list_to_legacy_owned(result, &ctx.policy);
    out.clear();
    emit(&Message::response(id, legacy), out);
}

/// Upstream modern `tasks/get` in `input_required` → legacy `tasks/get`
/// answer plus the `elicitation/create` request sent to the client.
#[inline(never)]
fn tr_get_input(_: &Ctx, bytes: &[u8], out: &mut Vec<u8>) {
    let (id, result) = response(Message::parse(bytes).expect("parses"));
    let (t, payload) = task::get_result_to_legacy_owned(result).expect("translates");
    out.clear();
    emit(&Message::response(id, t.clone().into_value()), out);
    if let Payload::Input(inputs) = payload {
        for (n, (key, req)) in inputs.into_iter().enumerate() {
            let r = input::input_request_to_legacy_owned(&key, req, &t.task_id, Id::Num(n as i64))
                .expect("translates");
            emit(&Message::Request(r), out);
        }
    }
}

/// Upstream modern `tasks/get`, completed with a 1 MiB result → the legacy
/// `tasks/get` answer and the `tasks/result` answer carrying the payload.
#[inline(never)]
fn tr_get_large(_: &Ctx, bytes: &[u8], out: &mut Vec<u8>) {
    let (id, result) = response(Message::parse(bytes).expect("parses"));
    let (t, payload) = task::get_result_to_legacy_owned(result).expect("translates");
    out.clear();
    emit(&Message::response(id.clone(), t.clone().into_value()), out);
    let answer =
        task::task_result_to_legacy_owned(&t.task_id, t.status, payload).expect("has a result");
    emit(&Message::response(id, answer), out);
}

/// Upstream `tools/call` result of 1 MiB → tagged with the related task.
#[inline(never)]
fn tr_tag_large(_: &Ctx, bytes: &[u8], out: &mut Vec<u8>) {
    let (id, result) = response(Message::parse(bytes).expect("parses"));
    let tagged = task::tag_related_task(result, "task-0123456789abcdef");
    out.clear();
    emit(&Message::response(id, tagged), out);
}

/// Upstream legacy `tasks/result` of 1 MiB → the modern `tasks/get` answer
/// with the result inline (reverse bridge).
#[inline(never)]
fn tr_result_to_modern_large(_: &Ctx, bytes: &[u8], out: &mut Vec<u8>) {
    let (id, result) = response(Message::parse(bytes).expect("parses"));
    let t = legacy_task("completed");
    let payload = Payload::Result(task::strip_related_task(result));
    let modern = task::get_result_to_modern_owned(&t, payload);
    out.clear();
    emit(&Message::response(id, modern), out);
}

// ---- messages ---------------------------------------------------------------

fn modern_task(status: &str) -> Value {
    json!({
        "taskId": "786512e2-9e0d-44bd-8f29-789f320fe840",
        "status": status,
        "statusMessage": "The operation is now in progress.",
        "createdAt": "2026-11-25T10:30:00Z",
        "lastUpdatedAt": "2026-11-25T10:40:00Z",
        "ttlMs": 60000,
        "pollIntervalMs": 5000
    })
}

fn legacy_task(status: &str) -> legacy::Task {
    from_value(
        "task",
        &json!({
            "taskId": "786512e2-9e0d-44bd-8f29-789f320fe840",
            "status": status,
            "createdAt": "2025-11-25T10:30:00Z",
            "lastUpdatedAt": "2025-11-25T10:50:00Z",
            "ttl": 60000,
            "pollInterval": 5000
        }),
    )
    .expect("valid task")
}

/// About `bytes` of tool output: readable lines, some quotes to escape.
fn big_text(bytes: usize) -> String {
    let line = "2026-07-28T12:00:00Z INFO worker=\"compute-7\" processed batch; \
                checksum ok, rows=4096 latency_ms=12.5\n";
    let mut s = String::with_capacity(bytes + line.len());
    while s.len() < bytes {
        s.push_str(line);
    }
    s.truncate(bytes);
    s
}

fn tool_result(text: String) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": false})
}

fn wire(v: Value) -> Vec<u8> {
    serde_json::to_vec(&v).expect("serialises")
}

fn tools_list(n: usize) -> Value {
    let tools: Vec<Value> = (0..n)
        .map(|i| {
            json!({
                "name": format!("tool_{i:02}"),
                "title": format!("Tool number {i}"),
                "description": "Does one well-defined thing with the arguments it is given \
                                and reports the outcome as text.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string", "description": "File to work on"},
                        "count": {"type": "integer", "minimum": 1, "maximum": 100},
                        "dryRun": {"type": "boolean", "default": false}
                    },
                    "required": ["path"]
                },
                "annotations": {"readOnlyHint": i % 2 == 0, "idempotentHint": true}
            })
        })
        .collect();
    json!({"tools": tools, "resultType": "complete", "ttlMs": 60000, "cacheScope": "private"})
}

fn cases() -> Vec<Case> {
    let mib = 1 << 20;
    let mut completed = modern_task("completed");
    completed["result"] = tool_result(big_text(mib));
    completed["resultType"] = json!("complete");

    let mut creation = modern_task("working");
    creation["resultType"] = json!("task");

    let mut get_working = modern_task("working");
    get_working["resultType"] = json!("complete");

    let mut status = modern_task("input_required");
    status["inputRequests"] = json!({"create-1": {"method": "elicitation/create",
        "params": {"mode": "form", "message": "Delete report.pdf?",
                   "requestedSchema": {"type": "object",
                       "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}}}});
    status["_meta"] = json!({META_SUBSCRIPTION_ID: 4});

    let mut get_input = modern_task("input_required");
    get_input["inputRequests"] = json!({
        "create-1": {"method": "elicitation/create",
            "params": {"mode": "form", "message": "Delete report.pdf?",
                       "requestedSchema": {"type": "object",
                           "properties": {"confirm": {"type": "boolean"}}, "required": ["confirm"]}}},
        "create-2": {"method": "elicitation/create",
            "params": {"mode": "url", "message": "Sign in to continue",
                       "url": "https://example.com/authorize?state=abc"}}
    });
    get_input["resultType"] = json!("complete");

    let mut big_legacy_result = tool_result(big_text(mib));
    big_legacy_result["_meta"] =
        json!({META_RELATED_TASK: {"taskId": "786512e2-9e0d-44bd-8f29-789f320fe840"}});

    vec![
        Case {
            name: "tasks/get working → legacy",
            bytes: wire(json!({"jsonrpc": "2.0", "id": 41, "result": get_working})),
            translate: tr_get_small,
        },
        Case {
            name: "creation result → legacy",
            bytes: wire(json!({"jsonrpc": "2.0", "id": 42, "result": creation})),
            translate: tr_create_to_legacy,
        },
        Case {
            name: "creation result → modern",
            bytes: wire(json!({"jsonrpc": "2.0", "id": 43, "result": {"task": {
                "taskId": "786512e2-9e0d-44bd-8f29-789f320fe840", "status": "working",
                "createdAt": "2025-11-25T10:30:00Z", "lastUpdatedAt": "2025-11-25T10:30:00Z",
                "ttl": 60000, "pollInterval": 5000}}})),
            translate: tr_create_to_modern,
        },
        Case {
            name: "tools/call request + _meta → modern",
            bytes: wire(json!({"jsonrpc": "2.0", "id": 44, "method": "tools/call",
                "params": {"name": "slow_compute",
                           "arguments": {"seconds": 3, "label": "nightly report"},
                           "task": {"ttl": 60000},
                           "_meta": {"progressToken": "p-44"}}})),
            translate: tr_call_request,
        },
        Case {
            name: "status notification → legacy",
            bytes: wire(json!({"jsonrpc": "2.0", "method": notify::MODERN_STATUS,
                               "params": status})),
            translate: tr_status,
        },
        Case {
            name: "tools/list (20 tools) → legacy",
            bytes: wire(json!({"jsonrpc": "2.0", "id": 45, "result": tools_list(20)})),
            translate: tr_tools_list,
        },
        Case {
            name: "tasks/get input_required → legacy + 2 requests",
            bytes: wire(json!({"jsonrpc": "2.0", "id": 46, "result": get_input})),
            translate: tr_get_input,
        },
        Case {
            name: "tasks/get completed 1 MiB → legacy get + result",
            bytes: wire(json!({"jsonrpc": "2.0", "id": 47, "result": completed})),
            translate: tr_get_large,
        },
        Case {
            name: "tools/call result 1 MiB → tag_related_task",
            bytes: wire(json!({"jsonrpc": "2.0", "id": 48, "result": tool_result(big_text(mib))})),
            translate: tr_tag_large,
        },
        Case {
            name: "tasks/result 1 MiB → modern tasks/get",
            bytes: wire(json!({"jsonrpc": "2.0", "id": 49, "result": big_legacy_result})),
            translate: tr_result_to_modern_large,
        },
    ]
}

// ---- timing -----------------------------------------------------------------

/// Runs `f` `iters` times and returns ns per call.
fn time_batch(iters: u64, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..iters {
        f();
    }
    start.elapsed().as_nanos() as f64 / iters as f64
}

/// How many calls of `f` fill about `target`.
fn calibrate(target: Duration, mut f: impl FnMut()) -> u64 {
    let mut iters = 1u64;
    loop {
        let start = Instant::now();
        for _ in 0..iters {
            f();
        }
        let took = start.elapsed();
        if took >= target / 4 || iters >= 1 << 30 {
            let per = took.as_nanos().max(1) as f64 / iters as f64;
            return ((target.as_nanos() as f64 / per) as u64).max(1);
        }
        iters *= 2;
    }
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn read_cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn sanity_check(ctx: &Ctx, cases: &[Case]) {
    // Every emitted line must parse as a JSON-RPC message; spot-check the
    // translations so the bench cannot time a no-op.
    for c in cases {
        let mut out = Vec::new();
        (c.translate)(ctx, &c.bytes, &mut out);
        let lines: Vec<Message> = out
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| Message::parse(l).expect("shim output parses"))
            .collect();
        assert!(!lines.is_empty(), "{}: nothing emitted", c.name);
    }
    let mut out = Vec::new();
    tr_call_request(ctx, &cases[3].bytes, &mut out);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["params"]["_meta"][META_PROTOCOL_VERSION], MODERN_VERSION);
    assert!(v["params"].get("task").is_none());
    tr_tools_list(ctx, &cases[5].bytes, &mut out);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        v["result"]["tools"][3]["execution"]["taskSupport"],
        "required"
    );
    tr_get_large(ctx, &cases[7].bytes, &mut out);
    assert!(out.len() > 1 << 20);
}

fn selected(filter: &[String], c: &Case) -> bool {
    filter.is_empty() || filter.iter().any(|f| c.name.contains(f.as_str()))
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument selects cases.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let batch = Duration::from_millis(
        std::env::var("TRANSLATE_BENCH_MS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(40),
    );

    let mut policy = TaskPolicy::optional();
    policy
        .per_tool
        .insert("tool_03".into(), TaskSupport::Required);
    policy
        .per_tool
        .insert("tool_07".into(), TaskSupport::Forbidden);
    let client = LegacyClient::from_initialize(Some(&json!({
        "protocolVersion": "2025-11-25",
        "capabilities": {"elicitation": {"form": {}, "url": {}}, "sampling": {},
                         "tasks": {"list": {}, "cancel": {}}},
        "clientInfo": {"name": "bench-client", "version": "1.0.0"}
    })))
    .expect("valid initialize");
    let ctx = Ctx {
        modern_meta: ModernMeta::for_client(&client),
        policy,
    };
    let cases = cases();

    // Profiling mode: fixed iteration counts, no timing, for
    // `valgrind --tool=callgrind` or `perf stat` (load-independent).
    if let Some(n) = std::env::var("TRANSLATE_BENCH_PROFILE")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    {
        for c in cases.iter().filter(|c| selected(&filter, c)) {
            let mut out = Vec::with_capacity(c.bytes.len() * 2);
            for _ in 0..n {
                baseline(black_box(&c.bytes), black_box(&mut out));
                (c.translate)(&ctx, black_box(&c.bytes), black_box(&mut out));
            }
        }
        return;
    }
    sanity_check(&ctx, &cases);
    println!("translate bench: per-message cost vs serde_json parse+serialize of the same bytes");
    println!(
        "machine: {} CPUs (nproc), {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        read_cpu_model()
    );
    println!(
        "method: warm-up, then {BATCHES} batches of ~{} ms per side, each alternating the sides in {SLICES} slices; \
         median ns/msg; ratio = median of the per-batch ratios; target ≤ {TARGET_RATIO}×",
        batch.as_millis()
    );
    println!();
    println!(
        "{:<48} {:>9} {:>9} {:>12} {:>13} {:>7}  target",
        "message kind", "in B", "out B", "baseline ns", "translate ns", "ratio"
    );
    let mut misses = 0;
    for c in &cases {
        if !selected(&filter, c) {
            continue;
        }
        let out_len = {
            let mut o = Vec::new();
            (c.translate)(&ctx, &c.bytes, &mut o);
            o.len()
        };
        let mut out_b = Vec::with_capacity(c.bytes.len() * 2);
        let mut out_t = Vec::with_capacity(c.bytes.len() * 2);
        let mut run_b = || baseline(black_box(&c.bytes), black_box(&mut out_b));
        let mut run_t = || (c.translate)(&ctx, black_box(&c.bytes), black_box(&mut out_t));
        // Warm-up doubles as calibration.
        let iters_b = calibrate(batch, &mut run_b);
        let iters_t = calibrate(batch, &mut run_t);
        // Each batch alternates the two sides in short slices, so a burst
        // of load on the machine hits both alike.
        let (slice_b, slice_t) = ((iters_b / SLICES).max(1), (iters_t / SLICES).max(1));
        let (mut bs, mut ts, mut rs) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..BATCHES {
            let (mut b, mut t) = (0.0, 0.0);
            for _ in 0..SLICES {
                b += time_batch(slice_b, &mut run_b);
                t += time_batch(slice_t, &mut run_t);
            }
            bs.push(b / SLICES as f64);
            ts.push(t / SLICES as f64);
            rs.push(t / b);
        }
        let (b, t, ratio) = (median(bs), median(ts), median(rs));
        let pass = ratio <= TARGET_RATIO;
        misses += usize::from(!pass);
        println!(
            "{:<48} {:>9} {:>9} {:>12.0} {:>13.0} {:>6.2}×  {}",
            c.name,
            c.bytes.len(),
            out_len,
            b,
            t,
            ratio,
            if pass { "PASS" } else { "MISS" }
        );
    }
    println!();
    if misses == 0 {
        println!("all kinds within {TARGET_RATIO}× of the baseline");
    } else {
        println!("{misses} kind(s) miss the {TARGET_RATIO}× target");
    }
}
