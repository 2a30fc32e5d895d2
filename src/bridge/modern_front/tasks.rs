//! The 2026-07-28 `tasks/*` methods and task notifications over a legacy
//! upstream.
//!
//! Every task the shim creates gets one background `tasks/result` call
//! upstream: it is how 2025-11-25 servers deliver mid-task input (as
//! server→client requests tagged with the task) and its answer is the
//! task's payload, cached once for every later `tasks/get`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::calls::RoundKeys;
use super::{LiveTask, ModernFront, ModernSession, lock, require_tasks};
use crate::bridge::cancel::{IfDropped, cancelled_id, spawn_cleanup};
use crate::bridge::{Outbox, Route};
use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, Message, Request};
use crate::ledger::TaskRecord;
use crate::revision::META_SUBSCRIPTION_ID;
use crate::scope::Scope;
use crate::translate::{input, notify, session as tsession, task as ttask};
use crate::upstream::RpcResult;
use crate::wire::modern::{Payload, RequestMeta, result_type};
use crate::wire::{TaskStatus, from_value, legacy};

/// How long `tasks/get` waits for the payload of a task that just ended.
const PAYLOAD_WAIT: Duration = Duration::from_secs(10);

/// How long a request tagged with a task the shim does not track yet waits
/// for that task's creation answer before it is refused.
const EARLY_INPUT_GRACE: Duration = Duration::from_secs(5);

/// A list whose changes a listen stream can ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ListKind {
    Tools,
    Prompts,
    Resources,
}

/// The `subscriptions/listen` filter's members have the schema's types
/// (`null` reads as absent): a flag that is no boolean was acknowledged
/// as not asked, and a `taskIds` that is no list of strings as empty, so
/// the client waited for notifications that never came.
fn check_listen_filter(filter: &Value) -> Result<(), ShimError> {
    for k in ListKind::ALL {
        let key = k.filter_key();
        if filter
            .get(key)
            .is_some_and(|v| !v.is_null() && !v.is_boolean())
        {
            return Err(ShimError::InvalidParams(format!(
                "params.notifications.{key} must be a boolean"
            )));
        }
    }
    for key in ["taskIds", "resourceSubscriptions"] {
        let strings = |v: &Value| v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
        if filter.get(key).is_some_and(|v| !v.is_null() && !strings(v)) {
            return Err(ShimError::InvalidParams(format!(
                "params.notifications.{key} must be a list of strings"
            )));
        }
    }
    Ok(())
}

impl ListKind {
    const ALL: [ListKind; 3] = [ListKind::Tools, ListKind::Prompts, ListKind::Resources];

    /// The capability (`<name>.listChanged`) the upstream declares.
    fn capability(self) -> &'static str {
        match self {
            ListKind::Tools => "tools",
            ListKind::Prompts => "prompts",
            ListKind::Resources => "resources",
        }
    }

    /// The listen filter member, and the acknowledgement's.
    fn filter_key(self) -> &'static str {
        match self {
            ListKind::Tools => "toolsListChanged",
            ListKind::Prompts => "promptsListChanged",
            ListKind::Resources => "resourcesListChanged",
        }
    }

    /// The kind whose change `method` announces.
    pub(super) fn of_notification(method: &str) -> Option<ListKind> {
        Self::ALL.into_iter().find(|k| k.notification() == method)
    }

    fn notification(self) -> &'static str {
        match self {
            ListKind::Tools => "notifications/tools/list_changed",
            ListKind::Prompts => "notifications/prompts/list_changed",
            ListKind::Resources => "notifications/resources/list_changed",
        }
    }
}

/// One `subscriptions/listen` stream.
#[derive(Debug)]
pub(super) struct Subscription {
    id: Id,
    task_ids: Vec<String>,
    /// The list changes it asked for (and the upstream declares).
    lists: Vec<ListKind>,
    out: Outbox,
    /// The last `notifications/tasks` params sent per task: the same news
    /// twice (two paths learning one change, say a lost task's failed
    /// `tasks/result` and the loss itself) is sent once.
    last_sent: HashMap<String, Value>,
}

impl ModernFront {
    /// A request tagged with `task_id`: captured as task input, or, if the
    /// task is not tracked yet (a server may ask before or right after it
    /// answers the creating `tools/call`), kept until [`ModernSession::track`]
    /// claims it or the grace period ends.
    pub(super) async fn capture_or_defer(self: &Arc<Self>, task_id: String, req: Request) {
        let mut early = lock(&self.early);
        if let Some(notify) = self.capture_task_input(&task_id, &req) {
            drop(early);
            if let Some(scope) = notify {
                self.notify_subscribers(&scope, &task_id, None).await;
            }
            return;
        }
        let id = req.id.clone();
        early.push((task_id, req));
        drop(early);
        let front = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(EARLY_INPUT_GRACE).await;
            let stale = {
                let mut early = lock(&front.early);
                let at = early.iter().position(|(_, r)| r.id == id);
                at.map(|i| early.remove(i).1)
            };
            if let Some(req) = stale {
                front.refuse(req);
            }
        });
    }

    /// Stores an upstream task input request; `None` if the task is not
    /// ours, else the scope whose listen streams are to hear of it (told
    /// by the caller, with no lock held: that reads the ledger), if any.
    pub(super) fn capture_task_input(&self, task_id: &str, req: &Request) -> Option<Option<Scope>> {
        let mut tasks = lock(&self.tasks);
        let live = tasks.get_mut(task_id)?;
        live.seq += 1;
        let key = input::input_key(&req.method, live.seq);
        let (modern, _) = input::legacy_request_to_input(req);
        if let Some(why) = live.closed {
            drop(tasks);
            let asked = std::collections::BTreeMap::from([(key, (req.id.clone(), modern))]);
            self.answer_for_the_client(task_id, asked, why);
            return Some(None);
        }
        live.inputs.insert(key, (req.id.clone(), modern));
        live.asked.send_modify(|n| *n += 1);
        Some(Some(live.scope.clone()))
    }

    /// An upstream `notifications/tasks/status`.
    pub(super) async fn status_changed(&self, params: &Value) {
        let Ok(task) = from_value::<legacy::Task>("task status", params) else {
            tracing::warn!("malformed notifications/tasks/status from upstream");
            return;
        };
        let scope = lock(&self.tasks)
            .get(&task.task_id)
            .map(|l| l.scope.clone());
        if let Some(scope) = scope {
            // Terminal statuses are announced when their payload arrives.
            if !task.status.is_terminal() {
                let id = task.task_id.clone();
                // Kept, so that the next view of the task (the question
                // captured, a tasks/get) shows this status message too,
                // not the one seen before.
                let stored = self
                    .ledger
                    .update(&scope, &id, self.clock.now_ms(), &mut |r| {
                        if !r.is_terminal() && !r.cancel_pinned {
                            r.task = task.clone();
                        }
                    })
                    .await;
                if let Err(e) = stored {
                    tracing::error!(task = %id, error = %e, "could not store a task's new status");
                }
                self.notify_subscribers(&scope, &id, Some(task)).await;
            }
        }
    }

    /// No client will answer `task_id`'s questions any more (`why`): the
    /// open ones are answered for it now, and any that still comes at once.
    pub(super) fn close_inputs(&self, task_id: &str, why: &'static str) {
        let asked = lock(&self.tasks)
            .get_mut(task_id)
            .map(|live| {
                live.closed = Some(why);
                std::mem::take(&mut live.inputs)
            })
            .unwrap_or_default();
        self.answer_for_the_client(task_id, asked, why);
    }

    /// Answers the server's open questions about task `task_id` (key →
    /// the server's request id and the request), which no client will
    /// answer any more (`why`): an elicitation is cancelled, anything else
    /// refused, so that the server is not left waiting on them.
    fn answer_for_the_client(
        &self,
        task_id: &str,
        asked: std::collections::BTreeMap<String, (Id, Value)>,
        why: &str,
    ) {
        for (key, (id, request)) in asked {
            tracing::info!(task = %task_id, %key, %why, "the server's open question answered for the client");
            let method = request.get("method").and_then(Value::as_str);
            self.answer_instead(id, method, why);
        }
    }

    /// Answers server request `id` (of `method`) that no client will
    /// answer (`why`): an elicitation is cancelled, anything else refused,
    /// so that the server is not left waiting on it.
    pub(super) fn answer_instead(&self, id: Id, method: Option<&str>, why: &str) {
        let answer = match method {
            Some("elicitation/create") => Ok(json!({"action": "cancel"})),
            _ => Err(ShimError::Internal(why.to_owned()).into()),
        };
        let _ = self.upstream.respond(id, answer);
    }

    /// Starts the background `tasks/result` call of a tracked task; its
    /// answer is cached in the ledger as the task's payload.
    fn watch_outcome(self: &Arc<Self>, scope: Scope, id: String) {
        let front = self.clone();
        tokio::spawn(async move {
            let outcome = front.await_outcome(&id).await;
            let reports = lock(&front.tasks)
                .get(&id)
                .is_some_and(|live| live.progress.is_some());
            if reports {
                // Its last progress is handled before its route goes.
                front.upstream.events_handled().await;
            }
            let payload = match outcome {
                Ok(r) => Payload::Result(ttask::strip_related_task(r)),
                Err(e) => Payload::Error(e),
            };
            // The status the payload ends in, as tasks/get would say:
            // asked first, so that the outcome and its status are stored
            // in one write. Two writes left a window in which a client was
            // told `completed` while the ledger still said `working`, and a
            // shim stopped then lost the task's end to its successor.
            // A driven task has no record to store it in, and its caller
            // waits on the outcome: no extra round trip for it.
            let driven = lock(&front.tasks).get(&id).is_some_and(|l| l.driven);
            let ended = if driven {
                None
            } else {
                match front
                    .upstream
                    .request("tasks/get", json!({"taskId": id}))
                    .await
                {
                    Ok(Ok(v)) => from_value::<legacy::Task>("task", &v).ok(),
                    _ => None,
                }
            };
            let now = front.clock.now_ms();
            // No record: a driven task (see `LiveTask::driven`), or one
            // already expired; nobody will read its status then.
            // A task already settled in the ledger (marked lost when the
            // child died, whose `tasks/result` then failed too) keeps that
            // outcome, and its listen streams are not told twice.
            // Kept for later by a store that fails now (`update_kept`): the
            // outcome is fetched once, and must not be lost to an outage.
            let settled = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let (flag, outcome) = (settled.clone(), payload.clone());
            let change: crate::ledger::KeptChange = Arc::new(move |r| {
                if r.is_terminal() && r.payload != Payload::None {
                    flag.store(true, std::sync::atomic::Ordering::Relaxed);
                } else {
                    r.payload = outcome.clone();
                    if let Some(t) = &ended {
                        r.task = t.clone();
                    }
                }
            });
            if let Err(e) = front.ledger.update_kept(&scope, &id, now, change).await {
                // Kept, where the store can, status and all.
                tracing::error!(task = %id, error = %e, "could not store a task's outcome");
            }
            // The task has ended (a cancel's error can come before the
            // cancel's own answer): nobody will answer what it asked.
            front.close_inputs(&id, "the task has ended");
            if let Some(live) = lock(&front.tasks).get_mut(&id) {
                live.outcome.send_replace(Some(payload.clone()));
                // It has ended: no more progress.
                live.progress = None;
            }
            if settled.load(std::sync::atomic::Ordering::Relaxed) {
                return;
            }
            front.notify_subscribers(&scope, &id, None).await;
        });
    }

    /// The task's outcome: the answer to its `tasks/result`, asked again
    /// while the task still runs upstream. One wait is bounded by the
    /// upstream's request timeout (or cut by a dropped HTTP connection);
    /// the task is not, and a job may well outlast `--request-timeout-s`.
    /// Some servers do not block either: they refuse `tasks/result` at once
    /// ("not completed yet") while the task works. An error answered while
    /// the last `tasks/get` said the task runs is such a "not ready": the
    /// task is polled (at its `pollInterval`) until it has ended, then asked
    /// again. Only an error about an ended task is its outcome, and so is a
    /// wait that fails while the server no longer answers for the task (it
    /// is gone, or so is the upstream).
    async fn await_outcome(&self, id: &str) -> RpcResult {
        // A terminal task answers `tasks/result` at once: failing again
        // then is the upstream's answer, not a wait cut short.
        let mut ended_and_failed = 0;
        // What the last `tasks/get` said; the task was running when the
        // shim took it up.
        let mut seen_ended = false;
        loop {
            let (failed, not_ready) = match self
                .upstream
                .request("tasks/result", json!({"taskId": id}))
                .await
            {
                Ok(Ok(result)) => return Ok(result),
                Ok(Err(refused)) if seen_ended => return Err(refused),
                Ok(Err(refused)) => (refused, true),
                Err(e) => (e.into(), false),
            };
            let mut status = None;
            loop {
                let seen = match self.call("tasks/get", json!({"taskId": id})).await {
                    Ok(v) => from_value::<legacy::Task>("task", &v).ok(),
                    Err(_) => None,
                };
                let wanted = lock(&self.tasks).contains_key(id);
                let Some(task) = seen.filter(|_| wanted) else {
                    return Err(failed);
                };
                let first = status.is_none();
                let entered_input = task.status == TaskStatus::InputRequired
                    && status != Some(TaskStatus::InputRequired);
                status = Some(task.status);
                seen_ended = task.status.is_terminal();
                // A timed-out wait is asked again at once; a refusal only
                // once the task has ended, or when it asks for input (which
                // a 2025-11-25 server may deliver on `tasks/result` only).
                if !not_ready || seen_ended || (entered_input && !first) {
                    break;
                }
                let interval = task
                    .poll_interval
                    .map_or(self.config.default_poll_ms, |p| p.max(0) as u64)
                    .max(self.config.min_poll_ms);
                tokio::time::sleep(Duration::from_millis(interval)).await;
            }
            if seen_ended && !not_ready {
                ended_and_failed += 1;
                if ended_and_failed > 2 {
                    return Err(failed);
                }
            }
            tracing::info!(task = %id, status = ?status, error = %failed.message, "waiting again for a task's result");
        }
    }

    /// `tasks/cancel` upstream for a task whose call was cancelled: one
    /// driven for it, or one its creation made after the client had gone.
    pub(super) async fn cancel_driven(self: Arc<Self>, task_id: String) {
        // Its call is gone: nothing waits for the task here any more.
        lock(&self.tasks).remove(&task_id);
        match self.call("tasks/cancel", json!({"taskId": task_id})).await {
            Ok(_) => tracing::info!(task = %task_id, "call cancelled; its task cancelled upstream"),
            Err(e) => {
                tracing::info!(task = %task_id, code = e.code, "could not cancel a driven task")
            }
        }
    }

    /// Sends `notifications/tasks` to the scope's listen streams that
    /// follow `task_id`.
    pub(super) async fn notify_subscribers(
        &self,
        scope: &Scope,
        task_id: &str,
        task: Option<legacy::Task>,
    ) {
        let Some((task, payload)) = self.view(scope, task_id, task).await else {
            return;
        };
        for s in self
            .live_sessions()
            .into_iter()
            .filter(|s| s.scope == *scope)
        {
            for sub in lock(&s.subscriptions)
                .iter_mut()
                .filter(|sub| sub.task_ids.iter().any(|t| t == task_id))
            {
                let params = notify::status_to_modern(&task, &payload, &sub.id);
                if sub.last_sent.get(task_id) == Some(&params) {
                    continue;
                }
                sub.last_sent.insert(task_id.to_owned(), params.clone());
                let status = Message::notification(notify::MODERN_STATUS, params);
                let _ = sub.out.send(Route::During(sub.id.clone()), status);
            }
        }
    }

    /// What a task notification says of `task_id`: `task` (or the ledger's
    /// last view of it) with its payload. A store that cannot be read
    /// leaves out what only the record holds (logged).
    async fn view(
        &self,
        scope: &Scope,
        task_id: &str,
        task: Option<legacy::Task>,
    ) -> Option<(legacy::Task, Payload)> {
        let rec = self
            .ledger
            .get(scope, task_id, self.clock.now_ms())
            .await
            .unwrap_or_else(|e| {
                tracing::error!(task = %task_id, error = %e, "could not read a task to tell its listeners");
                None
            });
        let mut task = task.or_else(|| rec.as_ref().map(|r| r.task.clone()))?;
        crate::bridge::bounded_ttl(&mut task.ttl, self.config.max_task_ttl_ms);
        if task.status == crate::wire::TaskStatus::Working && self.pending_inputs(task_id).is_some()
        {
            task.status = crate::wire::TaskStatus::InputRequired;
        }
        let payload = self.payload_for(task_id, &task, rec.as_ref());
        Some((task, payload))
    }

    pub(super) fn pending_inputs(&self, task_id: &str) -> Option<serde_json::Map<String, Value>> {
        let tasks = lock(&self.tasks);
        let live = tasks.get(task_id)?;
        let map: serde_json::Map<_, _> = live
            .inputs
            .iter()
            .map(|(k, (_, v))| (k.clone(), v.clone()))
            .collect();
        (!map.is_empty()).then_some(map)
    }

    fn payload_for(&self, task_id: &str, task: &legacy::Task, rec: Option<&TaskRecord>) -> Payload {
        match (task.status.is_terminal(), rec) {
            (true, Some(r)) => r.payload.clone(),
            (false, _) => self
                .pending_inputs(task_id)
                .map_or(Payload::None, Payload::Input),
            _ => Payload::None,
        }
    }
}

impl ModernSession {
    /// Records a task the legacy server created and starts its background
    /// `tasks/result` call. A task the ledger refuses is cancelled upstream.
    /// A task `driven` for a plain call gets no ledger record: nobody can
    /// ask for it by id, and it must not count against the client's cap
    /// (the client asked for no task), as the legacy front's driven tasks
    /// do not.
    pub(super) async fn track(
        self: &Arc<Self>,
        created: &Value,
        driven: bool,
    ) -> Result<(), ErrorObject> {
        let created: legacy::CreateTaskResult = from_value("CreateTaskResult", created)?;
        let mut task = created.task;
        crate::bridge::bounded_ttl(&mut task.ttl, self.front.config.max_task_ttl_ms);
        let id = task.task_id.clone();
        let expires_at = Some(
            self.front
                .clock
                .record_expiry(task.ttl, self.front.config.max_task_ttl_ms),
        );
        let record = TaskRecord::new(self.scope.clone(), task, expires_at);
        if !driven
            && let Err(e) = self
                .front
                .ledger
                .insert(record, self.front.clock.now_ms())
                .await
        {
            let (upstream, task_id) = (self.front.upstream.clone(), id.clone());
            let cancel = async move {
                upstream
                    .request("tasks/cancel", json!({"taskId": task_id}))
                    .await
            };
            return Err(crate::bridge::cancel_unrecorded(id, cancel, e));
        }
        let mine = {
            let mut early = lock(&self.front.early);
            lock(&self.front.tasks).insert(id.clone(), LiveTask::new(self.scope.clone(), driven));
            // Input the server asked for before the task was known here.
            let (mine, rest): (Vec<_>, Vec<_>) = early.drain(..).partition(|(t, _)| *t == id);
            *early = rest;
            mine
        };
        for (_, req) in mine {
            if let Some(Some(scope)) = self.front.capture_task_input(&id, &req) {
                self.front.notify_subscribers(&scope, &id, None).await;
            }
        }
        self.front.watch_outcome(self.scope.clone(), id);
        Ok(())
    }

    /// A task of this scope that no background `tasks/result` follows: one
    /// made by an earlier shim process on a durable ledger. Follows it now,
    /// so its outcome is cached as if this process had made it.
    fn reattach(&self, task_id: &str) {
        {
            let mut tasks = lock(&self.front.tasks);
            if tasks.contains_key(task_id) {
                return;
            }
            tasks.insert(task_id.to_owned(), LiveTask::new(self.scope.clone(), false));
        }
        tracing::info!(task = %task_id, "following a task made before a restart");
        self.front
            .watch_outcome(self.scope.clone(), task_id.to_owned());
    }

    /// Waits for a tracked task's payload.
    async fn payload(&self, task_id: &str) -> Option<Payload> {
        let mut rx = lock(&self.front.tasks).get(task_id)?.outcome.subscribe();
        let wait = rx.wait_for(Option::is_some);
        match tokio::time::timeout(PAYLOAD_WAIT, wait).await {
            Ok(Ok(p)) => p.clone(),
            _ => None,
        }
    }

    /// A required task run for a client without the extension: its outcome
    /// becomes the call's answer. Input it asks for on the way becomes an
    /// MRTR round (`input_required`) of the call, as input asked before a
    /// task exists does; the retry answers it and driving goes on.
    pub(super) async fn drive(
        &self,
        task_id: &str,
        called: &super::calls::Called,
        meta: &RequestMeta,
    ) -> RpcResult {
        let (mut outcome, mut asked) = {
            let tasks = lock(&self.front.tasks);
            let live = tasks.get(task_id).ok_or(ShimError::UnknownTask)?;
            (live.outcome.subscribe(), live.asked.subscribe())
        };
        // Only the shim knows this task: if the client cancels the call
        // (dropping this wait), the task goes with it.
        let (front, id) = (self.front.clone(), task_id.to_owned());
        let unwanted = IfDropped::new(move || spawn_cleanup(front.cancel_driven(id)));
        let mut asking = true;
        loop {
            asked.borrow_and_update();
            if let Some((inputs, keys)) = self.driven_round(task_id, meta) {
                tracing::info!(task = %task_id, "a driven task asks for input: an MRTR round");
                let held = super::calls::Held::driven(called, keys, task_id, unwanted);
                return Ok(self.hold(held, inputs));
            }
            tokio::select! {
                payload = outcome.wait_for(Option::is_some) => {
                    unwanted.disarm();
                    let payload = payload.map(|p| p.clone()).map_err(|_| {
                        ShimError::Upstream("the task's result never came".into())
                    });
                    // Delivered with this answer: a driven task is
                    // forgotten here (it has no ledger record to expire).
                    lock(&self.front.tasks).remove(task_id);
                    let payload = payload?;
                    return match payload {
                        // Made modern as a plain call's answer is: an
                        // object with `resultType`, whatever the server's
                        // tasks/result held.
                        Some(Payload::Result(r)) if r.is_object() => {
                            Ok(tsession::result_to_modern_owned(r, "tools/call", 0))
                        }
                        Some(Payload::Result(_)) => Err(ShimError::Upstream(format!(
                            "the server's tasks/result for task {task_id} is not an object"
                        ))
                        .into()),
                        Some(Payload::Error(e)) => Err(e),
                        _ => Err(ShimError::TaskCancelled.into()),
                    };
                }
                // Once the task is no longer tracked only its outcome can come.
                changed = asked.changed(), if asking => asking = changed.is_ok(),
            }
        }
    }

    /// The input a driven task asks for and the client can answer, as an
    /// MRTR round (`inputRequests`, and key → upstream request); input the
    /// client did not declare is refused upstream at once.
    fn driven_round(
        &self,
        task_id: &str,
        meta: &RequestMeta,
    ) -> Option<(serde_json::Map<String, Value>, RoundKeys)> {
        let mut inputs = serde_json::Map::new();
        let mut keys = RoundKeys::new();
        let mut refused = Vec::new();
        {
            let mut tasks = lock(&self.front.tasks);
            let live = tasks.get_mut(task_id)?;
            live.inputs.retain(|key, (id, asked)| {
                let method = asked
                    .get("method")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                if declared(meta, asked) {
                    inputs.insert(key.clone(), asked.clone());
                    keys.insert(key.clone(), (id.clone(), method.to_owned()));
                    true
                } else {
                    refused.push((id.clone(), input::not_declared(method, asked.get("params"))));
                    false
                }
            });
        }
        for (id, why) in refused {
            let err = ShimError::MethodNotFound(why);
            let _ = self.front.upstream.respond(id, Err(err.into()));
        }
        (!inputs.is_empty()).then_some((inputs, keys))
    }

    /// A running task the legacy upstream no longer knows (it restarted,
    /// or dropped the task early) has failed: stored so, its error cached,
    /// listen streams told, and answered as such. A task that had already
    /// ended, its outcome not fetched, stays unknown.
    async fn lost(&self, id: &str, why: &str) -> RpcResult {
        let (rec, changed) =
            crate::bridge::mark_lost(&*self.front.ledger, &self.front.clock, &self.scope, id, why)
                .await?;
        let rec = rec
            .filter(|r| matches!(r.payload, Payload::Error(_)))
            .ok_or(ShimError::UnknownTask)?;
        if changed {
            self.front.notify_subscribers(&self.scope, id, None).await;
        }
        let mut task = rec.task;
        task.extra.remove("_meta");
        Ok(ttask::get_result_to_modern_owned(&task, rec.payload))
    }

    async fn record(&self, params: &Value) -> Result<TaskRecord, ErrorObject> {
        let id = ttask::task_id_param(Some(params))?;
        self.front
            .ledger
            .get(&self.scope, id, self.front.clock.now_ms())
            .await
            .map_err(ShimError::from)?
            .ok_or_else(|| ShimError::UnknownTask.into())
    }

    pub(super) async fn tasks_get(&self, params: &Value, meta: &RequestMeta) -> RpcResult {
        require_tasks(meta)?;
        let rec = self.record(params).await?;
        let id = rec.id().to_owned();
        if rec.task.status.is_terminal() && rec.payload != Payload::None {
            // Settled and cached: nothing upstream can change it, and after
            // a restart (durable ledger) the upstream may have forgotten it.
            let mut task = rec.task;
            task.extra.remove("_meta");
            return Ok(ttask::get_result_to_modern_owned(&task, rec.payload));
        }
        let elsewhere = self.maybe_elsewhere(&id);
        if rec.payload == Payload::None && !elsewhere {
            self.reattach(&id);
        }
        let fresh = self.front.call("tasks/get", json!({"taskId": id})).await;
        let task: legacy::Task = match fresh {
            Ok(v) => from_value("task", &v)?,
            Err(e) if e.code == crate::error::codes::INVALID_PARAMS && elsewhere => {
                return Err(held_elsewhere(&id));
            }
            Err(e) if e.code == crate::error::codes::INVALID_PARAMS => {
                return self.lost(&id, &e.message).await;
            }
            Err(e) => return Err(e),
        };
        if elsewhere && rec.payload == Payload::None {
            // This instance's upstream knows it after all: follow it here.
            self.reattach(&id);
        }
        let payload = if task.status.is_terminal() {
            match rec.payload {
                Payload::None => self.payload(&id).await.unwrap_or(Payload::None),
                p => p,
            }
        } else {
            self.front.pending_inputs(&id).map_or(Payload::None, |all| {
                Payload::Input(all.into_iter().filter(|(_, v)| declared(meta, v)).collect())
            })
        };
        let mut task = task;
        task.extra.remove("_meta");
        crate::bridge::bounded_ttl(&mut task.ttl, self.front.config.max_task_ttl_ms);
        // `completed` and `failed` must carry their outcome. Without one
        // (the background `tasks/result` is still on its way, or the task
        // expired while we waited for it) say what the client can act on.
        if matches!(
            task.status,
            crate::wire::TaskStatus::Completed | crate::wire::TaskStatus::Failed
        ) && matches!(payload, Payload::None)
        {
            if self
                .front
                .ledger
                .get_task(&self.scope, &id, self.front.clock.now_ms())
                .await
                .map_err(ShimError::from)?
                .is_none()
            {
                return Err(ShimError::UnknownTask.into());
            }
            tracing::debug!(task = %id, "terminal upstream, outcome not here yet: reporting working");
            task.status = crate::wire::TaskStatus::Working;
            task.status_message = None;
        }
        // A server that asks without moving to input_required (it sent the
        // request directly) is still waiting on the client: say so, as the
        // listen stream does.
        if task.status == crate::wire::TaskStatus::Working
            && matches!(&payload, Payload::Input(i) if !i.is_empty())
        {
            task.status = crate::wire::TaskStatus::InputRequired;
        }
        Ok(ttask::get_result_to_modern_owned(&task, payload))
    }

    pub(super) async fn tasks_update(&self, params: &Value, meta: &RequestMeta) -> RpcResult {
        require_tasks(meta)?;
        // The shape first, as a 2026-07-28 server checks it: its error
        // says what is wrong, and is the same for any task id.
        let answers = input::input_responses(Some(params))?.ok_or_else(|| {
            ShimError::InvalidParams("tasks/update needs inputResponses (an object)".into())
        })?;
        let rec = self.record(params).await?;
        if !rec.task.status.is_terminal() && self.maybe_elsewhere(rec.id()) {
            // Its questions were asked on another instance's upstream
            // session: acknowledging here would drop the answers.
            return Err(held_elsewhere(rec.id()));
        }
        let mut tasks = lock(&self.front.tasks);
        if let Some(live) = tasks.get_mut(rec.id()) {
            // All checked before any goes upstream: a refused update
            // leaves every question open.
            for (key, answer) in answers {
                let method = live
                    .inputs
                    .get(key)
                    .and_then(|(_, asked)| asked.get("method"))
                    .and_then(Value::as_str);
                if let Some(method) = method {
                    input::check_input_response(method, answer).map_err(|why| {
                        ShimError::InvalidParams(format!("inputResponses.{key}: {why}"))
                    })?;
                }
            }
            for (key, answer) in answers {
                // Unknown or already answered keys are ignored, as the spec says.
                if let Some((id, _)) = live.inputs.remove(key) {
                    let _ = self.front.upstream.respond(id, Ok(answer.clone()));
                }
            }
        }
        Ok(json!({"resultType": result_type::COMPLETE}))
    }

    pub(super) async fn tasks_cancel(&self, params: &Value, meta: &RequestMeta) -> RpcResult {
        require_tasks(meta)?;
        let rec = self.record(params).await?;
        match self
            .front
            .call("tasks/cancel", json!({"taskId": rec.id()}))
            .await
        {
            // Already terminal upstream: cancel is an ack either way now.
            Ok(_) => {}
            Err(e)
                if e.code == crate::error::codes::INVALID_PARAMS
                    && !rec.task.status.is_terminal()
                    && self.maybe_elsewhere(rec.id()) =>
            {
                return Err(held_elsewhere(rec.id()));
            }
            Err(e) if e.code == crate::error::codes::INVALID_PARAMS => {}
            Err(e) => return Err(e),
        }
        // The server's questions about the task will get no answer from
        // the client now.
        self.front.close_inputs(rec.id(), "the task was cancelled");
        Ok(ttask::cancel_result_to_modern())
    }

    /// Whether task `id` (in the ledger) may be held by another shim
    /// instance: the ledger is shared and this instance does not follow
    /// the task. A 2025-11-25 server keeps tasks per connection, so such
    /// a task is out of this instance's reach, and the upstream's
    /// "unknown task" is no news about it.
    fn maybe_elsewhere(&self, id: &str) -> bool {
        self.front.ledger.shared_with_other_instances() && !lock(&self.front.tasks).contains_key(id)
    }

    /// `subscriptions/listen`: the stream stays open (no answer until
    /// teardown); an acknowledgement names the task ids accepted.
    pub(super) async fn listen(&self, req: &Request, meta: &RequestMeta) -> Option<RpcResult> {
        // Nothing would ever come on a stream opened now.
        if let Some(why) = self.front.fate.gone_for_good() {
            return Some(Err(ShimError::Upstream(why).into()));
        }
        let (filter, wanted) = match listen_filter(req, meta) {
            Ok(read) => read,
            Err(e) => return Some(Err(e.into())),
        };
        let accepted = match self.owned_tasks(wanted).await {
            Ok(accepted) => accepted,
            Err(e) => return Some(Err(e.into())),
        };
        // Acknowledged only if the server sends it (the schema: the ack
        // lists what the server supports).
        let lists: Vec<ListKind> = ListKind::ALL
            .into_iter()
            .filter(|k| {
                filter.get(k.filter_key()).and_then(Value::as_bool) == Some(true)
                    && self.front.upstream_list_changed(k.capability())
            })
            .collect();
        let mut ack = serde_json::Map::new();
        if filter.get("taskIds").is_some() {
            ack.insert("taskIds".into(), json!(accepted));
        }
        for k in &lists {
            ack.insert(k.filter_key().into(), json!(true));
        }
        let _ = self.out.send(
            Route::During(req.id.clone()),
            Message::notification(
                "notifications/subscriptions/acknowledged",
                json!({"notifications": ack, "_meta": {META_SUBSCRIPTION_ID: req.id}}),
            ),
        );
        lock(&self.subscriptions).push(Subscription {
            id: req.id.clone(),
            task_ids: accepted.clone(),
            lists,
            out: self.out.clone(),
            last_sent: HashMap::new(),
        });
        self.send_current_states(&req.id, &accepted).await;
        None
    }

    /// Of the task ids a listen asks for, those this client's scope holds
    /// (others are left out of the acknowledgement, as unknown).
    async fn owned_tasks(&self, wanted: Vec<String>) -> Result<Vec<String>, ShimError> {
        let now = self.front.clock.now_ms();
        let mut accepted = Vec::with_capacity(wanted.len());
        for t in wanted {
            if self
                .front
                .ledger
                .get_task(&self.scope, &t, now)
                .await?
                .is_some()
            {
                accepted.push(t);
            }
        }
        Ok(accepted)
    }

    /// The current state of each task on a new listen stream, so that a
    /// change made before the stream opened (a question already asked) is
    /// not lost.
    async fn send_current_states(&self, listen: &Id, accepted: &[String]) {
        for t in accepted {
            if let Some((task, payload)) = self.front.view(&self.scope, t, None).await {
                let params = notify::status_to_modern(&task, &payload, listen);
                if let Some(sub) = lock(&self.subscriptions)
                    .iter_mut()
                    .find(|s| &s.id == listen)
                {
                    sub.last_sent.insert(t.clone(), params.clone());
                }
                let status = Message::notification(notify::MODERN_STATUS, params);
                let _ = self.out.send(Route::During(listen.clone()), status);
            }
        }
    }

    /// Closes the listen stream a `notifications/cancelled` names; false
    /// if it names none.
    pub(super) fn end_listen(&self, params: Option<&Value>) -> bool {
        let Some(id) = cancelled_id(params) else {
            return false;
        };
        let mut subs = lock(&self.subscriptions);
        let before = subs.len();
        subs.retain(|s| s.id != id);
        subs.len() != before
    }

    /// Answers every listen stream of this session with the upstream's
    /// end (see [`ModernFront::upstream_ended`]).
    pub(super) fn end_listens(&self, reason: &str) {
        let subs = std::mem::take(&mut *lock(&self.subscriptions));
        for sub in subs {
            tracing::info!(subscription = %sub.id, "listen stream ended: the upstream is gone");
            let error = ShimError::Upstream(reason.to_owned()).into();
            let _ = sub.out.send(
                Route::Answer(sub.id.clone()),
                Message::error(Some(sub.id), error),
            );
        }
    }

    /// See [`ModernFront::close_listens`].
    pub(super) fn close_listens(&self) {
        let subs = std::mem::take(&mut *lock(&self.subscriptions));
        for sub in subs {
            tracing::info!(subscription = %sub.id, "listen stream closed: the shim is shutting down");
            let result = json!({"resultType": result_type::COMPLETE,
                "_meta": {META_SUBSCRIPTION_ID: sub.id}});
            let _ = sub.out.send(
                Route::Answer(sub.id.clone()),
                Message::response(sub.id, result),
            );
        }
    }

    /// An upstream list changed: tell the listen streams that asked.
    pub(super) fn list_changed(&self, kind: ListKind) {
        for sub in lock(&self.subscriptions)
            .iter()
            .filter(|s| s.lists.contains(&kind))
        {
            let _ = sub.out.send(
                Route::During(sub.id.clone()),
                Message::notification(
                    kind.notification(),
                    json!({"_meta": {META_SUBSCRIPTION_ID: sub.id}}),
                ),
            );
        }
    }
}

/// The answer for a task another shim instance holds (see
/// [`ModernSession::maybe_elsewhere`]): the task is left as it is.
fn held_elsewhere(id: &str) -> ErrorObject {
    ShimError::Upstream(format!(
        "task {id} is held by another shim instance: the 2025-11-25 server keeps \
         tasks per connection, so only the instance that created it can reach it \
         (route requests by Mcp-Name to that instance; see docs/scaling.md)"
    ))
    .into()
}

/// True when the request declared the capability an input request needs.
fn declared(meta: &RequestMeta, input: &Value) -> bool {
    let method = input
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or_default();
    meta.takes(method, input.get("params"))
}

/// A listen's `params.notifications` filter and the task ids it names;
/// task ids need the tasks extension declared.
fn listen_filter(req: &Request, meta: &RequestMeta) -> Result<(Value, Vec<String>), ShimError> {
    let filter = match req.params.as_ref().and_then(|p| p.get("notifications")) {
        Some(f @ Value::Object(_)) => f.clone(),
        _ => {
            return Err(ShimError::InvalidParams(
                "subscriptions/listen needs params.notifications (an object)".into(),
            ));
        }
    };
    check_listen_filter(&filter)?;
    let wanted: Vec<String> = filter
        .get("taskIds")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if filter.get("taskIds").is_some() && !meta.declares_tasks() {
        return Err(ShimError::TasksExtensionRequired);
    }
    Ok((filter, wanted))
}
