//! `tools/call` for legacy clients: task creation (real or synthetic),
//! MRTR input rounds, and driving an unasked-for task to its end.

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::LegacySession;
use crate::bridge::Route;
use crate::bridge::cancel::{IfDropped, spawn_cleanup};
use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, Reply, Request};
use crate::ledger::TaskRecord;
use crate::revision::META_RELATED_TASK;
use crate::translate::raw::Params;
use crate::translate::{input, session as tsession, task as ttask, tools as ttools};
use crate::upstream::RpcResult;
use crate::wire::legacy::{self, TaskMetadata, TaskSupport};
use crate::wire::modern::{DetailedTask, Payload, result_type, result_type_of};
use crate::wire::{TaskStatus, to_value};

/// Retention of synthetic tasks when the client asked for none (ms).
const SYNTHETIC_TTL_MS: i64 = 3_600_000;

impl LegacySession {
    pub(super) async fn tools_call(self: &Arc<Self>, req: Request) -> Result<Reply, ErrorObject> {
        self.tools_call_from(req, None).await
    }

    /// [`Self::tools_call`], the first answer already `first` when given
    /// (the call went up as text, and its answer needs a tree).
    pub(super) async fn tools_call_from(
        self: &Arc<Self>,
        mut req: Request,
        mut first: Option<Value>,
    ) -> Result<Reply, ErrorObject> {
        let name = ttools::tool_name(req.params.as_ref())?.to_owned();
        ttools::check_task_param(req.params.as_ref())?;
        let support = self.front.policy.for_tool(&name);
        let asked = req.params.take().unwrap_or_else(|| json!({}));
        // The call as asked, made modern; kept (the upstream only borrows
        // it) for an input round's retry, which adds that round's answers.
        let (mut params, task) = ttools::call_params_to_modern_owned(asked);
        if support == TaskSupport::Required && task.is_none() {
            return Err(ShimError::MethodNotFound(format!(
                "tool {name:?} requires task augmentation (params.task)"
            ))
            .into());
        }
        // A tool the operator marked forbidden is refused as the 2025-11-25
        // spec says servers SHOULD: the operator said tasks of it must not
        // be, and a synthetic one would be a task all the same.
        if task.is_some() && self.front.operator_forbids_tasks(&name) {
            return Err(ShimError::MethodNotFound(format!(
                "tool {name:?} does not support task augmentation (taskSupport is \
                 forbidden): call it without params.task"
            ))
            .into());
        }
        // A tool forbidden only because the upstream offers no tasks runs
        // as a plain call, and the client that asked for a task gets one:
        // a synthetic task holding the plain outcome, since SDKs read the
        // answer to a task-augmented call as a CreateTaskResult.
        let asked = task;
        let task = asked.clone().filter(|_| support != TaskSupport::Forbidden);
        let forbidden_but_asked = asked.is_some() && task.is_none();
        if asked.is_some() {
            // A client at its cap is refused before the server starts work
            // (the insert below still enforces it, for calls that race).
            self.front
                .ledger
                .check_room(&self.scope, self.front.clock.now_ms())
                .await
                .map_err(ShimError::from)?;
        }
        for _ in 0..=self.front.config.max_input_rounds {
            let result = if let Some(first) = first.take() {
                first
            } else if asked.is_some() {
                self.call_making_task(&params).await?
            } else {
                // A plain answer goes to the client as the text it came
                // in, where the upstream hands it over as text.
                match self.call_plain(&req.method, Params::Tree(&params)).await? {
                    Reply::Tree(result) => result,
                    text => return Ok(text),
                }
            };
            match result_type_of(&result) {
                result_type::TASK => {
                    let answer = self.created(result, task.as_ref(), &req.id).await?;
                    if forbidden_but_asked {
                        return self.plain(answer, asked.as_ref()).await.map(Reply::Tree);
                    }
                    return Ok(Reply::Tree(answer));
                }
                result_type::INPUT_REQUIRED => {
                    // The retry is the call plus this round's answers,
                    // which replace the last round's.
                    self.answer_round(&mut params, &result, &req.id).await?;
                }
                _ => return self.plain(result, asked.as_ref()).await.map(Reply::Tree),
            }
        }
        Err(ShimError::Upstream(format!(
            "tool {name:?} asked for input more than {} times",
            self.front.config.max_input_rounds
        ))
        .into())
    }

    /// `tools/call` with `params` for a client that asked for a task. If
    /// the client cancels it before the server answers, the answer is still
    /// awaited (the request timeout bounds it) and the task it made is
    /// cancelled upstream: a server that makes the task anyway would
    /// otherwise run it to its end, unreachable, the client never having
    /// learnt its id.
    async fn call_making_task(self: &Arc<Self>, params: &Value) -> RpcResult {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let (this, params) = (self.clone(), params.clone());
        tokio::spawn(async move {
            let outcome = this.call_with("tools/call", &params).await;
            let Err(Ok(created)) = tx.send(outcome) else {
                return;
            };
            if result_type_of(&created) != result_type::TASK {
                return;
            }
            if let Some(task_id) = created.get("taskId").and_then(Value::as_str) {
                tracing::info!(task = %task_id, "the client cancelled its task call before the task was made; cancelling the task");
                this.cancel_driven(task_id.to_owned()).await;
            }
        });
        rx.await.unwrap_or_else(|_| {
            Err(ShimError::Internal("the upstream call was dropped".into()).into())
        })
    }

    /// The upstream made a task: hand it to a client that asked for one,
    /// or drive it to its end for a client that made a plain call.
    async fn created(
        self: &Arc<Self>,
        result: Value,
        asked: Option<&TaskMetadata>,
        during: &Id,
    ) -> RpcResult {
        let d = DetailedTask::from_value(&result)?;
        if asked.is_none() {
            tracing::info!(task = %d.task.task_id, "upstream made a task of a plain call; driving it");
            return self.drive(&d.task.task_id, during).await;
        }
        let max_ttl = self.front.config.max_task_ttl_ms;
        let mut task = ttask::detailed_to_legacy_record(&d);
        crate::bridge::bounded_ttl(&mut task.ttl, max_ttl);
        let record = TaskRecord::new(
            self.scope.clone(),
            task,
            Some(
                self.front
                    .clock
                    .record_expiry(d.task.ttl_ms, self.front.config.max_task_ttl_ms),
            ),
        );
        if let Err(e) = self
            .front
            .ledger
            .insert(record, self.front.clock.now_ms())
            .await
        {
            let (this, id) = (self.clone(), d.task.task_id.clone());
            let cancel = async move {
                this.upstream_request("tasks/cancel", &json!({"taskId": id}))
                    .await
            };
            return Err(crate::bridge::cancel_unrecorded(
                d.task.task_id.clone(),
                cancel,
                e,
            ));
        }
        let mut created = ttask::create_result_to_legacy(&result)?;
        crate::bridge::bounded_ttl_member(created.get_mut("task"), "ttl", max_ttl);
        Ok(created)
    }

    /// A plain upstream answer. A client that asked for a task gets a
    /// synthetic one (2025-11-25 requires `working` at creation) whose
    /// result the legacy methods serve from the ledger.
    async fn plain(&self, result: Value, asked: Option<&TaskMetadata>) -> RpcResult {
        let Some(meta) = asked else {
            return Ok(tsession::result_to_legacy_owned(result, "tools/call"));
        };
        let now = self.front.clock.now_iso();
        // A ttl below 1 was refused (`check_task_param`). One without
        // bound would let a client pin memory for good; the receiver may
        // lower it (and says so in the answer).
        let ttl = meta
            .ttl
            .unwrap_or(SYNTHETIC_TTL_MS)
            .min(self.front.config.max_task_ttl_ms);
        let task = legacy::Task {
            task_id: crate::ids::random_id(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: now.clone(),
            last_updated_at: now,
            ttl: Some(ttl),
            poll_interval: Some(self.front.config.default_poll_ms as i64),
            extra: Map::new(),
        };
        let mut ended = task.clone();
        ended.status = if ttask::is_error_result(&result) {
            TaskStatus::Failed
        } else {
            TaskStatus::Completed
        };
        let record = TaskRecord {
            scope: self.scope.clone(),
            task: ended,
            payload: Payload::Result(result),
            cancel_pinned: false,
            synthetic: true,
            expires_at: self.front.clock.expiry(Some(ttl)),
        };
        self.front
            .ledger
            .insert(record, self.front.clock.now_ms())
            .await
            .map_err(ShimError::from)?;
        tracing::debug!(task = %task.task_id, "synthetic task for a plain upstream answer");
        Ok(json!({"task": to_value(&task)}))
    }

    /// Waits for a task the client never saw and answers with its outcome.
    async fn drive(self: &Arc<Self>, task_id: &str, during: &Id) -> RpcResult {
        // Only the shim knows this task: if the client cancels the call
        // (dropping this wait), the task goes with it.
        let (this, id) = (self.clone(), task_id.to_owned());
        let unwanted = IfDropped::new(move || {
            // Withdrawn now, while the call's stream is still there to
            // carry it, not once the task reads cancelled.
            this.withdraw_questions(&id, "the request it was asked in was cancelled");
            spawn_cleanup(this.cancel_driven(id))
        });
        let d = self.await_task(task_id, Some(during)).await;
        unwanted.disarm();
        let failed = super::lock(&self.input_failures).remove(task_id);
        match d?.payload {
            Payload::Result(r) => {
                let mut r = tsession::result_to_legacy_owned(r, "tools/call");
                if let Some(m) = r.as_object_mut() {
                    crate::translate::remove_meta_key(m, META_RELATED_TASK);
                }
                Ok(r)
            }
            Payload::Error(e) => Err(e),
            _ => Err(failed.unwrap_or_else(|| ShimError::TaskCancelled.into())),
        }
    }

    /// `tasks/cancel` upstream for a driven task whose call was cancelled.
    async fn cancel_driven(self: Arc<Self>, task_id: String) {
        super::lock(&self.input_failures).remove(&task_id);
        let params = json!({"taskId": task_id});
        match self.upstream_request("tasks/cancel", &params).await {
            Ok(Ok(_)) => {
                tracing::info!(task = %task_id, "call cancelled; its task cancelled upstream");
                // Read again now: a question still open for the call is
                // withdrawn once the task reads cancelled.
                self.front.watchers.poke(&task_id);
            }
            Ok(Err(e)) => {
                tracing::info!(task = %task_id, code = e.code, "upstream refused to cancel a driven task")
            }
            Err(e) => tracing::warn!(task = %task_id, error = %e, "could not cancel a driven task"),
        }
    }

    /// One MRTR round: ask the client each input request, on behalf of its
    /// request `during`, then put the answers and the opaque
    /// `requestState` into the retried params.
    async fn answer_round(
        &self,
        params: &mut Value,
        result: &Value,
        during: &Id,
    ) -> Result<(), ErrorObject> {
        let requests = result
            .get("inputRequests")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let mut answers = Map::new();
        for (key, request) in &requests {
            let answer = self
                .ask_input(key, request, None, Some(during), None)
                .await?;
            answers.insert(key.clone(), answer);
        }
        let p = params.as_object_mut().ok_or_else(|| {
            ShimError::InvalidParams("tools/call params must be an object".into())
        })?;
        p.insert("inputResponses".into(), Value::Object(answers));
        match result.get("requestState") {
            Some(state) => p.insert("requestState".into(), state.clone()),
            None => p.remove("requestState"),
        };
        Ok(())
    }

    /// Asks the client one input request; `task_id` tags it with the
    /// related task (`None` for requests outside a task the client knows),
    /// `during` names the client request it is asked for, if any, and
    /// `serves` the task that needs the answer, if any (tagged or driven:
    /// see [`LegacySession::withdraw_questions`]). The question's route:
    /// the tagged task's, else the request's it is asked during.
    /// Returns the answer as a modern input response.
    pub(super) async fn ask_input(
        &self,
        key: &str,
        request: &Value,
        task_id: Option<&str>,
        during: Option<&Id>,
        serves: Option<&str>,
    ) -> Result<Value, ErrorObject> {
        let method = request
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let declared = self.client_takes(method, request.get("params"));
        if !declared {
            // Declined at once, as the client would decline what it
            // cannot show: the call goes on with that answer.
            tracing::info!(%method, "input the client did not declare; declined for it");
            return match method {
                "elicitation/create" => Ok(json!({"action": "decline"})),
                "roots/list" => Ok(json!({"roots": []})),
                _ => Err(ShimError::Internal(format!(
                    "the server needs {method:?} input, which this client did not declare"
                ))
                .into()),
            };
        }
        let mut req =
            input::input_request_to_legacy(key, request, task_id.unwrap_or(""), 0.into())?;
        if task_id.is_none()
            && let Some(p) = req.params.as_mut().and_then(Value::as_object_mut)
        {
            crate::translate::remove_meta_key(p, META_RELATED_TASK);
        }
        let route = match (task_id, during) {
            (Some(task), _) => Route::Task(task.to_owned()),
            (None, Some(during)) => Route::During(during.clone()),
            (None, None) => Route::Session,
        };
        match self.ask(req, route, serves).await {
            // An answer that is no ElicitResult (`"yes"`, `{}`, an unknown
            // action) has not accepted anything either; forwarded, it made
            // a tasks/update the schema refuses.
            Ok(answer) if method == "elicitation/create" && !input::is_elicit_result(&answer) => {
                tracing::warn!(%answer, "client answered an elicitation with no ElicitResult; answering cancel");
                Ok(json!({"action": "cancel"}))
            }
            Ok(answer) => Ok(input::legacy_answer_to_input_response(&answer)),
            // A client that errors on an elicitation has not accepted it.
            Err(e) if method == "elicitation/create" => {
                tracing::info!(
                    code = e.code,
                    "client refused an elicitation; answering cancel"
                );
                Ok(json!({"action": "cancel"}))
            }
            Err(e) => Err(e),
        }
    }
}
