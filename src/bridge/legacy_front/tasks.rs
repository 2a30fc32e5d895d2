//! The 2025-11-25 `tasks/*` methods over a modern upstream.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use tokio::task::JoinSet;

use super::LegacySession;
use crate::bridge::Route;
use crate::bridge::watch::Seen;
use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, Message, Request};
use crate::ledger::TaskRecord;
use crate::translate::notify::LEGACY_STATUS;
use crate::translate::task as ttask;
use crate::upstream::{RpcResult, TaskAnswer};
use crate::wire::modern::{BareTask, DetailedTask, Payload};
use crate::wire::{TaskStatus, to_value};

/// How many times the server may refuse the client's answer to one input
/// request before the task fails (the client is asked again in between).
const MAX_REFUSED_ANSWERS: u32 = 3;

impl LegacySession {
    /// The record of `task_id` in this session's scope, or the one answer
    /// given for unknown and foreign ids alike.
    async fn record(&self, req: &Request) -> Result<TaskRecord, ErrorObject> {
        self.read_record(req, true).await
    }

    /// [`Self::record`] without the cached outcome (see
    /// [`TaskLedger::get_task`]): for the methods that answer with the
    /// task, not its result.
    pub(super) async fn task_record(&self, req: &Request) -> Result<TaskRecord, ErrorObject> {
        self.read_record(req, false).await
    }

    /// The record of the request's `taskId` in this session's scope, with
    /// its cached outcome if `with_payload`; a miss of any kind is
    /// "unknown task", a store that cannot say is `-32603`.
    async fn read_record(
        &self,
        req: &Request,
        with_payload: bool,
    ) -> Result<TaskRecord, ErrorObject> {
        let id = ttask::task_id_param(req.params.as_ref())?;
        self.read_record_of(id, with_payload).await
    }

    /// [`Self::read_record`] of task `id`.
    pub(super) async fn read_record_of(
        &self,
        id: &str,
        with_payload: bool,
    ) -> Result<TaskRecord, ErrorObject> {
        let (ledger, now) = (&self.front.ledger, self.front.clock.now_ms());
        let read = if with_payload {
            ledger.get(&self.scope, id, now).await
        } else {
            ledger.get_task(&self.scope, id, now).await
        };
        read.map_err(ShimError::from)?
            .ok_or_else(|| ShimError::UnknownTask.into())
    }

    /// Reads the task upstream and stores what was seen; input it asks
    /// for goes to the client (see [`Self::ask_directly`]).
    pub(super) async fn refresh(
        self: &Arc<Self>,
        rec: TaskRecord,
    ) -> Result<TaskRecord, ErrorObject> {
        let answer = self.front.upstream.get_task(rec.id(), &self.meta()).await;
        // Boxed: inline, its state grew the future of every request a
        // session answers (the HTTP front boxes that whole future per
        // request; 7k instructions of copying per `tools/call`).
        Box::pin(self.refreshed(rec, answer)).await
    }

    /// [`Self::refresh`] once the upstream answered.
    pub(super) async fn refreshed(
        self: &Arc<Self>,
        rec: TaskRecord,
        answer: Result<TaskAnswer, ShimError>,
    ) -> Result<TaskRecord, ErrorObject> {
        let answer = match answer {
            Ok(answer) => answer,
            // Gone for good: the task died with it.
            Err(e) => {
                let Some(why) = self.front.fate.gone_for_good() else {
                    return Err(e.into());
                };
                return self
                    .record_lost(rec.id(), &why)
                    .await?
                    .ok_or_else(|| ShimError::UnknownTask.into());
            }
        };
        let d = match answer {
            Ok(d) => d,
            // A task this client holds as running that the upstream does
            // not know (it restarted, or dropped it early) has failed: the
            // client learns why, and `tasks/list` stops calling it working.
            Err(e) if e.code == crate::error::codes::INVALID_PARAMS => {
                return self
                    .record_lost(rec.id(), &e.message)
                    .await?
                    .ok_or_else(|| ShimError::UnknownTask.into());
            }
            Err(e) => {
                return Err(ShimError::Upstream(format!("tasks/get: {}", e.message)).into());
            }
        };
        // The common poll of a working task brings no news: the record
        // read before asking already says it, and storing it again would
        // be a store write (an fsync on disk, a round trip to Redis) for
        // nothing. A record changed meanwhile keeps its newer state.
        if self.tells_nothing_new(&rec, &d) {
            return Ok(rec);
        }
        // No record back: the store failed to take it (logged); what the
        // upstream just said is still the task's news.
        let seen = self.record_seen(&d).await;
        if let Some(rec) = &seen {
            self.ask_directly(rec, &d);
        }
        Ok(seen.unwrap_or_else(|| {
            let mut rec = rec;
            if !rec.is_terminal() {
                rec.task = self.seen_task(&d);
            }
            rec
        }))
    }

    /// Marks a task the upstream no longer knows (`why`) as failed, its
    /// error cached for `tasks/result` (unless it ended or was cancelled
    /// first), and tells the client. Returns the record as it now stands.
    pub(super) async fn record_lost(
        &self,
        task_id: &str,
        why: &str,
    ) -> Result<Option<TaskRecord>, ErrorObject> {
        let (rec, changed) = crate::bridge::mark_lost(
            &*self.front.ledger,
            &self.front.clock,
            &self.scope,
            task_id,
            why,
        )
        .await?;
        if let (Some(rec), true) = (&rec, changed) {
            self.send(
                Route::Session,
                Message::notification(LEGACY_STATUS, to_value(&rec.task)),
            );
            self.task_ended(rec.id());
        }
        Ok(rec)
    }

    /// True when storing `d` would leave `rec` as it is (by the rule
    /// [`absorb_seen`] stores it by) and `d` asks no input: input goes
    /// through [`Self::record_seen`]'s path, which puts it to the client.
    pub(super) fn tells_nothing_new(&self, rec: &TaskRecord, d: &DetailedTask) -> bool {
        nothing_new(rec, d, self.front.config.max_task_ttl_ms)
    }

    /// [`Self::tells_nothing_new`] of a bare task read from a poll's line:
    /// the same verdict, with nothing copied out of the line.
    pub(super) fn bare_task_tells_nothing_new(&self, rec: &TaskRecord, seen: &BareTask) -> bool {
        nothing_new_in_bare(rec, seen, self.front.config.max_task_ttl_ms)
    }

    /// An upstream snapshot as this session's client sees the task.
    fn seen_task(&self, d: &DetailedTask) -> crate::wire::legacy::Task {
        seen_as_legacy(d, self.front.config.max_task_ttl_ms)
    }

    /// Stores an upstream snapshot in this session's ledger scope (if the
    /// task is ours), applying a pinned cancel; tells the client when the
    /// status it sees changed. Returns the updated record; `None` when the
    /// task is not this scope's, or the store failed (logged here: the
    /// callers carry on with what the upstream said).
    pub(super) async fn record_seen(&self, d: &DetailedTask) -> Option<TaskRecord> {
        // Owned, so that a store that fails may keep the change for later
        // (`update_kept`): a task that ends while the store is down must
        // still read as ended once it is back.
        let changed = Arc::new(AtomicBool::new(false));
        let seen = self.seen_task(d);
        let payload = d.payload.clone();
        let flag = changed.clone();
        let change: crate::ledger::KeptChange = Arc::new(move |rec| {
            if let Some(changed) = absorb_seen(rec, &seen, &payload) {
                flag.store(changed, Ordering::Relaxed);
            }
        });
        let stored = self
            .front
            .ledger
            .update_kept(
                &self.scope,
                &d.task.task_id,
                self.front.clock.now_ms(),
                change,
            )
            .await;
        let rec = match stored {
            Ok(rec) => rec?,
            Err(e) => {
                tracing::error!(task = %d.task.task_id, error = %e, "could not store what the upstream said of a task");
                return None;
            }
        };
        if changed.load(Ordering::Relaxed) {
            self.send(
                Route::Session,
                Message::notification(LEGACY_STATUS, to_value(&rec.task)),
            );
        }
        if rec.is_terminal() {
            self.task_ended(rec.id());
        }
        Some(rec)
    }

    /// Puts the input requests of `d`, a snapshot of this session's task
    /// `rec`, to the client now, unless they were already: a client that
    /// only polls `tasks/get` until the task ends, and calls `tasks/result`
    /// only then, would otherwise leave the task waiting in
    /// `input_required` for good. Tagged with the task, as on the
    /// `tasks/result` path; the transport places them (an open
    /// `tasks/result` stream of the task first). Whoever sees the input
    /// first asks it, this or a waiting `tasks/result`: each key once.
    ///
    /// No watcher is started for it: the client that polls `tasks/get`
    /// shows the next round itself, and each asking holds a watch of the
    /// task while it waits (see `input_withdrawn`), so a task that ends or
    /// is cancelled meanwhile still has its question withdrawn.
    pub(super) fn ask_directly(self: &Arc<Self>, rec: &TaskRecord, d: &DetailedTask) {
        if rec.synthetic || rec.cancel_pinned || rec.is_terminal() || d.task.status.is_terminal() {
            return;
        }
        let Payload::Input(requests) = &d.payload else {
            return;
        };
        let task_id = d.task.task_id.as_str();
        let batch: Vec<_> = requests
            .iter()
            .filter(|(key, _)| {
                self.claim_question(task_id, key) && self.take_outstanding(task_id, key)
            })
            .map(|(key, request)| (key.clone(), request.clone()))
            .collect();
        if !batch.is_empty() {
            tracing::info!(task = %task_id, questions = batch.len(), "input required and not asked yet: asking the client");
            self.spawn_answers(task_id, batch, None);
        }
    }

    pub(super) async fn tasks_result(self: &Arc<Self>, req: &Request) -> RpcResult {
        let rec = self.record(req).await?;
        let rec = if rec.is_terminal() {
            rec
        } else {
            let seen = self.await_task(rec.id(), None).await?;
            // Re-read: the wait stored the outcome, or a cancel was pinned.
            // A session that ended meanwhile (an HTTP DELETE, expiry) took
            // its tasks with it: say that, not "task not found".
            let rec = self.record(req).await.map_err(|e| {
                if *self.ended.borrow() {
                    self.ended_error("tasks/result")
                } else {
                    e
                }
            })?;
            if !rec.is_terminal() {
                // The store did not take the outcome (a full disk, say; it
                // logged why): answer with what the upstream said rather
                // than make the record's stale `working` an outcome.
                let task = self.seen_task(&seen);
                return ttask::task_result_to_legacy_owned(
                    &task.task_id,
                    task.status,
                    seen.payload,
                );
            }
            rec
        };
        if rec.cancel_pinned {
            return Err(ShimError::TaskCancelled.into());
        }
        // Moved out of the record this request owns: a big result is not copied.
        ttask::task_result_to_legacy_owned(&rec.task.task_id, rec.task.status, rec.payload)
    }

    /// Waits until the upstream task is terminal, bridging input requests
    /// to the client on the way: tagged with the task, or, for a task the
    /// client does not know (driven `during` its plain call), untagged and
    /// asked for that call.
    pub(super) async fn await_task(
        self: &Arc<Self>,
        task_id: &str,
        during: Option<&Id>,
    ) -> Result<DetailedTask, ErrorObject> {
        let (watcher, mut rx) = self.front.watchers.subscribe(task_id, self.meta());
        let mut ended = self.ended.subscribe();
        loop {
            let seen = rx.borrow_and_update().clone();
            // Stored before the pin is read: with the store unreachable the
            // read fails, and what the upstream said (the task's end) must
            // not go with it but be kept until the store is back. A pinned
            // cancel still wins: `record_seen` leaves a pinned record alone.
            if let Seen::Task(d) = &seen {
                self.record_seen(d).await;
            }
            match self.is_pinned(task_id).await {
                Ok(true) => {
                    self.withdraw_questions(task_id, "the client cancelled the task");
                    return Err(ShimError::TaskCancelled.into());
                }
                Ok(false) => {}
                // The store is unreachable: the wait goes on, so that the
                // task's end is still seen and kept. A cancel sent during
                // the outage could not be pinned either (it was answered
                // -32603), and one pinned before it was read already.
                Err(e) => {
                    tracing::warn!(task = %task_id, error = %e.message, "could not read the task's cancel pin; still waiting");
                }
            }
            match seen {
                Seen::Nothing => {}
                Seen::Gone(e) => {
                    self.withdraw_questions(task_id, &e.message);
                    return Err(e);
                }
                Seen::Lost(e) => {
                    self.withdraw_questions(task_id, &e.message);
                    // Stored as failed: `tasks/result` answers from the
                    // record. One at the end of its TTL is gone instead.
                    return Err(match self.record_lost(task_id, &e.message).await? {
                        Some(_) => ShimError::TaskLost(e.message),
                        None => ShimError::UnknownTask,
                    }
                    .into());
                }
                Seen::Task(d) => {
                    if d.task.status.is_terminal() {
                        let why = format!("the task is {}", d.task.status);
                        self.withdraw_questions(task_id, &why);
                        return Ok(*d);
                    }
                    if let Payload::Input(requests) = &d.payload {
                        let batch: Vec<_> = requests
                            .iter()
                            .filter(|(key, _)| {
                                watcher.claim(key)
                                    && self.claim_question(task_id, key)
                                    && self.take_outstanding(task_id, key)
                            })
                            .map(|(key, request)| (key.clone(), request.clone()))
                            .collect();
                        if !batch.is_empty() {
                            self.spawn_answers(task_id, batch, during.cloned());
                        }
                    }
                }
            }
            // The watcher (and its sender) lives as long as we hold it.
            tokio::select! {
                _ = rx.changed() => {}
                _ = ended.wait_for(|ended| *ended) => {
                    return Err(self.ended_error("the request"));
                }
            }
        }
    }

    /// Asks the client each input request of `batch` (key, request) and
    /// forwards each answer upstream with `tasks/update`, then re-polls.
    /// The questions go out in the server's order (one task polls them in
    /// turn; a task per question went out in whatever order the runtime
    /// ran them) and are answered in any order.
    fn spawn_answers(
        self: &Arc<Self>,
        task_id: &str,
        batch: Vec<(String, Value)>,
        during: Option<Id>,
    ) {
        let (this, task_id) = (self.clone(), task_id.to_owned());
        tokio::spawn(async move {
            let each = batch
                .iter()
                .map(|(key, request)| this.answer_one(&task_id, key, request, during.as_ref()));
            futures_util::future::join_all(each).await;
        });
    }

    /// One input request of [`Self::spawn_answers`].
    async fn answer_one(&self, task_id: &str, key: &str, request: &Value, during: Option<&Id>) {
        let tag = during.is_none().then_some(task_id);
        let asked = self.ask_input(key, request, tag, during, Some(task_id));
        let outcome = tokio::select! {
            // The asking first, so that its question is sent before the
            // next one's.
            biased;
            outcome = asked => outcome,
            // Dropping the asking withdraws the question from the client;
            // nothing goes upstream.
            why = self.input_withdrawn(task_id) => {
                tracing::info!(%task_id, %key, %why, "input request withdrawn from the client");
                super::lock(&self.outstanding).remove(&(task_id.to_owned(), key.to_owned()));
                return;
            }
        };
        let answer = match outcome {
            Ok(answer) => answer,
            // An elicitation this client cannot be asked (it declared no
            // elicitation, or it went away) has not been accepted: answer
            // `cancel`, as for one it refused, so the task moves on. Left
            // unanswered, the task would sit in input_required and a
            // blocking tasks/result would wait until the TTL (found by
            // tests/fuzz_engines.rs).
            Err(e)
                if request.get("method").and_then(Value::as_str) == Some("elicitation/create") =>
            {
                tracing::info!(%task_id, %key, client_error = %e.message, "elicitation not deliverable; answering cancel");
                serde_json::json!({"action": "cancel"})
            }
            // Anything else (sampling the client did not declare, or
            // answered with an error) has no answer meaning "no" in
            // 2026-07-28: left unanswered, the task would wait until its
            // ttl, and a blocking tasks/result with it.
            Err(e) => {
                tracing::warn!(%task_id, %key, client_error = %e.message, "input the client cannot give; failing the task");
                super::lock(&self.outstanding).remove(&(task_id.to_owned(), key.to_owned()));
                self.fail_for_input(task_id, during.is_some(), e).await;
                return;
            }
        };
        self.send_answer(task_id, key, answer, during.is_some())
            .await;
    }

    /// The client's answer to input request `key`, sent up with
    /// `tasks/update`. A refusal reopens the question, a few times, then
    /// fails the task (`during`: a call is waiting on it) rather than wait
    /// for good.
    async fn send_answer(&self, task_id: &str, key: &str, answer: Value, during: bool) {
        let mut responses = serde_json::Map::new();
        responses.insert(key.to_owned(), answer);
        let params = crate::translate::input::update_params(task_id, responses);
        let refusal = match self.upstream_request("tasks/update", &params).await {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(e),
            Err(e) => {
                tracing::warn!(%task_id, %key, error = %e, "tasks/update failed");
                None
            }
        };
        let place = (task_id.to_owned(), key.to_owned());
        super::lock(&self.outstanding).remove(&place);
        let Some(refusal) = refusal else {
            super::lock(&self.refused).remove(&place);
            self.front.watchers.poke(task_id);
            return;
        };
        // The server refused the answer and still asks: the client is
        // asked again (its answer may not have fit the question), a few
        // times, then the task fails rather than wait for good.
        let times = {
            let mut refused = super::lock(&self.refused);
            let n = refused.entry(place.clone()).or_insert(0);
            *n += 1;
            *n
        };
        tracing::warn!(%task_id, %key, code = refusal.code, upstream_message = %refusal.message, times, "upstream refused the client's answer");
        if times < MAX_REFUSED_ANSWERS {
            self.reopen_question(task_id, key);
            self.front.watchers.reopen(task_id, key);
            return;
        }
        super::lock(&self.refused).remove(&place);
        let why = ShimError::Upstream(format!(
            "the server refused the answers to its input request {key} {times} times: {}",
            refusal.message
        ));
        self.fail_for_input(task_id, during, why.into()).await;
    }

    /// Fails `task_id` for its client with `error` (input it cannot give,
    /// or answers the server keeps refusing), tells the client, and
    /// cancels the task upstream: it could only wait until its ttl. A task
    /// `driven` for a plain call has no record to carry the failure: its
    /// call takes it from `input_failures` (see `drive`).
    async fn fail_for_input(&self, task_id: &str, driven: bool, error: ErrorObject) {
        let (now, now_ms) = (self.front.clock.now_iso(), self.front.clock.now_ms());
        let mut changed = false;
        let stored = self
            .front
            .ledger
            .update(&self.scope, task_id, now_ms, &mut |r| {
                if r.is_terminal() || r.cancel_pinned {
                    return;
                }
                r.task = ttask::lost_view(&r.task, &error, &now);
                r.payload = Payload::Error(error.clone());
                changed = true;
            })
            .await;
        let rec = stored.unwrap_or_else(|e| {
            tracing::error!(%task_id, error = %e, "could not store the failure of a task");
            None
        });
        if let (Some(rec), true) = (&rec, changed) {
            self.send(
                Route::Session,
                Message::notification(LEGACY_STATUS, to_value(&rec.task)),
            );
            self.task_ended(task_id);
        }
        if driven {
            super::lock(&self.input_failures).insert(task_id.to_owned(), error.clone());
        }
        match self
            .upstream_request("tasks/cancel", &json!({"taskId": task_id}))
            .await
        {
            Ok(Ok(_)) => {
                tracing::info!(%task_id, "task cancelled upstream: it cannot get its input")
            }
            Ok(Err(e)) => {
                tracing::info!(%task_id, code = e.code, "could not cancel the task upstream")
            }
            Err(e) => tracing::info!(%task_id, error = %e, "could not cancel the task upstream"),
        }
        self.front.watchers.poke(task_id);
    }

    /// Resolves, saying why, once `task_id` can no longer use the answer
    /// to an input request: it was cancelled here, or it ended or was lost
    /// upstream. Holds a watch of the task meanwhile, so it is still
    /// polled.
    async fn input_withdrawn(&self, task_id: &str) -> String {
        let (_watcher, mut rx) = self.front.watchers.subscribe(task_id, self.meta());
        loop {
            if self.is_pinned(task_id).await.unwrap_or(false) {
                return "the client cancelled the task".into();
            }
            match &*rx.borrow_and_update() {
                Seen::Nothing => {}
                Seen::Gone(e) | Seen::Lost(e) => return e.message.clone(),
                Seen::Task(d) if d.task.status.is_terminal() => {
                    return format!("the task is {}", d.task.status);
                }
                // Not `working` without the key: a status notification
                // from before the question may still arrive after a poll
                // that saw it asked.
                Seen::Task(_) => {}
            }
            if rx.changed().await.is_err() {
                return "the task is no longer watched".into();
            }
        }
    }

    /// Marks input request `key` of `task_id` as being asked; false when
    /// an earlier asking still waits for the client's answer.
    fn take_outstanding(&self, task_id: &str, key: &str) -> bool {
        super::lock(&self.outstanding).insert((task_id.to_owned(), key.to_owned()))
    }

    /// Whether the client cancelled `task_id` (its pin is set).
    async fn is_pinned(&self, task_id: &str) -> Result<bool, ErrorObject> {
        let rec = self
            .front
            .ledger
            .get_task(&self.scope, task_id, self.front.clock.now_ms())
            .await
            .map_err(ShimError::from)?;
        Ok(rec.is_some_and(|r| r.cancel_pinned))
    }

    pub(super) async fn tasks_list(self: &Arc<Self>, req: &Request) -> RpcResult {
        let cursor = match req.params.as_ref().and_then(|p| p.get("cursor")) {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Some(c.as_str()),
            Some(_) => {
                return Err(ShimError::InvalidParams("cursor must be a string".into()).into());
            }
        };
        let page = self
            .front
            .ledger
            .list(
                &self.scope,
                cursor,
                self.front.config.page_size,
                self.front.clock.now_ms(),
            )
            .await
            .map_err(ShimError::from)?;
        let mut refreshes = JoinSet::new();
        for (i, rec) in page.records.iter().enumerate() {
            if !rec.synthetic && !rec.is_terminal() {
                let id = rec.id().to_owned();
                let (upstream, meta) = (self.front.upstream.clone(), self.meta());
                refreshes.spawn(async move { (i, upstream.get_task(&id, &meta).await) });
            }
        }
        let mut tasks: Vec<_> = page.records.iter().map(|r| r.task.clone()).collect();
        while let Some(Ok((i, outcome))) = refreshes.join_next().await {
            let seen = match outcome {
                Ok(Ok(d)) => {
                    let seen = self.record_seen(&d).await;
                    if let Some(rec) = &seen {
                        self.ask_directly(rec, &d);
                    }
                    seen
                }
                // Lost upstream: listed as failed, as `tasks/get` would say.
                Ok(Err(e)) if e.code == crate::error::codes::INVALID_PARAMS => self
                    .record_lost(page.records[i].id(), &e.message)
                    .await
                    .ok()
                    .flatten(),
                // The upstream is gone for good: so are its tasks.
                Err(_) => match self.front.fate.gone_for_good() {
                    Some(why) => self
                        .record_lost(page.records[i].id(), &why)
                        .await
                        .ok()
                        .flatten(),
                    None => None,
                },
                // Anything else: the page shows the last status seen.
                _ => None,
            };
            if let Some(rec) = seen {
                tasks[i] = rec.task;
            }
        }
        Ok(ttask::list_page(&tasks, page.next_cursor))
    }

    pub(super) async fn tasks_cancel(&self, req: &Request) -> RpcResult {
        let rec = self.task_record(req).await?;
        if rec.is_terminal() {
            let status = if rec.cancel_pinned {
                TaskStatus::Cancelled
            } else {
                rec.task.status
            };
            return Err(ShimError::TaskTerminal(status.to_string()).into());
        }
        let params = json!({"taskId": rec.id()});
        match self.upstream_request("tasks/cancel", &params).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::info!(
                task = rec.id(),
                code = e.code,
                "upstream refused the cancel; pinned anyway"
            ),
            Err(e) => return Err(e.into()),
        }
        let now = self.front.clock.now_iso();
        // Checked again where the pin is set: the task may have ended (or
        // another cancel pinned it) during the upstream round trip, and a
        // client already given its result must not read it cancelled. An
        // end as `cancelled` is this cancel's own, already seen.
        let mut ended = None;
        // Seen ending cancelled already (a status notification or a poll
        // during the round trip): the client was told then.
        let mut told = false;
        let pinned = self
            .front
            .ledger
            .update(&self.scope, rec.id(), self.front.clock.now_ms(), &mut |r| {
                if r.cancel_pinned {
                    ended = Some(TaskStatus::Cancelled);
                    return;
                }
                if r.task.status.is_terminal() && r.task.status != TaskStatus::Cancelled {
                    ended = Some(r.task.status);
                    return;
                }
                told = r.task.status == TaskStatus::Cancelled;
                r.cancel_pinned = true;
                r.task = ttask::cancelled_view(&r.task, &now);
                r.payload = Payload::None;
            })
            .await
            .map_err(ShimError::from)?
            .ok_or(ShimError::UnknownTask)?;
        if let Some(status) = ended {
            return Err(ShimError::TaskTerminal(status.to_string()).into());
        }
        // Before the poke wakes a `tasks/result` waiting on the task, whose
        // answer may end the stream that carried the questions.
        self.withdraw_questions(rec.id(), "the client cancelled the task");
        self.front.watchers.poke(rec.id());
        self.task_ended(rec.id());
        let view = to_value(&pinned.task);
        if !told {
            self.send(
                Route::Session,
                Message::notification(LEGACY_STATUS, view.clone()),
            );
        }
        Ok(view)
    }
}

/// True when [`absorb_seen`] would leave `rec` as it is for the snapshot
/// `seen` (made only if needed) carrying no payload, told without a copy
/// of the record to absorb it into: a pinned or ended record takes nothing
/// but an outcome, and there is none; a running one takes the snapshot,
/// and a payload only if the snapshot has ended, which it has not if it
/// equals the record's running task.
fn absorbs_nothing(
    rec: &TaskRecord,
    seen_is: impl FnOnce(&crate::wire::legacy::Task) -> bool,
) -> bool {
    rec.cancel_pinned || rec.task.status.is_terminal() || seen_is(&rec.task)
}

/// An upstream snapshot as a client sees the task, its ttl bounded by
/// `max_ttl_ms`.
fn seen_as_legacy(d: &DetailedTask, max_ttl_ms: i64) -> crate::wire::legacy::Task {
    let mut task = ttask::detailed_to_legacy_record(d);
    crate::bridge::bounded_ttl(&mut task.ttl, max_ttl_ms);
    task
}

/// See [`LegacySession::tells_nothing_new`].
fn nothing_new(rec: &TaskRecord, d: &DetailedTask, max_ttl_ms: i64) -> bool {
    matches!(d.payload, Payload::None)
        && absorbs_nothing(rec, |known| seen_as_legacy(d, max_ttl_ms) == *known)
}

/// See [`LegacySession::bare_task_tells_nothing_new`].
fn nothing_new_in_bare(rec: &TaskRecord, seen: &BareTask, max_ttl_ms: i64) -> bool {
    let mut ttl = seen.ttl_ms;
    crate::bridge::bounded_ttl(&mut ttl, max_ttl_ms);
    absorbs_nothing(rec, |known| ttask::bare_task_is(known, seen, ttl))
}

/// Stores an upstream snapshot (`seen`, its outcome or input `payload`)
/// in `rec`: whether the status the client sees changed, `None` when the
/// record is final and takes no new status. Terminal is
/// final: snapshots from the poller, the listen stream and the refreshes
/// of tasks/get and tasks/list land out of order, and a stale `working`
/// stored after the end would tell the client its finished task runs
/// again. A pinned cancel is final too.
fn absorb_seen(
    rec: &mut TaskRecord,
    seen: &crate::wire::legacy::Task,
    payload: &Payload,
) -> Option<bool> {
    if rec.cancel_pinned {
        return None;
    }
    if rec.task.status.is_terminal() {
        // Only the same end's outcome, if it came later (a status
        // notification carries none), is still taken.
        if seen.status == rec.task.status
            && matches!(rec.payload, Payload::None)
            && !matches!(payload, Payload::None)
        {
            rec.payload = payload.clone();
        }
        return None;
    }
    let changed = seen.status != rec.task.status;
    rec.task = seen.clone();
    if seen.status.is_terminal() {
        rec.payload = payload.clone();
    }
    Some(changed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scope::Scope;

    fn task(status: TaskStatus, message: Option<&str>) -> crate::wire::legacy::Task {
        crate::wire::legacy::Task {
            task_id: "t1".into(),
            status,
            status_message: message.map(str::to_owned),
            created_at: "2026-11-29T10:00:00.000Z".into(),
            last_updated_at: "2026-11-29T10:00:00.000Z".into(),
            ttl: Some(60_000),
            poll_interval: Some(500),
            extra: Default::default(),
        }
    }

    /// The shortcut agrees with absorbing into a copy and comparing, for
    /// every kind of record and snapshot a poll without payload meets.
    #[test]
    fn absorbs_nothing_is_absorb_seen_leaving_the_record_as_it_is() {
        use TaskStatus::*;
        let statuses = [Working, InputRequired, Completed, Failed, Cancelled];
        let mut input = serde_json::Map::new();
        input.insert(
            "q1".into(),
            json!({"method": "elicitation/create", "params": {}}),
        );
        let payloads = [Payload::None, Payload::Input(input)];
        for pinned in [false, true] {
            for stored in statuses {
                for payload in &payloads {
                    for seen_status in statuses {
                        for message in [None, Some("busy")] {
                            let mut rec = TaskRecord::new(Scope::stdio(), task(stored, None), None);
                            rec.cancel_pinned = pinned;
                            rec.payload = payload.clone();
                            let seen = task(seen_status, message);
                            let mut absorbed = rec.clone();
                            absorb_seen(&mut absorbed, &seen, &Payload::None);
                            assert_eq!(
                                absorbs_nothing(&rec, |known| seen == *known),
                                absorbed == rec,
                                "pinned {pinned}, stored {stored:?}, {payload:?}, seen {seen_status:?} {message:?}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// A poll's line judged bare gets the verdict its full reading gets,
    /// for every record and every task a bare answer can carry; and an
    /// answer that is not bare is not judged bare.
    #[test]
    fn a_bare_poll_is_judged_as_its_full_reading() {
        use crate::wire::modern::{bare_task_answer, detailed_task_answer};
        use TaskStatus::*;
        const MAX_TTL: i64 = 90_000;
        let mut records = Vec::new();
        for status in [Working, InputRequired, Completed, Cancelled] {
            for (message, ttl) in [
                (None, Some(60_000)),
                (Some("busy"), Some(MAX_TTL)),
                (None, None),
            ] {
                for pinned in [false, true] {
                    let mut t = task(status, message);
                    t.ttl = ttl;
                    let mut rec = TaskRecord::new(Scope::stdio(), t, None);
                    rec.cancel_pinned = pinned;
                    records.push(rec);
                }
            }
        }
        let mut with_extra = records[0].clone();
        with_extra.task.extra.insert("k".into(), json!(1));
        records.push(with_extra);
        let mut judged = 0;
        for (id, status) in [
            ("t1", "working"),
            ("t1", "input_required"),
            ("t1", "completed"),
            ("t2", "working"),
        ] {
            for message in ["", r#""statusMessage":null,"#, r#""statusMessage":"busy","#] {
                for ttl in [r#""ttlMs":60000"#, r#""ttlMs":null"#, r#""ttlMs":90000"#] {
                    for poll in ["", r#","pollIntervalMs":500"#] {
                        let line = format!(
                            r#"{{"jsonrpc":"2.0","id":3,"result":{{"taskId":"{id}","status":"{status}",{message}"createdAt":"2026-11-29T10:00:00.000Z","lastUpdatedAt":"2026-11-29T10:00:00.000Z",{ttl}{poll},"resultType":"task","_meta":{{"a":[1]}}}}}}"#
                        );
                        let seen = bare_task_answer(&line).expect("a bare task");
                        let d = detailed_task_answer(line.as_bytes()).expect("a task");
                        for rec in &records {
                            assert_eq!(
                                nothing_new_in_bare(rec, &seen, MAX_TTL),
                                nothing_new(rec, &d, MAX_TTL),
                                "{line} for {rec:?}"
                            );
                            judged += usize::from(nothing_new(rec, &d, MAX_TTL));
                        }
                    }
                }
            }
        }
        // Both verdicts were met.
        assert!(judged > 0 && judged < 4 * 3 * 3 * 2 * records.len());
        let base = r#""taskId":"t1","status":"working","createdAt":"a","lastUpdatedAt":"b""#;
        for not_bare in [
            format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{{base},"result":{{}}}}}}"#),
            format!(
                r#"{{"jsonrpc":"2.0","id":3,"result":{{{base},"error":{{"code":1,"message":"m"}}}}}}"#
            ),
            format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{{base},"inputRequests":{{}}}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{{base},"other":1}}}}"#),
            format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{{base},"statusMessage":"a\"b"}}}}"#),
        ] {
            assert!(bare_task_answer(&not_bare).is_none(), "{not_bare}");
            assert!(
                detailed_task_answer(not_bare.as_bytes()).is_some(),
                "{not_bare}"
            );
        }
    }
}
