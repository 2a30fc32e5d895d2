//! One 2025-11-25 HTTP session: its [`ReferenceServer`] and the routing of
//! the server's outgoing messages to the HTTP exchanges of the session.
//!
//! Answers go to the POST that asked. Server requests go to the SSE stream
//! of the exchange they belong to: the open `tasks/result` of their related
//! task, else an open `tools/call` (a request asked before the task exists);
//! failing that, to the GET stream (kept in a short backlog until one
//! opens). Notifications (task status) are unsolicited: GET stream only.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{accepts, error_response, json_response, message_stream, sse_only, sse_response};
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message, Request};
use crate::reference::ReferenceServer;
use crate::reference::seeded::id as random_id;
use crate::revision::{META_RELATED_TASK, Revision};

/// The session header of 2025-11-25 Streamable HTTP.
pub(super) const SESSION_HEADER: &str = "mcp-session-id";

/// Server requests kept for a GET stream that is not open yet.
const MAX_BACKLOG: usize = 64;
/// Methods whose POST answers as SSE (they may carry server requests).
const STREAMED: &[&str] = &["tools/call", "tasks/result"];

/// Where the messages of one in-flight client request go.
struct Waiter {
    tx: mpsc::UnboundedSender<Message>,
    method: String,
    /// `params.taskId` of a `tasks/result`.
    task_id: Option<String>,
    /// The POST answers as SSE, so it can carry server requests.
    streaming: bool,
    seq: u64,
}

#[derive(Default)]
struct Routes {
    waiters: HashMap<Id, Waiter>,
    get_stream: Option<mpsc::UnboundedSender<Message>>,
    backlog: VecDeque<Message>,
    seq: u64,
}

pub(super) struct Session {
    pub(super) id: String,
    pub(super) server: ReferenceServer,
    routes: Mutex<Routes>,
}

/// An error response without id giving `why`.
pub(super) fn refuse(status: StatusCode, why: &str) -> Response {
    error_response(status, None, &ShimError::InvalidRequest(why.to_owned()))
}

/// `resp` with the session header.
pub(super) fn with_session(mut resp: Response, id: &str) -> Response {
    if let Ok(v) = HeaderValue::from_str(id) {
        resp.headers_mut().insert(SESSION_HEADER, v);
    }
    resp
}

async fn demux(session: Weak<Session>, mut rx: mpsc::UnboundedReceiver<Message>) {
    while let Some(msg) = rx.recv().await {
        let Some(s) = session.upgrade() else { break };
        s.routes().route(msg);
    }
}

impl Routes {
    /// Answers go to their exchange; server requests to the SSE stream of
    /// the exchange they belong to (the `tasks/result` of their related
    /// task, else an open `tools/call`), else to the GET stream;
    /// notifications are unsolicited and go to the GET stream.
    fn route(&mut self, msg: Message) {
        let target = match &msg {
            Message::Response(_) | Message::Error(_) => {
                msg.id().and_then(|id| self.waiters.get(id))
            }
            Message::Request(r) => {
                let task = related_task(r.params.as_ref());
                self.waiters
                    .values()
                    .filter(|w| w.streaming && !w.tx.is_closed())
                    .filter(|w| match &task {
                        Some(t) => w.task_id.as_deref() == Some(t.as_str()),
                        None => w.method == "tools/call",
                    })
                    .max_by_key(|w| w.seq)
            }
            Message::Notification(_) => None,
        };
        let msg = match target {
            Some(w) => match w.tx.send(msg) {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => msg,
        };
        if matches!(msg, Message::Response(_) | Message::Error(_)) {
            // Its POST is gone; a GET stream never carries answers.
            tracing::debug!(?msg, "answer to an abandoned exchange; dropped");
            return;
        }
        self.unsolicited(msg);
    }

    /// To the GET stream; a server request nobody can take yet waits for one.
    fn unsolicited(&mut self, msg: Message) {
        let msg = match &self.get_stream {
            Some(tx) => match tx.send(msg) {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => msg,
        };
        if matches!(msg, Message::Request(_)) && self.backlog.len() < MAX_BACKLOG {
            self.backlog.push_back(msg);
        } else {
            tracing::debug!(?msg, "no stream to carry this message; dropped");
        }
    }
}

fn related_task(params: Option<&Value>) -> Option<String> {
    let t = params?
        .get("_meta")?
        .get(META_RELATED_TASK)?
        .get("taskId")?;
    t.as_str().map(str::to_owned)
}

impl Session {
    /// A new session with its own server and output demultiplexer.
    pub(super) fn open() -> Arc<Session> {
        let (tx, rx) = mpsc::unbounded_channel();
        let s = Arc::new(Session {
            id: random_id(),
            server: ReferenceServer::new(Revision::Legacy, tx),
            routes: Mutex::default(),
        });
        tokio::spawn(demux(Arc::downgrade(&s), rx));
        s
    }

    fn routes(&self) -> MutexGuard<'_, Routes> {
        self.routes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The session's stream for unsolicited messages, starting with the
    /// backlog; `None` while another one is open.
    pub(super) fn open_stream(&self) -> Option<mpsc::UnboundedReceiver<Message>> {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut routes = self.routes();
        if routes.get_stream.as_ref().is_some_and(|t| !t.is_closed()) {
            return None;
        }
        for m in routes.backlog.drain(..) {
            let _ = tx.send(m);
        }
        routes.get_stream = Some(tx);
        Some(rx)
    }

    /// Ends the session's open streams (the session is being deleted).
    pub(super) fn close(&self) {
        let mut routes = self.routes();
        routes.get_stream = None;
        routes.waiters.clear();
    }

    /// Hands a request to the server and answers the POST with its answer
    /// (as SSE, after the server's requests, when it may have any).
    pub(super) async fn exchange(self: &Arc<Self>, r: Request, headers: &HeaderMap) -> Response {
        let streaming = accepts(headers, "text/event-stream")
            && (sse_only(headers) || STREAMED.contains(&r.method.as_str()));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let seq = {
            let mut routes = self.routes();
            if routes.waiters.contains_key(&r.id) {
                let e = ShimError::InvalidRequest(format!("request id {} is already in use", r.id));
                return error_response(StatusCode::BAD_REQUEST, Some(r.id), &e);
            }
            routes.seq += 1;
            let waiter = Waiter {
                tx,
                method: r.method.clone(),
                task_id: (r.method == "tasks/result")
                    .then(|| {
                        r.params
                            .as_ref()?
                            .get("taskId")?
                            .as_str()
                            .map(str::to_owned)
                    })
                    .flatten(),
                streaming,
                seq: routes.seq,
            };
            routes.waiters.insert(r.id.clone(), waiter);
            routes.seq
        };
        let guard = Registration {
            session: self.clone(),
            id: r.id.clone(),
            seq,
        };
        self.server.handle(Message::Request(r));
        let sid = [(SESSION_HEADER, self.id.clone())];
        if streaming {
            return sse_response(message_stream(rx, guard, true), &sid);
        }
        while let Some(msg) = rx.recv().await {
            if matches!(msg, Message::Response(_) | Message::Error(_)) {
                return with_session(json_response(StatusCode::OK, &msg), &self.id);
            }
        }
        refuse(StatusCode::NOT_FOUND, "Session ended")
    }
}

/// Unregisters an exchange when its HTTP response is done or abandoned.
struct Registration {
    session: Arc<Session>,
    id: Id,
    seq: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut routes = self.session.routes();
        if routes
            .waiters
            .get(&self.id)
            .is_some_and(|w| w.seq == self.seq)
        {
            routes.waiters.remove(&self.id);
        }
    }
}
