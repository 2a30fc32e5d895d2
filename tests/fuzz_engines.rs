//! Fuzzing the bridge engines in process: arbitrary client message
//! sequences fed to a `LegacyFront` session (modern reference server
//! behind) and a `ModernFront` session (legacy reference server behind).
//! See docs/fuzzing.md.
//!
//! Properties, per sequence:
//! - every request gets exactly one reply, with its id, within a bounded
//!   time (a missed deadline is reported as a hang);
//! - the shim never answers something that was not asked;
//! - every message the shim emits is valid JSON-RPC; errors, notifications
//!   and the shim's own requests are schema-valid for the client's
//!   revision, and so is every reply to a schema-valid request;
//! - nothing panics (a panicking engine task would leave its request
//!   unanswered, which the first property catches).

mod fuzz_gen;
mod support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use fuzz_gen::*;
use mcp_tasks_shim::bridge::BridgeConfig;
use mcp_tasks_shim::bridge::legacy_front::LegacyFront;
use mcp_tasks_shim::bridge::modern_front::ModernFront;
use mcp_tasks_shim::jsonrpc::{Id, Message};
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::reference::ReferenceServer;
use mcp_tasks_shim::revision::probe_request;
use mcp_tasks_shim::upstream::{Upstream, channel};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::schema::{Revision, validate};
use tokio::sync::mpsc;

/// How long the whole sequence may take after its last message before an
/// unanswered request counts as a hang. Generous: debug build, shared CPU.
const SETTLE: Duration = Duration::from_secs(20);

/// One client step: a message, and which known task id (if any) to put in
/// its `taskId` members so sequences reach real tasks.
#[derive(Debug, Clone)]
struct Step {
    msg: Value,
    task_pick: Option<usize>,
}

fn arb_step(legacy: bool) -> impl Strategy<Value = Step> {
    let pool = corpus_messages_of(legacy, "c2s");
    let msg = prop_oneof![
        6 => mutated_from(pool, 2),
        1 => arb_envelope(),
    ];
    (msg, prop::option::weighted(0.7, any::<usize>()))
        .prop_map(|(msg, task_pick)| Step { msg, task_pick })
}

/// Reference tools and arguments that start real tasks.
const SEED_CALLS: &[(&str, &str)] = &[
    ("slow_compute", r#"{"seconds": 0.1, "label": "fuzz"}"#),
    ("confirm_delete", r#"{"filename": "a.txt"}"#),
    ("multi_input", "{}"),
    ("failing_job", "{}"),
    ("protocol_error_job", "{}"),
    ("test_tool_with_task", "{}"),
    ("greet", r#"{"name": "fuzz"}"#),
];

/// (initialize first?, a task-starting call first?, the steps)
fn arb_sequence(legacy: bool) -> impl Strategy<Value = (bool, Option<usize>, Vec<Step>)> {
    (
        prop::bool::weighted(0.9),
        prop::option::weighted(0.8, 0..SEED_CALLS.len()),
        prop::collection::vec(arb_step(legacy), 1..8),
    )
}

/// A well-formed `tools/call` of a seed tool, as the client's revision
/// sends it (legacy: task-augmented; modern: with its `_meta`).
fn seed_call(legacy: bool, which: usize) -> Value {
    let (name, args) = SEED_CALLS[which];
    let args: Value = serde_json::from_str(args).unwrap();
    let mut params = json!({"name": name, "arguments": args});
    if legacy {
        params["task"] = json!({"ttl": 60000});
    } else {
        let probe = probe_request(Id::Num(0), &json!({"name": "fuzz", "version": "1"}));
        params["_meta"] = probe.params().unwrap()["_meta"].clone();
    }
    json!({"jsonrpc": "2.0", "id": "seed", "method": "tools/call", "params": params})
}

/// Keeps reference tools quick (`slow_compute` waits `seconds`).
fn tame(v: &mut Value) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if k == "seconds" && child.as_f64().is_some_and(|s| s > 0.3) {
                    *child = json!(0.2);
                }
                tame(child);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(tame),
        _ => {}
    }
}

fn set_task_ids(v: &mut Value, id: &str) {
    match v {
        Value::Object(m) => {
            for (k, child) in m.iter_mut() {
                if k == "taskId" && child.is_string() {
                    *child = json!(id);
                }
                set_task_ids(child, id);
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|c| set_task_ids(c, id)),
        _ => {}
    }
}

fn collect_task_ids(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, child) in m {
                if k == "taskId"
                    && let Some(s) = child.as_str()
                    && !out.iter().any(|t| t == s)
                {
                    out.push(s.to_owned());
                }
                collect_task_ids(child, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|c| collect_task_ids(c, out)),
        _ => {}
    }
}

/// What a cooperative client answers to the shim's own requests.
fn answer(req: &Value) -> Value {
    let mut a = support::wire::auto_answer(req);
    if req["method"] == "roots/list" {
        a = json!({"jsonrpc": "2.0", "id": req["id"], "result": {"roots": []}});
    }
    a
}

/// Either front, behind one interface.
enum Front {
    Legacy(Arc<mcp_tasks_shim::bridge::legacy_front::LegacySession>),
    Modern(Arc<mcp_tasks_shim::bridge::modern_front::ModernSession>),
}

impl Front {
    fn feed(&self, m: Message) {
        match self {
            Front::Legacy(s) => s.handle_client(m),
            Front::Modern(s) => s.handle_client(m),
        }
    }
}

/// A shim engine of the given client revision with its reference server.
async fn start(legacy_client: bool) -> (Front, mpsc::UnboundedReceiver<Message>) {
    let (conn, events, mut server_end) = channel::pair(Duration::from_secs(30));
    let server_rev = if legacy_client {
        mcp_tasks_shim::revision::Revision::Modern
    } else {
        mcp_tasks_shim::revision::Revision::Legacy
    };
    let server = ReferenceServer::new(server_rev, server_end.to_shim.clone());
    tokio::spawn(async move {
        while let Some(msg) = server_end.from_shim.recv().await {
            server.handle(msg);
        }
    });
    let upstream = conn;
    let (to_client, outbox) = mpsc::unbounded_channel();
    let front = if legacy_client {
        let probe = probe_request(Id::Num(0), &json!({"name": "fuzz", "version": "1"}));
        let discover = upstream
            .request(
                "server/discover",
                probe.params().cloned().unwrap_or_default(),
            )
            .await
            .expect("reference server answers")
            .expect("discover succeeds");
        let front = LegacyFront::new(
            upstream,
            Arc::new(MemoryLedger::default()),
            BridgeConfig::default(),
            discover,
        );
        front.follow(events);
        Front::Legacy(front.session(
            mcp_tasks_shim::scope::Principal::new("fuzz").into(),
            to_client,
        ))
    } else {
        let front = ModernFront::new(
            upstream,
            Arc::new(MemoryLedger::default()),
            BridgeConfig::default(),
        );
        front.follow(events);
        Front::Modern(front.session(
            mcp_tasks_shim::scope::Principal::new("fuzz").into(),
            to_client,
        ))
    };
    (front, outbox)
}

/// A request sent and not answered yet.
struct Pending {
    method: String,
    schema_valid: bool,
}

struct Run {
    rev: Revision,
    pending: HashMap<Id, Pending>,
    task_ids: Vec<String>,
    replies: usize,
}

impl Run {
    /// Checks one message from the shim; answers the shim's own requests.
    fn receive(&mut self, front: &Front, m: Message) -> Result<(), String> {
        let v = m.to_value();
        check_jsonrpc(&v)?;
        collect_task_ids(&v, &mut self.task_ids);
        match &m {
            Message::Request(_) => {
                validate(self.rev, &v, None).map_err(|e| format!("shim request: {e}"))?;
                let a = Message::from_value(answer(&v)).map_err(|e| e.to_string())?;
                front.feed(a);
            }
            Message::Notification(_) => {
                validate(self.rev, &v, None).map_err(|e| format!("shim notification: {e}"))?;
            }
            Message::Response(_) | Message::Error(_) => {
                let id = m.id().ok_or_else(|| format!("an answer without id: {v}"))?;
                let p = self
                    .pending
                    .remove(id)
                    .ok_or_else(|| format!("an answer to nothing pending (twice?): {v}"))?;
                self.replies += 1;
                if std::env::var_os("SHIM_FUZZ_VERBOSE").is_some() {
                    let outcome = match &m {
                        Message::Error(e) => format!("error {} {}", e.error.code, e.error.message),
                        _ => "ok".into(),
                    };
                    eprintln!("{} {} -> {outcome}", self.rev, p.method);
                }
                if p.schema_valid || matches!(m, Message::Error(_)) {
                    validate(self.rev, &v, Some(&p.method)).map_err(|e| {
                        format!("answer to a schema-valid {} request: {e}", p.method)
                    })?;
                }
            }
        }
        Ok(())
    }
}

async fn run_sequence(
    legacy: bool,
    init: bool,
    seed: Option<usize>,
    steps: Vec<Step>,
) -> Result<(), String> {
    let rev = if legacy {
        Revision::Legacy
    } else {
        Revision::Modern
    };
    let (front, mut outbox) = start(legacy).await;
    let mut run = Run {
        rev,
        pending: HashMap::new(),
        task_ids: Vec::new(),
        replies: 0,
    };
    let mut script: Vec<(Value, Option<usize>)> = Vec::new();
    if legacy && init {
        script.push((
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {"form": {}}},
                "clientInfo": {"name": "fuzz", "version": "1"}}}),
            None,
        ));
        script.push((
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            None,
        ));
    }
    if let Some(which) = seed {
        script.push((seed_call(legacy, which), None));
    }
    script.extend(steps.into_iter().map(|s| (s.msg, s.task_pick)));
    let mut exempt = Vec::new();
    for (n, (mut v, pick)) in script.into_iter().enumerate() {
        tame(&mut v);
        if let Some(k) = pick
            && !run.task_ids.is_empty()
        {
            let id = run.task_ids[k % run.task_ids.len()].clone();
            set_task_ids(&mut v, &id);
        }
        let Ok(mut m) = Message::from_value(v) else {
            continue; // the driver refuses it before any engine sees it
        };
        if let Message::Request(r) = &mut m {
            // Unique ids, of both types, so answers can be told apart.
            r.id = if n.is_multiple_of(2) {
                Id::Num(n as i64 + 1000)
            } else {
                Id::Str(format!("fuzz-{n}"))
            };
            let (id, method) = (r.id.clone(), r.method.clone());
            let v = m.to_value();
            if !legacy && method == "subscriptions/listen" {
                // Answered at teardown only, by design.
                exempt.push(id.clone());
            }
            run.pending.insert(
                id,
                Pending {
                    schema_valid: validate(rev, &v, None).is_ok(),
                    method,
                },
            );
        }
        let is_seed = m.method() == Some("tools/call") && n < 3 && seed.is_some();
        let waits_for = m.id().cloned();
        front.feed(m);
        // Let quick answers arrive so later steps can use their task ids;
        // the seed call's answer (the task) is always waited for.
        let pause = if is_seed {
            SETTLE
        } else {
            Duration::from_millis(30)
        };
        let deadline = tokio::time::Instant::now() + pause;
        while let Ok(Some(out)) = tokio::time::timeout_at(deadline, outbox.recv()).await {
            run.receive(&front, out)?;
            if is_seed
                && waits_for
                    .as_ref()
                    .is_some_and(|id| !run.pending.contains_key(id))
            {
                break;
            }
        }
    }
    let deadline = tokio::time::Instant::now() + SETTLE;
    while run.pending.keys().any(|id| !exempt.contains(id)) {
        match tokio::time::timeout_at(deadline, outbox.recv()).await {
            Ok(Some(out)) => run.receive(&front, out)?,
            Ok(None) | Err(_) => break,
        }
    }
    let unanswered: Vec<String> = run
        .pending
        .iter()
        .filter(|(id, _)| !exempt.contains(id))
        .map(|(id, p)| format!("{id} ({})", p.method))
        .collect();
    if !unanswered.is_empty() {
        if std::env::var_os("SHIM_FUZZ_VERBOSE").is_some() {
            eprintln!("HANG {unanswered:?}");
        }
        return Err(format!(
            "hang: no answer within {SETTLE:?} to {}",
            unanswered.join(", ")
        ));
    }
    // Late extra answers (a duplicate reply) would show up here.
    while let Ok(out) = outbox.try_recv() {
        run.receive(&front, out)?;
    }
    Ok(())
}

fn check(
    legacy: bool,
    init: bool,
    seed: Option<usize>,
    steps: Vec<Step>,
) -> Result<(), TestCaseError> {
    // Paused time: the engines' timers (polls, request timeouts) and the
    // reference server's task durations run on a clock that jumps ahead
    // whenever everything waits, so a run takes no real time and every
    // pause below means "once all is quiet" rather than a guess.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .unwrap();
    let before = panics_seen();
    let r = rt.block_on(run_sequence(legacy, init, seed, steps));
    rt.shutdown_timeout(Duration::from_secs(1));
    r.map_err(TestCaseError::fail)?;
    prop_assert_eq!(
        panics_seen(),
        before,
        "something panicked (see the output above)"
    );
    Ok(())
}

proptest! {
    #![proptest_config(config(file!(), 24))]

    #[test]
    fn legacy_front_answers_every_request((init, seed, steps) in arb_sequence(true)) {
        check(true, init, seed, steps)?;
    }

    #[test]
    fn modern_front_answers_every_request((init, seed, steps) in arb_sequence(false)) {
        check(false, init, seed, steps)?;
    }
}

/// Found by this fuzzer: a 2025-11-25 client that declared no elicitation
/// (here: it never initialized) starts a task that needs input, then waits
/// on it with a blocking `tasks/result`. The input can never be asked, so
/// the shim answers it `cancel` and the task ends instead of hanging.
#[test]
fn a_task_needing_input_the_client_cannot_give_still_ends() {
    let steps = vec![Step {
        msg: json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/result",
            "params": {"taskId": "replaced by the seed task's id"}}),
        task_pick: Some(0),
    }];
    let multi_input = SEED_CALLS
        .iter()
        .position(|(name, _)| *name == "multi_input");
    check(true, false, multi_input, steps).unwrap();
}
