//! The upstream side as the bridges see it: "send a request, get its
//! answer", "send a notification", and a stream of whatever else arrives.
//!
//! [`Upstream`] is what every upstream does; [`ModernUpstream`] adds what
//! only a 2026-07-28 one does, the calls the legacy-front engine makes.
//! The probe's verdict is an [`AnyUpstream`] of one or the other, so each
//! engine gets the trait its direction needs. [`Connection`] implements
//! both over any message transport (a child's stdio, an in-process
//! server); [`http`] has one type per revision. Library users wrap their
//! own server by implementing the traits or by feeding a [`Connection`].

pub mod channel;
pub mod http;
pub mod io;
pub mod stream;
pub mod supervised;

pub use stream::{StreamEvent, UpstreamStream};

/// The attribute [`Upstream`] is declared with, re-exported so that an
/// implementation of your own needs no `async-trait` dependency of its own
/// (`#[mcp_tasks_shim::upstream::async_trait] impl Upstream for …`).
pub use async_trait::async_trait;

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, IdMap, Message, Notification, Request};
use crate::revision::Revision;
use crate::translate::raw::{Params, PlainParams};
use crate::translate::session::ModernMeta;
use crate::transport::LineSink;
use crate::wire::modern::DetailedTask;

/// Messages for the upstream, drained by its writer.
type ToUpstream = mpsc::UnboundedSender<Message>;

/// A request's outcome as the upstream gave it: its result or its error.
pub type RpcResult = Result<Value, ErrorObject>;

/// What went wrong with an upstream over its life, as counted by its
/// supervisor ([`Upstream::faults`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Faults {
    /// Children restarted that came up (answered their probe).
    pub restarts: u64,
    /// Liveness pings unanswered in time, and restarted children that
    /// failed their probe.
    pub probe_failures: u64,
}

/// Whether an upstream can serve requests now, as its transport knows it
/// (`/readyz`; a 2025-11-25 `initialize` is refused while it is not up).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Readiness {
    /// Probed and connected.
    Up,
    /// Gone, and a successor is being started (`--restart-upstream`).
    Restarting(String),
    /// Gone, and no successor will come (or not started yet).
    Down(String),
}

impl Readiness {
    /// Why it is not up (`None` when it is).
    pub fn why_not(&self) -> Option<&str> {
        match self {
            Readiness::Up => None,
            Readiness::Restarting(why) | Readiness::Down(why) => Some(why),
        }
    }

    /// `up`, `restarting` or `down`.
    pub fn name(&self) -> &'static str {
        match self {
            Readiness::Up => "up",
            Readiness::Restarting(_) => "restarting",
            Readiness::Down(_) => "down",
        }
    }
}

/// Traffic from the upstream that is not an answer to a shim request.
#[derive(Debug)]
pub enum UpstreamEvent {
    /// A notification (progress, log, task status…).
    Notification(Notification),
    /// A server→client request (legacy elicitation, sampling, roots).
    Request(Request),
    /// The upstream is gone; every pending request has been failed. With
    /// a restartable upstream more events may follow (from its successor).
    Closed(String),
    /// An answer to a request relayed unchanged (pass-through, see
    /// [`supervised::Supervised::send_raw`]).
    Relayed(Message),
    /// Sent by [`Upstream::events_handled`]: whoever handles the
    /// events sends on it (or drops it) once it gets here, which is after
    /// every event the upstream had emitted before.
    Barrier(tokio::sync::oneshot::Sender<()>),
}

tokio::task_local! {
    /// Set by a front around an upstream call (its own number for the
    /// call): an upstream that can tell which of its requests a
    /// server→client request came with (an HTTP upstream: it arrives on
    /// that request's answer stream) remembers it for
    /// [`Upstream::origin_of`].
    pub static CALL_ORIGIN: u64;
}

/// What a bridge needs from an upstream server of either revision.
///
/// `request` resolves with the upstream's own answer (`Ok(Ok(result))` or
/// `Ok(Err(error))`); `Err(ShimError)` means the upstream could not answer
/// at all (exited, timed out, unreachable). Dropping the future abandons
/// the request; the answer, if it comes, is discarded.
///
/// What only a 2026-07-28 upstream does (tasks read by `tasks/get`,
/// long-lived requests, per-request `_meta`) is [`ModernUpstream`]'s: a
/// 2025-11-25 upstream has nothing of it to refuse.
#[async_trait]
pub trait Upstream: Send + Sync + 'static {
    /// Sends a request and waits for its answer.
    async fn request(&self, method: &str, params: Value) -> Result<RpcResult, ShimError>;
    /// The [`CALL_ORIGIN`] of the call whose answer stream carried the
    /// server→client request `id`, if this upstream could tell (until the
    /// request is answered). The default tells nothing: over one stdio
    /// stream no request says which call it belongs to.
    fn origin_of(&self, id: &Id) -> Option<u64> {
        let _ = id;
        None
    }
    /// Sends a notification.
    fn notify(&self, method: &str, params: Value) -> Result<(), ShimError>;
    /// Answers a server→client request.
    fn respond(&self, id: Id, outcome: RpcResult) -> Result<(), ShimError>;
    /// Stops talking to the upstream: waiting requests fail with `reason`
    /// and a child process sees the end of its input.
    fn shutdown(&self, reason: &str) {
        let _ = reason;
    }
    /// Whether it can serve requests now. An upstream that cannot tell
    /// says [`Readiness::Up`]: its requests then fail one by one.
    fn readiness(&self) -> Readiness {
        Readiness::Up
    }
    /// How often it was restarted and failed a probe, for `/metrics`. An
    /// upstream that is never restarted or probed says zero.
    fn faults(&self) -> Faults {
        Faults::default()
    }
    /// [`Upstream::readiness`] for `/readyz`, which may ask the upstream
    /// (bounded): an HTTP upstream only knows it is out of reach by trying.
    /// The default is [`Upstream::readiness`].
    async fn check_readiness(&self) -> Readiness {
        self.readiness()
    }
    /// After [`Upstream::shutdown`]: waits (bounded) until the upstream
    /// process, if there is one, has exited, killing it if it lingers.
    async fn finish(&self) {}
    /// Returns once the events this upstream emitted so far have been
    /// handled (see [`UpstreamEvent::Barrier`]); at once when it cannot
    /// tell. A request's progress is emitted as an event while its answer
    /// goes straight to the waiting request: awaiting this before passing
    /// the answer on keeps the progress in front.
    async fn events_handled(&self) {}
}

/// What a 2026-07-28 upstream does beside [`Upstream`]'s: the calls the
/// legacy-front engine (a 2025-11-25 client bridged to a 2026-07-28
/// server) and the same-revision HTTP relay make.
///
/// A transport that learns its revision only by probing (a child's stdio,
/// a channel, a supervised child) implements both traits, and
/// [`AnyUpstream::speaking`] hands out the one its probe calls for.
#[async_trait]
pub trait ModernUpstream: Upstream {
    /// [`Upstream::request`] with `meta`'s members merged into
    /// `params._meta` (a legacy session's requests to a 2026-07-28
    /// upstream). The params are borrowed: an upstream that writes JSON
    /// writes them, with `meta`'s members from their serialised form
    /// ([`ModernMeta::write_request`], the same on the wire), and the
    /// caller keeps them (a `tools/call` retried with input answers needs
    /// them again). The default merges a copy.
    async fn request_with_meta(
        &self,
        method: &str,
        params: &Value,
        meta: &ModernMeta,
    ) -> Result<RpcResult, ShimError> {
        self.request(method, meta.merge_into(Some(params.clone())))
            .await
    }
    /// `tasks/get` of `task_id`, with `meta` (a legacy session reading its
    /// task), the result read as a [`DetailedTask`] without the answer's
    /// own `_meta`: `Ok(Err(_))` is the upstream's error answer, and a
    /// result that is no task is an `Err`. The default reads the answer as
    /// any other; an HTTP upstream reads the task straight from the
    /// answer's bytes ([`crate::wire::modern::detailed_task_answer`]).
    async fn get_task(
        &self,
        task_id: &str,
        meta: &ModernMeta,
    ) -> Result<Result<DetailedTask, ErrorObject>, ShimError> {
        read_task(self, task_id, meta).await
    }
    /// [`Self::request_with_meta`], the result handed back as the text it
    /// came in, for a caller that passes it on without reading it as a
    /// tree (a legacy session's plain answers, see
    /// [`crate::translate::raw`]). `None` when this transport does not
    /// read answers as text: use [`Self::request_with_meta`] (text made
    /// from a tree would only cost more).
    async fn request_text(
        &self,
        method: &str,
        params: Params<'_>,
        meta: &ModernMeta,
    ) -> Option<Result<TextAnswer, ShimError>> {
        let _ = (method, params, meta);
        None
    }
    /// [`Self::request_text`] without a future: the request is written
    /// now, from this thread, and `handler` gets its answer on the thread
    /// that reads it, or the error that ends it (no answer within the
    /// request timeout, the upstream gone). False when this upstream
    /// cannot take the request that way now (the default; a child being
    /// restarted): the handler was told ([`AnswerHandler::not_sent`]) and
    /// goes the usual way.
    fn request_with_callback(
        &self,
        method: &'static str,
        meta: &ModernMeta,
        handler: Box<dyn AnswerHandler>,
    ) -> bool {
        let _ = (method, meta);
        handler.not_sent();
        false
    }
    /// Forgets the request of [`Self::request_with_callback`] that answers
    /// request `id` of `client` ([`AnswerHandler::answers`]) if it is still
    /// unanswered: its handler is dropped uncalled and the upstream is told
    /// (`notifications/cancelled`). False when there is none.
    ///
    /// The client's cancel finds the request here, not in a registry of
    /// the client's own: a registry would be written by the client's
    /// thread and the reader's for every request, only for the rare cancel.
    fn abandon_for(&self, client: &dyn Any, id: &Id) -> bool {
        let _ = (client, id);
        false
    }
    /// Sends a long-lived request (`subscriptions/listen`) and hands back
    /// its stream at once; see [`stream`]. `Err` means it could not be
    /// sent. A server that refuses the method ends the stream with its
    /// error, and the bridges then poll.
    async fn open_stream(&self, method: &str, params: Value) -> Result<UpstreamStream, ShimError>;
    /// Pass-through of one client request whose body is already a valid
    /// 2026-07-28 request: the body goes out as it came in, the client's
    /// id included. `None` when this transport cannot do that (ids must be
    /// remapped on a shared stream): use [`Upstream::request`].
    async fn relay_raw(
        &self,
        id: &Id,
        method: &str,
        name: Option<&str>,
        body: axum::body::Bytes,
    ) -> Option<Result<RawAnswer, ShimError>> {
        let _ = (id, method, name, body);
        None
    }
}

/// An upstream whose revision is known, typed by it: the driver decides
/// the revision once (by the probe) and each engine gets the trait its
/// direction needs.
#[derive(Clone)]
pub enum AnyUpstream {
    /// A 2025-11-25 upstream (the modern-front engine's).
    Legacy(Arc<dyn Upstream>),
    /// A 2026-07-28 upstream (the legacy-front engine's, or relayed).
    Modern(Arc<dyn ModernUpstream>),
}

impl std::fmt::Debug for AnyUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "AnyUpstream({})", self.revision())
    }
}

impl AnyUpstream {
    /// `upstream`, a transport of no revision of its own, as the one its
    /// probe found it to speak.
    pub fn speaking<U: ModernUpstream>(upstream: Arc<U>, revision: Revision) -> AnyUpstream {
        match revision {
            Revision::Legacy => AnyUpstream::Legacy(upstream),
            Revision::Modern => AnyUpstream::Modern(upstream),
        }
    }

    /// The revision it speaks.
    pub fn revision(&self) -> Revision {
        match self {
            AnyUpstream::Legacy(_) => Revision::Legacy,
            AnyUpstream::Modern(_) => Revision::Modern,
        }
    }

    /// What every upstream does, whichever its revision.
    pub fn common(&self) -> Arc<dyn Upstream> {
        match self {
            AnyUpstream::Legacy(up) => up.clone(),
            AnyUpstream::Modern(up) => up.clone(),
        }
    }

    /// The 2026-07-28 upstream, if it is one.
    pub fn modern(&self) -> Option<&Arc<dyn ModernUpstream>> {
        match self {
            AnyUpstream::Modern(up) => Some(up),
            AnyUpstream::Legacy(_) => None,
        }
    }
}

impl std::ops::Deref for AnyUpstream {
    type Target = dyn Upstream;

    fn deref(&self) -> &(dyn Upstream + 'static) {
        match self {
            AnyUpstream::Legacy(up) => &**up,
            AnyUpstream::Modern(up) => &**up,
        }
    }
}

/// [`ModernUpstream::get_task`] as any upstream can: the answer read as any
/// other, then as a task.
pub(crate) async fn read_task<U: ModernUpstream + ?Sized>(
    upstream: &U,
    task_id: &str,
    meta: &ModernMeta,
) -> Result<Result<DetailedTask, ErrorObject>, ShimError> {
    let params = serde_json::json!({ "taskId": task_id });
    task_of(
        upstream
            .request_with_meta("tasks/get", &params, meta)
            .await?,
    )
}

/// A `tasks/get` answer as [`ModernUpstream::get_task`] gives it: the task
/// (without the answer's `_meta`), or the upstream's error answer; a
/// result that is no task is an `Err`.
pub(crate) fn task_of(answer: RpcResult) -> Result<Result<DetailedTask, ErrorObject>, ShimError> {
    match answer {
        Ok(result) => DetailedTask::from_answer_result(result).map(Ok),
        Err(e) => Ok(Err(e)),
    }
}

/// The upstream's answer to a [`ModernUpstream::relay_raw`] request.
#[derive(Debug)]
pub enum RawAnswer {
    /// A result answer to the relayed id, in the bytes it came in: checked
    /// on its envelope ([`crate::jsonrpc::peek`]), so it can go to the
    /// client unchanged without building its payload.
    Verbatim(axum::body::Bytes),
    /// Any other answer, parsed (so its shape and id are checked).
    Parsed(Message),
}

/// A connected upstream of any transport, and what its probe learnt.
#[derive(Debug)]
pub struct Link {
    /// Requests go here, typed by the revision the probe found.
    pub upstream: AnyUpstream,
    /// Notifications, server requests and the final `Closed`.
    pub events: tokio::sync::mpsc::UnboundedReceiver<UpstreamEvent>,
    /// Its `server/discover` result (modern upstreams).
    pub discover: Value,
    /// The child process, when the upstream is one.
    pub child: Option<tokio::process::Child>,
}

impl Link {
    /// The revision it speaks.
    pub fn revision(&self) -> Revision {
        self.upstream.revision()
    }

    /// Probes `upstream` by the spec's rule and bundles what it learnt: a
    /// `server/discover` answer means 2026-07-28 (kept as `discover`), an
    /// error or no answer within `timeout` means 2025-11-25 (logged as a
    /// warning when there was no answer). For an upstream you wired
    /// yourself, such as [`channel::pair`]'s, whose server must already be
    /// running; it may turn out to speak either revision, so it implements
    /// [`ModernUpstream`] too. When you know the revision, build the
    /// `Link` yourself (its fields are public; a 2026-07-28 one needs its
    /// `server/discover` result).
    ///
    /// ```no_run
    /// # async fn run() {
    /// use std::time::Duration;
    /// use mcp_tasks_shim::upstream::{Link, channel};
    /// let (conn, events, server) = channel::pair(Duration::from_secs(30));
    /// // … start your server on `server` …
    /// # drop(server);
    /// let link = Link::probe(conn, events, Duration::from_secs(5)).await;
    /// println!("the server speaks {}", link.revision());
    /// # }
    /// ```
    pub async fn probe<U: ModernUpstream>(
        upstream: Arc<U>,
        events: mpsc::UnboundedReceiver<UpstreamEvent>,
        timeout: Duration,
    ) -> Link {
        let verdict = probe(&*upstream, timeout, || false).await;
        tracing::info!(%verdict, "upstream probe");
        let (revision, discover) = verdict.into_revision();
        Link {
            upstream: AnyUpstream::speaking(upstream, revision),
            events,
            discover,
            child: None,
        }
    }
}

/// The probe's params: `server/discover` with the shim's client info.
pub(crate) fn probe_params() -> Value {
    let info = serde_json::json!({"name": "mcp-tasks-shim", "version": env!("CARGO_PKG_VERSION")});
    crate::revision::probe_request(Id::Num(0), &info)
        .params()
        .cloned()
        .unwrap_or_default()
}

/// Sends the probe through `up` and classifies its answer; none within
/// `timeout` counts as 2025-11-25. `gone` tells whether the upstream died
/// meanwhile: its probe failing then is no news (the death is the error
/// to report), so no warning about the revision guessed.
pub(crate) async fn probe(
    up: &dyn Upstream,
    timeout: Duration,
    gone: impl Fn() -> bool,
) -> crate::revision::ProbeVerdict {
    let ask = up.request("server/discover", probe_params());
    let answer = match tokio::time::timeout(timeout, ask).await {
        Ok(Ok(Ok(result))) => Some(Message::response(Id::Num(0), result)),
        Ok(Ok(Err(error))) => Some(Message::error(Some(Id::Num(0)), error)),
        Ok(Err(e)) if gone() => {
            tracing::debug!(error = %e, "server/discover failed: the upstream is gone");
            None
        }
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "server/discover failed before the upstream answered; treating it as 2025-11-25");
            None
        }
        Err(_) => {
            tracing::warn!(
                ?timeout,
                "no answer to server/discover in time; treating the upstream as 2025-11-25 (a slow 2026-07-28 server needs a longer probe timeout)"
            );
            None
        }
    };
    crate::revision::classify_probe(answer.as_ref())
}

impl From<http::HttpLink> for Link {
    fn from(h: http::HttpLink) -> Self {
        Link {
            upstream: h.upstream.into(),
            events: h.events,
            discover: h.discover,
            child: None,
        }
    }
}

impl std::fmt::Debug for dyn Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("dyn Upstream")
    }
}

impl std::fmt::Debug for dyn ModernUpstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("dyn ModernUpstream")
    }
}

/// Open long-lived requests by id, and where their traffic goes.
type Streams = Arc<Mutex<HashMap<Id, mpsc::UnboundedSender<StreamEvent>>>>;

/// What a request of [`ModernUpstream::request_with_callback`] does with
/// its answer. No future waits for it, so no task is woken and no timer
/// armed per request: on a stdio session the answer is handled on the
/// thread that reads it, right after reading it, as a bare relay would
/// forward it. The request timeout is kept by the upstream's sweep.
pub trait AnswerHandler: Send {
    /// The request's params, written once the request has its id.
    fn params(&self) -> Params<'_>;
    /// Whether it answers request `id` of `client` (whoever made it, as
    /// that one knows itself), for [`ModernUpstream::abandon_for`].
    fn answers(&self, client: &dyn Any, id: &Id) -> bool {
        let _ = (client, id);
        false
    }
    /// The answer (or the error that ends the request), once. It runs on
    /// the reading thread: it must not block, and work that waits goes
    /// to the runtime.
    fn answered(self: Box<Self>, answer: Result<Answer<'_>, ShimError>);
    /// The request was not sent (see
    /// [`ModernUpstream::request_with_callback`]).
    fn not_sent(self: Box<Self>);
}

/// What an [`AnswerHandler`] gets: the answer in the form it reads.
#[derive(Debug)]
pub enum Answer<'a> {
    /// The answer's line, as read ([`TextAnswer::Line`], not copied out
    /// of the reader's buffer).
    Line(&'a str),
    /// The answer, parsed by the reader first ([`TextAnswer::Read`]).
    Read(RpcResult),
}

/// Who waits for an answer, and in which form.
#[derive(Debug)]
enum Waiter {
    /// The answer read as an outcome.
    Outcome(oneshot::Sender<Result<RpcResult, ShimError>>),
    /// The answer read as a task ([`ModernUpstream::get_task`]); counted
    /// while it waits, so that readers try the task reader only then (see
    /// [`Connection::take_answer`]).
    Task {
        tx: oneshot::Sender<Result<TaskAnswer, ShimError>>,
        _counted: Counted,
    },
    /// The answer's result as text ([`ModernUpstream::request_text`]);
    /// counted as [`Waiter::Task`] is.
    Text {
        tx: oneshot::Sender<Result<TextAnswer, ShimError>>,
        _counted: Counted,
    },
    /// The answer, to a handler ([`ModernUpstream::request_with_callback`])
    /// as text; counted as [`Waiter::Text`] is, and failed once `due` by
    /// [`Connection::expire_callbacks`].
    Callback {
        handler: Box<dyn AnswerHandler>,
        method: &'static str,
        due: tokio::time::Instant,
        _counted: Counted,
    },
}

impl std::fmt::Debug for dyn AnswerHandler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("dyn AnswerHandler")
    }
}

/// What [`ModernUpstream::request_text`] hands back.
#[derive(Debug)]
pub enum TextAnswer {
    /// The answer as the text it came in, read no further than to know it
    /// answers the request: the caller reads its result from the text
    /// ([`crate::translate::raw::plain_answer_to_legacy`]), or, when that
    /// declines, [`TextAnswer::outcome`].
    Line(String),
    /// The answer, read.
    Read(RpcResult),
}

impl TextAnswer {
    /// The answer as an outcome: the result, the upstream's error, or for
    /// a line that does not read as an answer the error a reader gives a
    /// request whose answer it refused.
    pub fn outcome(self) -> RpcResult {
        match self {
            TextAnswer::Read(outcome) => outcome,
            TextAnswer::Line(line) => line_outcome(&line),
        }
    }
}

/// A `tasks/get` answer's line read as [`ModernUpstream::get_task`] reads
/// it: straight from its bytes when they read as a task, else parsed as
/// any answer is.
pub(crate) fn task_of_line(line: &str) -> Result<TaskAnswer, ShimError> {
    match crate::wire::modern::detailed_task_answer(line.as_bytes()) {
        Some(task) => Ok(Ok(task)),
        None => task_of(line_outcome(line)),
    }
}

/// See [`TextAnswer::outcome`].
fn line_outcome(line: &str) -> RpcResult {
    match Message::parse(line.as_bytes()) {
        Ok(Message::Response(r)) => Ok(r.result),
        Ok(Message::Error(e)) => Err(e.error),
        Ok(_) => Err(refused(&ShimError::InvalidRequest("not an answer".into())).into()),
        Err(e) => {
            tracing::warn!(error = %e, "upstream message refused");
            Err(refused(&e).into())
        }
    }
}

/// What [`ModernUpstream::get_task`] reads an answer as: the task, or
/// the upstream's error answer.
pub type TaskAnswer = Result<DetailedTask, ErrorObject>;

impl Waiter {
    /// Hands `outcome`, the answer to its request, to the waiter.
    fn answer(self, outcome: Result<RpcResult, ShimError>) {
        match self {
            Waiter::Outcome(tx) => {
                let _ = tx.send(outcome);
            }
            Waiter::Task { tx, .. } => {
                let _ = tx.send(outcome.and_then(task_of));
            }
            Waiter::Text { tx, .. } => {
                let _ = tx.send(outcome.map(TextAnswer::Read));
            }
            Waiter::Callback { handler, .. } => call_back(handler, outcome.map(Answer::Read)),
        }
    }
}

/// A request of [`Connection::request_with_callback`] that did not go,
/// its handler handed back: the caller tells it ([`Unsent::tell`]) once
/// it holds no lock a handler's work might want.
pub(crate) enum Unsent {
    /// Not sent: the connection writes no lines of its own, or is closed.
    NotSent(Box<dyn AnswerHandler>),
    /// Writing it failed.
    Failed(Box<dyn AnswerHandler>, ShimError),
}

impl Unsent {
    /// Tells the handler.
    pub(crate) fn tell(self) {
        match self {
            Unsent::NotSent(handler) => handler.not_sent(),
            Unsent::Failed(handler, e) => call_back(handler, Err(e)),
        }
    }
}

/// Hands `answer` to `handler`. A panic in it is caught and logged: it
/// runs on whatever thread delivers the answer (the upstream's reader),
/// which must go on reading.
fn call_back(handler: Box<dyn AnswerHandler>, answer: Result<Answer<'_>, ShimError>) {
    let answered = std::panic::AssertUnwindSafe(|| handler.answered(answer));
    if std::panic::catch_unwind(answered).is_err() {
        tracing::error!("handling an upstream answer panicked; its request gets no answer");
    }
}

/// One waiter counted in a shared count, for as long as it lives.
#[derive(Debug)]
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(count: &Arc<AtomicUsize>) -> Counted {
        count.fetch_add(1, Ordering::SeqCst);
        Counted(count.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An [`Upstream`] over a message channel: ids are the shim's own, answers
/// are matched to waiting requests by id.
#[derive(Debug)]
pub struct Connection {
    out: Mutex<Option<ToUpstream>>,
    /// When set, messages are written here by the sending thread, and
    /// `out` only stays open until [`Connection::close`] (its closing is
    /// what ends the writer, and with it the upstream's input).
    lines: Option<Arc<dyn LineSink>>,
    pending: Mutex<IdMap<Waiter>>,
    /// How many of `pending` wait for a task ([`Waiter::Task`]).
    task_waiters: Arc<AtomicUsize>,
    /// How many of `pending` wait for text ([`Waiter::Text`]).
    text_waiters: Arc<AtomicUsize>,
    streams: Streams,
    next_id: AtomicI64,
    id_prefix: Option<String>,
    closed: AtomicBool,
    close_reason: Mutex<Option<String>>,
    timeout: Duration,
}

impl Connection {
    /// A connection writing to `out`; requests fail after `timeout`.
    pub fn new(out: ToUpstream, timeout: Duration) -> Self {
        Connection {
            out: Mutex::new(Some(out)),
            lines: None,
            pending: Mutex::default(),
            task_waiters: Arc::default(),
            text_waiters: Arc::default(),
            streams: Arc::default(),
            next_id: AtomicI64::new(1),
            id_prefix: None,
            closed: AtomicBool::new(false),
            close_reason: Mutex::new(None),
            timeout,
        }
    }

    /// Like [`Connection::new`], with string request ids `{prefix}{n}`:
    /// they cannot collide with a client's ids relayed on the same stream.
    pub fn with_id_prefix(out: ToUpstream, timeout: Duration, prefix: &str) -> Self {
        Connection {
            id_prefix: Some(prefix.to_owned()),
            ..Connection::new(out, timeout)
        }
    }

    /// Writes each message straight into `lines` from the thread sending
    /// it (serialised there), instead of through `out`'s writer task: one
    /// task wake-up less between a request and the upstream reading it.
    #[must_use]
    pub fn writing_lines_to(mut self, lines: Arc<dyn LineSink>) -> Self {
        self.lines = Some(lines);
        self
    }

    /// How many requests wait for an answer.
    pub fn pending(&self) -> usize {
        self.lock().len()
    }

    fn next_request_id(&self) -> Id {
        self.request_id(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// The id of this connection's `n`th request.
    fn request_id(&self, n: i64) -> Id {
        match &self.id_prefix {
            // Not `format!`: its machinery was a thousand instructions of
            // every translated round trip.
            Some(p) => {
                let mut digits = itoa::Buffer::new();
                let n = digits.format(n);
                let mut id = String::with_capacity(p.len() + n.len());
                id.push_str(p);
                id.push_str(n);
                Id::Str(id)
            }
            None => Id::Num(n),
        }
    }

    /// Feeds one message read from the upstream. Answers resolve their
    /// request, stream traffic goes to its stream; everything else is
    /// handed back for the bridge.
    pub fn on_inbound(&self, msg: Message) -> Option<UpstreamEvent> {
        match msg {
            Message::Response(r) => {
                self.resolve(&r.id, Ok(Ok(r.result)));
                None
            }
            Message::Error(e) => {
                match &e.id {
                    Some(id) => self.resolve(id, Ok(Err(e.error))),
                    None => tracing::warn!(error = ?e.error, "upstream sent an error without id"),
                }
                None
            }
            Message::Notification(n) => self.stream_notification(n),
            Message::Request(r) => Some(UpstreamEvent::Request(r)),
        }
    }

    /// While a request waits for its answer in a form of its own (a task,
    /// [`ModernUpstream::get_task`]; a result's text,
    /// [`ModernUpstream::request_text`]): hands `line`, read from the
    /// upstream, to it if the line is its answer, read straight from the
    /// bytes into that form (as an HTTP upstream reads a task from its
    /// body); true then. Otherwise false, and the reader parses the line
    /// as any other. A reader that never calls this loses nothing:
    /// [`Connection::on_inbound`] reads the parsed answer into the form.
    pub fn take_answer(&self, line: &[u8]) -> bool {
        if self.task_waiters.load(Ordering::SeqCst) > 0
            && let Some((id, task)) = crate::wire::modern::detailed_task_answer_with_id(line)
            && let Some(waiter) = self.take_waiter(&id, |w| matches!(w, Waiter::Task { .. }))
        {
            match waiter {
                Waiter::Task { tx, .. } => {
                    let _ = tx.send(Ok(Ok(task)));
                }
                other => other.answer(Err(ShimError::Internal("answer taken as a task".into()))),
            }
            return true;
        }
        // A result's text is read once, by its request: here only far
        // enough to know whose answer the line is. (A line that turns out
        // not to read is refused as the reader refuses an answer it cannot
        // hold: `TextAnswer::outcome`.)
        if self.text_waiters.load(Ordering::SeqCst) > 0
            && let Ok(text) = std::str::from_utf8(line)
            && let Some(id) = crate::jsonrpc::answer_id(text).or_else(|| {
                match crate::jsonrpc::salvage_prefix(line) {
                    crate::jsonrpc::Prefix {
                        id,
                        is_answer: true,
                    } => id,
                    _ => None,
                }
            })
            && let Some(waiter) = self.take_waiter(&id, |w| {
                matches!(w, Waiter::Text { .. } | Waiter::Callback { .. })
            })
        {
            match waiter {
                Waiter::Callback { handler, .. } => call_back(handler, Ok(Answer::Line(text))),
                Waiter::Text { tx, .. } => {
                    let _ = tx.send(Ok(TextAnswer::Line(text.to_owned())));
                }
                other => other.answer(Err(ShimError::Internal("answer taken as text".into()))),
            }
            return true;
        }
        false
    }

    /// [`ModernUpstream::request_with_callback`] on this connection, for
    /// an owner that sweeps it ([`Connection::expire_callbacks`]) and
    /// writes its lines itself. `None` (the handler told) otherwise, or
    /// once closed.
    pub(crate) fn request_with_callback(
        &self,
        method: &'static str,
        meta: &ModernMeta,
        handler: Box<dyn AnswerHandler>,
    ) -> Result<(), Unsent> {
        if self.lines.is_none() || self.is_closed() {
            return Err(Unsent::NotSent(handler));
        }
        let n = self.next_id.fetch_add(1, Ordering::Relaxed);
        let id = self.request_id(n);
        let mut line = Vec::with_capacity(512);
        meta.write_request_with(&mut line, &id, method, handler.params());
        line.push(b'\n');
        let waiter = Waiter::Callback {
            handler,
            method,
            due: tokio::time::Instant::now() + self.timeout,
            _counted: Counted::new(&self.text_waiters),
        };
        // The id goes into the map, not cloned: the reader that takes the
        // answer frees it, and a clone would be one more allocation made
        // on this thread and freed on that one.
        self.lock().insert(id, waiter);
        if let Err(e) = self.send_line(&line)
            && let Some(Waiter::Callback { handler, .. }) = self.lock().remove(&self.request_id(n))
        {
            return Err(Unsent::Failed(handler, e));
        }
        Ok(())
    }

    /// See [`ModernUpstream::abandon_for`].
    pub(crate) fn abandon_for(&self, client: &dyn Any, id: &Id) -> bool {
        let abandoned = {
            let mut pending = self.lock();
            let found = pending.iter().find_map(|(sent, w)| match w {
                Waiter::Callback { handler, .. } if handler.answers(client, id) => {
                    Some(sent.clone())
                }
                _ => None,
            });
            found.and_then(|sent| pending.remove_entry(&sent))
        };
        let Some((sent, _handler)) = abandoned else {
            return false;
        };
        let _ = self.send(stream::abandoned_message(&sent));
        true
    }

    /// Fails the requests of [`Connection::request_with_callback`] due by
    /// `now` as [`Connection::exchange`] fails one that timed out (the
    /// upstream told to stop its work), and returns when the next one
    /// left is due.
    pub(crate) fn expire_callbacks(
        &self,
        now: tokio::time::Instant,
    ) -> Option<tokio::time::Instant> {
        let counted = |n: &AtomicUsize| n.load(Ordering::SeqCst);
        if counted(&self.text_waiters) + counted(&self.task_waiters) == 0 {
            return None;
        }
        let (expired, next) = {
            let mut pending = self.lock();
            let expired: Vec<(Id, Waiter)> = pending
                .extract_if(|_, w| matches!(w, Waiter::Callback { due, .. } if *due <= now))
                .collect();
            let next = pending
                .values()
                .filter_map(|w| match w {
                    Waiter::Callback { due, .. } => Some(*due),
                    _ => None,
                })
                .min();
            (expired, next)
        };
        for (id, waiter) in expired {
            let Waiter::Callback {
                handler, method, ..
            } = waiter
            else {
                continue;
            };
            let why = format!(
                "no answer to {method} within {} s",
                self.timeout.as_secs_f64()
            );
            let _ = self.send(stream::cancel_message(&id, &why));
            call_back(handler, Err(ShimError::Upstream(why)));
        }
        next
    }

    /// The waiter of `id`, taken from the pending ones if `wanted` is its
    /// kind.
    fn take_waiter(&self, id: &Id, wanted: impl Fn(&Waiter) -> bool) -> Option<Waiter> {
        let mut pending = self.lock();
        match pending.get(id) {
            Some(w) if wanted(w) => pending.remove(id),
            _ => None,
        }
    }

    /// Routes a notification tagged with an open stream's id to it.
    fn stream_notification(&self, n: Notification) -> Option<UpstreamEvent> {
        let mut streams = lock(&self.streams);
        if streams.is_empty() {
            return Some(UpstreamEvent::Notification(n));
        }
        let Some(id) = stream::stream_of(&n).filter(|id| streams.contains_key(id)) else {
            return Some(UpstreamEvent::Notification(n));
        };
        if n.method == stream::CANCELLED {
            if let Some(tx) = streams.remove(&id) {
                let _ = tx.send(stream::ended_by_upstream(&n));
            }
        } else if let Some(tx) = streams.get(&id) {
            let _ = tx.send(StreamEvent::Notification(n));
        }
        None
    }

    /// Marks the upstream gone, drops the outbox (so the writer can finish
    /// and the upstream sees end of input) and fails every waiting request
    /// with the first reason given to this or [`Connection::close_input`].
    pub fn close(&self, reason: &str) {
        let reason = self.close_input(reason);
        let reason = reason.as_str();
        let waiters: Vec<_> = self.lock().drain().collect();
        for (_, waiter) in waiters {
            waiter.answer(Err(ShimError::Upstream(reason.to_owned())));
        }
        let streams: Vec<_> = lock(&self.streams).drain().collect();
        for (_, tx) in streams {
            let _ = tx.send(StreamEvent::Ended(Err(ShimError::Upstream(
                reason.to_owned(),
            ))));
        }
    }

    /// Sends nothing more (new requests fail with `reason`; the upstream
    /// sees end of input) but still takes the answers to requests already
    /// sent: a stdio child answers what a client sent last before it
    /// exits. Returns the first reason the connection was closed for.
    pub fn close_input(&self, reason: &str) -> String {
        let first = self
            .close_reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert_with(|| reason.to_owned())
            .clone();
        self.closed.store(true, Ordering::SeqCst);
        self.out.lock().unwrap_or_else(|p| p.into_inner()).take();
        first
    }

    /// True once [`Connection::close`] ran.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn resolve(&self, id: &Id, outcome: Result<RpcResult, ShimError>) {
        if let Some(waiter) = self.lock().remove(id) {
            waiter.answer(outcome);
            return;
        }
        match lock(&self.streams).remove(id) {
            Some(tx) => {
                let _ = tx.send(StreamEvent::Ended(outcome));
            }
            None => tracing::debug!(%id, "answer for no pending request (late or abandoned)"),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, IdMap<Waiter>> {
        // A poisoned map only means a panic elsewhere; the data is still usable.
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes one message as it is (no id bookkeeping).
    pub fn send(&self, msg: Message) -> Result<(), ShimError> {
        if self.lines.is_some() {
            return self.send_line(&msg.to_line());
        }
        let out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        match out.as_ref() {
            Some(tx) if !self.is_closed() => tx.send(msg).map_err(|_| self.closed_error()),
            _ => Err(self.closed_error()),
        }
    }

    /// Writes one encoded message (newline included) to the upstream, on a
    /// connection that writes its lines itself.
    fn send_line(&self, line: &[u8]) -> Result<(), ShimError> {
        let out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        match (out.as_ref(), &self.lines) {
            (Some(_), Some(lines)) if !self.is_closed() => {
                drop(out);
                match lines.write_line(line) {
                    Ok(()) => Ok(()),
                    Err(_) if self.is_closed() => Err(self.closed_error()),
                    Err(e) => {
                        // A broken pipe means the upstream is going away:
                        // its exit or end of output is the fault to report
                        // (to this request too, as pending), not the pipe.
                        tracing::debug!(error = %e, "writing to the upstream failed");
                        Ok(())
                    }
                }
            }
            _ => Err(self.closed_error()),
        }
    }

    /// Writes request `id` of `method` with `params` and `meta`'s members
    /// in its `_meta`, serialised as they go (a connection that writes
    /// its own lines).
    fn send_with_meta(
        &self,
        id: &Id,
        method: &str,
        params: Params<'_>,
        meta: &ModernMeta,
    ) -> Result<(), ShimError> {
        let mut line = Vec::with_capacity(512);
        meta.write_request_with(&mut line, id, method, params);
        line.push(b'\n');
        self.send_line(&line)
    }

    /// Sends a request with a fresh id (`send` writes it) and waits for
    /// its answer, within the request timeout.
    async fn exchange(
        &self,
        method: &str,
        send: impl FnOnce(&Connection, &Id) -> Result<(), ShimError>,
    ) -> Result<RpcResult, ShimError> {
        self.exchange_as(method, send, Waiter::Outcome).await
    }

    /// [`Connection::exchange`], the answer handed over in the form
    /// `waiter` takes.
    async fn exchange_as<T>(
        &self,
        method: &str,
        send: impl FnOnce(&Connection, &Id) -> Result<(), ShimError>,
        waiter: impl FnOnce(oneshot::Sender<Result<T, ShimError>>) -> Waiter,
    ) -> Result<T, ShimError> {
        let id = self.next_request_id();
        let (tx, rx) = oneshot::channel();
        self.lock().insert(id.clone(), waiter(tx));
        if let Err(e) = send(self, &id) {
            self.lock().remove(&id);
            return Err(e);
        }
        let _guard = Abandon {
            conn: self,
            id: &id,
            // MCP: `initialize` MUST NOT be cancelled.
            cancel: method != "initialize",
        };
        match tokio::time::timeout(self.timeout, rx).await {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(_)) => Err(self.closed_error()),
            Err(_) => Err(ShimError::Upstream(format!(
                "no answer to {method} within {} s",
                self.timeout.as_secs_f64()
            ))),
        }
    }

    /// Why requests fail now: the reason given to [`Connection::close`].
    fn closed_error(&self) -> ShimError {
        let reason = self
            .close_reason
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        ShimError::Upstream(reason.unwrap_or_else(|| "the upstream connection is closed".into()))
    }
}

#[async_trait]
impl Upstream for Connection {
    async fn request(&self, method: &str, params: Value) -> Result<RpcResult, ShimError> {
        self.exchange(method, |conn, id| {
            conn.send(Message::request(id.clone(), method, params))
        })
        .await
    }

    fn notify(&self, method: &str, params: Value) -> Result<(), ShimError> {
        self.send(Message::notification(method, params))
    }

    fn shutdown(&self, reason: &str) {
        self.close(reason);
    }

    fn readiness(&self) -> Readiness {
        if !self.is_closed() {
            return Readiness::Up;
        }
        let why = lock(&self.close_reason).clone();
        Readiness::Down(why.unwrap_or_else(|| "the upstream connection is closed".into()))
    }

    fn respond(&self, id: Id, outcome: RpcResult) -> Result<(), ShimError> {
        self.send(match outcome {
            Ok(result) => Message::response(id, result),
            Err(error) => Message::error(Some(id), error),
        })
    }
}

#[async_trait]
impl ModernUpstream for Connection {
    async fn request_with_meta(
        &self,
        method: &str,
        params: &Value,
        meta: &ModernMeta,
    ) -> Result<RpcResult, ShimError> {
        if self.lines.is_none() {
            // Messages go to a channel, not out as JSON: merge.
            return self
                .request(method, meta.merge_into(Some(params.clone())))
                .await;
        }
        self.exchange(method, |conn, id| {
            conn.send_with_meta(id, method, Params::Tree(params), meta)
        })
        .await
    }

    /// On a connection that writes its own lines, a reader that hands
    /// it the answer's line ([`Connection::take_answer`]) saves
    /// building the answer as a JSON tree.
    async fn get_task(&self, task_id: &str, meta: &ModernMeta) -> Result<TaskAnswer, ShimError> {
        if self.lines.is_none() {
            return read_task(self, task_id, meta).await;
        }
        let Some(params) = PlainParams::task_id(task_id) else {
            return read_task(self, task_id, meta).await;
        };
        let count = &self.task_waiters;
        self.exchange_as(
            "tasks/get",
            |conn, id| conn.send_with_meta(id, "tasks/get", Params::Text(&params), meta),
            |tx| Waiter::Task {
                tx,
                _counted: Counted::new(count),
            },
        )
        .await
    }

    /// On a connection that writes its own lines, a reader that hands it
    /// the answer's line ([`Connection::take_answer`]) saves building the
    /// result as a JSON tree and writing it again.
    async fn request_text(
        &self,
        method: &str,
        params: Params<'_>,
        meta: &ModernMeta,
    ) -> Option<Result<TextAnswer, ShimError>> {
        self.lines.as_ref()?;
        let count = &self.text_waiters;
        let answer = self
            .exchange_as(
                method,
                |conn, id| conn.send_with_meta(id, method, params, meta),
                |tx| Waiter::Text {
                    tx,
                    _counted: Counted::new(count),
                },
            )
            .await;
        Some(answer)
    }

    async fn open_stream(&self, method: &str, params: Value) -> Result<UpstreamStream, ShimError> {
        let id = self.next_request_id();
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.streams).insert(id.clone(), tx);
        if let Err(e) = self.send(Message::request(id.clone(), method, params)) {
            lock(&self.streams).remove(&id);
            return Err(e);
        }
        // Weak: a forgotten stream handle must not keep the upstream's input
        // open after `close` (the child would never see its end).
        let out = lock(&self.out)
            .as_ref()
            .map(mpsc::UnboundedSender::downgrade);
        let (streams, sid) = (self.streams.clone(), id.clone());
        Ok(UpstreamStream::new(id, rx, move || {
            // Still open on our side: tell the upstream we are done with it.
            if lock(&streams).remove(&sid).is_some()
                && let Some(out) = out.and_then(|o| o.upgrade())
            {
                let _ = out.send(stream::cancel_message(&sid, "no longer needed"));
            }
        }))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means a panic elsewhere; the data is still usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Removes the pending entry when a request future is dropped or times out.
struct Abandon<'a> {
    conn: &'a Connection,
    id: &'a Id,
    /// Tell the upstream when the request is abandoned unanswered.
    cancel: bool,
}

impl Drop for Abandon<'_> {
    fn drop(&mut self) {
        // Still unanswered: nobody will read the answer (the request timed
        // out, or whoever waited gave up, as when a client cancels the
        // request this one serves). Only this id means anything upstream,
        // so the upstream hears of it here and may stop the work (MCP: the
        // requester SHOULD send `notifications/cancelled`).
        if self.conn.lock().remove(self.id).is_some() && self.cancel {
            let _ = self.conn.send(stream::abandoned_message(self.id));
        }
    }
}

/// The error that stands in for an upstream answer refused for its size
/// (`error` says by how much), delivered under the answer's own id.
pub(crate) fn oversized_answer(id: Id, error: &ShimError) -> Message {
    Message::error(Some(id), refused(error).into())
}

/// What a request learns of an answer the reader refused for `error`.
fn refused(error: &ShimError) -> ShimError {
    ShimError::Upstream(format!("its answer was refused: {error}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    #[tokio::test]
    async fn answers_are_matched_by_id_and_close_fails_waiters() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let conn = Arc::new(Connection::new(tx, Duration::from_secs(5)));
        let c = conn.clone();
        let call = tokio::spawn(async move { c.request("ping", json!({})).await });
        let sent = rx.recv().await.unwrap();
        let id = sent.id().cloned().unwrap();
        assert!(
            conn.on_inbound(Message::response(id, json!({"ok": 1})))
                .is_none()
        );
        assert_eq!(call.await.unwrap().unwrap().unwrap()["ok"], 1);
        // Answered: nothing more to say upstream.
        assert!(rx.try_recv().is_err());

        let c = conn.clone();
        let call = tokio::spawn(async move { c.request("slow", json!({})).await });
        let _ = rx.recv().await.unwrap();
        conn.close("upstream exited");
        let err = call.await.unwrap().unwrap_err();
        assert_eq!(err.code(), -32603);
        assert!(err.to_string().contains("exited"));
    }

    #[tokio::test]
    async fn streams_get_their_own_traffic_and_end_upstream_when_dropped() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let conn = Connection::new(tx, Duration::from_millis(20));
        let mut stream = conn
            .open_stream("subscriptions/listen", json!({"notifications": {}}))
            .await
            .unwrap();
        let id = rx.recv().await.unwrap().id().cloned().unwrap();
        assert_eq!(&id, stream.id());
        // Outlives the request timeout: a stream has none.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let tagged = Message::notification(
            "notifications/tasks",
            json!({"taskId": "t", "_meta": {crate::revision::META_SUBSCRIPTION_ID: id}}),
        );
        assert!(conn.on_inbound(tagged).is_none());
        assert!(matches!(
            stream.next().await,
            Some(StreamEvent::Notification(_))
        ));
        let other = Message::notification("notifications/message", json!({"level": "info"}));
        assert!(conn.on_inbound(other).is_some());
        drop(stream);
        let cancel = rx.recv().await.unwrap();
        assert_eq!(cancel.method(), Some("notifications/cancelled"));
        assert_eq!(cancel.params().unwrap()["requestId"], json!(id));

        let mut stream = conn
            .open_stream("subscriptions/listen", json!({}))
            .await
            .unwrap();
        conn.close("upstream exited");
        match stream.next().await {
            Some(StreamEvent::Ended(Err(e))) => assert!(e.to_string().contains("exited")),
            other => panic!("{other:?}"),
        }
    }

    /// The lines a connection writes itself, kept for the test to read.
    #[derive(Debug, Default)]
    struct Written(Mutex<Vec<Vec<u8>>>);

    impl LineSink for Written {
        fn write_line(&self, line: &[u8]) -> std::io::Result<()> {
            lock(&self.0).push(line.to_vec());
            Ok(())
        }
    }

    /// Lets a spawned request run (this test's runtime has one thread)
    /// until it waits for its answer.
    async fn sent(conn: &Connection) {
        for _ in 0..100 {
            if !conn.lock().is_empty() {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the request was not sent");
    }

    /// The id of the request the connection wrote last.
    fn last_request_id(written: &Written) -> Id {
        let line = lock(&written.0)
            .last()
            .cloned()
            .expect("a request was written");
        Message::parse(&line).unwrap().id().cloned().unwrap()
    }

    /// `tasks/get` on a connection that writes its own lines reads the
    /// task from the answer's bytes when its reader hands them over, and
    /// gets the same task, or the upstream's error, when the reader parses
    /// the answer first.
    #[tokio::test]
    async fn get_task_reads_the_answer_however_the_reader_delivers_it() {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let written = Arc::new(Written::default());
        let conn =
            Arc::new(Connection::new(tx, Duration::from_secs(5)).writing_lines_to(written.clone()));
        let meta = ModernMeta::new(serde_json::Map::new());
        let task = json!({"taskId": "t1", "status": "working",
            "createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z",
            "ttlMs": 60000, "pollIntervalMs": 100, "resultType": "task",
            "_meta": {crate::revision::META_SERVER_INFO: {"name": "s", "version": "1"}}});
        // Nobody waits for a task: the reader keeps every line.
        let line = Message::response(Id::Num(1), task.clone()).to_line();
        assert!(!conn.take_answer(&line));
        for from_bytes in [true, false] {
            let (c, m) = (conn.clone(), meta.clone());
            let get = tokio::spawn(async move { c.get_task("t1", &m).await });
            sent(&conn).await;
            let answer = Message::response(last_request_id(&written), task.clone());
            // An answer to another request is not taken.
            let other = Message::response(Id::Str("other".into()), task.clone());
            assert!(!conn.take_answer(&other.to_line()));
            if from_bytes {
                assert!(conn.take_answer(&answer.to_line()));
            } else {
                assert!(conn.on_inbound(answer).is_none());
            }
            let d = get.await.unwrap().unwrap().unwrap();
            assert_eq!(d.task.task_id, "t1");
            assert_eq!(d.task.status, crate::wire::TaskStatus::Working);
            // The answer's own `_meta` describes the answer, not the task.
            assert!(d.task.extra.is_empty(), "{:?}", d.task.extra);
        }
        let (c, m) = (conn.clone(), meta.clone());
        let get = tokio::spawn(async move { c.get_task("gone", &m).await });
        sent(&conn).await;
        let refused = Message::error(
            Some(last_request_id(&written)),
            ErrorObject::new(-32602, "no such task"),
        );
        // An error answer is no task: the reader parses it, as any other.
        assert!(!conn.take_answer(&refused.to_line()));
        assert!(conn.on_inbound(refused).is_none());
        let e = get.await.unwrap().unwrap().unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-32602, "no such task"));
        assert!(conn.lock().is_empty());
        assert_eq!(conn.task_waiters.load(Ordering::SeqCst), 0);
    }

    /// Hands what a request's callback gets to the test: `None` when the
    /// request was not sent.
    struct Handed {
        params: PlainParams,
        tx: std::sync::mpsc::Sender<Option<Result<TextAnswer, ShimError>>>,
    }

    impl AnswerHandler for Handed {
        fn params(&self) -> Params<'_> {
            Params::Text(&self.params)
        }
        /// Every one answers request 1 of the client `"test"`.
        fn answers(&self, client: &dyn Any, id: &Id) -> bool {
            client.downcast_ref::<&str>() == Some(&"test") && *id == Id::Num(1)
        }
        fn answered(self: Box<Self>, answer: Result<Answer<'_>, ShimError>) {
            let _ = self.tx.send(Some(answer.map(|a| match a {
                Answer::Line(line) => TextAnswer::Line(line.to_owned()),
                Answer::Read(read) => TextAnswer::Read(read),
            })));
        }
        fn not_sent(self: Box<Self>) {
            let _ = self.tx.send(None);
        }
    }

    /// A connection writing its own lines (kept in `written`), whose
    /// callback requests hand what they get to `got`.
    struct Callbacks {
        conn: Connection,
        written: Arc<Written>,
        tx: std::sync::mpsc::Sender<Option<Result<TextAnswer, ShimError>>>,
        got: std::sync::mpsc::Receiver<Option<Result<TextAnswer, ShimError>>>,
        meta: ModernMeta,
    }

    impl Callbacks {
        const TIMEOUT: Duration = Duration::from_secs(5);

        fn new() -> Callbacks {
            let (out, _) = tokio::sync::mpsc::unbounded_channel();
            let written = Arc::new(Written::default());
            let conn = Connection::new(out, Self::TIMEOUT).writing_lines_to(written.clone());
            let (tx, got) = std::sync::mpsc::channel();
            let meta = ModernMeta::new(serde_json::Map::new());
            Callbacks {
                conn,
                written,
                tx,
                got,
                meta,
            }
        }

        fn handler(&self) -> Box<Handed> {
            Box::new(Handed {
                params: PlainParams::task_id("t1").unwrap(),
                tx: self.tx.clone(),
            })
        }

        /// Sends one on `conn`; returns the id it went under, when sent.
        fn send(&self, conn: &Connection) -> Option<Id> {
            match conn.request_with_callback("tools/call", &self.meta, self.handler()) {
                Ok(()) => Some(last_request_id(&self.written)),
                Err(unsent) => {
                    unsent.tell();
                    None
                }
            }
        }

        fn nothing_yet(&self) -> bool {
            self.got.try_recv().unwrap_err() == std::sync::mpsc::TryRecvError::Empty
        }
    }

    /// A request answered by a callback gets its answer however the
    /// reader delivers it, once; a connection that does not write its own
    /// lines sends none and says so.
    #[tokio::test]
    async fn a_callback_request_gets_its_answer_however_it_is_read() {
        let c = Callbacks::new();
        let (out, _) = tokio::sync::mpsc::unbounded_channel();
        let unsweepable = Connection::new(out, Duration::from_secs(5));
        assert_eq!(c.send(&unsweepable), None);
        assert!(matches!(c.got.try_recv(), Ok(None)), "told it was not sent");

        // Read from the line's bytes.
        let id = c.send(&c.conn).expect("sent");
        let sent = Message::parse(lock(&c.written.0).last().unwrap()).unwrap();
        assert_eq!(sent.method(), Some("tools/call"));
        assert_eq!(sent.params().unwrap()["taskId"], "t1");
        assert!(c.nothing_yet());
        let answer = Message::response(id, json!({"content": []})).to_line();
        assert!(c.conn.take_answer(&answer));
        match c.got.try_recv() {
            Ok(Some(Ok(TextAnswer::Line(line)))) => assert_eq!(line.as_bytes(), &answer[..]),
            other => panic!("{other:?}"),
        }
        // Parsed by the reader first.
        let id = c.send(&c.conn).expect("sent");
        let parsed = Message::response(id, json!({"n": 2}));
        assert!(c.conn.on_inbound(parsed).is_none());
        match c.got.try_recv() {
            Ok(Some(Ok(TextAnswer::Read(Ok(v))))) => assert_eq!(v["n"], 2),
            other => panic!("{other:?}"),
        }
        assert!(c.conn.lock().is_empty());
        assert_eq!(c.conn.text_waiters.load(Ordering::SeqCst), 0);
    }

    /// Unanswered, it times out on the sweep (paused time), the upstream
    /// told, and a late answer finds nobody.
    #[tokio::test(start_paused = true)]
    async fn a_callback_request_expires_on_the_sweep() {
        let c = Callbacks::new();
        let id = c.send(&c.conn).expect("sent");
        let due = c.conn.expire_callbacks(tokio::time::Instant::now());
        assert_eq!(due, Some(tokio::time::Instant::now() + Callbacks::TIMEOUT));
        assert!(c.nothing_yet());
        tokio::time::advance(Callbacks::TIMEOUT).await;
        assert_eq!(c.conn.expire_callbacks(tokio::time::Instant::now()), None);
        match c.got.try_recv() {
            Ok(Some(Err(e))) => {
                assert!(e.to_string().contains("no answer to tools/call within 5 s"))
            }
            other => panic!("{other:?}"),
        }
        let cancel = Message::parse(lock(&c.written.0).last().unwrap()).unwrap();
        assert_eq!(cancel.method(), Some("notifications/cancelled"));
        assert_eq!(cancel.params().unwrap()["requestId"], json!(id));
        assert!(
            !c.conn
                .take_answer(&Message::response(id, json!({})).to_line())
        );
    }

    /// Abandoned for the client request it answers (and only that one),
    /// its handler goes uncalled and the upstream is told; the connection
    /// closing fails one that waits, and sends no more.
    #[tokio::test]
    async fn a_callback_request_is_abandoned_or_failed_once() {
        let c = Callbacks::new();
        let id = c.send(&c.conn).expect("sent");
        assert!(!c.conn.abandon_for(&"other", &Id::Num(1)));
        assert!(!c.conn.abandon_for(&"test", &Id::Num(2)));
        assert!(c.conn.abandon_for(&"test", &Id::Num(1)));
        assert!(!c.conn.abandon_for(&"test", &Id::Num(1)), "abandoned once");
        assert!(c.nothing_yet());
        let cancel = Message::parse(lock(&c.written.0).last().unwrap()).unwrap();
        assert_eq!(cancel.params().unwrap()["requestId"], json!(id));
        assert!(c.conn.lock().is_empty());

        c.send(&c.conn).expect("sent");
        c.conn.close("upstream exited");
        match c.got.try_recv() {
            Ok(Some(Err(e))) => assert!(e.to_string().contains("exited")),
            other => panic!("{other:?}"),
        }
        assert_eq!(c.send(&c.conn), None);
        assert!(matches!(c.got.try_recv(), Ok(None)));
    }

    #[tokio::test]
    async fn timeouts_fail_with_upstream_error() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let conn = Connection::new(tx, Duration::from_millis(20));
        let err = conn.request("x", json!({})).await.unwrap_err();
        assert!(err.to_string().contains("no answer"));
        assert!(conn.lock().is_empty());
        // The upstream is told, under the id it knows the request by.
        let id = rx.recv().await.unwrap().id().cloned().unwrap();
        let cancel = rx.recv().await.unwrap();
        assert_eq!(cancel.method(), Some("notifications/cancelled"));
        assert_eq!(cancel.params().unwrap()["requestId"], json!(id));
    }

    #[tokio::test]
    async fn a_dropped_request_is_cancelled_upstream_under_its_own_id() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let conn = Arc::new(Connection::with_id_prefix(
            tx,
            Duration::from_secs(5),
            "shim-",
        ));
        let c = conn.clone();
        let call = tokio::spawn(async move { c.request("tools/call", json!({})).await });
        let id = rx.recv().await.unwrap().id().cloned().unwrap();
        call.abort();
        let _ = call.await;
        let cancel = rx.recv().await.unwrap();
        assert_eq!(cancel.method(), Some("notifications/cancelled"));
        assert_eq!(cancel.params().unwrap()["requestId"], json!(id));
        assert_eq!(conn.pending(), 0);

        // Except `initialize`, which MCP says must never be cancelled.
        let c = conn.clone();
        let init = tokio::spawn(async move { c.request("initialize", json!({})).await });
        let _ = rx.recv().await.unwrap();
        init.abort();
        let _ = init.await;
        assert!(rx.try_recv().is_err());
        assert_eq!(conn.pending(), 0);
    }
}
