//! `tools/call` for modern clients: when to ask the legacy server for a
//! task, MRTR rounds for input asked before any task exists, and driving a
//! required task for a client without the extension.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::{mpsc, oneshot};

use futures_util::future::{AbortHandle, Abortable};

use super::{ModernFront, ModernSession, lock};
use crate::bridge::cancel::IfDropped;
use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, Request};
use crate::translate::{input, session as tsession, task as ttask, tools as ttools};
use crate::upstream::RpcResult;
use crate::wire::legacy::{TaskMetadata, TaskSupport};
use crate::wire::modern::{RequestMeta, result_type};

/// A `tools/call` still unanswered upstream; untagged server requests that
/// arrive meanwhile are sent to it.
#[derive(Debug)]
pub(super) struct OpenCall {
    id: u64,
    /// Whose call it is (the session's client): untagged input never
    /// crosses clients.
    client: String,
    interjections: mpsc::UnboundedSender<Request>,
}

/// The requests of one MRTR round: input key → id and method of the
/// upstream request it answers.
pub(super) type RoundKeys = std::collections::BTreeMap<String, (Id, String)>;

/// What a `tools/call` asked for. An MRTR retry is the same request sent
/// again with the answers: one that names another tool or other arguments
/// is refused, so a `requestState` cannot carry answers given for one call
/// into another (the spec asks servers to tie the state to its request).
#[derive(Debug, Clone)]
pub(super) struct Called {
    pub(super) tool: String,
    arguments: Option<Value>,
}

impl Called {
    pub(super) fn new(tool: String, params: Option<&Value>) -> Self {
        Called {
            tool,
            arguments: params.and_then(|p| p.get("arguments")).cloned(),
        }
    }

    /// Why a retry with `params` is not this call's, if it is not.
    fn refuses(&self, params: Option<&Value>) -> Option<String> {
        let tool = ttools::tool_name(params).unwrap_or_default();
        if tool != self.tool {
            return Some(format!(
                "this requestState belongs to a call of {}, not {tool}",
                self.tool
            ));
        }
        // No arguments and `{}` ask the same.
        let empty = Value::Object(Map::new());
        let normal = |a: Option<&Value>| a.filter(|a| **a != empty).cloned();
        let retried = params.and_then(|p| p.get("arguments"));
        (normal(retried) != normal(self.arguments.as_ref())).then(|| {
            format!(
                "this requestState belongs to a call of {} with other arguments: \
                 retry with the arguments of the request that was answered input_required",
                self.tool
            )
        })
    }
}

/// An MRTR round the client has yet to answer: what it asked, and what
/// goes on once it does.
#[derive(Debug)]
pub(super) struct Held {
    /// The call answered `input_required`: a retry must be the same one.
    called: Called,
    keys: RoundKeys,
    round: Round,
}

/// What an MRTR round holds.
#[derive(Debug)]
pub(super) enum Round {
    /// An upstream call parked on input asked before any task exists.
    Call(InFlight),
    /// A task driven for a client without the extension, asking for input
    /// mid-task; `unwanted` cancels it if the round is dropped unanswered.
    Driven {
        task_id: String,
        unwanted: IfDropped,
    },
}

impl Held {
    pub(super) fn driven(
        called: &Called,
        keys: RoundKeys,
        task_id: &str,
        unwanted: IfDropped,
    ) -> Self {
        Held {
            called: called.clone(),
            keys,
            round: Round::Driven {
                task_id: task_id.to_owned(),
                unwanted,
            },
        }
    }
}

/// The client side of an unanswered upstream `tools/call`.
#[derive(Debug)]
pub(super) struct InFlight {
    open_id: u64,
    /// What was called: a retry must ask the same.
    called: Called,
    done: oneshot::Receiver<RpcResult>,
    interjections: mpsc::UnboundedReceiver<Request>,
    asked_task: bool,
    seq: u64,
    /// Whoever holds the call last (a client request waiting on it, or
    /// the MRTR table) dropping it unanswered ends it: its upstream
    /// request is cancelled there, and it takes no more input.
    abandon: Option<IfDropped>,
    /// Routes the upstream's progress for this call back to the client.
    progress: Option<crate::bridge::progress::ProgressRoute<ModernSession>>,
}

impl ModernFront {
    /// Hands an untagged server request to the open call it most likely
    /// belongs to (the newest). False when no call is open, or when calls
    /// of several clients are: a guess could then show one client's
    /// question (and its answer) to another, so it is refused instead.
    pub(super) fn interject(&self, req: &Request) -> bool {
        let origin = self.upstream.origin_of(&req.id);
        let calls = lock(&self.open_calls);
        // The upstream says whose it is (it came on that call's answer
        // stream): no guessing, and no other call's to take if that one
        // has ended.
        if let Some(origin) = origin {
            return calls
                .iter()
                .find(|c| c.id == origin)
                .is_some_and(|call| call.interjections.send(req.clone()).is_ok());
        }
        let Some(call) = calls.last() else {
            return false;
        };
        if calls.iter().any(|c| c.client != call.client) {
            tracing::warn!(method = %req.method, "calls of several clients open; refusing an untagged request rather than guessing whose it is");
            return false;
        }
        if calls.len() > 1 {
            tracing::warn!(method = %req.method, "several calls open; giving the request to the newest");
        }
        call.interjections.send(req.clone()).is_ok()
    }

    fn close_call(&self, open_id: u64) {
        lock(&self.open_calls).retain(|c| c.id != open_id);
    }

    /// Answers the server's questions of an MRTR round no client will
    /// answer (`why`), as [`ModernFront::answer_instead`] does.
    fn close_round(&self, keys: RoundKeys, why: &str) {
        for (key, (id, method)) in keys {
            tracing::info!(%key, %why, "a parked round's question answered for the client");
            self.answer_instead(id, Some(&method), why);
        }
    }

    /// Registers an open call of `client`; untagged server requests may be
    /// handed to it through `interjections` (see [`ModernFront::interject`])
    /// until [`ModernFront::close_call`] with the returned id.
    fn open_call(&self, client: &str, interjections: mpsc::UnboundedSender<Request>) -> u64 {
        let id = self.next_id();
        lock(&self.open_calls).push(OpenCall {
            id,
            client: client.to_owned(),
            interjections,
        });
        id
    }
}

impl ModernSession {
    pub(super) async fn tools_call(
        self: &Arc<Self>,
        req: &Request,
        params: Value,
        meta: &RequestMeta,
    ) -> RpcResult {
        match req.params.as_ref().and_then(|p| p.get("requestState")) {
            Some(Value::String(state)) => return self.resume(state, req, meta).await,
            Some(_) => {
                return Err(
                    ShimError::InvalidParams("requestState must be a string".into()).into(),
                );
            }
            None => {}
        }
        let name = ttools::tool_name(Some(&params))?.to_owned();
        let support = self.front.support_of(&name).await;
        let task = match (support, meta.declares_tasks()) {
            (TaskSupport::Forbidden, _) | (TaskSupport::Optional, false) => None,
            (_, true) => Some(self.task_request()),
            (TaskSupport::Required, false) if self.front.config.drive_required_tasks => {
                Some(self.task_request())
            }
            (TaskSupport::Required, false) => return Err(ShimError::TasksExtensionRequired.into()),
        };
        if task.is_some() && meta.declares_tasks() {
            // A client at its cap is refused before the server starts work
            // (`track` still enforces it, for calls that race). A task the
            // shim drives for a plain call is not the client's: uncounted.
            self.front
                .ledger
                .check_room(&self.scope, self.front.clock.now_ms())
                .await
                .map_err(ShimError::from)?;
        }
        let mut legacy = ttools::call_params_to_legacy(&params, task.as_ref())?;
        let progress = self.front.progress.route(self, &req.id, &mut legacy);
        let called = Called::new(name, Some(&params));
        let mut call = self.start_call(called, legacy, task.is_some()).await?;
        call.progress = progress;
        self.run(call, meta).await
    }

    fn task_request(&self) -> TaskMetadata {
        TaskMetadata {
            ttl: self.front.config.task_ttl_ms,
            ..Default::default()
        }
    }

    async fn start_call(
        &self,
        called: Called,
        params: Value,
        asked_task: bool,
    ) -> Result<InFlight, ErrorObject> {
        self.front.initialized().await?;
        let (itx, irx) = mpsc::unbounded_channel();
        let open_id = self.front.open_call(&self.client, itx);
        let (dtx, drx) = oneshot::channel();
        let upstream = self.front.upstream.clone();
        // Weak, as below: only to cancel a task nobody wants any more.
        let owner = Arc::downgrade(&self.front);
        let (stop, registration) = AbortHandle::new_pair();
        // Its own future, not part of this request's: a call parked for
        // input outlives the client request that started it. Started here
        // rather than spawned, so the upstream request is written before
        // this returns, and the answer continues on the thread that reads
        // it (see `inline`), instead of waking a runtime worker each way.
        crate::inline::start_here(async move {
            // Marked: an upstream that can tell which call a question came
            // with (on its answer stream) says so (see `interject`).
            let call = crate::upstream::CALL_ORIGIN.scope(open_id, async move {
                upstream.request("tools/call", params).await
            });
            if asked_task {
                // Not aborted with the client's call: 2025-11-25 says a
                // task-augmented request is cancelled with `tasks/cancel`,
                // not `notifications/cancelled`, and a creation dropped
                // unread would leave a task nobody can reach running. Its
                // answer is awaited (the request timeout bounds it), and
                // the task it made cancelled if nobody wants it any more.
                let outcome = call.await.unwrap_or_else(|e| Err(e.into()));
                if let Err(Ok(created)) = dtx.send(outcome)
                    && let Some(task_id) = created.pointer("/task/taskId").and_then(Value::as_str)
                    && let Some(front) = owner.upgrade()
                {
                    tracing::info!(task = %task_id, "the client cancelled its call before the task was made");
                    front.cancel_driven(task_id.to_owned()).await;
                }
                return;
            }
            // Aborted: the request was dropped, which cancels it upstream.
            if let Ok(outcome) = Abortable::new(call, registration).await {
                let _ = dtx.send(outcome.unwrap_or_else(|e| Err(e.into())));
            }
        });
        // Weak: a parked call is kept by the front it would otherwise keep.
        let front = Arc::downgrade(&self.front);
        let abandon = IfDropped::new(move || {
            stop.abort();
            if let Some(front) = front.upgrade() {
                front.close_call(open_id);
            }
        });
        Ok(InFlight {
            open_id,
            called,
            done: drx,
            interjections: irx,
            asked_task,
            seq: 0,
            abandon: Some(abandon),
            progress: None,
        })
    }

    /// Waits for the call's answer; an interjected server request parks the
    /// call and answers the client `input_required`.
    async fn run(self: &Arc<Self>, mut call: InFlight, meta: &RequestMeta) -> RpcResult {
        loop {
            tokio::select! {
                done = &mut call.done => {
                    self.front.close_call(call.open_id);
                    // Questions handed to this call but not taken were
                    // another open call's (untagged ones go to the newest):
                    // pass them on, or refuse them, so that the server is
                    // not left waiting for an answer that never comes.
                    // (Closed first: no more arrive.)
                    while let Ok(req) = call.interjections.try_recv() {
                        if !self.front.interject(&req) {
                            self.front.refuse(req);
                        }
                    }
                    if let Some(abandon) = call.abandon.take() {
                        abandon.disarm();
                    }
                    let result = done.unwrap_or_else(|_| {
                        Err(ShimError::Upstream("the upstream call was dropped".into()).into())
                    })?;
                    if call.progress.is_some() {
                        // The progress the upstream sent before its answer
                        // is handled (while its route still stands) first.
                        self.front.upstream.events_handled().await;
                    }
                    let progress = call.progress.take();
                    return self
                        .answered(result, call.asked_task, &call.called, progress, meta)
                        .await;
                }
                Some(first) = call.interjections.recv() => {
                    let mut batch = vec![first];
                    while let Ok(more) = call.interjections.try_recv() {
                        batch.push(more);
                    }
                    if let Some(answer) = self.park(&mut call, batch, meta) {
                        return Ok(answer);
                    }
                }
            }
        }
    }

    /// Turns interjected requests into an MRTR round. Requests the client
    /// did not declare are refused upstream at once; if none remain, the
    /// call keeps running (`None`).
    fn park(&self, call: &mut InFlight, batch: Vec<Request>, meta: &RequestMeta) -> Option<Value> {
        let mut inputs = Map::new();
        let mut keys = RoundKeys::new();
        for req in batch {
            let declared = meta.takes(&req.method, req.params.as_ref());
            if !declared {
                let err = ShimError::MethodNotFound(input::not_declared(
                    &req.method,
                    req.params.as_ref(),
                ));
                let _ = self.front.upstream.respond(req.id, Err(err.into()));
                continue;
            }
            call.seq += 1;
            let key = input::input_key(&req.method, call.seq);
            let (modern, _) = input::legacy_request_to_input(&req);
            inputs.insert(key.clone(), modern);
            keys.insert(key, (req.id, req.method));
        }
        if inputs.is_empty() {
            return None;
        }
        let (dummy_tx, dummy_done) = oneshot::channel();
        drop(dummy_tx);
        let parked = InFlight {
            open_id: call.open_id,
            called: call.called.clone(),
            done: std::mem::replace(&mut call.done, dummy_done),
            interjections: std::mem::replace(&mut call.interjections, mpsc::unbounded_channel().1),
            asked_task: call.asked_task,
            seq: call.seq,
            abandon: call.abandon.take(),
            progress: call.progress.take(),
        };
        let held = Held {
            called: parked.called.clone(),
            keys,
            round: Round::Call(parked),
        };
        Some(self.hold(held, inputs))
    }

    /// Keeps `held` until the client's retry, and answers the client the
    /// MRTR round asking `inputs`, with the signed state naming it.
    pub(super) fn hold(&self, held: Held, inputs: Map<String, Value>) -> Value {
        let held_id = crate::ids::random_id();
        let state = self.front.signer.sign(&held_id, &self.scope);
        lock(&self.front.held).insert(held_id, held);
        json!({
            "resultType": result_type::INPUT_REQUIRED,
            "inputRequests": inputs,
            "requestState": state,
        })
    }

    /// The retry of an MRTR round: answer the held upstream requests with
    /// the client's `inputResponses`, then keep waiting on the same call.
    async fn resume(self: &Arc<Self>, state: &str, req: &Request, meta: &RequestMeta) -> RpcResult {
        let held_id = self.front.signer.verify(state, &self.scope)?;
        // Checked before the held round is taken, so that a client whose
        // retry is refused can send it again, corrected.
        let responses = input::input_responses(req.params.as_ref())?
            .cloned()
            .unwrap_or_default();
        ttools::tool_name(req.params.as_ref())?;
        let mut held = self.take_round(held_id, req, &responses)?;
        if let Round::Call(call) = &mut held.round
            && let Some(outcome) = ended(call)
        {
            // The upstream call ended while the round was parked (it timed
            // out, failed, or was answered): the client's answers belong to
            // nothing any more and must not reach the server. Its questions
            // are closed for the client, and the retry gets the outcome.
            self.front
                .close_round(held.keys, "the call ended before the client answered");
            let (tx, done) = oneshot::channel();
            let _ = tx.send(outcome);
            call.done = done;
            let Round::Call(call) = held.round else {
                unreachable!("matched above")
            };
            return self.run(call, meta).await;
        }
        if let Round::Call(call) = &mut held.round {
            // The retry is the request now: the call's progress is its.
            // Handed over before the answers go up: the server may report
            // progress the moment it has them.
            call.progress = self.front.progress.hand_over(
                call.progress.take(),
                self,
                &req.id,
                req.params.as_ref(),
            );
        }
        let answered: Vec<String> = held.keys.keys().cloned().collect();
        for (key, (id, _)) in held.keys {
            // Every key has an answer: checked above.
            let answer = responses.get(&key).cloned().unwrap_or_default();
            let _ = self.front.upstream.respond(id, Ok(answer));
        }
        match held.round {
            Round::Call(call) => self.run(call, meta).await,
            Round::Driven { task_id, unwanted } => {
                if let Some(live) = lock(&self.front.tasks).get_mut(&task_id) {
                    for key in &answered {
                        live.inputs.remove(key);
                    }
                }
                unwanted.disarm();
                self.drive(&task_id, &held.called, meta).await
            }
        }
    }

    /// The round `held_id` names, taken out of the table if the retry fits
    /// it: the same call, and an answer of the right kind for every input
    /// request. A retry that does not fit leaves the round open for one
    /// that does.
    fn take_round(
        &self,
        held_id: String,
        req: &Request,
        responses: &serde_json::Map<String, Value>,
    ) -> Result<Held, ShimError> {
        let mut table = lock(&self.front.held);
        let Some(held) = table.remove(&held_id) else {
            if let Some(why) = lock(&self.front.lost_rounds).remove(&held_id) {
                return Err(ShimError::Upstream(format!(
                    "the call this requestState held was lost with the upstream: {why}"
                )));
            }
            return Err(ShimError::InvalidParams(
                "invalid or expired requestState".into(),
            ));
        };
        let refused = if let Some(why) = held.called.refuses(req.params.as_ref()) {
            Some(why)
        } else {
            held.keys.iter().find_map(|(key, (_, method))| match responses.get(key) {
                None => Some(format!(
                    "the retry has no inputResponses.{key}: answer every input request of the round"
                )),
                Some(answer) => input::check_input_response(method, answer)
                    .err()
                    .map(|why| format!("inputResponses.{key}: {why}")),
            })
        };
        if let Some(why) = refused {
            table.insert(held_id, held);
            return Err(ShimError::InvalidParams(why));
        }
        Ok(held)
    }

    /// Registers a request of this client other than `tools/call` as open
    /// while it runs, until the returned guard drops. A question the server
    /// asks meanwhile may be that request's (a prompt or a resource that
    /// elicits), and must not go to another open tool call, least of all
    /// another client's (see [`ModernFront::interject`]): given to this
    /// one, it is refused, as outside any call. Returns the id to mark the
    /// upstream request with ([`crate::upstream::CALL_ORIGIN`]).
    pub(super) fn open_request(&self) -> (u64, IfDropped) {
        // No receiver: what is sent to this request is refused.
        let (interjections, _) = mpsc::unbounded_channel();
        let id = self.front.open_call(&self.client, interjections);
        let front = Arc::downgrade(&self.front);
        let close = IfDropped::new(move || {
            if let Some(front) = front.upgrade() {
                front.close_call(id);
            }
        });
        (id, close)
    }

    /// The upstream answered the call: a task handle or a plain result.
    async fn answered(
        self: &Arc<Self>,
        result: Value,
        asked_task: bool,
        called: &Called,
        progress: Option<crate::bridge::progress::ProgressRoute<ModernSession>>,
        meta: &RequestMeta,
    ) -> RpcResult {
        if !result.is_object() {
            return Err(ShimError::Upstream(
                "the server answered tools/call with a result that is not an object".into(),
            )
            .into());
        }
        if !(asked_task && result.get("task").is_some()) {
            return Ok(tsession::result_to_modern_owned(result, "tools/call", 0));
        }
        let created = ttask::create_result_to_modern(&result)?;
        let task_id = created
            .get("taskId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        self.track(&result, !meta.declares_tasks()).await?;
        // The task's progress comes under the call's token until it ends.
        if let Some(live) = lock(&self.front.tasks).get_mut(&task_id) {
            live.progress = progress;
        }
        if meta.declares_tasks() {
            let mut created = created;
            let max_ttl = self.front.config.max_task_ttl_ms;
            crate::bridge::bounded_ttl_member(Some(&mut created), "ttlMs", max_ttl);
            // As tasks/get reads it: waiting on input the shim does not
            // hold yet (the question is still on its way) is working.
            if created.get("status").and_then(Value::as_str) == Some("input_required")
                && self.front.pending_inputs(&task_id).is_none()
            {
                created["status"] = json!("working");
            }
            return Ok(created);
        }
        // A required tool, driven inside the shim for a client without tasks.
        tracing::info!(task = %task_id, "driving a required task for a client without the extension");
        self.drive(&task_id, called, meta).await
    }
}

/// The outcome of a parked call whose upstream request has already ended,
/// if it has.
fn ended(call: &mut InFlight) -> Option<RpcResult> {
    use tokio::sync::oneshot::error::TryRecvError;
    match call.done.try_recv() {
        Ok(outcome) => Some(outcome),
        Err(TryRecvError::Closed) => Some(Err(ShimError::Upstream(
            "the upstream call was dropped".into(),
        )
        .into())),
        Err(TryRecvError::Empty) => None,
    }
}
