//! The task table both reference servers share.
//!
//! Revision-neutral: it stores status, timestamps, the outcome and the
//! outstanding input requests of each task; `legacy` and `modern` render it
//! in their own wire shapes. Every status change is reported through the
//! `on_change` hook so each revision can push its own notification.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

// tokio's Instant, so paused test time moves task retention too.
use tokio::time::Instant;

use serde_json::Value;
use tokio::sync::{oneshot, watch};
use tokio::task::AbortHandle;

use super::seeded::{id as random_id, now_iso};
use super::tools::Call;
use crate::jsonrpc::ErrorObject;
use crate::wire::TaskStatus;

/// How a task (or a plain call) ended: a tool result or a JSON-RPC error.
pub(crate) type Outcome = Result<Value, ErrorObject>;

/// Default retention when the client asks for none (5 minutes).
pub(crate) const DEFAULT_TTL_MS: i64 = 300_000;
/// The retention used when the client asks for none; `--task-ttl-ms`
/// changes it process-wide so load tests can watch tasks expire.
static DEFAULT_TTL: AtomicI64 = AtomicI64::new(DEFAULT_TTL_MS);

/// Sets the retention of tasks whose client asked for none (the modern
/// server's every task: it alone decides), clamped to `1..=`[`MAX_TTL_MS`].
pub(crate) fn set_default_ttl_ms(ms: i64) {
    DEFAULT_TTL.store(ms.clamp(1, MAX_TTL_MS), Ordering::Relaxed);
}

/// Upper bound on a client-requested retention (1 hour): a reference server
/// must not be made to hold results forever.
pub(crate) const MAX_TTL_MS: i64 = 3_600_000;
/// Suggested polling interval; short so tests stay fast.
pub(crate) const POLL_INTERVAL_MS: i64 = 100;
/// The interval advertised; `--poll-interval-ms` changes it process-wide so
/// tests can tell a pushed change from a polled one.
static POLL_INTERVAL: AtomicI64 = AtomicI64::new(POLL_INTERVAL_MS);

/// Sets the advertised polling interval, clamped to `1..=`[`MAX_TTL_MS`].
pub(crate) fn set_poll_interval_ms(ms: i64) {
    POLL_INTERVAL.store(ms.clamp(1, MAX_TTL_MS), Ordering::Relaxed);
}

/// A point-in-time copy of one task, for rendering.
#[derive(Debug, Clone)]
pub(crate) struct TaskView {
    pub(crate) task_id: String,
    pub(crate) status: TaskStatus,
    pub(crate) status_message: Option<String>,
    pub(crate) created_at: String,
    pub(crate) last_updated_at: String,
    pub(crate) ttl_ms: Option<i64>,
    pub(crate) poll_interval_ms: i64,
    /// Set once the task is `completed` or `failed`.
    pub(crate) outcome: Option<Outcome>,
    /// Outstanding input requests (`{method, params}`) by key, oldest first.
    pub(crate) inputs: Vec<(String, Value)>,
}

struct Input {
    key: String,
    request: Value,
    responder: Option<oneshot::Sender<Value>>,
    /// Legacy only: already sent to the client as a JSON-RPC request.
    delivered: bool,
}

struct Entry {
    seq: u64,
    created: Instant,
    view: TaskView,
    inputs: Vec<Input>,
    next_key: u64,
    abort: Option<AbortHandle>,
    version: watch::Sender<u64>,
}

/// Status-change hook; called with the store lock held, so it must not
/// block or call back into the store (sending on an unbounded channel is fine).
pub(crate) type OnChange = Box<dyn Fn(&TaskView) + Send + Sync>;

/// Why a cancel was refused.
pub(crate) enum CancelError {
    Unknown,
    /// The task already ended, in this status.
    Terminal(TaskStatus),
}

/// The task table of one server (legacy: one session; modern: one process).
pub(crate) struct TaskStore {
    inner: Mutex<Inner>,
    on_change: OnChange,
    /// The origin of `createdAt`/`lastUpdatedAt`.
    clock: crate::bridge::Clock,
}

#[derive(Default)]
struct Inner {
    tasks: HashMap<String, Entry>,
    seq: u64,
}

impl TaskStore {
    pub(crate) fn new(on_change: OnChange) -> Arc<Self> {
        Arc::new(Self {
            inner: Mutex::new(Inner::default()),
            on_change,
            clock: crate::bridge::Clock::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic elsewhere must not take every later request down with it.
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        purge_expired(&mut g);
        g
    }

    /// Creates a `working` task; `requested_ttl` is clamped to [`MAX_TTL_MS`].
    pub(crate) fn create(&self, requested_ttl: Option<i64>) -> TaskView {
        let ttl = requested_ttl.filter(|t| *t > 0).map_or_else(
            || DEFAULT_TTL.load(Ordering::Relaxed),
            |t| t.min(MAX_TTL_MS),
        );
        let now = now_iso(&self.clock);
        let view = TaskView {
            task_id: random_id(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: now.clone(),
            last_updated_at: now,
            ttl_ms: Some(ttl),
            poll_interval_ms: POLL_INTERVAL.load(Ordering::Relaxed),
            outcome: None,
            inputs: Vec::new(),
        };
        let mut g = self.lock();
        g.seq += 1;
        let entry = Entry {
            seq: g.seq,
            created: Instant::now(),
            view: view.clone(),
            inputs: Vec::new(),
            next_key: 0,
            abort: None,
            version: watch::channel(0).0,
        };
        g.tasks.insert(view.task_id.clone(), entry);
        view
    }

    pub(crate) fn get(&self, id: &str) -> Option<TaskView> {
        self.lock().tasks.get(id).map(snapshot)
    }

    /// All tasks, oldest first, with their creation sequence numbers.
    pub(crate) fn list(&self) -> Vec<(u64, TaskView)> {
        let g = self.lock();
        let mut all: Vec<_> = g.tasks.values().map(|e| (e.seq, snapshot(e))).collect();
        all.sort_by_key(|(seq, _)| *seq);
        all
    }

    /// Wakes whenever the task changes; `None` for an unknown task.
    pub(crate) fn watch(&self, id: &str) -> Option<watch::Receiver<u64>> {
        self.lock().tasks.get(id).map(|e| e.version.subscribe())
    }

    /// Remembers how to stop the task's worker; a task cancelled before its
    /// worker started gets the worker stopped right away.
    pub(crate) fn set_abort(&self, id: &str, abort: AbortHandle) {
        let mut g = self.lock();
        match g.tasks.get_mut(id) {
            Some(e) if !e.view.status.is_terminal() => e.abort = Some(abort),
            _ => abort.abort(),
        }
    }

    /// Moves a live task to `cancelled` and stops its worker.
    pub(crate) fn cancel(&self, id: &str) -> Result<TaskView, CancelError> {
        let mut g = self.lock();
        let e = g.tasks.get_mut(id).ok_or(CancelError::Unknown)?;
        if e.view.status.is_terminal() {
            return Err(CancelError::Terminal(e.view.status));
        }
        if let Some(a) = e.abort.take() {
            a.abort();
        }
        // Dropping the responders wakes any waiting tool with "cancel".
        e.inputs.clear();
        self.transition(
            e,
            TaskStatus::Cancelled,
            Some("The task was cancelled by request."),
        );
        Ok(snapshot(e))
    }

    /// Records the end of a task; ignored once the task is terminal
    /// (a cancelled task stays cancelled even if its work finished).
    pub(crate) fn finish(&self, id: &str, status: TaskStatus, message: Option<&str>, out: Outcome) {
        let mut g = self.lock();
        if let Some(e) = g.tasks.get_mut(id)
            && !e.view.status.is_terminal()
        {
            e.abort = None;
            e.inputs.clear();
            e.view.outcome = Some(out);
            self.transition(e, status, message);
        }
    }

    /// Starts the worker of task `task_id`, which runs `call` (after the
    /// task's CreateTaskResult is queued, so no status notification can
    /// overtake it). `ending` is where the revisions differ: which status
    /// and message a tool's outcome ends the task with.
    pub(crate) fn start(
        self: &Arc<Self>,
        task_id: String,
        call: Call,
        ending: fn(&Outcome) -> (TaskStatus, Option<String>),
    ) {
        let ctx = TaskCtx {
            store: self.clone(),
            task_id: task_id.clone(),
        };
        let h = tokio::spawn(async move {
            let out = super::tools::run(call, Some(ctx.clone())).await;
            let (status, msg) = ending(&out);
            ctx.store.finish(&ctx.task_id, status, msg.as_deref(), out);
        });
        self.set_abort(&task_id, h.abort_handle());
    }

    /// Registers an input request and parks the task in `input_required`.
    /// The receiver yields the client's answer; it errors if the task ends first.
    pub(crate) fn ask(&self, id: &str, prefix: &str, request: Value) -> oneshot::Receiver<Value> {
        let (tx, rx) = oneshot::channel();
        let mut g = self.lock();
        if let Some(e) = g.tasks.get_mut(id)
            && !e.view.status.is_terminal()
        {
            // Keys are never reused within a task (ext-tasks rule).
            e.next_key += 1;
            let key = format!("{prefix}-{}", e.next_key);
            e.inputs.push(Input {
                key,
                request,
                responder: Some(tx),
                delivered: false,
            });
            self.transition(
                e,
                TaskStatus::InputRequired,
                Some("Waiting for client input."),
            );
        }
        rx
    }

    /// Why `response` does not answer input request `key` of task `id`, if
    /// it does not: an accepted form that lacks a required member. A
    /// server checks what it is given; this one keeps the request open
    /// for a retry, as an MRTR server would.
    pub(crate) fn refusal(&self, id: &str, key: &str, response: &Value) -> Option<String> {
        let g = self.lock();
        let input = g.tasks.get(id)?.inputs.iter().find(|i| i.key == key)?;
        refusal(&input.request, key, response)
    }

    /// Delivers an answer; unknown or already answered keys are ignored.
    /// Returns whether the key was outstanding. `None` means unknown task.
    pub(crate) fn answer(&self, id: &str, key: &str, response: Value) -> Option<bool> {
        let mut g = self.lock();
        let e = g.tasks.get_mut(id)?;
        let Some(pos) = e.inputs.iter().position(|i| i.key == key) else {
            return Some(false);
        };
        let input = e.inputs.remove(pos);
        if let Some(tx) = input.responder {
            let _ = tx.send(response);
        }
        if e.inputs.is_empty() && e.view.status == TaskStatus::InputRequired {
            self.transition(e, TaskStatus::Working, None);
        }
        Some(true)
    }

    /// Legacy: input requests not yet sent to the client, marked as sent now.
    pub(crate) fn take_undelivered(&self, id: &str) -> Vec<(String, Value)> {
        let mut g = self.lock();
        let Some(e) = g.tasks.get_mut(id) else {
            return Vec::new();
        };
        e.inputs
            .iter_mut()
            .filter(|i| !i.delivered)
            .map(|i| {
                i.delivered = true;
                (i.key.clone(), i.request.clone())
            })
            .collect()
    }

    fn transition(&self, e: &mut Entry, status: TaskStatus, message: Option<&str>) {
        e.view.status = status;
        e.view.status_message = message.map(str::to_owned);
        e.view.last_updated_at = now_iso(&self.clock);
        e.version.send_modify(|v| *v += 1);
        (self.on_change)(&snapshot(e));
    }
}

/// Why `response` does not answer the input request `request`
/// (`{method, params}`) filed under `key`, if it does not: an accepted
/// form that lacks a required member. Shared with the rmcp reference server,
/// whose task manager takes any answer.
pub(crate) fn refusal(request: &Value, key: &str, response: &Value) -> Option<String> {
    let accepted = response.get("action").and_then(Value::as_str) == Some("accept");
    if request.get("method").and_then(Value::as_str) != Some("elicitation/create") || !accepted {
        return None;
    }
    let required = request.pointer("/params/requestedSchema/required")?;
    let content = response.get("content");
    required
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .find(|field| content.and_then(|c| c.get(*field)).is_none())
        .map(|field| format!("inputResponses.{key}: the accepted form lacks {field:?}"))
}

fn snapshot(e: &Entry) -> TaskView {
    let mut v = e.view.clone();
    v.inputs = e
        .inputs
        .iter()
        .map(|i| (i.key.clone(), i.request.clone()))
        .collect();
    v
}

/// Drops tasks whose retention has elapsed (lazily, on every access).
fn purge_expired(g: &mut Inner) {
    g.tasks.retain(|_, e| {
        let ttl = e.view.ttl_ms.unwrap_or(i64::MAX).max(0) as u64;
        let alive = e.created.elapsed() < Duration::from_millis(ttl);
        if !alive && let Some(a) = e.abort.take() {
            a.abort();
        }
        alive
    });
}

/// A running task's handle on the store, given to tool code.
#[derive(Clone)]
pub(crate) struct TaskCtx {
    pub(crate) store: Arc<TaskStore>,
    pub(crate) task_id: String,
}

impl TaskCtx {
    /// Asks the client one question mid-task and waits for the answer.
    /// A task that ends meanwhile reads as the client cancelling the form.
    pub(crate) async fn elicit(&self, prefix: &str, params: Value) -> Value {
        let request = serde_json::json!({"method": "elicitation/create", "params": params});
        let rx = self.store.ask(&self.task_id, prefix, request);
        rx.await
            .unwrap_or_else(|_| serde_json::json!({"action": "cancel"}))
    }

    /// Sends the client any input request (`method`: sampling, roots) and
    /// waits for the answer; `null` if the task ends first.
    pub(crate) async fn ask(&self, prefix: &str, method: &str, params: Value) -> Value {
        let request = serde_json::json!({"method": method, "params": params});
        let rx = self.store.ask(&self.task_id, prefix, request);
        rx.await.unwrap_or_default()
    }
}
