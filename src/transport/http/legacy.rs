//! Legacy (2025-11-25) Streamable HTTP: sessions, POST answers as JSON or
//! SSE, the GET stream for unsolicited messages, DELETE.
//!
//! Each HTTP session owns one engine session. Its outgoing messages are
//! routed: answers to the POST that asked; requests tagged with a task to
//! the SSE stream of a pending `tasks/result` for that task; other
//! requests to a pending `tools/call` stream; the rest to the GET stream,
//! or a bounded backlog until one opens.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::{App, error_response, json_response};
use crate::bridge::legacy_front::LegacySession;
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message};
use crate::revision::Revision;
use crate::translate::input::related_task_of;

/// Messages kept for a GET stream that is not open yet.
const BACKLOG: usize = 1000;

type Tx = mpsc::UnboundedSender<Message>;

/// One legacy HTTP session.
#[derive(Debug)]
pub(crate) struct HttpSession {
    engine: Arc<LegacySession>,
    routes: Mutex<Routes>,
}

#[derive(Debug, Default)]
struct Routes {
    by_id: HashMap<Id, Tx>,
    by_task: HashMap<String, Tx>,
    calls: Vec<(Id, Tx)>,
    get_stream: Option<Tx>,
    backlog: VecDeque<Message>,
}

impl HttpSession {
    fn route(&self, msg: Message) {
        let mut r = self.routes.lock().unwrap_or_else(|p| p.into_inner());
        let target = match &msg {
            Message::Response(_) | Message::Error(_) => msg.id().and_then(|id| r.by_id.remove(id)),
            Message::Request(req) => match related_task_of(req.params.as_ref()) {
                Some(task) => r.by_task.get(task).cloned(),
                None => r.calls.last().map(|(_, tx)| tx.clone()),
            },
            Message::Notification(_) => None,
        };
        if let Some(id) = msg
            .id()
            .filter(|_| matches!(msg, Message::Response(_) | Message::Error(_)))
        {
            r.calls.retain(|(cid, _)| cid != id);
            r.by_task.retain(|_, tx| !tx.is_closed());
        }
        let msg = match target {
            Some(tx) => match tx.send(msg) {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => msg,
        };
        match &r.get_stream {
            Some(tx) if !tx.is_closed() => {
                let _ = tx.send(msg);
            }
            _ => {
                if r.backlog.len() == BACKLOG {
                    r.backlog.pop_front();
                }
                r.backlog.push_back(msg);
            }
        }
    }
}

pub(super) async fn initialize(app: Arc<App>, msg: Message, hdrs: &HeaderMap) -> Response {
    app.metrics.count(Revision::Legacy, "initialize");
    let Some(front) = &app.legacy else {
        return error_response(
            StatusCode::OK,
            msg.id().cloned(),
            ShimError::Internal(
                "the upstream speaks 2025-11-25 too; pass-through of legacy HTTP sessions to a stdio upstream is not supported, connect the client to the server directly".into(),
            ),
        );
    };
    let sid = crate::ids::random_id();
    let scope = app
        .principal(hdrs)
        .unwrap_or_else(|| format!("{}{sid}", super::SESSION_SCOPE_PREFIX));
    let (tx, mut rx) = mpsc::unbounded_channel();
    let session = Arc::new(HttpSession {
        engine: front.session(scope, tx),
        routes: Mutex::new(Routes::default()),
    });
    // Weak: the engine holds this channel's sender, so a strong reference
    // here would keep the session (and the task) alive after DELETE.
    let router = Arc::downgrade(&session);
    tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            let Some(s) = router.upgrade() else { break };
            s.route(m);
        }
    });
    app.sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(sid.clone(), session.clone());
    tracing::info!(session = %sid, "legacy HTTP session opened");
    let mut resp = exchange(&session, msg, false).await;
    if let Ok(v) = HeaderValue::from_str(&sid) {
        resp.headers_mut().insert("mcp-session-id", v);
    }
    resp
}

fn session(app: &App, sid: &str) -> Option<Arc<HttpSession>> {
    app.sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(sid)
        .cloned()
}

fn unknown_session() -> Response {
    let e = ShimError::InvalidRequest("unknown or expired Mcp-Session-Id".into());
    error_response(StatusCode::NOT_FOUND, None, e)
}

pub(super) async fn post(app: Arc<App>, sid: &str, msg: Message, hdrs: &HeaderMap) -> Response {
    app.metrics
        .count(Revision::Legacy, msg.method().unwrap_or("(response)"));
    let Some(s) = session(&app, sid) else {
        return unknown_session();
    };
    if msg.method() == Some("tasks/list")
        && app.opts.require_principal
        && app.principal(hdrs).is_none()
    {
        let e =
            ShimError::InvalidRequest("tasks/list needs an authenticated principal here".into());
        return error_response(StatusCode::FORBIDDEN, msg.id().cloned(), e);
    }
    let sse = hdrs
        .get("accept")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/event-stream"));
    exchange(&s, msg, sse).await
}

/// Hands a client message to the engine and answers the POST.
async fn exchange(s: &Arc<HttpSession>, msg: Message, sse: bool) -> Response {
    let Message::Request(req) = &msg else {
        s.engine.handle_client(msg);
        return StatusCode::ACCEPTED.into_response();
    };
    let id = req.id.clone();
    let streams = sse && matches!(req.method.as_str(), "tasks/result" | "tools/call");
    if !streams {
        // A JSON answer carries only the answer: it comes straight back from
        // the engine instead of through the session's router. A client that
        // hangs up does not cut the engine's work short.
        let Message::Request(req) = msg else {
            unreachable!("matched above")
        };
        let answer = crate::inline::finish_even_if_dropped(s.engine.clone().answer(req)).await;
        // What routing an answer did: forget streams that have ended.
        s.routes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .by_task
            .retain(|_, tx| !tx.is_closed());
        return match answer {
            Ok(m) => json_response(StatusCode::OK, &m),
            Err(_) => error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                Some(id),
                ShimError::Internal("no answer".into()),
            ),
        };
    }
    let (tx, rx) = mpsc::unbounded_channel();
    {
        let mut r = s.routes.lock().unwrap_or_else(|p| p.into_inner());
        r.by_id.insert(id.clone(), tx.clone());
        match req.method.as_str() {
            "tasks/result" => {
                if let Some(task) = req
                    .params
                    .as_ref()
                    .and_then(|p| p.get("taskId"))
                    .and_then(|t| t.as_str())
                {
                    r.by_task.insert(task.to_owned(), tx.clone());
                }
            }
            _ => r.calls.push((id.clone(), tx.clone())),
        }
    }
    drop(tx);
    s.engine.handle_client(msg);
    let mut rx = rx;
    // The first message decides the body. The answer alone goes back as
    // plain JSON, one write with no stream framing, as most calls have
    // nothing else to say; a message before it (a question for the client,
    // a progress notification) opens an SSE stream that starts with it.
    let Some(first) = rx.recv().await else {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            Some(id),
            ShimError::Internal("no answer".into()),
        );
    };
    if is_answer_to(&first, &id) {
        return json_response(StatusCode::OK, &first);
    }
    // The stream ends right after the answer to this request.
    let first = futures_util::stream::once(std::future::ready(super::sse_event(&first)));
    let rest = futures_util::stream::unfold(Some(rx), move |state| {
        let id = id.clone();
        async move {
            let mut rx = state?;
            let m = rx.recv().await?;
            let next = (!is_answer_to(&m, &id)).then_some(rx);
            Some((super::sse_event(&m), next))
        }
    });
    let events = futures_util::StreamExt::chain(first, rest);
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn is_answer_to(m: &Message, id: &Id) -> bool {
    matches!(m, Message::Response(_) | Message::Error(_)) && m.id() == Some(id)
}

pub(super) fn get_stream(app: Arc<App>, sid: &str) -> Response {
    app.metrics.count(Revision::Legacy, "GET");
    let Some(s) = session(&app, sid) else {
        return unknown_session();
    };
    let (tx, rx) = mpsc::unbounded_channel();
    {
        let mut r = s.routes.lock().unwrap_or_else(|p| p.into_inner());
        for m in r.backlog.drain(..) {
            let _ = tx.send(m);
        }
        r.get_stream = Some(tx);
    }
    let events = UnboundedReceiverStream::new(rx).map(|m| super::sse_event(&m));
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

pub(super) fn delete(app: Arc<App>, sid: &str) -> Response {
    app.metrics.count(Revision::Legacy, "DELETE");
    let removed = app
        .sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(sid);
    let Some(s) = removed else {
        return unknown_session();
    };
    s.engine.fail_asks("the session was deleted");
    // Session-scoped tasks go with the session; principal-scoped ones stay.
    if s.engine.scope().starts_with(super::SESSION_SCOPE_PREFIX) {
        app.ledger.drop_scope(s.engine.scope());
    }
    tracing::info!(session = %sid, "legacy HTTP session deleted");
    StatusCode::OK.into_response()
}
