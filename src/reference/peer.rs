//! The server's side of the conversation: answers, notifications, and
//! requests of its own whose responses come back through [`Peer::route`].

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use super::tasks::Outcome;
use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, Message};

/// Where a server's outgoing messages go. Unbounded on purpose: status
/// hooks send while holding the task-table lock and must never wait.
pub(crate) type Outbox = mpsc::UnboundedSender<Message>;

pub(crate) struct Peer {
    out: Outbox,
    next_id: AtomicI64,
    pending: Mutex<HashMap<Id, oneshot::Sender<Outcome>>>,
}

impl Peer {
    pub(crate) fn new(out: Outbox) -> Self {
        Self {
            out,
            next_id: AtomicI64::new(1),
            pending: Mutex::new(HashMap::new()),
        }
    }

    pub(crate) fn outbox(&self) -> Outbox {
        self.out.clone()
    }

    pub(crate) fn send(&self, msg: Message) {
        // A closed outbox means the transport is gone; nothing to tell.
        let _ = self.out.send(msg);
    }

    /// Answers request `id` with a result or an error.
    pub(crate) fn respond(&self, id: Id, answer: Result<Value, ShimError>) {
        self.send(match answer {
            Ok(v) => Message::response(id, v),
            Err(e) => Message::error(Some(id), e.to_error_object()),
        });
    }

    /// Answers request `id` with an outcome (a tool's own JSON-RPC error
    /// passes through unchanged).
    pub(crate) fn respond_outcome(&self, id: Id, outcome: Outcome) {
        self.send(match outcome {
            Ok(v) => Message::response(id, v),
            Err(e) => Message::error(Some(id), e),
        });
    }

    /// Sends a request to the client and waits for its answer. A session
    /// that ends first reads as an internal error.
    pub(crate) async fn request(&self, method: &str, params: Value) -> Outcome {
        let id = Id::Num(self.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id.clone(), tx);
        self.send(Message::request(id.clone(), method, params));
        let answer = rx.await;
        self.lock().remove(&id);
        answer.unwrap_or_else(|_| {
            Err(ErrorObject::new(
                crate::error::codes::INTERNAL_ERROR,
                "the session ended before the client answered",
            ))
        })
    }

    /// Hands a client response to the request waiting for it. Responses to
    /// nothing we asked are logged and dropped.
    pub(crate) fn route(&self, msg: Message) {
        let (id, outcome) = match msg {
            Message::Response(r) => (r.id, Ok(r.result)),
            Message::Error(e) => match e.id {
                Some(id) => (id, Err(e.error)),
                None => {
                    tracing::warn!(error = ?e.error, "client sent an error without an id");
                    return;
                }
            },
            _ => return,
        };
        match self.lock().remove(&id) {
            Some(tx) => {
                let _ = tx.send(outcome);
            }
            None => tracing::warn!(%id, "response to no request of ours"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Id, oneshot::Sender<Outcome>>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `params.<key>` as a string, or `-32602`.
pub(crate) fn param_str<'a>(params: Option<&'a Value>, key: &str) -> Result<&'a str, ShimError> {
    params
        .and_then(|p| p.get(key))
        .and_then(Value::as_str)
        .ok_or_else(|| ShimError::InvalidParams(format!("\"{key}\" must be a string")))
}
