//! Fuzzing the bridge engines from the other side: a hostile upstream that
//! answers every request with a *mutated* corpus answer of the same method
//! (and sends mutated corpus notifications and requests of its own), with
//! well-formed client sequences in front. See docs/fuzzing.md.
//!
//! Properties:
//! - nothing the upstream sends makes the shim panic or hang: every client
//!   request gets exactly one answer with its id within a bounded time
//!   (a 2025-11-25 `tasks/result` may legitimately wait for a task the
//!   upstream keeps `working` forever, so it must answer at most once; so
//!   may a plain 2025-11-25 `tools/call` the upstream turned into a task,
//!   when no `tasks/get` answer the fake gave ever ended a task);
//! - everything the shim sends the client is valid JSON-RPC, and its
//!   errors are schema-valid for the client's revision.

mod fuzz_gen;
mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fuzz_gen::*;
use mcp_tasks_shim::bridge::BridgeConfig;
use mcp_tasks_shim::bridge::legacy_front::{LegacyFront, LegacySession};
use mcp_tasks_shim::bridge::modern_front::{ModernFront, ModernSession};
use mcp_tasks_shim::jsonrpc::{Id, Message};
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::revision::probe_request;
use mcp_tasks_shim::upstream::{Upstream, channel};
use proptest::prelude::*;
use serde_json::{Value, json};
use support::schema::{Revision, validate};
use tokio::sync::mpsc;

const SETTLE: Duration = Duration::from_secs(20);

/// The upstream's script: which corpus answer to pick and how to damage
/// it, consumed in turn (cyclically) as requests arrive.
#[derive(Debug, Clone)]
struct Hostility {
    picks: Vec<usize>,
    mutations: Vec<Vec<Mutation>>,
    /// Unsolicited messages (mutated corpus s2c notifications/requests)
    /// sent after the n-th answer.
    extra_every: usize,
}

fn arb_hostility() -> impl Strategy<Value = Hostility> {
    (
        prop::collection::vec(any::<usize>(), 1..8),
        prop::collection::vec(prop::collection::vec(arb_mutation(), 0..3), 1..8),
        1usize..6,
    )
        .prop_map(|(picks, mutations, extra_every)| Hostility {
            picks,
            mutations,
            extra_every,
        })
}

struct Fake {
    /// method → corpus answers of the server's revision.
    answers: HashMap<String, Vec<Value>>,
    unsolicited: Vec<Value>,
    h: Hostility,
    turn: usize,
    /// Some `tools/call` was answered with a task (`resultType: "task"`).
    made_task: bool,
    /// Some `tasks/get` was answered with an error or a terminal status:
    /// a shim driving a task to its end could have stopped waiting.
    ended_task: bool,
}

impl Fake {
    fn new(server_legacy: bool, h: Hostility) -> Fake {
        let mut answers: HashMap<String, Vec<Value>> = HashMap::new();
        let mut unsolicited = Vec::new();
        for (method, msg) in corpus_with_methods(server_legacy, "s2c") {
            if msg.get("method").is_some() {
                unsolicited.push(msg);
            } else {
                answers.entry(method).or_default().push(msg);
            }
        }
        Fake {
            answers,
            unsolicited,
            h,
            turn: 0,
            made_task: false,
            ended_task: false,
        }
    }

    fn damage(&mut self, mut v: Value) -> Value {
        let ms = &self.h.mutations[self.turn % self.h.mutations.len()];
        for m in ms {
            apply(&mut v, m);
        }
        v
    }

    fn pick(&self, n: usize) -> usize {
        self.h.picks[(self.turn + n) % self.h.picks.len()]
    }

    /// What the fake sends back for one message from the shim.
    fn reply(&mut self, msg: &Message) -> Vec<Message> {
        let Message::Request(r) = msg else {
            return Vec::new();
        };
        self.turn += 1;
        let mut out = Vec::new();
        let answer = match self.answers.get(&r.method) {
            Some(pool) => {
                let base = pool[self.pick(0) % pool.len()].clone();
                let mut v = self.damage(base);
                if let Value::Object(o) = &mut v {
                    o.insert("id".into(), serde_json::to_value(&r.id).unwrap());
                }
                Message::from_value(v).ok()
            }
            None => None,
        };
        let answer = answer.unwrap_or_else(|| {
            Message::error(
                Some(r.id.clone()),
                mcp_tasks_shim::jsonrpc::ErrorObject::new(-32601, "Method not found"),
            )
        });
        match (r.method.as_str(), &answer) {
            ("tools/call", Message::Response(a)) => {
                self.made_task |= a.result.get("resultType") == Some(&json!("task"));
            }
            ("tasks/get", Message::Response(a)) => {
                let status = a.result.get("status").and_then(Value::as_str);
                self.ended_task |= matches!(status, Some("completed" | "failed" | "cancelled"))
                    // Not a task at all: the poller gives up on it.
                    || status.is_none();
            }
            ("tasks/get", _) => self.ended_task = true,
            _ => {}
        }
        out.push(answer);
        if self.turn.is_multiple_of(self.h.extra_every) && !self.unsolicited.is_empty() {
            let base = self.unsolicited[self.pick(1) % self.unsolicited.len()].clone();
            if let Ok(m) = Message::from_value(self.damage(base)) {
                out.push(m);
            }
        }
        out
    }
}

enum Front {
    Legacy(Arc<LegacySession>),
    Modern(Arc<ModernSession>),
}

impl Front {
    fn feed(&self, m: Message) {
        match self {
            Front::Legacy(s) => s.handle_client(m),
            Front::Modern(s) => s.handle_client(m),
        }
    }
}

async fn start(
    legacy_client: bool,
    h: Hostility,
) -> (Front, mpsc::UnboundedReceiver<Message>, Arc<Mutex<Fake>>) {
    let (conn, events, mut server_end) = channel::pair(Duration::from_secs(10));
    let fake = Arc::new(Mutex::new(Fake::new(!legacy_client, h)));
    let fake_out = fake.clone();
    let to_shim = server_end.to_shim.clone();
    let f = fake.clone();
    tokio::spawn(async move {
        while let Some(msg) = server_end.from_shim.recv().await {
            let replies = f.lock().unwrap().reply(&msg);
            for r in replies {
                let _ = to_shim.send(r);
            }
        }
    });
    let upstream = conn;
    let (to_client, outbox) = mpsc::unbounded_channel();
    let front = if legacy_client {
        let probe = probe_request(Id::Num(0), &json!({"name": "fuzz", "version": "1"}));
        // A hostile discover result too; the shim takes whatever came back.
        let discover = match upstream
            .request(
                "server/discover",
                probe.params().cloned().unwrap_or_default(),
            )
            .await
        {
            Ok(Ok(d)) => d,
            _ => json!({}),
        };
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
    (front, outbox, fake_out)
}

/// A client conversation of the client's revision, unmutated, from the
/// corpus: initialize (legacy) then the client's requests in order.
fn client_script(legacy: bool, picks: &[usize]) -> Vec<Value> {
    let msgs: Vec<Value> = corpus_messages_of(legacy, "c2s")
        .into_iter()
        .filter(|m| m.get("method").is_some())
        .collect();
    let mut script = Vec::new();
    if legacy {
        script.push(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"form": {}}},
            "clientInfo": {"name": "fuzz", "version": "1"}}}),
        );
    }
    script.extend(picks.iter().map(|p| msgs[p % msgs.len()].clone()));
    script
}

async fn run(legacy: bool, h: Hostility, picks: Vec<usize>) -> Result<(), String> {
    let rev = if legacy {
        Revision::Legacy
    } else {
        Revision::Modern
    };
    let (front, mut outbox, fake) = start(legacy, h).await;
    let mut pending: HashMap<Id, String> = HashMap::new();
    let mut may_wait: Vec<Id> = Vec::new();
    // Plain legacy calls: driven to the task's end if the upstream makes one.
    let mut plain_calls: Vec<Id> = Vec::new();
    let receive = |front: &Front, m: Message, pending: &mut HashMap<Id, String>| {
        let v = m.to_value();
        // The upstream's own errors are relayed as they came (JSON-RPC
        // allows an empty message), so only the envelope is checked here.
        check_envelope(&v)?;
        match &m {
            Message::Request(_) => {
                let a = Message::from_value(support::wire::auto_answer(&v))
                    .map_err(|e| e.to_string())?;
                front.feed(a);
            }
            Message::Error(_) => {
                validate(rev, &v, None).map_err(|e| format!("shim error: {e}"))?;
                let id = m.id().ok_or_else(|| format!("error without id: {v}"))?;
                pending
                    .remove(id)
                    .ok_or_else(|| format!("answer to nothing pending: {v}"))?;
            }
            Message::Response(r) => {
                pending
                    .remove(&r.id)
                    .ok_or_else(|| format!("answer to nothing pending: {v}"))?;
            }
            Message::Notification(_) => {}
        }
        Ok::<(), String>(())
    };
    for (n, v) in client_script(legacy, &picks).into_iter().enumerate() {
        let Ok(mut m) = Message::from_value(v) else {
            continue;
        };
        if let Message::Request(r) = &mut m {
            r.id = Id::Str(format!("c-{n}"));
            pending.insert(r.id.clone(), r.method.clone());
            if matches!(r.method.as_str(), "tasks/result" | "subscriptions/listen") {
                may_wait.push(r.id.clone());
            }
            if legacy
                && r.method == "tools/call"
                && r.params.as_ref().and_then(|p| p.get("task")).is_none()
            {
                plain_calls.push(r.id.clone());
            }
        }
        front.feed(m);
        let deadline = tokio::time::Instant::now() + Duration::from_millis(20);
        while let Ok(Some(out)) = tokio::time::timeout_at(deadline, outbox.recv()).await {
            receive(&front, out, &mut pending)?;
        }
    }
    let deadline = tokio::time::Instant::now() + SETTLE;
    let endless_tasks = || {
        let f = fake.lock().unwrap();
        f.made_task && !f.ended_task
    };
    let may_wait = |id: &Id| may_wait.contains(id) || (plain_calls.contains(id) && endless_tasks());
    while pending.keys().any(|id| !may_wait(id)) {
        match tokio::time::timeout_at(deadline, outbox.recv()).await {
            Ok(Some(out)) => receive(&front, out, &mut pending)?,
            Ok(None) | Err(_) => break,
        }
    }
    let hung: Vec<String> = pending
        .iter()
        .filter(|(id, _)| !may_wait(id))
        .map(|(id, m)| format!("{id} ({m})"))
        .collect();
    if !hung.is_empty() {
        return Err(format!(
            "hang: no answer within {SETTLE:?} to {}",
            hung.join(", ")
        ));
    }
    while let Ok(out) = outbox.try_recv() {
        receive(&front, out, &mut pending)?;
    }
    Ok(())
}

fn check(legacy: bool, h: Hostility, picks: Vec<usize>) -> Result<(), TestCaseError> {
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
    let r = rt.block_on(run(legacy, h, picks));
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
    fn legacy_front_survives_a_hostile_modern_server(
        h in arb_hostility(),
        picks in prop::collection::vec(any::<usize>(), 1..8),
    ) {
        check(true, h, picks)?;
    }

    #[test]
    fn modern_front_survives_a_hostile_legacy_server(
        h in arb_hostility(),
        picks in prop::collection::vec(any::<usize>(), 1..8),
    ) {
        check(false, h, picks)?;
    }
}
