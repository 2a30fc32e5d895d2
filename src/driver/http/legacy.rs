//! Legacy (2025-11-25) Streamable HTTP: sessions, POST answers as JSON or
//! SSE, the GET stream for unsolicited messages, DELETE.
//!
//! Each HTTP session owns one engine session, whose outgoing messages
//! come with their [`Route`]: the session places each on one of its
//! streams as it is sent (see [`super::legacy_streams`]).
//!
//! A session ends with DELETE, or when it has been idle for the configured
//! time: no request being answered, no open stream. Clients that vanish
//! without DELETE would otherwise keep their session, its engine and its
//! anonymous tasks for the life of the process.

use crate::bridge::{Deliver, PeerGone, Route, lock};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::Sse;
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use super::legacy_session::{LegacyHttpSession, Usage, keep};
use super::legacy_streams::{Streams, Tx};
use super::{App, error_response, json_response};
use crate::bridge::legacy_front::LegacySession;
use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, Message, Reply, Request};
use crate::revision::Revision;
use crate::scope::{Principal, Scope};

/// One legacy HTTP session.
#[derive(Debug)]
pub(crate) struct HttpSession {
    engine: Arc<LegacySession>,
    streams: Mutex<Streams>,
    usage: Usage,
}

/// The engine's outbox of one session: places each message on its
/// stream as the engine sends it. Weak: the engine holds this, so a strong
/// reference would keep the session alive after DELETE.
#[derive(Debug)]
struct Placer(Weak<HttpSession>);

impl Deliver for Placer {
    fn deliver(&self, route: Route, msg: Message) -> Result<(), PeerGone> {
        let s = self.0.upgrade().ok_or(PeerGone)?;
        let stranded = lock(&s.streams).place(route, msg);
        if let Some(q) = stranded {
            s.refuse_question(&q);
        }
        Ok(())
    }
}

impl HttpSession {
    /// Answers question `q` of the shim's for the client, with an error:
    /// no stream of the session can carry it.
    fn refuse_question(&self, q: &Request) {
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
        lock(&app.sessions).values().map(|s| &s.usage.principal),
        &principal,
    );
    if let Some(cap) = reached {
        return too_many_sessions(cap, Some(req.id));
    }
    if app.legacy.is_none()
        && let Some(relay) = app.opts.legacy_relay.clone()
    {
        return super::legacy_relay::initialize(app, &relay, req, principal).await;
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
    let session = HttpSession::open(&app, front, &sid, principal);
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
    if let Err(cap) = keep(&app, &sid, session) {
        return too_many_sessions(cap, Some(id));
    }
    tracing::info!(session = %crate::ids::log_prefix(&sid), "legacy HTTP session opened");
    let mut resp = json_response(StatusCode::OK, &answer);
    if let Ok(v) = HeaderValue::from_str(&sid) {
        resp.headers_mut().insert(super::headers::MCP_SESSION_ID, v);
    }
    resp
}

impl HttpSession {
    /// A new session `sid` of `principal` over `front`, not yet known to
    /// the app. Its engine's outbox places what it sends on the session's
    /// streams.
    fn open(
        app: &App,
        front: &Arc<crate::bridge::legacy_front::LegacyFront>,
        sid: &str,
        principal: Option<Principal>,
    ) -> Arc<HttpSession> {
        let scope = match &principal {
            Some(p) => p.scope().clone(),
            None => Scope::session(sid),
        };
        Arc::new_cyclic(|me: &Weak<HttpSession>| HttpSession {
            engine: front.session(
                scope,
                crate::bridge::Outbox::new(Arc::new(Placer(me.clone()))),
            ),
            streams: Mutex::new(Streams::default()),
            usage: Usage::new(principal, app.now_ms()),
        })
    }
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
    if let Some(v) = super::headers::header(hdrs, &super::headers::MCP_PROTOCOL_VERSION)
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

/// Hands a client message to the engine and answers the POST.
async fn exchange(s: &Arc<HttpSession>, msg: Message, sse: bool) -> Response {
    let req = match msg {
        Message::Request(req) => req,
        other => return client_answer(s, other),
    };
    if sse && matches!(req.method.as_str(), "tasks/result" | "tools/call") {
        answer_streamed(s, req).await
    } else {
        answer_as_json(s, req).await
    }
}

/// A client notification, or the client's answer to a question of the
/// shim's: handed to the engine, and the POST answered 202.
fn client_answer(s: &HttpSession, msg: Message) -> Response {
    if let Some(id) = msg.id() {
        // An answer to a question: it need not be asked again.
        lock(&s.streams).answered(id);
    }
    s.engine.handle_client(msg);
    StatusCode::ACCEPTED.into_response()
}

/// A request answered with its answer alone, as JSON: the client takes no
/// stream, or the method has nothing to stream. A client that hangs up
/// does not cut the engine's work short.
async fn answer_as_json(s: &Arc<HttpSession>, req: Request) -> Response {
    let id = req.id.clone();
    let _waiting = (req.method == "tasks/result")
        .then(|| req.params.as_ref()?.get("taskId")?.as_str())
        .flatten()
        .map(|task| JsonWait::new(s, task));
    let answer = crate::inline::finish_even_if_dropped(s.engine.clone().reply(req)).await;
    // The `tasks/result` streams that ended meanwhile.
    lock(&s.streams).forget_closed();
    match answer {
        Ok(outcome) => super::reply_response(id, outcome),
        Err(_) => json_response(StatusCode::INTERNAL_SERVER_ERROR, &no_answer(id)),
    }
}

/// A request that may stream (`tools/call`, `tasks/result`, from a client
/// that takes SSE). The first message decides the body: the answer alone
/// goes back as plain JSON, one write with no stream framing, as most
/// calls have nothing else to say; anything the request sends before it
/// (a question, progress) opens an SSE stream that starts with it and
/// ends with the answer.
async fn answer_streamed(s: &Arc<HttpSession>, req: Request) -> Response {
    let id = req.id.clone();
    let (registered, mut rx) = Registered::open(s, &req);
    // The answer comes straight back from the engine. What the request
    // sent before it is on `rx` by then: the engine's outbox places each
    // message as it is sent.
    let mut work =
        crate::inline::finish_even_if_dropped(s.engine.clone().reply_unless_cancelled(req));
    let first = tokio::select! {
        biased;
        Some(first) = rx.recv() => first,
        answer = &mut work => {
            // Forgotten before looking: from then on nothing more is
            // placed on `rx` (placing and forgetting share the streams'
            // lock), so a question placed after the look is not lost with
            // `rx`. Its kept sender holds the channel open until the look
            // is done (see `take_quietly`).
            let forgotten = registered.forget();
            let Some(first) = take_quietly(&mut rx) else {
                return answer_alone(id, answer);
            };
            // Sent in the same step as the answer: a stream after all,
            // the answer last.
            forgotten.finish_with(answer);
            return super::sse_until_answer(&first, rx, id, s.clone(), None);
        }
    };
    // The answer follows the questions on the stream when the work ends.
    tokio::spawn(async move {
        let answer = work.await;
        registered.finish_with(answer);
    });
    // The stream ends right after the answer to this request. It holds the
    // session, so that answers still reach it after a DELETE (the error
    // each pending request then gets).
    // Not `hang_up`: 2025-11-25 says a disconnect is no cancellation.
    super::sse_until_answer(&first, rx, id, s.clone(), None)
}

/// What `rx` holds now; when it holds nothing, it is left with a no-op
/// waker. Forgetting a stream drops its channel's last sender, and a
/// closing channel wakes the waker it holds: were that this task's (the
/// `select!` left it there), the task would be woken mid-poll, and hyper
/// would poll the connection again on a worker woken for it, a thread
/// switch on every plain call.
fn take_quietly(rx: &mut mpsc::UnboundedReceiver<Message>) -> Option<Message> {
    // `try_recv` first: it spends no coop budget, and `poll_recv` on a
    // task that spent its own answers `Pending` even with a message there.
    if let Ok(first) = rx.try_recv() {
        return Some(first);
    }
    match rx.poll_recv(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(first) => first,
        Poll::Pending => None,
    }
}

/// The POST of a request `id` that sent nothing before its `answer`
/// (`Ok(None)`: it was cancelled; `Err`: the shim's work panicked).
fn answer_alone<E>(id: Id, answer: Result<Option<Result<Reply, ErrorObject>>, E>) -> Response {
    match answer {
        Ok(Some(outcome)) => super::reply_response(id, outcome),
        // Cancelled by the client: nothing is owed, and the POST ends
        // without an answer instead of staying open.
        Ok(None) => Sse::new(futures_util::stream::empty::<
            Result<axum::response::sse::Event, std::convert::Infallible>,
        >())
        .into_response(),
        Err(_) => json_response(StatusCode::INTERNAL_SERVER_ERROR, &no_answer(id)),
    }
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
        let stranded = lock(&session.streams).begin_json_wait(task);
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
        lock(&self.session.streams).end_json_wait(&self.task);
    }
}

/// The answer to request `id` when the shim's work for it panicked.
fn no_answer(id: Id) -> Message {
    Message::error(
        Some(id),
        ShimError::Internal("no answer".into()).to_error_object(),
    )
}

/// The stream a streamed request opened (its id, its call or task, all
/// feeding `tx`), forgotten when it is answered, or when its POST is
/// dropped because the client hung up: no entry outlives the request.
struct Registered {
    session: Arc<HttpSession>,
    id: Id,
    tx: Tx,
}

impl Registered {
    /// Opens the stream of `req` in its session.
    fn open(
        session: &Arc<HttpSession>,
        req: &Request,
    ) -> (Registered, mpsc::UnboundedReceiver<Message>) {
        let (tx, rx) = mpsc::unbounded_channel();
        {
            let mut streams = lock(&session.streams);
            if req.method == "tasks/result" {
                let task = req
                    .params
                    .as_ref()
                    .and_then(|p| p.get("taskId"))
                    .and_then(|t| t.as_str());
                streams.open_task_result(&req.id, task, &tx);
            } else {
                streams.open_call(&req.id, &tx);
            }
        }
        let registered = Registered {
            session: session.clone(),
            id: req.id.clone(),
            tx,
        };
        (registered, rx)
    }

    /// Forgets the stream, then ends it with what the request's work ended
    /// with (see [`Forgotten::finish_with`]).
    fn finish_with<E>(self, work: Result<Option<Result<Reply, ErrorObject>>, E>) {
        // Forgotten first: the answer ends the stream, and nothing may be
        // placed on it after.
        self.forget().finish_with(work);
    }

    /// Takes the stream out of the session: nothing more is placed on it.
    fn forget(self) -> Forgotten {
        let forgotten = Forgotten {
            id: self.id.clone(),
            tx: self.tx.clone(),
        };
        drop(self);
        forgotten
    }
}

/// A request's stream taken out of its session, its sender kept for the
/// answer that ends it.
struct Forgotten {
    id: Id,
    tx: Tx,
}

impl Forgotten {
    /// Ends the stream with the answer of what the request's work ended
    /// with (`Err`: it panicked; `Ok(None)`: it was cancelled, and the
    /// stream ends without one when `tx`, its last sender, is dropped).
    fn finish_with<E>(self, work: Result<Option<Result<Reply, ErrorObject>>, E>) {
        let answer = match work {
            Ok(outcome) => outcome.map(|o| Message::answer(self.id.clone(), o)),
            Err(_) => Some(no_answer(self.id.clone())),
        };
        if let Some(m) = answer
            && self.tx.send(m).is_err()
        {
            // The 2025-11-25 transport puts no answer on the GET stream.
            tracing::info!(id = %self.id, "an answer whose request's stream is closed; dropped");
        }
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        lock(&self.session.streams).close_request(&self.id, &self.tx);
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

impl LegacyHttpSession for HttpSession {
    const ENDING: &'static str = "";

    fn sessions(app: &App) -> &Mutex<HashMap<String, Arc<Self>>> {
        &app.sessions
    }
    fn usage(&self) -> &Usage {
        &self.usage
    }
    fn streaming(&self) -> bool {
        lock(&self.streams).any_open()
    }
    async fn exchange(self: &Arc<Self>, msg: Message, hdrs: &HeaderMap) -> Response {
        exchange(self, msg, super::accepts_sse(hdrs)).await
    }
    fn open_get(&self, tx: Tx) {
        lock(&self.streams).open_get(tx);
    }
    /// Later questions fail too: nobody is left to answer them, and one
    /// left waiting would keep the session in memory. Session-scoped tasks
    /// go with the session; principal-scoped ones stay.
    async fn close(&self, app: &App, why: &str) {
        self.engine.end(why);
        if self.engine.scope().ends_with_session()
            && let Err(e) = app.ledger.drop_scope(self.engine.scope()).await
        {
            tracing::error!(error = %e, "could not drop the tasks of an ended session");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use serde_json::json;

    use super::*;
    use crate::driver::http::legacy_relay::tests::Wakes;

    /// A stream found empty, then forgotten (its last sender dropped),
    /// wakes nobody: not the task that waited on it before.
    #[test]
    fn an_empty_stream_taken_quietly_wakes_nobody_when_it_closes() {
        let (tx, mut rx) = mpsc::unbounded_channel::<Message>();
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(wakes.clone());
        assert!(rx.poll_recv(&mut Context::from_waker(&waker)).is_pending());
        assert!(take_quietly(&mut rx).is_none());
        drop(tx);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
    }

    /// What the stream holds is taken.
    #[test]
    fn what_the_stream_holds_is_taken() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let progress = Message::notification("notifications/progress", json!({}));
        tx.send(progress.clone()).unwrap();
        let taken = take_quietly(&mut rx).map(|m| m.to_json());
        assert_eq!(taken, Some(progress.to_json()));
    }
}
