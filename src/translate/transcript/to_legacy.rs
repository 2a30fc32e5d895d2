//! A 2026-07-28 transcript as a 2025-11-25 peer would see it (§3.2 of the
//! design: modern client, shim, legacy server).

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use super::notes::{modern_only_note, noted_answer};
use super::{Dir, Pending, Record};
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message, Request};
use crate::translate::session::{self, LegacyClient};
use crate::translate::tools::{self, TaskPolicy};
use crate::translate::{input, notify, task};
use crate::wire::legacy::{self, TaskMetadata};
use crate::wire::modern::{Payload, RequestMeta, UpdateTaskParams, result_type, result_type_of};
use crate::wire::{TaskStatus, from_value, to_value};

/// What the legacy side has seen of one task.
struct TaskView {
    last: legacy::Task,
    /// Cancelled through `tasks/cancel`: reported cancelled from then on.
    pinned: bool,
    /// Id of the `tasks/result` the shim holds open upstream.
    held: Option<Id>,
    /// Input key → id of the legacy request that carried it.
    sent: HashMap<String, Id>,
    answered: HashSet<String>,
    result_sent: bool,
}

pub(super) struct ToLegacy {
    client: LegacyClient,
    pending: HashMap<(Dir, Id), Pending>,
    tasks: HashMap<String, TaskView>,
    /// Look-ahead: `tools/call` record index → the `params.task` to add,
    /// for calls the modern server answered with a task.
    task_calls: HashMap<usize, TaskMetadata>,
    /// The legacy session is open: `server/discover` opened it, or the
    /// first request did (a modern client need not discover first).
    opened: bool,
}

impl super::Translator for ToLegacy {
    fn record(&mut self, i: usize, rec: &Record, msg: &Message) -> super::Translated {
        match (rec.dir, msg) {
            (Dir::C2s, Message::Request(q)) => self.client_request(i, rec, q),
            (Dir::S2c, Message::Notification(n)) => {
                self.server_notification(rec, &n.method, n.params.as_ref())
            }
            (Dir::S2c, Message::Response(_) | Message::Error(_)) => self.answer(rec, msg),
            // Client notifications (cancelled, progress) read the same in both.
            _ => Ok(vec![rec.clone_plain()]),
        }
    }
}

impl ToLegacy {
    pub(super) fn new(records: &[Record], pairs: &HashMap<usize, usize>) -> ToLegacy {
        ToLegacy {
            // Replaced by the one `server/discover` declares, if any.
            client: LegacyClient::undeclared("unknown"),
            pending: HashMap::new(),
            tasks: HashMap::new(),
            task_calls: super::lookahead::task_calls(records, pairs),
            opened: false,
        }
    }

    fn client_request(
        &mut self,
        i: usize,
        rec: &Record,
        q: &Request,
    ) -> Result<Vec<Record>, ShimError> {
        let (lq, meta) = session::request_to_legacy(q)?;
        let mut pending = Pending::of(q);
        let is_retry = lq
            .params
            .as_ref()
            .is_some_and(|p| p.get("inputResponses").is_some() || p.get("requestState").is_some());
        let mut out = Vec::new();
        let note = modern_only_note(&q.method, is_retry);
        if !self.opened && note.is_none() && q.method != "server/discover" {
            // What the live shim does before a first request that is not
            // server/discover: open the legacy session with what the
            // request's `_meta` says of the client.
            let init = self.open("initialize".into(), &meta)?;
            out.push(rec.derive(Dir::C2s, init, Some(
                "synthesised: the shim opens the legacy session before the first request (this transcript has no server/discover, so the server's answer is not in it)".into(),
            )));
            out.push(initialized(rec));
        }
        out.extend(match q.method.as_str() {
            // Requests without a legacy form become notes, and so do their answers.
            _ if note.is_some() => vec![rec.noted(note.unwrap_or_default())],
            // The live shim opens one legacy session and answers later
            // discovers from it: no second initialize.
            "server/discover" if self.opened => vec![rec.noted(
                "answered by the shim from the legacy session it opened already (no second initialize)",
            )],
            "server/discover" => {
                let init = self.open(q.id.clone(), &meta)?;
                let note = "the shim opens the legacy session with initialize and answers server/discover from it";
                vec![rec.derive(Dir::C2s, init, Some(note.into()))]
            }
            "tasks/update" => self.update(rec, q)?,
            "tools/call" => {
                let params = lq.params.clone().unwrap_or_else(|| json!({}));
                let params = tools::call_params_to_legacy(&params, self.task_calls.get(&i))?;
                vec![rec.derive(
                    Dir::C2s,
                    Message::Request(Request {
                        params: Some(params),
                        ..lq
                    }),
                    None,
                )]
            }
            _ => vec![rec.derive(Dir::C2s, Message::Request(lq), None)],
        });
        pending.noted = out.iter().any(|r| r.msg.is_none()) || q.method == "tasks/update";
        self.pending.insert((Dir::C2s, q.id.clone()), pending);
        Ok(out)
    }

    /// The `initialize` request (id `id`) that opens the legacy session,
    /// built from a modern request's `_meta`; the session's client is the
    /// one it declares from then on.
    fn open(&mut self, id: Id, meta: &RequestMeta) -> Result<Message, ShimError> {
        self.opened = true;
        let params = session::initialize_params_from_meta(meta);
        self.client = LegacyClient::from_initialize(Some(&params))?;
        Ok(Message::request(id, "initialize", params))
    }

    /// `tasks/update` → the legacy client's answers to the captured requests;
    /// unknown or already answered keys are ignored, as the extension says.
    fn update(&mut self, rec: &Record, q: &Request) -> Result<Vec<Record>, ShimError> {
        let upd: UpdateTaskParams = from_value(
            "tasks/update params",
            q.params.as_ref().unwrap_or(&Value::Null),
        )?;
        let mut out = Vec::new();
        let mut ignored = Vec::new();
        for (key, answer) in upd.input_responses {
            let open = self.tasks.get_mut(&upd.task_id).and_then(|v| {
                v.sent
                    .get(&key)
                    .cloned()
                    .filter(|_| v.answered.insert(key.clone()))
            });
            match open {
                Some(id) => {
                    let note = format!(
                        "answers inputRequests[\"{key}\"] (from tasks/update {})",
                        q.id
                    );
                    out.push(rec.derive(Dir::C2s, Message::response(id, answer), Some(note)));
                }
                _ => ignored.push(key),
            }
        }
        if !ignored.is_empty() || out.is_empty() {
            out.push(rec.noted(format!(
                "tasks/update: keys {ignored:?} match no open input request of task {} and are ignored",
                upd.task_id
            )));
        }
        Ok(out)
    }

    fn server_notification(
        &mut self,
        rec: &Record,
        method: &str,
        params: Option<&Value>,
    ) -> Result<Vec<Record>, ShimError> {
        match method {
            notify::MODERN_STATUS => {
                let (t, payload) = notify::status_to_legacy(params.unwrap_or(&Value::Null))?;
                let (t, payload) = self.pin(t, payload);
                let n = Message::notification(notify::LEGACY_STATUS, to_value(&t));
                let mut out = vec![rec.derive(Dir::S2c, n, None)];
                self.after_view(rec, &t, &payload, &mut out)?;
                Ok(out)
            }
            "notifications/subscriptions/acknowledged" => {
                Ok(vec![rec.noted(
                    "2025-11-25 has no listen streams: nothing to acknowledge",
                )])
            }
            _ => Ok(vec![rec.clone_plain()]),
        }
    }

    fn answer(&mut self, rec: &Record, msg: &Message) -> Result<Vec<Record>, ShimError> {
        let pending = msg
            .id()
            .and_then(|id| self.pending.remove(&(Dir::C2s, id.clone())));
        if let Some(p) = pending.as_ref().filter(|p| p.noted) {
            return Ok(vec![match msg {
                // Not an acknowledgement: what the server refused, said.
                Message::Error(e) => rec.noted(format!(
                    "the server refused {} ({}: {})",
                    p.method, e.error.code, e.error.message
                )),
                _ => rec.noted(noted_answer(&p.method)),
            }]);
        }
        let (Some(p), Message::Response(r)) = (pending, msg) else {
            // Errors read the same in both; unknown answers pass as they are.
            return Ok(vec![match msg {
                Message::Response(r) => rec.derive(
                    Dir::S2c,
                    Message::response(r.id.clone(), session::result_to_legacy(&r.result, "")),
                    None,
                ),
                _ => rec.clone_plain(),
            }]);
        };
        let reply = |result: Value, note: Option<String>| {
            rec.derive(Dir::S2c, Message::response(r.id.clone(), result), note)
        };
        let mut out = Vec::new();
        match p.method.as_str() {
            "server/discover" => {
                out.push(reply(session::discover_to_initialize(&r.result, &self.client)?, None));
                out.push(initialized(rec));
            }
            "tools/list" => out.push(reply(tools::tools_list_to_legacy(&r.result, &TaskPolicy::optional()), None)),
            "tools/call" if tools::is_task_result(&r.result) => {
                let created = task::create_result_to_legacy(&r.result)?;
                let c: legacy::CreateTaskResult = from_value("CreateTaskResult", &created)?;
                self.view(&c.task);
                out.push(reply(created, None));
            }
            "tools/call" if result_type_of(&r.result) == result_type::INPUT_REQUIRED => out.push(rec.noted(
                "MRTR input_required: 2025-11-25 has no counterpart; the server's own server→client requests \
                 for this call are held by the shim and shown as inputRequests",
            )),
            "tasks/get" => {
                let (t, payload) = task::get_result_to_legacy(&r.result)?;
                let (t, payload) = self.pin(t, payload);
                out.push(reply(to_value(&t), None));
                self.after_view(rec, &t, &payload, &mut out)?;
            }
            "tasks/cancel" => out.push(self.cancel(rec, r.id.clone(), p.task_id.as_deref())),
            m => out.push(reply(session::result_to_legacy(&r.result, m), None)),
        }
        Ok(out)
    }

    /// The modern ack of `tasks/cancel` → the legacy answer: the task in
    /// `cancelled` (pinned from now on), or `-32602` if it had already ended.
    fn cancel(&mut self, rec: &Record, id: Id, task_id: Option<&str>) -> Record {
        let Some(v) = task_id.and_then(|t| self.tasks.get_mut(t)) else {
            return rec.noted("the legacy answer is the task in cancelled, but this transcript never showed the task");
        };
        // Pinned tasks are `cancelled` here, so a second cancel is refused too.
        if v.last.status.is_terminal() {
            let e = ShimError::TaskTerminal(v.last.status.to_string()).to_error_object();
            let note = "2025-11-25 refuses to cancel a task that already ended".to_owned();
            return rec.derive(Dir::S2c, Message::error(Some(id), e), Some(note));
        }
        v.pinned = true;
        v.last = task::cancelled_view(&v.last, &v.last.last_updated_at);
        rec.derive(Dir::S2c, Message::response(id, to_value(&v.last)), None)
    }

    /// A task cancelled through `tasks/cancel` stays cancelled (2025-11-25
    /// rule), even if the modern server let it finish cooperatively.
    fn pin(&self, t: legacy::Task, payload: Payload) -> (legacy::Task, Payload) {
        match self.tasks.get(&t.task_id) {
            Some(v) if v.pinned => {
                let mut c = task::cancelled_view(&t, &v.last.last_updated_at);
                if t.status != TaskStatus::Cancelled {
                    // The server's message describes the status it reported.
                    c.status_message = None;
                }
                (c, Payload::None)
            }
            _ => (t, payload),
        }
    }

    fn view(&mut self, t: &legacy::Task) -> &mut TaskView {
        let v = self
            .tasks
            .entry(t.task_id.clone())
            .or_insert_with(|| TaskView {
                last: t.clone(),
                pinned: false,
                held: None,
                sent: HashMap::new(),
                answered: HashSet::new(),
                result_sent: false,
            });
        v.last = t.clone();
        v
    }

    /// What the shim does upstream after seeing a task's status: hold a
    /// `tasks/result` open to receive input requests (each new key becomes
    /// a tagged server→client request), and fetch the payload once the
    /// task is terminal.
    fn after_view(
        &mut self,
        rec: &Record,
        t: &legacy::Task,
        payload: &Payload,
        out: &mut Vec<Record>,
    ) -> Result<(), ShimError> {
        let tid = t.task_id.clone();
        let v = self.view(t);
        let fetch = |id: &Id, note: &str| {
            let q = Message::request(id.clone(), "tasks/result", json!({"taskId": tid}));
            rec.derive(Dir::C2s, q, Some(note.into()))
        };
        if let Payload::Input(inputs) = payload {
            if v.held.is_none() {
                let id = Id::Str(format!("result:{tid}"));
                out.push(fetch(&id, "synthesised: the shim holds tasks/result open to receive the task's input requests"));
                v.held = Some(id);
            }
            for (key, req) in inputs {
                if v.sent.contains_key(key) {
                    continue;
                }
                let id = Id::Str(format!("{tid}/{key}"));
                let q = input::input_request_to_legacy(key, req, &tid, id.clone())?;
                v.sent.insert(key.clone(), id);
                let note = format!(
                    "inputRequests[\"{key}\"] of task {tid}, sent on the held tasks/result"
                );
                out.push(rec.derive(Dir::S2c, Message::Request(q), Some(note)));
            }
        }
        let closes_held = v.held.is_some() || t.status != TaskStatus::Cancelled;
        if t.status.is_terminal() && !v.result_sent && closes_held {
            v.result_sent = true;
            let id = match v.held.take() {
                Some(id) => id,
                None => {
                    let id = Id::Str(format!("result:{tid}"));
                    out.push(fetch(
                        &id,
                        "synthesised: the shim fetches tasks/result once to inline the payload",
                    ));
                    id
                }
            };
            let answer = match task::task_result_to_legacy(&tid, t.status, payload) {
                Ok(result) => Message::response(id, result),
                Err(e) => Message::error(Some(id), e),
            };
            out.push(rec.derive(
                Dir::S2c,
                answer,
                Some("synthesised: the legacy answer to tasks/result".into()),
            ));
        }
        Ok(())
    }
}

/// The `notifications/initialized` the shim sends to complete the legacy
/// handshake, standing beside `rec`.
fn initialized(rec: &Record) -> Record {
    let done = Message::notification("notifications/initialized", json!({}));
    rec.derive(
        Dir::C2s,
        done,
        Some("synthesised: completes the legacy handshake".into()),
    )
}
