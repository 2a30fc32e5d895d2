//! Legacy (2025-11-25) Streamable HTTP: sessions, POST answers as JSON or
//! SSE, the GET stream for unsolicited messages, DELETE.
//!
//! Each HTTP session owns one engine session. Its outgoing messages are
//! routed: answers to the POST that asked; requests tagged with a task to
//! the SSE stream of a pending `tasks/result` for that task; other
//! requests to a pending `tools/call` stream; the withdrawal of a question
//! to the stream that carried it; progress to the stream of
//! the request that asked for it, while it is open; the rest to the GET
//! stream, or a bounded backlog until one opens.
//!
//! A session ends with DELETE, or when it has been idle for the configured
//! time: no request being answered, no open stream. Clients that vanish
//! without DELETE would otherwise keep their session, its engine and its
//! anonymous tasks for the life of the process.

use crate::bridge::lock;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
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
use crate::scope::{Principal, Scope};
use crate::translate::input::related_task_of;

/// Messages kept for a GET stream that is not open yet.
const BACKLOG: usize = 1000;

/// The longest an answer waits for the session's router to place what
/// was sent before it.
const ROUTER_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

type Tx = mpsc::UnboundedSender<Message>;

/// One legacy HTTP session.
#[derive(Debug)]
pub(crate) struct HttpSession {
    engine: Arc<LegacySession>,
    routes: Mutex<Routes>,
    /// Who opened it: every later request must come from the same
    /// principal (or be anonymous like it), as MCP's security practices
    /// require; a session id is not a credential.
    principal: Option<Principal>,
    /// Requests of this session being answered now.
    in_flight: AtomicUsize,
    /// When the session was last in use ([`App::now_ms`]).
    last_used_ms: AtomicU64,
    /// Messages the engine sent to the router, and those it routed: see
    /// [`HttpSession::routed_so_far`].
    sent: Arc<AtomicU64>,
    routed: AtomicU64,
    caught_up: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Routes {
    by_id: HashMap<Id, Tx>,
    by_task: HashMap<String, Tx>,
    /// The streamed requests that asked for progress, by their token (as
    /// JSON text): their progress goes on their own stream.
    by_progress: HashMap<String, Tx>,
    calls: Vec<(Id, Tx)>,
    get_stream: Option<Tx>,
    backlog: VecDeque<Message>,
    /// Questions sent about each task on a `tasks/result` stream and not
    /// yet answered: a new `tasks/result` stream for the task gets them
    /// again, since the stream that carried them may have been closed by
    /// the client before they were read. Those sent on the GET stream are
    /// not here: each question reaches the client once.
    asked: HashMap<String, Vec<Message>>,
    /// Questions about each task that no stream could carry yet (no
    /// `tasks/result` stream of the task, no GET stream): the first of a
    /// GET stream or a `tasks/result` stream of the task to open takes them.
    held: HashMap<String, Vec<Message>>,
    /// The call stream each question outside a task went on, while it is
    /// unanswered: its withdrawal follows it there.
    placed: HashMap<Id, Tx>,
    /// `tasks/result`s answered as JSON (no stream for questions) now
    /// waiting, by task.
    json_waits: HashMap<String, usize>,
}

impl HttpSession {
    /// Whether a request of `principal` may use this session (`sid`).
    fn belongs_to(&self, sid: &str, principal: &Option<Principal>) -> bool {
        let mine = self.principal == *principal;
        if !mine {
            tracing::info!(session = %crate::ids::log_prefix(sid), "refused: a request for a session another principal opened");
        }
        mine
    }

    fn touch(&self, now_ms: u64) {
        self.last_used_ms.store(now_ms, Ordering::Relaxed);
    }

    fn route(&self, msg: Message) {
        let mut r = lock(&self.routes);
        // A question asked during a call no stream of this session can
        // carry (a JSON-only POST, no GET stream, no other call streaming).
        let mut nowhere_to_ask = false;
        let target = match &msg {
            Message::Response(_) | Message::Error(_) => msg.id().and_then(|id| r.by_id.remove(id)),
            Message::Request(req) => match related_task_of(req.params.as_ref()) {
                Some(task) => {
                    let task = task.to_owned();
                    let target = r.by_task.get(&task).filter(|tx| !tx.is_closed()).cloned();
                    let no_get_stream = r.get_stream.as_ref().is_none_or(|tx| tx.is_closed());
                    // Only JSON-only `tasks/result`s wait on the task:
                    // none of them can carry it, and a stream opened later
                    // would find it asked.
                    nowhere_to_ask = target.is_none()
                        && r.json_waits.get(&task).is_some_and(|n| *n > 0)
                        && no_get_stream;
                    if target.is_some() {
                        r.asked.entry(task).or_default().push(msg.clone());
                    } else if no_get_stream && !nowhere_to_ask {
                        // Not the backlog: a question sent on the GET
                        // stream is not asked again on a `tasks/result`
                        // stream, and this one must reach the client
                        // once, by whichever opens first.
                        r.held.entry(task).or_default().push(msg);
                        return;
                    }
                    target
                }
                // Input asked during a plain call goes on that call's
                // stream; only a question the engine cannot place goes to
                // the newest call.
                None => {
                    let during = self.engine.asked_during(&req.id);
                    let target = during
                        .as_ref()
                        .and_then(|call| r.by_id.get(call).cloned())
                        .or_else(|| r.calls.last().map(|(_, tx)| tx.clone()));
                    nowhere_to_ask = target.is_none()
                        && during.is_some()
                        && r.get_stream.as_ref().is_none_or(|tx| tx.is_closed());
                    if let Some(tx) = &target {
                        r.placed.insert(req.id.clone(), tx.clone());
                    }
                    target
                }
            },
            Message::Notification(n) if n.method == "notifications/progress" => n
                .params
                .as_ref()
                .and_then(|p| p.get("progressToken"))
                .and_then(|t| r.by_progress.get(&t.to_string()))
                .filter(|tx| !tx.is_closed())
                .cloned(),
            Message::Notification(n) if n.method == "notifications/cancelled" => {
                if Self::unhold(&mut r, n.params.as_ref()) {
                    // Withdrawn before any stream carried it: the client
                    // never saw the question, nor hears of it now.
                    return;
                }
                self.withdrawal_route(&mut r, n.params.as_ref())
            }
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
        if matches!(msg, Message::Response(_) | Message::Error(_)) {
            // The 2025-11-25 transport puts no answer on the GET stream
            // (only a resumed stream may carry one): the stream of the
            // request it answers is gone, closed by the client.
            tracing::info!(id = ?msg.id(), "an answer whose request's stream is closed; dropped");
            return;
        }
        if nowhere_to_ask && let Message::Request(q) = &msg {
            // The backlog waits for a GET stream; a client that takes only
            // JSON and opened none would leave the call hanging until the
            // request timeout (a `tasks/result` until the task's ttl).
            // Refused as the client would refuse it.
            drop(r);
            self.refuse_question(q);
            return;
        }
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

impl HttpSession {
    /// Answers question `q` of the shim's for the client, with an error:
    /// no stream of the session can carry it.
    fn refuse_question(&self, q: &crate::jsonrpc::Request) {
        tracing::warn!(
            method = %q.method,
            "a question for a client that accepts no event stream on the request \
             waiting for it and has no GET stream open: refused"
        );
        let refusal = Message::error(
            Some(q.id.clone()),
            ShimError::Internal(format!(
                "{} could not be asked: the client accepts no event stream \
                 on the request waiting for it and has no GET stream open",
                q.method
            ))
            .to_error_object(),
        );
        self.engine.handle_client(refusal);
    }

    /// Waits until the router has placed every message the engine sent
    /// before now: an answer that goes straight to its POST must not
    /// overtake what the request sent ahead of it (progress, a withdrawn
    /// question), nor end the stream those were bound for. Bounded: a
    /// router stopped with its session does not hold the answer.
    async fn routed_so_far(&self) {
        let target = self.sent.load(Ordering::Acquire);
        if self.routed.load(Ordering::Acquire) >= target {
            return;
        }
        let wait = async {
            loop {
                let caught_up = self.caught_up.notified();
                tokio::pin!(caught_up);
                caught_up.as_mut().enable();
                if self.routed.load(Ordering::Acquire) >= target {
                    return;
                }
                caught_up.await;
            }
        };
        if tokio::time::timeout(ROUTER_WAIT, wait).await.is_err() {
            tracing::warn!("the session's router fell behind; answering anyway");
        }
    }

    /// Forgets a held question (see [`Routes::held`]) the engine has
    /// withdrawn; true if it was one.
    fn unhold(r: &mut Routes, params: Option<&serde_json::Value>) -> bool {
        let Some(question) = crate::bridge::cancelled_id(params) else {
            return false;
        };
        let mut found = false;
        r.held.retain(|_, held| {
            let before = held.len();
            held.retain(|q| q.id() != Some(&question));
            found |= held.len() != before;
            !held.is_empty()
        });
        found
    }

    /// Where the withdrawal of a question goes: the stream that carried
    /// the question, if still open (else the GET stream). A withdrawn
    /// task question is not asked again on a later `tasks/result` stream.
    fn withdrawal_route(&self, r: &mut Routes, params: Option<&serde_json::Value>) -> Option<Tx> {
        let question = crate::bridge::cancelled_id(params)?;
        let mut task = None;
        r.asked.retain(|t, asked| {
            let before = asked.len();
            asked.retain(|q| q.id() != Some(&question));
            if asked.len() != before {
                task = Some(t.clone());
            }
            !asked.is_empty()
        });
        let placed = r.placed.remove(&question);
        let stream = match task {
            Some(task) => r.by_task.get(&task).cloned(),
            None => placed,
        };
        stream.filter(|tx| !tx.is_closed())
    }
}

/// Marks a session in use while one of its requests is answered; idle
/// time counts from when the last one ends.
struct InUse<'a> {
    session: &'a HttpSession,
    app: &'a App,
}

impl<'a> InUse<'a> {
    fn new(session: &'a HttpSession, app: &'a App) -> Self {
        session.in_flight.fetch_add(1, Ordering::AcqRel);
        InUse { session, app }
    }
}

impl Drop for InUse<'_> {
    fn drop(&mut self) {
        self.session.touch(self.app.now_ms());
        self.session.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Which session cap an `initialize` would go past.
#[derive(Debug, Clone, Copy)]
pub(super) enum SessionCap {
    /// `max_sessions`: every session.
    All(usize),
    /// `max_anonymous_sessions`: sessions without a principal.
    Anonymous(usize),
    /// `max_sessions_per_principal`: this principal's.
    Principal(usize),
}

/// The cap a new session of `principal` would go past, if any, given the
/// `owners` of the open sessions (bridged or relayed: each kind is capped
/// on its own). Counted over the open sessions (a few thousand at most;
/// an `initialize` is rare next to the requests of a session): no second
/// tally to keep in step with every way a session ends.
pub(super) fn session_cap_reached<'a>(
    app: &App,
    owners: impl ExactSizeIterator<Item = &'a Option<Principal>>,
    principal: &Option<Principal>,
) -> Option<SessionCap> {
    let opts = &app.opts;
    if owners.len() >= opts.max_sessions {
        return Some(SessionCap::All(opts.max_sessions));
    }
    let (cap, max) = match principal {
        None => {
            let max = opts.anonymous_session_cap();
            (SessionCap::Anonymous(max), max)
        }
        Some(_) => {
            let max = opts.principal_session_cap();
            (SessionCap::Principal(max), max)
        }
    };
    let held = owners.filter(|owner| *owner == principal).count();
    (held >= max).then_some(cap)
}

pub(super) fn too_many_sessions(cap: SessionCap, id: Option<Id>) -> Response {
    let why = match cap {
        SessionCap::All(max) => {
            format!(
                "too many open sessions ({max}, --max-sessions); retry later, or end unused ones with DELETE"
            )
        }
        SessionCap::Anonymous(max) => format!(
            "too many open sessions without credentials ({max}, --max-anonymous-sessions); \
             authenticate, retry later, or end unused ones with DELETE"
        ),
        SessionCap::Principal(max) => format!(
            "too many open sessions for this principal ({max}, --max-sessions-per-principal); \
             end unused ones with DELETE, or retry later"
        ),
    };
    tracing::warn!(
        ?cap,
        "refusing a new legacy HTTP session: a session limit is reached"
    );
    error_response(
        StatusCode::SERVICE_UNAVAILABLE,
        id,
        ShimError::Internal(why),
    )
}

pub(super) async fn initialize(
    app: Arc<App>,
    msg: Message,
    principal: Option<Principal>,
) -> Response {
    app.metrics.count(Revision::Legacy, "initialize");
    let Message::Request(req) = msg else {
        let e = ShimError::InvalidRequest("initialize must be a request (with an id)".into());
        return error_response(StatusCode::BAD_REQUEST, None, e);
    };
    let reached = session_cap_reached(
        &app,
        lock(&app.sessions).values().map(|s| &s.principal),
        &principal,
    );
    if let Some(cap) = reached {
        return too_many_sessions(cap, Some(req.id));
    }
    if app.legacy.is_none()
        && let Some(command) = app.opts.legacy_relay.clone()
    {
        return super::legacy_relay::initialize(app, command, req, principal).await;
    }
    let Some(front) = &app.legacy else {
        return error_response(
            StatusCode::OK,
            Some(req.id),
            ShimError::Internal(
                "the upstream speaks 2025-11-25 too (or did not answer the shim's probe at start); the shim does not relay 2025-11-25 HTTP sessions to it: connect the client to the server directly".into(),
            ),
        );
    };
    let sid = crate::ids::random_id();
    let scope = match &principal {
        Some(p) => p.scope().clone(),
        None => Scope::session(&sid),
    };
    let (tx, mut rx) = mpsc::unbounded_channel();
    let sent = Arc::new(AtomicU64::new(0));
    let session = Arc::new(HttpSession {
        engine: front.session(scope, crate::transport::Outbox::counted(tx, sent.clone())),
        routes: Mutex::new(Routes::default()),
        principal,
        in_flight: AtomicUsize::new(0),
        last_used_ms: AtomicU64::new(app.now_ms()),
        sent,
        routed: AtomicU64::new(0),
        caught_up: tokio::sync::Notify::new(),
    });
    // Weak: the engine holds this channel's sender, so a strong reference
    // here would keep the session (and the task) alive after DELETE.
    let router = Arc::downgrade(&session);
    tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            let Some(s) = router.upgrade() else { break };
            s.route(m);
            s.routed.fetch_add(1, Ordering::Release);
            s.caught_up.notify_waiters();
        }
    });
    // The session exists for the client only once `initialize` succeeded:
    // a refused one leaves nothing behind to expire or leak.
    let id = req.id.clone();
    let Ok(answer) =
        crate::inline::finish_even_if_dropped(session.engine.clone().answer(req)).await
    else {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            Some(id),
            ShimError::Internal("no answer".into()),
        );
    };
    if matches!(answer, Message::Error(_)) {
        return json_response(StatusCode::OK, &answer);
    }
    {
        let mut sessions = lock(&app.sessions);
        if let Some(cap) = session_cap_reached(
            &app,
            sessions.values().map(|s| &s.principal),
            &session.principal,
        ) {
            drop(sessions);
            return too_many_sessions(cap, Some(id));
        }
        session.touch(app.now_ms());
        sessions.insert(sid.clone(), session);
    }
    tracing::info!(session = %crate::ids::log_prefix(&sid), "legacy HTTP session opened");
    let mut resp = json_response(StatusCode::OK, &answer);
    if let Ok(v) = HeaderValue::from_str(&sid) {
        resp.headers_mut().insert("mcp-session-id", v);
    }
    resp
}

/// Looks a session up for a request of `principal` and marks it used,
/// under the sessions lock: the idle sweep, which decides under the same
/// lock, cannot end a session a request has just found. A session of
/// another principal is not found, exactly like an unknown one.
fn session(app: &App, sid: &str, principal: &Option<Principal>) -> Option<Arc<HttpSession>> {
    let sessions = lock(&app.sessions);
    let s = sessions.get(sid).filter(|s| s.belongs_to(sid, principal))?;
    s.touch(app.now_ms());
    Some(s.clone())
}

/// 404 for a session the shim does not know; a POSTed request's answer
/// names its id (`None` for GET, DELETE, or a POSTed notification).
pub(super) fn unknown_session(id: Option<Id>) -> Response {
    let e = ShimError::InvalidRequest("unknown or expired Mcp-Session-Id".into());
    error_response(StatusCode::NOT_FOUND, id, e)
}

/// The checks a POST to a 2025-11-25 session passes before its message
/// goes anywhere, the same for a bridged session and a relayed one:
/// `found` is the session the lookup gave (404 when none), then the
/// MCP-Protocol-Version (400) and `--require-principal` on `tasks/list`
/// (403). Gives the session back, or the refusal to answer with (boxed:
/// a `Response` is large next to the session it stands in for).
pub(super) fn admit<S>(
    found: Option<S>,
    app: &App,
    msg: &Message,
    hdrs: &HeaderMap,
    principal: &Option<Principal>,
) -> Result<S, Box<Response>> {
    let Some(s) = found else {
        let id = match msg {
            Message::Request(r) => Some(r.id.clone()),
            _ => None,
        };
        return Err(Box::new(unknown_session(id)));
    };
    // The 2025-11-25 transport: a server MUST answer 400 to an invalid
    // or unsupported MCP-Protocol-Version (an absent one means 2025-03-26).
    if let Some(v) = super::headers::header(hdrs, "mcp-protocol-version")
        && !crate::revision::LEGACY_VERSIONS.contains(&v)
    {
        let e = ShimError::InvalidRequest(format!(
            "unsupported MCP-Protocol-Version {v:?} in a 2025-11-25 session (one of {})",
            crate::revision::LEGACY_VERSIONS.join(", ")
        ));
        return Err(Box::new(error_response(
            StatusCode::BAD_REQUEST,
            msg.id().cloned(),
            e,
        )));
    }
    if msg.method() == Some("tasks/list") && app.opts.require_principal && principal.is_none() {
        let e =
            ShimError::InvalidRequest("tasks/list needs an authenticated principal here".into());
        return Err(Box::new(error_response(
            StatusCode::FORBIDDEN,
            msg.id().cloned(),
            e,
        )));
    }
    Ok(s)
}

pub(super) async fn post(
    app: Arc<App>,
    sid: &str,
    msg: Message,
    hdrs: &HeaderMap,
    principal: Option<Principal>,
) -> Response {
    app.metrics
        .count(Revision::Legacy, msg.method().unwrap_or("(response)"));
    let s = match admit(session(&app, sid, &principal), &app, &msg, hdrs, &principal) {
        Ok(s) => s,
        Err(refusal) => return *refusal,
    };
    let sse = super::accepts_sse(hdrs);
    let _in_use = InUse::new(&s, &app);
    exchange(&s, msg, sse).await
}

/// Hands a client message to the engine and answers the POST.
async fn exchange(s: &Arc<HttpSession>, msg: Message, sse: bool) -> Response {
    let req = match msg {
        Message::Request(req) => req,
        other => {
            if let Some(id) = other.id() {
                // An answer to a question: it need not be asked again.
                let mut r = lock(&s.routes);
                r.asked.retain(|_, asked| {
                    asked.retain(|q| q.id() != Some(id));
                    !asked.is_empty()
                });
                r.held.retain(|_, held| {
                    held.retain(|q| q.id() != Some(id));
                    !held.is_empty()
                });
                r.placed.remove(id);
            }
            s.engine.handle_client(other);
            return StatusCode::ACCEPTED.into_response();
        }
    };
    let id = req.id.clone();
    let streams = sse && matches!(req.method.as_str(), "tasks/result" | "tools/call");
    if !streams {
        let _waiting = (req.method == "tasks/result")
            .then(|| req.params.as_ref()?.get("taskId")?.as_str())
            .flatten()
            .map(|task| JsonWait::new(s, task));
        // A JSON answer carries only the answer: it comes straight back from
        // the engine instead of through the session's router. A client that
        // hangs up does not cut the engine's work short.
        let answer = crate::inline::finish_even_if_dropped(s.engine.clone().answer(req)).await;
        // What routing an answer did: forget streams that have ended.
        lock(&s.routes).by_task.retain(|_, tx| !tx.is_closed());
        return match answer {
            Ok(m) => json_response(StatusCode::OK, &m),
            Err(_) => json_response(StatusCode::INTERNAL_SERVER_ERROR, &no_answer(id)),
        };
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    {
        let mut r = lock(&s.routes);
        r.by_id.insert(id.clone(), tx.clone());
        if let Some(token) = req
            .params
            .as_ref()
            .and_then(|p| p.get("_meta"))
            .and_then(|m| m.get("progressToken"))
        {
            r.by_progress.insert(token.to_string(), tx.clone());
        }
        match req.method.as_str() {
            "tasks/result" => {
                if let Some(task) = req
                    .params
                    .as_ref()
                    .and_then(|p| p.get("taskId"))
                    .and_then(|t| t.as_str())
                {
                    r.by_task.insert(task.to_owned(), tx.clone());
                    // Held questions go on this stream now, and from then
                    // on are asked again like those it carries itself.
                    let held = r.held.remove(task).unwrap_or_default();
                    r.asked.entry(task.to_owned()).or_default().extend(held);
                    for q in r.asked.get(task).into_iter().flatten() {
                        let _ = tx.send(q.clone());
                    }
                }
            }
            _ => r.calls.push((id.clone(), tx.clone())),
        }
    }
    let registered = Registered {
        session: s.clone(),
        id: id.clone(),
        tx,
    };
    // The answer comes straight back from the engine, as for a JSON-only
    // request: through the session's outbox and router it took two more
    // task hand-offs. Questions for the client during the call still come
    // through the router, to `rx`.
    let mut work =
        crate::inline::finish_even_if_dropped(s.engine.clone().answer_unless_cancelled(req));
    // The first message decides the body. The answer alone goes back as
    // plain JSON, one write with no stream framing, as most calls have
    // nothing else to say; a question before it opens an SSE stream that
    // starts with it.
    let first = tokio::select! {
        biased;
        Some(question) = rx.recv() => question,
        answer = &mut work => {
            s.routed_so_far().await;
            if let Ok(first) = rx.try_recv() {
                // Something the request sent before its answer reached
                // the router late: a stream after all, the answer last.
                match answer {
                    Ok(Some(m)) => drop(registered.tx.send(m)),
                    Ok(None) => {}
                    Err(_) => drop(registered.tx.send(no_answer(id.clone()))),
                }
                drop(registered);
                return super::sse_until_answer(&first, rx, id, s.clone(), None);
            }
            drop(registered);
            return match answer {
                Ok(Some(m)) => json_response(StatusCode::OK, &m),
                // Cancelled by the client: nothing is owed, and the POST
                // ends without an answer instead of staying open.
                Ok(None) => axum::response::sse::Sse::new(futures_util::stream::empty::<
                    Result<axum::response::sse::Event, std::convert::Infallible>,
                >())
                .into_response(),
                Err(_) => json_response(StatusCode::INTERNAL_SERVER_ERROR, &no_answer(id)),
            };
        }
    };
    // The answer follows the questions on the stream when the work ends.
    tokio::spawn(async move {
        let answer = match work.await {
            Ok(Some(m)) => Some(m),
            Ok(None) => None,
            Err(_) => Some(no_answer(registered.id.clone())),
        };
        registered.session.routed_so_far().await;
        let (tx, answered) = (registered.tx.clone(), registered.id.clone());
        drop(registered);
        if let Some(m) = answer
            && tx.send(m).is_err()
        {
            // The 2025-11-25 transport puts no answer on the GET stream.
            tracing::info!(id = ?answered, "an answer whose request's stream is closed; dropped");
        }
        // Dropping `tx`, the last sender, ends a stream left without an
        // answer (a cancelled request).
    });
    // The stream ends right after the answer to this request. It holds the
    // session, so that answers still reach it after a DELETE (the error
    // each pending request then gets).
    // Not `hang_up`: 2025-11-25 says a disconnect is no cancellation.
    super::sse_until_answer(&first, rx, id, s.clone(), None)
}

/// A `tasks/result` answered as JSON, waiting on its task: questions
/// about the task that no stream can carry are refused meanwhile, and
/// those already waiting for a stream are refused now.
struct JsonWait<'a> {
    session: &'a HttpSession,
    task: String,
}

impl<'a> JsonWait<'a> {
    fn new(session: &'a HttpSession, task: &str) -> Self {
        let mut r = lock(&session.routes);
        *r.json_waits.entry(task.to_owned()).or_default() += 1;
        let no_stream = r.get_stream.as_ref().is_none_or(|tx| tx.is_closed())
            && r.by_task.get(task).is_none_or(|tx| tx.is_closed());
        let stranded = if no_stream {
            let mut stranded = r.asked.remove(task).unwrap_or_default();
            stranded.extend(r.held.remove(task).unwrap_or_default());
            stranded
        } else {
            Vec::new()
        };
        drop(r);
        for q in &stranded {
            if let Message::Request(q) = q {
                session.refuse_question(q);
            }
        }
        JsonWait {
            session,
            task: task.to_owned(),
        }
    }
}

impl Drop for JsonWait<'_> {
    fn drop(&mut self) {
        let mut r = lock(&self.session.routes);
        if let Some(n) = r.json_waits.get_mut(&self.task) {
            *n -= 1;
            if *n == 0 {
                r.json_waits.remove(&self.task);
            }
        }
    }
}

/// The answer to request `id` when the shim's work for it panicked.
fn no_answer(id: Id) -> Message {
    Message::error(
        Some(id),
        ShimError::Internal("no answer".into()).to_error_object(),
    )
}

/// The routes a streamed request registered (its id, its call or task,
/// all feeding `tx`), forgotten when it is answered, or when its POST is
/// dropped because the client hung up: no entry outlives the request.
struct Registered {
    session: Arc<HttpSession>,
    id: Id,
    tx: Tx,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut r = lock(&self.session.routes);
        if r.by_id
            .get(&self.id)
            .is_some_and(|t| t.same_channel(&self.tx))
        {
            r.by_id.remove(&self.id);
        }
        r.calls.retain(|(_, t)| !t.same_channel(&self.tx));
        r.by_task
            .retain(|_, t| !t.same_channel(&self.tx) && !t.is_closed());
        r.by_progress.retain(|_, t| !t.same_channel(&self.tx));
        r.placed.retain(|_, t| !t.same_channel(&self.tx));
    }
}

pub(super) fn get_stream(app: Arc<App>, sid: &str, principal: Option<Principal>) -> Response {
    app.metrics.count(Revision::Legacy, "GET");
    let Some(s) = session(&app, sid, &principal) else {
        return unknown_session(None);
    };
    let (tx, rx) = mpsc::unbounded_channel();
    {
        let mut r = lock(&s.routes);
        for m in r.backlog.drain(..) {
            let _ = tx.send(m);
        }
        // The questions no stream could carry yet: delivered here, once.
        for (_, held) in r.held.drain() {
            for q in held {
                let _ = tx.send(q);
            }
        }
        r.get_stream = Some(tx);
    }
    let events = UnboundedReceiverStream::new(rx).map(|m| super::sse_event(&m));
    Sse::new(app.until_closing(events))
        .keep_alive(KeepAlive::default())
        .into_response()
}

pub(super) async fn delete(app: Arc<App>, sid: &str, principal: Option<Principal>) -> Response {
    app.metrics.count(Revision::Legacy, "DELETE");
    let removed = {
        let mut sessions = lock(&app.sessions);
        match sessions.get(sid) {
            Some(s) if s.belongs_to(sid, &principal) => sessions.remove(sid),
            _ => None,
        }
    };
    let Some(s) = removed else {
        return unknown_session(None);
    };
    end(&app, &s, "the session was deleted").await;
    tracing::info!(session = %crate::ids::log_prefix(sid), "legacy HTTP session deleted");
    StatusCode::OK.into_response()
}

/// What ending a session (removed from the map already) takes with it.
async fn end(app: &App, s: &HttpSession, why: &str) {
    // Later questions fail too: nobody is left to answer them, and one
    // left waiting would keep the session in memory.
    s.engine.end(why);
    // Session-scoped tasks go with the session; principal-scoped ones stay.
    if s.engine.scope().ends_with_session()
        && let Err(e) = app.ledger.drop_scope(s.engine.scope().key()).await
    {
        tracing::error!(error = %e, "could not drop the tasks of an ended session");
    }
}

/// The shim is stopping: every legacy session's waits (a blocking
/// `tasks/result`, a call whose task the shim drives) end now with
/// `-32603` naming why, while their HTTP requests can still carry it.
pub(super) fn end_waits(app: &App, why: &str) {
    let sessions: Vec<Arc<HttpSession>> = lock(&app.sessions).values().cloned().collect();
    for s in sessions {
        s.engine.end(why);
    }
}

/// Ends the sessions idle for longer than the configured time; returns
/// how many. Run by the sweeper every second.
pub(super) async fn expire_idle(app: &App) -> usize {
    let Some(idle) = app.opts.session_idle_timeout else {
        return 0;
    };
    let expired = super::take_idle(&app.sessions, app.now_ms(), idle);
    for (sid, s) in &expired {
        end(app, s, "the session expired").await;
        tracing::info!(session = %crate::ids::log_prefix(sid), idle_s = idle.as_secs(), "idle legacy HTTP session expired");
    }
    expired.len()
}

impl super::IdleSession for HttpSession {
    /// A request being answered, or a stream open to the client (the GET
    /// stream, an SSE answer in progress), keeps a session from expiring.
    fn busy(&self) -> bool {
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return true;
        }
        let r = lock(&self.routes);
        let open = |tx: &Tx| !tx.is_closed();
        r.get_stream.as_ref().is_some_and(open)
            || r.by_id.values().any(open)
            || r.by_task.values().any(open)
    }
    fn last_used(&self) -> &AtomicU64 {
        &self.last_used_ms
    }
}
