//! The 2026-07-28 reference server with the `io.modelcontextprotocol/tasks`
//! extension: no handshake, `_meta` checked on every request, server-chosen
//! tasks, inline payloads in `tasks/get`, `tasks/update` for mid-task input,
//! MRTR before a task exists, and `notifications/tasks` on listen streams.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::lock;
use super::modern_wire::{
    CheckedMeta, check_meta, create_result, detailed, discover, finish_result, task_notification,
};
use super::peer::{Outbox, Peer, param_str};
use super::seeded::id as random_id;
use super::tasks::{CancelError, Outcome, TaskStore, TaskView};
use super::tools::{self, Call, USER_NAME_KEY};
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message, Request};
use crate::revision::META_SUBSCRIPTION_ID;
use crate::wire::legacy::TaskSupport;
use crate::wire::modern::result_type;
use crate::wire::{TaskStatus, from_value};

/// How long an MRTR `requestState` stays redeemable.
const REQUEST_STATE_TTL: Duration = Duration::from_secs(600);

/// Methods this server knows; everything else (including the removed
/// `tasks/result` and `tasks/list`) is `-32601` before any other check.
pub(super) const METHODS: &[&str] = &[
    "server/discover",
    "tools/list",
    "tools/call",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "subscriptions/listen",
];

/// Off: `subscriptions/listen` is unknown here (`--no-listen`).
static LISTEN: AtomicBool = AtomicBool::new(true);

pub(super) fn disable_listen() {
    LISTEN.store(false, Ordering::Relaxed);
}

/// Open listen streams: subscription (= listen request) id → task ids.
type Subs = Arc<Mutex<HashMap<Id, HashSet<String>>>>;

/// The modern server. Cheap to clone; clones share state.
#[derive(Clone)]
pub(crate) struct ModernServer {
    s: Arc<Shared>,
}

struct Shared {
    peer: Peer,
    store: Arc<TaskStore>,
    subs: Subs,
    /// Outstanding MRTR `requestState` tokens and when they were minted.
    states: Mutex<HashMap<String, Instant>>,
}

impl ModernServer {
    pub(crate) fn new(out: Outbox) -> Self {
        let subs: Subs = Arc::default();
        let (hook_subs, hook_out) = (subs.clone(), out.clone());
        // Status pushes go only to listen streams that asked for the task.
        let store = TaskStore::new(Box::new(move |v| {
            for (sub, ids) in lock(&hook_subs).iter() {
                if ids.contains(&v.task_id) {
                    let _ = hook_out.send(task_notification(sub, v));
                }
            }
        }));
        let s = Shared {
            peer: Peer::new(out),
            store,
            subs,
            states: Mutex::new(HashMap::new()),
        };
        Self { s: Arc::new(s) }
    }

    pub(crate) fn handle(&self, msg: Message) {
        match msg {
            Message::Request(r) => {
                let id = r.id.clone();
                if let Some(answer) = self.request(r) {
                    self.s.peer.respond(id, answer.map(finish_result));
                }
            }
            Message::Notification(n) if n.method == "notifications/cancelled" => {
                // Cancelling a listen request closes that stream.
                if let Some(id) = n.params.as_ref().and_then(|p| p.get("requestId"))
                    && let Ok(id) = serde_json::from_value::<Id>(id.clone())
                {
                    lock(&self.s.subs).remove(&id);
                }
            }
            Message::Notification(_) => {}
            other => tracing::warn!(?other, "a modern client never answers the server; ignored"),
        }
    }

    /// `None` when the answer is sent later (long calls, listen streams).
    fn request(&self, r: Request) -> Option<Result<Value, ShimError>> {
        let known = METHODS.contains(&r.method.as_str())
            && (r.method != "subscriptions/listen" || LISTEN.load(Ordering::Relaxed));
        if !known {
            return Some(Err(ShimError::MethodNotFound(r.method)));
        }
        let p = r.params.as_ref();
        let meta = match check_meta(p) {
            Ok(m) => m,
            Err(e) => return Some(Err(e)),
        };
        let method = r.method.as_str();
        // Checked before any task lookup, as the extension requires.
        if method.starts_with("tasks/") && !meta.declares_tasks() {
            return Some(Err(ShimError::TasksExtensionRequired));
        }
        Some(match method {
            "server/discover" => Ok(discover()),
            "tools/list" => {
                Ok(json!({"tools": tools::list(false), "ttlMs": 0, "cacheScope": "public"}))
            }
            "tools/call" => return self.tools_call(&r, meta).transpose(),
            "tasks/get" => self.task(p).map(|v| detailed(&v)),
            "tasks/update" => self.tasks_update(p),
            "tasks/cancel" => self.tasks_cancel(p),
            _ => return self.listen(&r, meta).err().map(Err),
        })
    }

    fn tools_call(&self, r: &Request, meta: CheckedMeta) -> Result<Option<Value>, ShimError> {
        let p = r.params.as_ref();
        let name = param_str(p, "name")?;
        let support = tools::task_support(name)
            .ok_or_else(|| ShimError::InvalidParams(format!("Unknown tool: {name}")))?;
        let responses = p.and_then(|p| p.get("inputResponses"));
        if responses.is_some_and(|r| !r.is_object()) {
            return Err(ShimError::InvalidParams(
                "\"inputResponses\" must be an object".into(),
            ));
        }
        let ext = meta.declares_tasks();
        if support == TaskSupport::Required && !ext {
            return Err(ShimError::TasksExtensionRequired);
        }
        // `params.task` (a 2025 hint) is ignored: the server alone decides.
        let args = p.and_then(|p| p.get("arguments"));
        let pre_answer = if name == "test_tool_with_task" {
            match responses.and_then(|r| r.get(USER_NAME_KEY)) {
                None => return Ok(Some(self.ask_name())),
                Some(answer) => {
                    self.redeem_state(p)?;
                    Some(tools::accepted_name(answer).unwrap_or_else(|| "anonymous".into()))
                }
            }
        } else {
            None
        };
        let call = Call::parse(name, args, pre_answer)?;
        if ext && support != TaskSupport::Forbidden {
            let view = self.s.store.create(None);
            self.s
                .peer
                .respond(r.id.clone(), Ok(finish_result(create_result(&view))));
            self.start(view.task_id, call);
        } else {
            let (peer, id) = (self.s.peer.outbox(), r.id.clone());
            tokio::spawn(async move {
                let msg = match tools::run(call, None).await {
                    Ok(v) => Message::response(id, finish_result(v)),
                    Err(e) => Message::error(Some(id), e),
                };
                let _ = peer.send(msg);
            });
        }
        Ok(None)
    }

    /// MRTR round one of `test_tool_with_task`: no task yet, just a question.
    fn ask_name(&self) -> Value {
        let state = random_id();
        let mut states = lock(&self.s.states);
        states.retain(|_, t| t.elapsed() < REQUEST_STATE_TTL);
        states.insert(state.clone(), Instant::now());
        json!({
            "resultType": result_type::INPUT_REQUIRED,
            "inputRequests": {USER_NAME_KEY: {"method": "elicitation/create", "params": tools::name_question()}},
            "requestState": state,
        })
    }

    /// A retry may omit `requestState` (it is optional in MRTR), but one we
    /// never issued, or one that expired, is refused.
    fn redeem_state(&self, p: Option<&Value>) -> Result<(), ShimError> {
        match p.and_then(|p| p.get("requestState")) {
            None | Some(Value::Null) => Ok(()),
            Some(Value::String(s)) => {
                let states = lock(&self.s.states);
                match states.get(s) {
                    Some(t) if t.elapsed() < REQUEST_STATE_TTL => Ok(()),
                    _ => Err(ShimError::InvalidParams(
                        "unknown or expired requestState".into(),
                    )),
                }
            }
            Some(_) => Err(ShimError::InvalidParams(
                "\"requestState\" must be a string".into(),
            )),
        }
    }

    /// Starts a task's worker once its CreateTaskResult is queued.
    fn start(&self, task_id: String, call: Call) {
        self.s.store.start(task_id, call, ending);
    }

    fn task(&self, p: Option<&Value>) -> Result<TaskView, ShimError> {
        let id = param_str(p, "taskId")?;
        self.s.store.get(id).ok_or(ShimError::UnknownTask)
    }

    fn tasks_update(&self, p: Option<&Value>) -> Result<Value, ShimError> {
        let id = param_str(p, "taskId")?;
        let responses = p
            .and_then(|p| p.get("inputResponses"))
            .and_then(Value::as_object)
            .ok_or_else(|| {
                ShimError::InvalidParams("\"inputResponses\" must be an object".into())
            })?;
        self.s.store.get(id).ok_or(ShimError::UnknownTask)?;
        // All or nothing: a refused answer leaves every key open.
        if let Some(why) = responses
            .iter()
            .find_map(|(key, answer)| self.s.store.refusal(id, key, answer))
        {
            return Err(ShimError::InvalidParams(why));
        }
        for (key, answer) in responses {
            // Unknown or already answered keys are ignored (ext-tasks rule).
            self.s.store.answer(id, key, answer.clone());
        }
        Ok(json!({}))
    }

    fn tasks_cancel(&self, p: Option<&Value>) -> Result<Value, ShimError> {
        let id = param_str(p, "taskId")?;
        match self.s.store.cancel(id) {
            Ok(_) | Err(CancelError::Terminal(_)) => Ok(json!({})),
            Err(CancelError::Unknown) => Err(ShimError::UnknownTask),
        }
    }

    /// Opens a listen stream: acknowledge first, then register, then push
    /// the current state of each task (so a change between the two is not lost).
    fn listen(&self, r: &Request, meta: CheckedMeta) -> Result<(), ShimError> {
        let filter = r
            .params
            .as_ref()
            .and_then(|p| p.get("notifications"))
            .filter(|n| n.is_object())
            .ok_or_else(|| {
                ShimError::InvalidParams("\"notifications\" must be an object".into())
            })?;
        let mut agreed = json!({});
        let mut ids = HashSet::new();
        if let Some(wanted) = filter.get("taskIds") {
            if !meta.declares_tasks() {
                return Err(ShimError::TasksExtensionRequired);
            }
            let wanted: Vec<String> = from_value("notifications.taskIds", wanted)?;
            ids = wanted
                .into_iter()
                .filter(|t| self.s.store.get(t).is_some())
                .collect();
            agreed["taskIds"] = json!(ids.iter().collect::<Vec<_>>());
        }
        let sub = r.id.clone();
        self.s.peer.send(Message::notification(
            "notifications/subscriptions/acknowledged",
            json!({"notifications": agreed, "_meta": {META_SUBSCRIPTION_ID: sub}}),
        ));
        lock(&self.s.subs).insert(sub.clone(), ids.clone());
        for v in ids.iter().filter_map(|t| self.s.store.get(t)) {
            self.s.peer.send(task_notification(&sub, &v));
        }
        Ok(())
    }
}

/// How a tool's outcome ends its task in 2026-07-28: `failed` is for
/// JSON-RPC errors only; a tool result with isError still ends
/// `completed`.
fn ending(out: &Outcome) -> (TaskStatus, Option<String>) {
    match out {
        Ok(_) => (TaskStatus::Completed, None),
        Err(e) => (
            TaskStatus::Failed,
            Some(format!("Tool execution failed: {}", e.message)),
        ),
    }
}
