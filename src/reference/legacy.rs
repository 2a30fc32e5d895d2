//! The 2025-11-25 reference server: one `initialize` session, tasks in the
//! core, client-chosen task augmentation, blocking `tasks/result`, and
//! mid-task input as real `elicitation/create` requests.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::task::AbortHandle;

use super::legacy_wire::{final_result, initialize, task_json};
use super::lock;
use super::peer::{Outbox, Peer, param_str};
use super::tasks::{CancelError, Outcome, TaskStore, TaskView};
use super::tools::{self, Call};
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message, Notification, Request};
use crate::revision::META_RELATED_TASK;
use crate::wire::LOG_LEVELS;
use crate::wire::TaskStatus;
use crate::wire::legacy::TaskSupport;

/// Tasks per `tasks/list` page; small so pagination is actually exercised.
const PAGE_SIZE: usize = 4;

/// A legacy session. Cheap to clone; clones share the session.
#[derive(Clone)]
pub(crate) struct LegacyServer {
    s: Arc<Shared>,
}

struct Shared {
    peer: Peer,
    store: Arc<TaskStore>,
    /// Requests being worked on, so `notifications/cancelled` can stop them.
    inflight: Mutex<HashMap<Id, AbortHandle>>,
    /// The level the client asked for with `logging/setLevel`; none asked,
    /// no log messages.
    log_level: Mutex<Option<String>>,
    /// `greet` calls answered: the text of [`GREETINGS_URI`].
    greetings: AtomicU64,
    /// Resource URIs the client subscribed to (`resources/subscribe`).
    subscribed: Mutex<HashSet<String>>,
}

/// The one resource: a count that each `greet` call changes, so a
/// subscriber has updates to hear about (and a restarted server's
/// subscriptions can be seen).
pub(crate) const GREETINGS_URI: &str = "mcp-tasks-shim://reference/greetings";

impl LegacyServer {
    pub(crate) fn new(out: Outbox) -> Self {
        let status_out = out.clone();
        // 2025-11-25 pushes every status change, unsolicited.
        let store = TaskStore::new(Box::new(move |v| {
            let _ = status_out.send(Message::notification(
                "notifications/tasks/status",
                task_json(v),
            ));
        }));
        let s = Shared {
            peer: Peer::new(out),
            store,
            inflight: Mutex::new(HashMap::new()),
            log_level: Mutex::new(None),
            greetings: AtomicU64::new(0),
            subscribed: Mutex::new(HashSet::new()),
        };
        Self { s: Arc::new(s) }
    }

    pub(crate) fn handle(&self, msg: Message) {
        match msg {
            Message::Request(r) => self.request(r),
            Message::Notification(n) => self.notification(n),
            other => self.s.peer.route(other),
        }
    }

    fn notification(&self, n: Notification) {
        if n.method == "notifications/cancelled"
            && let Some(id) = n.params.as_ref().and_then(|p| p.get("requestId"))
            && let Ok(id) = serde_json::from_value::<Id>(id.clone())
            && let Some(h) = self.inflight().remove(&id)
        {
            // The requester gave up: stop working and send no answer.
            tracing::info!(%id, "request cancelled by the client");
            h.abort();
        }
    }

    fn request(&self, r: Request) {
        let p = r.params.as_ref();
        let answer = match r.method.as_str() {
            "initialize" => Ok(initialize(p)),
            "ping" => Ok(json!({})),
            "logging/setLevel" => self.set_level(p),
            "tools/list" => Ok(json!({"tools": tools::list(true)})),
            "tools/call" => {
                self.log("debug", || format!("tools/call {}", tool_name(p)));
                if tool_name(p) == "greet" {
                    self.greeted();
                }
                return self.tools_call(r);
            }
            "resources/list" => Ok(json!({"resources": [{
                "uri": GREETINGS_URI,
                "name": "greetings",
                "description": "How many greet calls this server has answered.",
                "mimeType": "text/plain",
            }]})),
            "resources/read" => resource_uri(p).map(|uri| {
                let n = self.s.greetings.load(Ordering::Relaxed);
                json!({"contents": [{"uri": uri, "mimeType": "text/plain", "text": format!("{n} greetings")}]})
            }),
            "resources/subscribe" => resource_uri(p).map(|uri| {
                lock(&self.s.subscribed).insert(uri.to_owned());
                json!({})
            }),
            "resources/unsubscribe" => resource_uri(p).map(|uri| {
                lock(&self.s.subscribed).remove(uri);
                json!({})
            }),
            "tasks/get" => self.task(p).map(|v| task_json(&v)),
            "tasks/result" => return self.tasks_result(r),
            "tasks/list" => self.tasks_list(p),
            "tasks/cancel" => self.tasks_cancel(p),
            m => Err(ShimError::MethodNotFound(m.to_owned())),
        };
        self.s.peer.respond(r.id, answer);
    }

    fn set_level(&self, p: Option<&Value>) -> Result<Value, ShimError> {
        let level = param_str(p, "level")?;
        if !LOG_LEVELS.contains(&level) {
            return Err(ShimError::InvalidParams(format!(
                "unknown log level {level:?}"
            )));
        }
        *lock(&self.s.log_level) = Some(level.to_owned());
        Ok(json!({}))
    }

    /// Counts a `greet` call and tells a subscriber that the count changed.
    fn greeted(&self) {
        self.s.greetings.fetch_add(1, Ordering::Relaxed);
        if lock(&self.s.subscribed).contains(GREETINGS_URI) {
            self.s.peer.send(Message::notification(
                "notifications/resources/updated",
                json!({"uri": GREETINGS_URI}),
            ));
        }
    }

    /// Sends `notifications/message` when the client asked for messages of
    /// `level` or more severe. (The fixture logs each tool call at
    /// `debug`: enough to show which level a session has.)
    fn log(&self, level: &str, data: impl FnOnce() -> String) {
        let rank = |l: &str| LOG_LEVELS.iter().position(|x| *x == l);
        let wanted = lock(&self.s.log_level).as_deref().and_then(rank);
        if wanted.is_some_and(|w| rank(level).is_some_and(|r| r >= w)) {
            self.s.peer.send(Message::notification(
                "notifications/message",
                json!({"level": level, "logger": "reference-server", "data": data()}),
            ));
        }
    }

    /// Runs `work` off the read loop; its outcome answers request `id`
    /// unless the client cancels the request first.
    fn spawn(&self, id: Id, work: impl Future<Output = Outcome> + Send + 'static) {
        let me = self.clone();
        let rid = id.clone();
        let mut inflight = self.inflight();
        let h = tokio::spawn(async move {
            let outcome = work.await;
            me.inflight().remove(&rid);
            me.s.peer.respond_outcome(rid, outcome);
        });
        inflight.insert(id, h.abort_handle());
    }

    fn inflight(&self) -> std::sync::MutexGuard<'_, HashMap<Id, AbortHandle>> {
        lock(&self.s.inflight)
    }

    fn tools_call(&self, r: Request) {
        match self.prepare_call(&r) {
            Ok(None) => {}
            Ok(Some((call, None))) => self.spawn(r.id, tools::run(call, None)),
            Ok(Some((call, Some(ttl)))) => {
                let view = self.s.store.create(ttl);
                self.s
                    .peer
                    .respond(r.id, Ok(json!({"task": task_json(&view)})));
                self.start(view.task_id, call);
            }
            Err(e) => self.s.peer.respond(r.id, Err(e)),
        }
    }

    /// Validates a `tools/call`; `Some(ttl)` in the answer means "as a task".
    /// `Ok(None)` means the call was taken over by an asynchronous flow.
    #[allow(clippy::type_complexity)]
    fn prepare_call(&self, r: &Request) -> Result<Option<(Call, Option<Option<i64>>)>, ShimError> {
        let p = r.params.as_ref();
        let name = param_str(p, "name")?;
        let support = tools::task_support(name)
            .ok_or_else(|| ShimError::InvalidParams(format!("Unknown tool: {name}")))?;
        let task = p.and_then(|p| p.get("task")).filter(|t| !t.is_null());
        // Spec (Tool-Level Negotiation): both violations answer -32601.
        match (support, task) {
            (TaskSupport::Forbidden, Some(_)) => {
                return Err(ShimError::MethodNotFound(format!(
                    "tools/call as a task: tool {name} does not support task augmentation"
                )));
            }
            (TaskSupport::Required, None) => {
                return Err(ShimError::MethodNotFound(format!(
                    "tools/call without params.task: tool {name} must be called as a task"
                )));
            }
            _ => {}
        }
        let ttl = task.map(task_ttl).transpose()?;
        let args = p.and_then(|p| p.get("arguments"));
        if name == "test_tool_with_task" {
            self.with_task_flow(r.id.clone(), args.cloned(), ttl.unwrap_or(None));
            return Ok(None);
        }
        Ok(Some((Call::parse(name, args, None)?, ttl)))
    }

    /// `test_tool_with_task`: ask a plain `elicitation/create` while the
    /// task-augmented call is still unanswered, then create the task.
    fn with_task_flow(&self, id: Id, args: Option<Value>, ttl: Option<i64>) {
        let me = self.clone();
        tokio::spawn(async move {
            let answer =
                me.s.peer
                    .request("elicitation/create", tools::name_question())
                    .await;
            let name = answer
                .ok()
                .and_then(|a| tools::accepted_name(&a))
                .unwrap_or_else(|| "anonymous".to_owned());
            match Call::parse("test_tool_with_task", args.as_ref(), Some(name)) {
                Ok(call) => {
                    let view = me.s.store.create(ttl);
                    me.s.peer.respond(id, Ok(json!({"task": task_json(&view)})));
                    me.start(view.task_id, call);
                }
                Err(e) => me.s.peer.respond(id, Err(e)),
            }
        });
    }

    /// Starts a task's worker once its CreateTaskResult is queued.
    fn start(&self, task_id: String, call: Call) {
        self.s.store.start(task_id, call, ending);
    }

    fn task(&self, p: Option<&Value>) -> Result<TaskView, ShimError> {
        let id = param_str(p, "taskId")?;
        self.s.store.get(id).ok_or(ShimError::UnknownTask)
    }

    /// Blocks until the task ends; meanwhile its input requests go to the
    /// client as real requests, tagged with the task.
    fn tasks_result(&self, r: Request) {
        let id = match param_str(r.params.as_ref(), "taskId") {
            Ok(id) => id.to_owned(),
            Err(e) => return self.s.peer.respond(r.id, Err(e)),
        };
        let me = self.clone();
        self.spawn(r.id, async move {
            let mut changed =
                me.s.store
                    .watch(&id)
                    .ok_or(ShimError::UnknownTask.to_error_object())?;
            loop {
                let view =
                    me.s.store
                        .get(&id)
                        .ok_or(ShimError::UnknownTask.to_error_object())?;
                if view.status.is_terminal() {
                    return final_result(&view);
                }
                for (key, request) in me.s.store.take_undelivered(&id) {
                    me.deliver(id.clone(), key, request);
                }
                if changed.changed().await.is_err() {
                    // The task was dropped (ttl elapsed) while we waited.
                    return Err(ShimError::UnknownTask.to_error_object());
                }
            }
        });
    }

    /// Sends one input request to the client and feeds the answer back.
    fn deliver(&self, task_id: String, key: String, request: Value) {
        let me = self.clone();
        tokio::spawn(async move {
            let method = request["method"].as_str().unwrap_or("elicitation/create");
            let mut params = request.get("params").cloned().unwrap_or_else(|| json!({}));
            params["_meta"] = json!({META_RELATED_TASK: {"taskId": task_id}});
            let answer = me.s.peer.request(method, params).await.unwrap_or_else(|e| {
                tracing::warn!(error = ?e, "client refused an input request; treating it as cancel");
                json!({"action": "cancel"})
            });
            me.s.store.answer(&task_id, &key, answer);
        });
    }

    fn tasks_list(&self, p: Option<&Value>) -> Result<Value, ShimError> {
        let after = match p.and_then(|p| p.get("cursor")) {
            None | Some(Value::Null) => 0,
            Some(c) => c
                .as_str()
                .and_then(|c| c.strip_prefix("after-"))
                .and_then(|n| n.parse::<u64>().ok())
                .ok_or_else(|| ShimError::InvalidParams("invalid cursor".into()))?,
        };
        let rest: Vec<_> = self
            .s
            .store
            .list()
            .into_iter()
            .filter(|(s, _)| *s > after)
            .collect();
        let page = &rest[..rest.len().min(PAGE_SIZE)];
        let mut result =
            json!({"tasks": page.iter().map(|(_, v)| task_json(v)).collect::<Vec<_>>()});
        if rest.len() > PAGE_SIZE
            && let Some((last, _)) = page.last()
        {
            result["nextCursor"] = json!(format!("after-{last}"));
        }
        Ok(result)
    }

    fn tasks_cancel(&self, p: Option<&Value>) -> Result<Value, ShimError> {
        let id = param_str(p, "taskId")?;
        match self.s.store.cancel(id) {
            Ok(v) => Ok(task_json(&v)),
            Err(CancelError::Unknown) => Err(ShimError::UnknownTask),
            Err(CancelError::Terminal(s)) => Err(ShimError::TaskTerminal(s.to_string())),
        }
    }
}

/// `params.name` of a `tools/call`, for logs ("?" when missing).
fn tool_name(p: Option<&Value>) -> &str {
    p.and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("?")
}

/// The `uri` of a `resources/*` request, if it names the one resource.
fn resource_uri(p: Option<&Value>) -> Result<&str, ShimError> {
    let uri = param_str(p, "uri")?;
    if uri == GREETINGS_URI {
        Ok(uri)
    } else {
        Err(ShimError::ResourceNotFound(uri.to_owned()))
    }
}

/// How a tool's outcome ends its task in 2025-11-25: a tool result with
/// isError also means `failed`.
fn ending(out: &Outcome) -> (TaskStatus, Option<String>) {
    let (status, msg) = match out {
        Ok(v) if v.get("isError") == Some(&Value::Bool(true)) => {
            (TaskStatus::Failed, "The tool reported an error.".to_owned())
        }
        Ok(_) => (TaskStatus::Completed, "The task completed.".to_owned()),
        Err(e) => (TaskStatus::Failed, e.message.clone()),
    };
    (status, Some(msg))
}

/// Reads `params.task` (schema `TaskMetadata`: an object whose `ttl`, if
/// any, is an integer). A malformed one is the caller's error, not a
/// silent plain call or a task with the default retention.
fn task_ttl(task: &Value) -> Result<Option<i64>, ShimError> {
    let bad = |why: &str| ShimError::InvalidParams(format!("params.task: {why}"));
    let task = task.as_object().ok_or_else(|| bad("must be an object"))?;
    match task.get("ttl") {
        None | Some(Value::Null) => Ok(None),
        Some(ttl) => match ttl.as_i64() {
            Some(ms) if ms >= 0 => Ok(Some(ms)),
            _ => Err(bad("ttl must be a non-negative integer of milliseconds")),
        },
    }
}
