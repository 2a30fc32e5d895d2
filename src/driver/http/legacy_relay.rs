//! 2025-11-25 HTTP sessions in front of a 2025-11-25 upstream: one
//! upstream of its own per session, its messages relayed unchanged.
//!
//! Both sides speak the same revision, so there is nothing to translate;
//! what the shim adds is the HTTP transport and isolation. A session gets
//! its own child process (the command the shim was started with), or its
//! own session on the 2025-11-25 HTTP server the shim was given, so its
//! tasks, request ids, notifications and `initialize` answer are that
//! upstream's alone: another session, of another principal or not, cannot
//! see them or collide with them. See docs/limits.md for why not one
//! multiplexed upstream.
//!
//! Routing, per session: the answer to a POSTed request goes to that POST
//! (plain JSON, or the end of an SSE stream when something came first);
//! the server's requests and notifications go on the SSE stream of a
//! request in flight whose client takes SSE (the 2025-11-25 transport lets
//! related messages travel there), else on the GET stream, else into a
//! bounded backlog until one opens. Client answers and notifications go to
//! the session's upstream and are acknowledged with 202.

use crate::bridge::lock;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use super::legacy::{session_cap_reached, too_many_sessions, unknown_session};
use super::legacy_session::{LegacyHttpSession, Usage, keep};
use super::{App, error_response, json_response};
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message};
use crate::scope::Principal;
use crate::transport::Inbound;
use crate::upstream::http::{LegacyHttpRelay, NotRelayed, RelayedSession};

/// Messages kept for a GET stream that is not open yet.
const BACKLOG: usize = 1000;
/// Longest line read from a session's child.
const MAX_LINE_BYTES: usize = 64 * 1024 * 1024;
/// How long a child may take to exit once its input is closed before it
/// is killed.
const EXIT_GRACE: Duration = Duration::from_secs(3);
/// How long the child may take to answer `initialize`.
const INITIALIZE_TIMEOUT: Duration = Duration::from_secs(30);

/// The command a session's upstream process is started with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayCommand {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
}

/// Where each relayed 2025-11-25 session gets an upstream of its own.
#[derive(Debug, Clone)]
pub enum LegacyRelay {
    /// A process per session, started with this command (the shim's
    /// `-- <command>`).
    Process(RelayCommand),
    /// A session per session on this 2025-11-25 Streamable HTTP server
    /// (the shim's `--upstream-url`).
    Url(LegacyHttpRelay),
}

type Tx = mpsc::UnboundedSender<Message>;

/// One 2025-11-25 HTTP session and its own upstream.
#[derive(Debug)]
pub(crate) struct RelaySession {
    link: Link,
    routes: Mutex<Routes>,
    usage: Usage,
}

/// A relayed session's own upstream.
#[derive(Debug)]
enum Link {
    /// A child process: messages go to its stdin, its stdout is routed.
    Process {
        /// Lines for the child's stdin; dropped to close it.
        to_child: Mutex<Option<Tx>>,
        child: Mutex<Option<tokio::process::Child>>,
    },
    /// A session on a 2025-11-25 HTTP server: a POST per message, what
    /// comes back on it (and on the GET stream) is routed.
    Http {
        peer: RelayedSession,
        /// `--record-upstream`, under the client session's label.
        record: Option<crate::transport::record::Labelled>,
        /// The shim's table holding this session, and its key there: a
        /// session the server forgot leaves it.
        app: Weak<App>,
        sid: String,
    },
}

#[derive(Debug, Default)]
struct Routes {
    /// POSTed requests waiting for their answer.
    by_id: HashMap<Id, Tx>,
    /// Of those, the ones whose client takes SSE, oldest first: where the
    /// server's own messages go while no GET stream is open.
    streams: Vec<(Id, Tx)>,
    /// POSTed requests that asked for progress, by token (as JSON text).
    by_progress: HashMap<String, Tx>,
    get_stream: Option<Tx>,
    backlog: VecDeque<Message>,
    /// The upstream is gone: nothing more will come.
    ended: bool,
    /// The HTTP upstream answered 404: it no longer knows the session, so
    /// the client is told so (404) and initializes again.
    forgotten: bool,
}

impl RelaySession {
    /// Hands one client message to the session's upstream: a child's
    /// input takes it at once; over HTTP its POST is returned for the
    /// caller to run (see [`Posting`]). What comes back is routed, as a
    /// child's output is, and a POST that fails answers its request with
    /// why.
    fn send_up(self: &Arc<Self>, msg: Message) -> Result<Option<Posting>, ShimError> {
        match &self.link {
            Link::Process { to_child, .. } => match lock(to_child).as_ref() {
                Some(tx) => tx.send(msg).map(|()| None).map_err(|_| gone_error()),
                None => Err(gone_error()),
            },
            Link::Http { record, .. } => {
                self.may_post(record.as_ref(), &msg)?;
                Ok(Some(Box::pin(self.clone().post(msg))))
            }
        }
    }

    /// [`Self::send_up`] for what the client sends that awaits no answer
    /// (a notification, its answer to the server): over HTTP its POST is
    /// awaited, so that it reaches the server before the client's next
    /// message can (a server may refuse requests that overtake
    /// `notifications/initialized`).
    async fn send_up_in_order(self: &Arc<Self>, msg: Message) -> Result<(), ShimError> {
        if let Some(posting) = self.send_up(msg)? {
            posting.await;
        }
        Ok(())
    }

    /// Whether `msg` may still go to the HTTP upstream; recorded if so.
    fn may_post(
        &self,
        record: Option<&crate::transport::record::Labelled>,
        msg: &Message,
    ) -> Result<(), ShimError> {
        if lock(&self.routes).ended {
            return Err(gone_error());
        }
        if let Some(rec) = record {
            rec.record("c2s", msg);
        }
        Ok(())
    }

    /// [`Self::send_up`] over HTTP: one POST, its messages routed.
    async fn post(self: Arc<Self>, msg: Message) {
        let Link::Http {
            peer,
            record,
            app,
            sid,
        } = &self.link
        else {
            return;
        };
        let posted = peer
            .post(&msg, |m| {
                if let Some(rec) = record {
                    rec.record("s2c", &m);
                }
                self.route(m);
            })
            .await;
        match posted {
            Ok(()) => {}
            Err(NotRelayed::SessionGone) => {
                tracing::info!(session = %crate::ids::log_prefix(sid), "the HTTP upstream no longer knows the session (404); it ends");
                if let Some(app) = app.upgrade() {
                    lock(&app.relays).remove(sid);
                }
                lock(&self.routes).forgotten = true;
                self.end("the HTTP upstream no longer knows the session");
            }
            Err(NotRelayed::Failed(e)) => match msg.id() {
                Some(id) => self.route(Message::error(Some(id.clone()), e.to_error_object())),
                None => {
                    tracing::warn!(error = %e, "a client message to the HTTP upstream was lost")
                }
            },
        }
    }

    /// Places one message from the session's upstream.
    fn route(&self, msg: Message) {
        let mut r = lock(&self.routes);
        if matches!(msg, Message::Response(_) | Message::Error(_)) {
            let Some(id) = msg.id().cloned() else {
                tracing::info!("an error without an id from a session's upstream; dropped");
                return;
            };
            r.streams.retain(|(sid, _)| *sid != id);
            match r.by_id.remove(&id) {
                Some(tx) => {
                    r.by_progress.retain(|_, t| !t.same_channel(&tx));
                    if tx.send(msg).is_err() {
                        tracing::info!(?id, "an answer whose request's stream is closed; dropped");
                    }
                }
                // The 2025-11-25 transport puts no answer on the GET stream.
                None => tracing::info!(?id, "an answer to no pending request; dropped"),
            }
            return;
        }
        let progress = match &msg {
            Message::Notification(n) if n.method == "notifications/progress" => n
                .params
                .as_ref()
                .and_then(|p| p.get("progressToken"))
                .and_then(|t| r.by_progress.get(&t.to_string()))
                .filter(|tx| !tx.is_closed())
                .cloned(),
            _ => None,
        };
        // A server request is most likely asked during a request (input
        // for a tool call, a task's question while `tasks/result` waits):
        // the newest open POST stream first. A notification is more often
        // unrelated to any request: the GET stream first.
        let open = |tx: &&Tx| !tx.is_closed();
        let get = r.get_stream.as_ref().filter(open).cloned();
        let post = r.streams.iter().rev().map(|(_, tx)| tx).find(open).cloned();
        let target = progress.or_else(|| match &msg {
            Message::Request(_) => post.or(get),
            _ => get.or(post),
        });
        let msg = match target {
            Some(tx) => match tx.send(msg) {
                Ok(()) => return,
                Err(e) => e.0,
            },
            None => msg,
        };
        if r.backlog.len() == BACKLOG {
            r.backlog.pop_front();
        }
        r.backlog.push_back(msg);
    }

    /// The upstream is gone: every POST still waiting gets an error. True
    /// the first time (the one that ends the upstream).
    fn upstream_gone(&self, why: &str) -> bool {
        let (first, waiting): (bool, Vec<(Id, Tx)>) = {
            let mut r = lock(&self.routes);
            let first = !std::mem::replace(&mut r.ended, true);
            r.streams.clear();
            r.by_progress.clear();
            r.get_stream = None;
            (first, r.by_id.drain().collect())
        };
        for (id, tx) in waiting {
            let _ = tx.send(Message::error(
                Some(id),
                ShimError::Internal(why.to_owned()).to_error_object(),
            ));
        }
        first
    }

    /// Ends the session's upstream: a child's input is closed, then it is
    /// killed if it has not exited within [`EXIT_GRACE`]; an HTTP session
    /// is ended on the server.
    fn end(&self, why: &str) {
        match &self.link {
            Link::Process { to_child, child } => {
                lock(to_child).take();
                let child = lock(child).take();
                self.upstream_gone(why);
                if let Some(mut child) = child {
                    tokio::spawn(async move {
                        if tokio::time::timeout(EXIT_GRACE, child.wait())
                            .await
                            .is_err()
                        {
                            let _ = child.kill().await;
                        }
                    });
                }
            }
            Link::Http { peer, .. } => {
                if self.upstream_gone(why) {
                    peer.end();
                }
            }
        }
    }
}

/// A message's POST to the session's HTTP upstream, not started yet.
type Posting = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Runs `posting` (if any) in this task while waiting for the first
/// message routed to `rx`: a plain JSON answer then needs no hand-over
/// to another task. A POST still running when something comes first (an
/// SSE stream's early messages), or when the waiting ends (the client
/// went), goes on in a task of its own: the request was sent, and what
/// it brings is still routed.
async fn first_routed(
    rx: &mut mpsc::UnboundedReceiver<Message>,
    posting: Option<Posting>,
) -> Option<Message> {
    /// Spawns the POST it still holds when dropped.
    struct Unfinished(Option<Posting>);
    impl Drop for Unfinished {
        fn drop(&mut self) {
            if let Some(posting) = self.0.take()
                && tokio::runtime::Handle::try_current().is_ok()
            {
                tokio::spawn(posting);
            }
        }
    }
    let mut unfinished = Unfinished(posting);
    let Some(post) = unfinished.0.as_mut() else {
        return rx.recv().await;
    };
    let posted = std::future::poll_fn(|cx| {
        // The channel holds this task's waker only while the POST is not
        // being polled: the answer the POST itself routes would otherwise
        // wake this task mid-poll, and hyper would then poll the
        // connection again on a worker woken for it, a thread switch per
        // request. What is sent meanwhile is seen by the last poll of the
        // channel, which comes after the POST's.
        let mut unheard = Context::from_waker(Waker::noop());
        if let Poll::Ready(first) = rx.poll_recv(&mut unheard) {
            return Poll::Ready(Some(first));
        }
        if post.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        rx.poll_recv(cx).map(Some)
    })
    .await;
    match posted {
        Some(first) => first,
        None => {
            unfinished.0 = None;
            rx.recv().await
        }
    }
}

/// What a message for a session whose upstream is gone is told.
fn gone_error() -> ShimError {
    ShimError::Internal("the session's upstream is gone".into())
}

/// Starts a session: its upstream, then `initialize` relayed to it. The
/// session exists for the client only once the upstream answered.
pub(super) async fn initialize(
    app: Arc<App>,
    relay: &LegacyRelay,
    req: crate::jsonrpc::Request,
    principal: Option<Principal>,
) -> Response {
    let reached = session_cap_reached(
        &app,
        lock(&app.relays).values().map(|s| &s.usage.principal),
        &principal,
    );
    if let Some(cap) = reached {
        return too_many_sessions(cap, Some(req.id));
    }
    let id = req.id.clone();
    let sid = crate::ids::random_id();
    let session = match relay {
        LegacyRelay::Process(command) => match start_child(&app, command, &sid, principal, &id) {
            Ok(session) => session,
            Err(refused) => return *refused,
        },
        LegacyRelay::Url(server) => start_http(&app, server, &sid, principal),
    };
    let answer = match relay_initialize(&session, req).await {
        Ok(answer) => answer,
        Err(e) => return error_response(StatusCode::INTERNAL_SERVER_ERROR, Some(id), e),
    };
    if matches!(answer, Message::Error(_)) || lock(&session.routes).ended {
        session.end("initialize was refused");
        return json_response(StatusCode::OK, &answer);
    }
    if let Err(cap) = keep(&app, &sid, session.clone()) {
        session.end("too many sessions");
        return too_many_sessions(cap, Some(id));
    }
    if let Link::Http { peer, .. } = &session.link {
        let weak = Arc::downgrade(&session);
        peer.open_get(move |m| {
            if let Some(s) = weak.upgrade() {
                s.route(m);
            }
        });
    }
    tracing::info!(session = %crate::ids::log_prefix(&sid), "legacy HTTP session opened on its own upstream");
    let mut resp = json_response(StatusCode::OK, &answer);
    if let Ok(v) = HeaderValue::from_str(&sid) {
        resp.headers_mut().insert(super::headers::MCP_SESSION_ID, v);
    }
    resp
}

/// The session's own child process, its input writer and its output
/// reader; a failure is the 500 answer to `initialize` (request `id`).
fn start_child(
    app: &Arc<App>,
    command: &RelayCommand,
    sid: &str,
    principal: Option<Principal>,
    id: &Id,
) -> Result<Arc<RelaySession>, Box<Response>> {
    let failed = |what: String| {
        error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            Some(id.clone()),
            ShimError::Internal(what),
        )
    };
    let spawned = crate::transport::child::spawn(&command.program, &command.args).map_err(|e| {
        tracing::error!(error = %e, "cannot start a session's upstream process");
        failed(format!("cannot start the upstream for this session: {e}"))
    })?;
    let record = relay_record(app, sid);
    let (to_child, from_session) = mpsc::unbounded_channel();
    crate::transport::child::ChildInput::start_recorded(
        spawned.stdin,
        from_session,
        record.clone(),
    )
    .map_err(|e| failed(format!("cannot write to the session's upstream: {e}")))?;
    let session = Arc::new(RelaySession {
        link: Link::Process {
            to_child: Mutex::new(Some(to_child)),
            child: Mutex::new(Some(spawned.child)),
        },
        routes: Mutex::new(Routes::default()),
        usage: Usage::new(principal, app.now_ms()),
    });
    spawn_reader(
        spawned.stdout,
        Arc::downgrade(&session),
        Arc::downgrade(app),
        sid.to_owned(),
        record,
    );
    Ok(session)
}

/// The session's own session on the HTTP `server`, opened by the
/// `initialize` relayed next.
fn start_http(
    app: &Arc<App>,
    server: &LegacyHttpRelay,
    sid: &str,
    principal: Option<Principal>,
) -> Arc<RelaySession> {
    Arc::new(RelaySession {
        link: Link::Http {
            peer: server.session(),
            record: relay_record(app, sid),
            app: Arc::downgrade(app),
            sid: sid.to_owned(),
        },
        routes: Mutex::new(Routes::default()),
        usage: Usage::new(principal, app.now_ms()),
    })
}

/// `--record-upstream` for session `sid`'s own upstream.
fn relay_record(app: &App, sid: &str) -> Option<crate::transport::record::Labelled> {
    app.opts
        .record_upstream
        .clone()
        .map(|rec| crate::transport::record::Labelled {
            label: rec.session_label(sid),
            rec,
        })
}

/// `initialize` to the session's upstream, and its answer; the session is
/// ended when the upstream does not take the request or does not answer
/// in time.
async fn relay_initialize(
    session: &Arc<RelaySession>,
    req: crate::jsonrpc::Request,
) -> Result<Message, ShimError> {
    let id = req.id.clone();
    let (tx, mut rx) = mpsc::unbounded_channel();
    lock(&session.routes).by_id.insert(id.clone(), tx);
    match session.send_up(Message::Request(req)) {
        Ok(Some(posting)) => drop(tokio::spawn(posting)),
        Ok(None) => {}
        Err(e) => {
            session.end("initialize failed");
            return Err(e);
        }
    }
    // Whatever the child says before its answer has no stream to go on
    // yet: it waits in the backlog for the session's GET stream.
    let answer = tokio::time::timeout(INITIALIZE_TIMEOUT, async {
        loop {
            match rx.recv().await {
                Some(m) if super::is_answer_to(&m, &id) => return Some(m),
                Some(_) => {}
                None => return None,
            }
        }
    })
    .await;
    match answer {
        Ok(Some(m)) => Ok(m),
        _ => {
            session.end("initialize was not answered");
            Err(ShimError::Internal(
                "the session's upstream did not answer initialize".into(),
            ))
        }
    }
}

/// Reads the child's stdout into the session's routes; when it ends, the
/// session ends with it (later requests get 404 and initialize again).
fn spawn_reader(
    stdout: tokio::process::ChildStdout,
    session: Weak<RelaySession>,
    app: Weak<App>,
    sid: String,
    record: Option<crate::transport::record::Labelled>,
) {
    tokio::spawn(async move {
        let mut lines = crate::transport::lines::LineReader::new(stdout, MAX_LINE_BYTES);
        loop {
            match lines.next().await {
                Ok(Some(Inbound::Message(m))) => {
                    if let Some(rec) = &record {
                        rec.record("s2c", &m);
                    }
                    let Some(s) = session.upgrade() else { return };
                    s.route(m);
                }
                Ok(Some(Inbound::Invalid { excerpt, error, .. })) => {
                    tracing::warn!(session = %crate::ids::log_prefix(&sid), %error, %excerpt, "a line from a session's upstream is no message; skipped");
                }
                Ok(None) | Err(_) => break,
            }
        }
        tracing::info!(session = %crate::ids::log_prefix(&sid), "a session's upstream process closed its output");
        if let Some(app) = app.upgrade() {
            lock(&app.relays).remove(&sid);
        }
        if let Some(s) = session.upgrade() {
            s.end("the session's upstream process exited");
        }
    });
}

/// Whether `sid` names a relayed session (of anyone: the principal check
/// comes with the lookup).
pub(super) fn holds(app: &App, sid: &str) -> bool {
    lock(&app.relays).contains_key(sid)
}

/// Forgets a POSTed request's routes when its POST ends, answered or not.
struct Registered {
    session: Arc<RelaySession>,
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
        r.streams.retain(|(_, t)| !t.same_channel(&self.tx));
        r.by_progress.retain(|_, t| !t.same_channel(&self.tx));
    }
}

/// Relays a client message to the session's process and answers the POST
/// with what comes back for it.
async fn exchange(s: &Arc<RelaySession>, msg: Message, hdrs: &HeaderMap) -> Response {
    let Message::Request(req) = msg else {
        // A client's answer to a server request, or a notification.
        return match s.send_up_in_order(msg).await {
            Ok(()) => StatusCode::ACCEPTED.into_response(),
            Err(e) => error_response(StatusCode::NOT_FOUND, None, e),
        };
    };
    let sse = super::accepts_sse(hdrs);
    let id = req.id.clone();
    let (tx, mut rx) = mpsc::unbounded_channel();
    {
        let mut r = lock(&s.routes);
        if r.ended {
            drop(r);
            return unknown_session(Some(id));
        }
        r.by_id.insert(id.clone(), tx.clone());
        if sse {
            r.streams.push((id.clone(), tx.clone()));
            if let Some(token) = req
                .params
                .as_ref()
                .and_then(|p| p.get("_meta"))
                .and_then(|m| m.get("progressToken"))
            {
                r.by_progress.insert(token.to_string(), tx.clone());
            }
        }
    }
    let registered = Registered {
        session: s.clone(),
        id: id.clone(),
        tx,
    };
    let posting = match s.send_up(Message::Request(req)) {
        Ok(posting) => posting,
        Err(e) => return error_response(StatusCode::OK, Some(id), e),
    };
    // The first message decides the body: the answer alone goes back as
    // JSON; anything before it opens an SSE stream that ends with it.
    let Some(first) = first_routed(&mut rx, posting).await else {
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            Some(id),
            ShimError::Internal("no answer".into()),
        );
    };
    if super::is_answer_to(&first, &id) {
        if matches!(first, Message::Error(_)) && lock(&s.routes).forgotten {
            return unknown_session(Some(id));
        }
        return json_response(StatusCode::OK, &first);
    }
    // The stream holds the routes (and the session) until the answer.
    super::sse_until_answer(&first, rx, id, registered, None)
}

/// Ends every session and its process (the shim is stopping).
pub(super) fn end_all(app: &App, why: &str) {
    let all: Vec<Arc<RelaySession>> = lock(&app.relays).drain().map(|(_, s)| s).collect();
    for s in all {
        s.end(why);
    }
}

impl LegacyHttpSession for RelaySession {
    const ENDING: &'static str = "; its own upstream ends";

    fn sessions(app: &App) -> &Mutex<HashMap<String, Arc<Self>>> {
        &app.relays
    }
    fn usage(&self) -> &Usage {
        &self.usage
    }
    fn streaming(&self) -> bool {
        let r = lock(&self.routes);
        r.get_stream.as_ref().is_some_and(|tx| !tx.is_closed())
            || r.by_id.values().any(|tx| !tx.is_closed())
    }
    async fn exchange(self: &Arc<Self>, msg: Message, hdrs: &HeaderMap) -> Response {
        exchange(self, msg, hdrs).await
    }
    /// What the process said while no GET stream was open goes out first.
    fn open_get(&self, tx: Tx) {
        let mut r = lock(&self.routes);
        for m in r.backlog.drain(..) {
            let _ = tx.send(m);
        }
        r.get_stream = Some(tx);
    }
    async fn close(&self, _app: &App, why: &str) {
        self.end(why);
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::future::Future;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use serde_json::json;

    use super::*;

    /// Counts its wakes.
    #[derive(Default)]
    pub(in crate::driver::http) struct Wakes(pub(in crate::driver::http) AtomicUsize);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A POST that routes `answer` to `tx` on its second poll, as a
    /// relayed POST does once its response has come back.
    fn answered_on_second_poll(tx: mpsc::UnboundedSender<Message>, answer: Message) -> Posting {
        let mut pending = Some((tx, answer));
        let mut polls = 0;
        Box::pin(std::future::poll_fn(move |_| {
            polls += 1;
            if polls == 1 {
                return Poll::Pending;
            }
            if let Some((tx, answer)) = pending.take() {
                let _ = tx.send(answer);
            }
            Poll::Ready(())
        }))
    }

    #[test]
    fn the_answer_a_post_routes_itself_does_not_wake_the_waiting_task() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let answer = Message::response(Id::Num(7), json!({}));
        let posting = answered_on_second_poll(tx, answer.clone());
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let mut first = Box::pin(first_routed(&mut rx, Some(posting)));
        assert!(first.as_mut().poll(&mut cx).is_pending());
        // The response came back: the task is polled again (hyper's
        // connection did it) and the POST routes the answer.
        match first.as_mut().poll(&mut cx) {
            Poll::Ready(Some(m)) => assert_eq!(m.to_json(), answer.to_json()),
            other => panic!("expected the answer, got {other:?}"),
        }
        // A wake here would have the runtime poll the connection again
        // on another worker: a thread switch per request.
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn what_another_task_routes_while_the_post_waits_wakes_the_waiting_task() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let posting = answered_on_second_poll(tx.clone(), Message::response(Id::Num(7), json!({})));
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        let mut first = Box::pin(first_routed(&mut rx, Some(posting)));
        assert!(first.as_mut().poll(&mut cx).is_pending());
        // A question the server sent on its GET stream, routed to this
        // request's stream by the task reading that stream.
        let question = Message::request(Id::Num(1), "elicitation/create", json!({}));
        tx.send(question.clone()).unwrap();
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "the wake was lost");
        match first.as_mut().poll(&mut cx) {
            Poll::Ready(Some(m)) => assert_eq!(m.to_json(), question.to_json()),
            other => panic!("expected the question first, got {other:?}"),
        }
    }
}
