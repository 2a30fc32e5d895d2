//! A 2025-11-25 transcript as a 2026-07-28 peer would see it (§3.1 of the
//! design: legacy client, shim, modern server).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::lookahead::LegacyLookahead;
use super::notes::{answer_note, client_only_note, unknown_payload};
use super::{Dir, Pending, Record};
use crate::error::{ShimError, codes};
use crate::jsonrpc::{Id, Message, Request};
use crate::translate::session::{self, LegacyClient};
use crate::translate::{input, notify, task, tools};
use crate::wire::{TaskStatus, from_value, legacy};

/// Subscription id assumed for status notifications: 2026-07-28 only sends
/// `notifications/tasks` on a `subscriptions/listen` stream, which a legacy
/// transcript never opened.
const ASSUMED_SUBSCRIPTION: &str = "tasks-stream";

pub(super) struct ToModern {
    client: LegacyClient,
    pending: HashMap<(Dir, Id), Pending>,
    status: HashMap<String, TaskStatus>,
    ahead: LegacyLookahead,
}

impl super::Translator for ToModern {
    fn record(&mut self, i: usize, rec: &Record, msg: &Message) -> super::Translated {
        match (rec.dir, msg) {
            (Dir::C2s, Message::Request(q)) => self.client_request(rec, q),
            (Dir::S2c, Message::Request(q)) => Ok(vec![self.server_request(i, rec, q)]),
            (_, Message::Notification(n)) => {
                self.notification(i, rec, &n.method, n.params.as_ref())
            }
            (dir, answer) => self.answer(i, rec, dir, answer),
        }
    }
}

impl ToModern {
    pub(super) fn new(records: &[Record], pairs: &HashMap<usize, usize>) -> ToModern {
        ToModern {
            // Replaced by the one `initialize` declares, if any.
            client: LegacyClient::undeclared("unknown"),
            pending: HashMap::new(),
            status: HashMap::new(),
            ahead: LegacyLookahead::scan(records, pairs),
        }
    }

    fn client_request(&mut self, rec: &Record, q: &Request) -> Result<Vec<Record>, ShimError> {
        let mut pending = Pending::of(q);
        let out = match q.method.as_str() {
            "initialize" => {
                self.client = LegacyClient::from_initialize(q.params.as_ref())?;
                let params = json!({"_meta": session::modern_meta(&self.client)});
                let discover = Request {
                    id: q.id.clone(),
                    method: "server/discover".into(),
                    params: Some(params),
                };
                rec.derive(Dir::C2s, Message::Request(discover), None)
            }
            m @ ("ping"
            | "logging/setLevel"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "tasks/result"
            | "tasks/list") => {
                if m == "logging/setLevel" {
                    let level = q
                        .params
                        .as_ref()
                        .and_then(|p| p.get("level"))
                        .and_then(Value::as_str);
                    self.client.log_level = level.map(str::to_owned);
                }
                pending.noted = true;
                rec.noted(client_only_note(m))
            }
            "tools/call" => {
                let (params, task_meta) =
                    tools::call_params_to_modern(q.params.as_ref().unwrap_or(&json!({})));
                pending.task_augmented = task_meta.is_some();
                let call = Request {
                    params: Some(params),
                    ..q.clone()
                };
                rec.derive(
                    Dir::C2s,
                    Message::Request(session::request_to_modern(&call, &self.client)),
                    None,
                )
            }
            _ => rec.derive(
                Dir::C2s,
                Message::Request(session::request_to_modern(q, &self.client)),
                None,
            ),
        };
        self.pending.insert((Dir::C2s, q.id.clone()), pending);
        Ok(vec![out])
    }

    fn server_request(&mut self, i: usize, rec: &Record, q: &Request) -> Record {
        self.pending
            .insert((Dir::S2c, q.id.clone()), Pending::of(q));
        if let Some(e) = self.ahead.asked_at(i) {
            return rec.noted(format!(
                "2026-07-28 has no server→client requests: this is inputRequests[\"{}\"] of task {} \
                 (shown by tasks/get and notifications/tasks while it is unanswered)",
                e.key, e.task_id
            ));
        }
        rec.noted(match q.method.as_str() {
            "ping" => "2026-07-28 has no ping: the shim answers the server's pings itself",
            _ => "2026-07-28 has no server→client requests outside tasks: the server asks through an \
                  input_required result (MRTR) of the request in progress",
        })
    }

    fn notification(
        &mut self,
        i: usize,
        rec: &Record,
        method: &str,
        params: Option<&Value>,
    ) -> Result<Vec<Record>, ShimError> {
        let out = match method {
            "notifications/initialized" => rec.noted("2026-07-28 has no handshake: nothing to send"),
            "notifications/roots/list_changed" => {
                rec.noted("2026-07-28 has no roots/list_changed: roots are asked for per request")
            }
            "notifications/elicitation/complete" => rec.noted(
                "2026-07-28 has no elicitation/complete: the client learns the outcome from the next tasks/get",
            ),
            notify::LEGACY_STATUS => {
                let t: legacy::Task = from_value("notifications/tasks/status params", params.unwrap_or(&Value::Null))?;
                self.status.insert(t.task_id.clone(), t.status);
                let payload = self.ahead.payload_for(&t, i);
                if let Some(why) = unknown_payload(&t, &payload) {
                    return Ok(vec![rec.noted(why)]);
                }
                let p = notify::status_to_modern(&t, &payload, &Id::Str(ASSUMED_SUBSCRIPTION.into()));
                let n = Message::notification(notify::MODERN_STATUS, p);
                rec.derive(rec.dir, n, Some(format!(
                    "2026-07-28 sends this only on a subscriptions/listen stream with taskIds; \
                     subscription {ASSUMED_SUBSCRIPTION:?} assumed"
                )))
            }
            _ => rec.clone_plain(),
        };
        Ok(vec![out])
    }

    fn answer(
        &mut self,
        i: usize,
        rec: &Record,
        dir: Dir,
        msg: &Message,
    ) -> Result<Vec<Record>, ShimError> {
        let id = msg.id().cloned();
        let pending = id
            .as_ref()
            .and_then(|id| self.pending.remove(&(dir.other(), id.clone())));
        if dir == Dir::C2s {
            return Ok(self.client_answer(i, rec, msg));
        }
        let Some(p) = pending else {
            // Answers nothing we saw: only the generic result rule applies.
            return Ok(vec![match msg {
                Message::Response(r) => {
                    let result = session::result_to_modern(&r.result, "", 0);
                    rec.derive(dir, Message::response(r.id.clone(), result), None)
                }
                _ => rec.clone_plain(),
            }]);
        };
        if p.noted {
            return Ok(vec![rec.noted(answer_note(&p.method))]);
        }
        let (id, result) = match msg {
            Message::Response(r) => (r.id.clone(), &r.result),
            Message::Error(e) => {
                let terminal = p
                    .task_id
                    .as_ref()
                    .and_then(|t| self.status.get(t))
                    .is_some_and(|s| s.is_terminal());
                if p.method == "tasks/cancel" && e.error.code == codes::INVALID_PARAMS && terminal {
                    let ack = Message::response(
                        e.id.clone().unwrap_or(Id::Num(0)),
                        task::cancel_result_to_modern(),
                    );
                    let note =
                        "2026-07-28 acknowledges a cancel of a task that already ended".to_owned();
                    return Ok(vec![rec.derive(dir, ack, Some(note))]);
                }
                return Ok(vec![rec.clone_plain()]);
            }
            _ => return Ok(vec![rec.clone_plain()]),
        };
        let modern = match p.method.as_str() {
            "initialize" => session::initialize_to_discover(result, 0)?,
            "tools/list" => tools::tools_list_to_modern(result, 0).0,
            // A 2025-11-25 server that does not do tasks for this call
            // ignores `params.task` and answers plainly (spec: "MUST process
            // requests of that type normally"); that is a plain answer in
            // 2026-07-28 too, handled by the generic rule below.
            "tools/call" if p.task_augmented && result.get("task").is_some() => {
                let created: legacy::CreateTaskResult = from_value("CreateTaskResult", result)?;
                self.status
                    .insert(created.task.task_id.clone(), created.task.status);
                task::create_result_to_modern(result)?
            }
            "tasks/get" => {
                let t: legacy::Task = from_value("tasks/get result", result)?;
                self.status.insert(t.task_id.clone(), t.status);
                let payload = self.ahead.payload_for(&t, i);
                if let Some(why) = unknown_payload(&t, &payload) {
                    return Ok(vec![rec.noted(why)]);
                }
                task::get_result_to_modern(&t, &payload)
            }
            "tasks/cancel" => {
                if let Some(t) = &p.task_id {
                    self.status.insert(t.clone(), TaskStatus::Cancelled);
                }
                task::cancel_result_to_modern()
            }
            m => session::result_to_modern(result, m, 0),
        };
        Ok(vec![rec.derive(dir, Message::response(id, modern), None)])
    }

    /// A client's answer to a server→client request: a tagged input request's
    /// answer becomes `tasks/update` (plus the server's ack); anything else
    /// has no counterpart.
    fn client_answer(&mut self, i: usize, rec: &Record, msg: &Message) -> Vec<Record> {
        let Some(e) = self.ahead.answered_at(i) else {
            return vec![
                rec.noted("answers a server→client request, which 2026-07-28 does not have"),
            ];
        };
        let Message::Response(r) = msg else {
            return vec![rec.noted(format!(
                "a JSON-RPC error has no inputResponses form: inputRequests[\"{}\"] of task {} stays unanswered",
                e.key, e.task_id
            ))];
        };
        let mut answers = Map::new();
        answers.insert(
            e.key.clone(),
            input::legacy_answer_to_input_response(&r.result),
        );
        let id = Id::Str(format!("update:{}/{}", e.task_id, e.key));
        let update = Request {
            id: id.clone(),
            method: "tasks/update".into(),
            params: Some(input::update_params(&e.task_id, answers)),
        };
        let update = Message::Request(session::request_to_modern(&update, &self.client));
        let ack = Message::response(id, json!({"resultType": "complete"}));
        vec![
            rec.derive(
                Dir::C2s,
                update,
                Some(format!(
                    "answers inputRequests[\"{}\"] (id {} in 2025-11-25)",
                    e.key, r.id
                )),
            ),
            rec.derive(
                Dir::S2c,
                ack,
                Some("synthesised: the server's empty acknowledgement".into()),
            ),
        ]
    }
}
