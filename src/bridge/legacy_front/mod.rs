//! 2025-11-25 clients in front of a 2026-07-28 server (design doc §3.1).
//!
//! [`LegacyFront`] holds what all sessions of one upstream share (the
//! upstream, the ledger, the pollers); a [`LegacySession`] is one client
//! session (a stdio client, or one `Mcp-Session-Id` over HTTP) and owns its
//! scope in the ledger.
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use mcp_tasks_shim::bridge::{BridgeConfig, legacy_front::LegacyFront};
//! # use mcp_tasks_shim::ledger::MemoryLedger;
//! # use mcp_tasks_shim::scope::Scope;
//! # fn demo(upstream: Arc<dyn mcp_tasks_shim::upstream::ModernUpstream>, discover: serde_json::Value) {
//! let front = LegacyFront::new(upstream, Arc::new(MemoryLedger::default()), BridgeConfig::default(), discover);
//! let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
//! let session = front.session(Scope::stdio(), tx);
//! // session.handle_client(message) for each client message;
//! // front.handle_upstream(event) for each upstream event.
//! # }
//! ```

mod calls;
mod plain;
mod poll;
mod tasks;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::cancel::{CANCELLED, Cancellable};
use super::progress::{ProgressRoute, ProgressRoutes, ProgressSink};
use super::watch::Watchers;
use super::{BridgeConfig, Clock, Outbox, Route, lock};
use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, Message, Reply, Request};
use crate::ledger::TaskLedger;
use crate::scope::Scope;
use crate::translate::raw::Params;
use crate::translate::session::{self as tsession, LegacyClient, ModernMeta};
use crate::translate::tools::TaskPolicy;
use crate::upstream::{ModernUpstream, Readiness, RpcResult, TextAnswer, UpstreamEvent};
use crate::wire::LOG_LEVELS;
use crate::wire::legacy::TaskSupport;
use crate::wire::modern::DetailedTask;

/// Shared state of the legacy-front bridge for one upstream.
#[derive(Debug)]
pub struct LegacyFront {
    upstream: Arc<dyn ModernUpstream>,
    ledger: Arc<dyn TaskLedger>,
    config: BridgeConfig,
    discover: Value,
    policy: TaskPolicy,
    watchers: Arc<Watchers>,
    clock: Clock,
    sessions: crate::bridge::Sessions<LegacySession>,
    /// Where the upstream's progress for each client request goes.
    progress: ProgressRoutes<LegacySession>,
    /// Why the upstream went, and whether for good.
    fate: super::UpstreamFate,
    /// The input requests (keys, by task) put to a client, whichever
    /// session and path asked them: each goes to the client once, however
    /// many `tasks/get` answers, polls and notifications repeat it, and
    /// whether a `tasks/result` or the shim's own sighting asked it (see
    /// [`LegacySession::ask_directly`]). Forgotten when the task ends.
    questions_put: Mutex<HashMap<String, std::collections::HashSet<String>>>,
}

/// Whether a 2026-07-28 upstream's `server/discover` result offers tasks.
fn upstream_has_tasks(discover: &Value) -> bool {
    discover
        .get("capabilities")
        .is_some_and(crate::revision::declares_tasks)
}

/// The `taskSupport` policy a legacy front over this upstream applies: the
/// operator's, with tools it does not name `optional` when the upstream
/// offers tasks, else `forbidden`.
pub(crate) fn effective_policy(config: &BridgeConfig, discover: &Value) -> TaskPolicy {
    let mut policy = config.policy.clone().unwrap_or_default();
    policy
        .default
        .get_or_insert(if upstream_has_tasks(discover) {
            TaskSupport::Optional
        } else {
            TaskSupport::Forbidden
        });
    policy
}

impl LegacyFront {
    /// A bridge over `upstream`, a 2026-07-28 server whose
    /// `server/discover` result is `discover`.
    pub fn new(
        upstream: Arc<dyn ModernUpstream>,
        ledger: Arc<dyn TaskLedger>,
        config: BridgeConfig,
        discover: Value,
    ) -> Arc<Self> {
        let has_tasks = upstream_has_tasks(&discover);
        let policy = effective_policy(&config, &discover);
        Arc::new(LegacyFront {
            watchers: Watchers::new(upstream.clone(), config.clone(), has_tasks),
            upstream,
            ledger,
            config,
            discover,
            policy,
            clock: Clock::new(),
            sessions: Default::default(),
            progress: ProgressRoutes::default(),
            fate: super::UpstreamFate::default(),
            questions_put: Mutex::new(HashMap::new()),
        })
    }

    /// The front's ledger clock, for checks made beside it on the same
    /// records (the HTTP driver's).
    pub(crate) fn clock(&self) -> Clock {
        self.clock
    }

    /// Whether the operator's policy (`--task-support`, the config file)
    /// marks `tool` forbidden, as opposed to the default the upstream's
    /// capabilities settled.
    pub(crate) fn operator_forbids_tasks(&self, tool: &str) -> bool {
        self.config.policy.as_ref().is_some_and(|p| {
            p.per_tool.get(tool).copied().or(p.default) == Some(TaskSupport::Forbidden)
        })
    }

    /// The upstream is gone for good (its events ended): the tasks it ran
    /// are dead, and read as failed from now on instead of as the status
    /// last seen.
    pub fn upstream_ended(&self) {
        self.fate.ended();
    }

    /// Opens a client session whose tasks live in ledger scope `scope` and
    /// whose outgoing messages go to `out`.
    pub fn session(self: &Arc<Self>, scope: Scope, out: impl Into<Outbox>) -> Arc<LegacySession> {
        let s = Arc::new(LegacySession {
            front: self.clone(),
            scope,
            client: Mutex::new(Declared::new(None)),
            out: out.into(),
            asks: Mutex::new(HashMap::new()),
            question_task: Mutex::new(HashMap::new()),
            withdrawn: Mutex::new(std::collections::HashSet::new()),
            outstanding: Mutex::new(std::collections::HashSet::new()),
            refused: Mutex::new(HashMap::new()),
            input_failures: Mutex::new(HashMap::new()),
            client_gone: std::sync::OnceLock::new(),
            ended: tokio::sync::watch::Sender::new(false),
            next_ask: AtomicI64::new(1),
            running: Arc::default(),
            task_progress: Mutex::new(HashMap::new()),
            poll_memo: Mutex::new(None),
        });
        self.sessions.add(&s);
        s
    }

    /// Feeds `events` (an upstream's notifications and requests) to the
    /// front until they end: what a [`crate::upstream::Link`]'s events
    /// need when the front is used without `HttpShim`.
    pub fn follow(
        self: &Arc<Self>,
        events: tokio::sync::mpsc::UnboundedReceiver<UpstreamEvent>,
    ) -> tokio::task::JoinHandle<()> {
        crate::bridge::spawn_follower(self.clone(), events)
    }

    /// Feeds one upstream event: task notifications update the owning
    /// session's ledger view and wake waiters; other notifications reach
    /// every session; a modern server sends no requests, so any is refused.
    pub async fn handle_upstream(&self, event: UpstreamEvent) {
        match event {
            UpstreamEvent::Notification(n)
                if n.method == crate::translate::notify::MODERN_STATUS =>
            {
                // Owned: a completed task's result moves through, uncopied.
                match n.params.map(DetailedTask::from_owned_value) {
                    Some(Ok(mut d)) => {
                        d.task.extra.remove("_meta");
                        // Stored before the waiters wake, so they read it.
                        for s in self.live_sessions() {
                            if let Some(rec) = s.record_seen(&d).await {
                                s.ask_directly(&rec, &d);
                            }
                        }
                        self.watchers.publish(d);
                    }
                    _ => tracing::warn!("malformed notifications/tasks from upstream"),
                }
            }
            // Listen-stream traffic that outlived its stream (the ack of
            // one just dropped): the shim's business, and 2025-11-25 has no
            // such notification.
            UpstreamEvent::Notification(n)
                if n.method == "notifications/subscriptions/acknowledged" => {}
            // Progress goes to the request it is about, and nowhere else.
            UpstreamEvent::Notification(n) if n.method == "notifications/progress" => {
                if !self.progress.deliver(&n) {
                    tracing::debug!("progress for no routed request; dropped");
                }
            }
            // Log messages say what the server is doing for someone: only
            // relayed when every open session is one principal's.
            UpstreamEvent::Notification(n) if n.method == "notifications/message" => {
                let sessions = self.live_sessions();
                if sessions.windows(2).all(|w| w[0].scope == w[1].scope) {
                    for s in sessions {
                        s.send(Route::Session, Message::Notification(n.clone()));
                    }
                } else {
                    tracing::debug!(
                        "log message not relayed: sessions of several principals are open"
                    );
                }
            }
            UpstreamEvent::Notification(n) => {
                for s in self.live_sessions() {
                    s.send(Route::Session, Message::Notification(n.clone()));
                }
            }
            UpstreamEvent::Request(r) => {
                let err = ShimError::MethodNotFound(r.method.clone()).to_error_object();
                let _ = self.upstream.respond(r.id, Err(err));
            }
            UpstreamEvent::Closed(reason) => {
                self.fate.closed(&reason);
                for s in self.live_sessions() {
                    s.fail_asks(&reason);
                }
                // Blocked `tasks/result` calls must not wait for a poll to
                // notice: the tasks died with the upstream.
                self.watchers
                    .fail_all(ShimError::Upstream(reason).to_error_object());
            }
            UpstreamEvent::Relayed(_) => {}
            UpstreamEvent::Barrier(reached) => {
                let _ = reached.send(());
            }
        }
    }

    /// Drops expired ledger records; returns how many. Lookups already
    /// ignore expired records: this is what gives their memory back.
    pub async fn sweep(&self) -> usize {
        self.ledger
            .evict_expired(self.clock.now_ms())
            .await
            .unwrap_or_else(|e| {
                tracing::error!(error = %e, "sweep: could not drop expired tasks");
                0
            })
    }

    /// How many client sessions are still in memory: open ones, and closed
    /// ones whose last requests are still finishing.
    pub fn sessions_in_memory(&self) -> usize {
        self.sessions.in_memory()
    }

    /// How many task pollers are running now.
    pub fn active_pollers(&self) -> usize {
        self.watchers.active()
    }

    /// How many client requests wait on a watched task now (a blocking
    /// `tasks/result`, a driven call).
    pub fn waiters(&self) -> usize {
        self.watchers.waiters()
    }

    /// How many upstream `subscriptions/listen` streams are open now.
    pub fn listen_streams(&self) -> usize {
        self.watchers.listen_streams()
    }

    fn live_sessions(&self) -> Vec<Arc<LegacySession>> {
        self.sessions.live()
    }
}

/// One legacy client session.
#[derive(Debug)]
pub struct LegacySession {
    front: Arc<LegacyFront>,
    scope: Scope,
    client: Mutex<Declared>,
    out: Outbox,
    asks: Mutex<HashMap<Id, oneshot::Sender<RpcResult>>>,
    /// The task each unanswered question serves, if any.
    question_task: Mutex<HashMap<Id, String>>,
    /// Questions withdrawn from the client (`notifications/cancelled`
    /// sent) whose asking has not ended yet: an answer that still comes is
    /// ignored, and the withdrawal is not sent twice.
    withdrawn: Mutex<std::collections::HashSet<Id>>,
    /// Task input requests (task id, key) asked and not yet answered: one
    /// is not asked again while the first asking waits, even by a new
    /// watcher after every `tasks/result` of the task was cancelled.
    outstanding: Mutex<std::collections::HashSet<(String, String)>>,
    /// How often the server refused the client's answer to each input
    /// request (task id, key): it is asked again, up to a bound.
    refused: Mutex<HashMap<(String, String), u32>>,
    /// Why a task driven for a plain call (no ledger record) was failed
    /// for want of input: its call answers with that, not "cancelled".
    input_failures: Mutex<HashMap<String, ErrorObject>>,
    /// Why the client can answer nothing more, once it can't (see
    /// [`LegacySession::client_closed`]).
    client_gone: std::sync::OnceLock<String>,
    /// Set when the session itself ended (see [`LegacySession::end`]).
    ended: tokio::sync::watch::Sender<bool>,
    next_ask: AtomicI64,
    running: Arc<Cancellable>,
    /// The progress routes of tasks this session's calls made: progress
    /// goes on under the call's token until the task ends.
    task_progress: Mutex<HashMap<String, ProgressRoute<LegacySession>>>,
    /// The last `tasks/get` answer that told nothing new (see
    /// [`poll::PollMemo`]).
    poll_memo: Mutex<Option<Arc<poll::PollMemo>>>,
}

impl LegacySession {
    /// The ledger scope of this session.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Feeds one client message. Requests are answered asynchronously
    /// through the outbox; answers to the shim's own requests (elicitation
    /// and friends) are routed to whoever waits for them.
    ///
    /// Call it inside a tokio runtime: a request's work starts on the
    /// calling thread, up to its first wait (its translation, a ledger
    /// call, the upstream write), and goes on as a task of the runtime.
    pub fn handle_client(self: &Arc<Self>, msg: Message) {
        match msg {
            Message::Request(req) if req.method == "tasks/get" => self.handle_tasks_get(req),
            Message::Request(req) => {
                let this = self.clone();
                crate::inline::start_here(async move {
                    let id = req.id.clone();
                    if let Some(outcome) = this.clone().reply_unless_cancelled(req).await {
                        this.answer_client(id, outcome);
                    }
                });
            }
            Message::Notification(n) => self.notification(n),
            Message::Response(r) => self.resolve_ask(&r.id, Ok(r.result)),
            Message::Error(e) => match e.id {
                Some(id) => self.resolve_ask(&id, Err(e.error)),
                None => tracing::warn!(error = ?e.error, "client sent an error without id"),
            },
        }
    }

    /// The answer to one client request, handed back to the caller instead
    /// of going through the outbox: a transport that answers each request
    /// on its own channel (an HTTP POST) saves a hop. Messages the request
    /// causes besides its answer still go to the outbox.
    pub async fn answer(self: Arc<Self>, req: Request) -> Message {
        let id = req.id.clone();
        Message::answer(id, self.reply(req).await)
    }

    /// [`Self::answer`] as its outcome, a result that came as text kept
    /// as text ([`Reply::Text`]), for a transport that writes it as it is
    /// ([`Reply::write_answer`]).
    pub async fn reply(self: Arc<Self>, req: Request) -> Result<Reply, ErrorObject> {
        let method = req.method.clone();
        guarded(&method, self.request(req)).await
    }

    /// [`Self::reply`], stopped by the client's `notifications/cancelled`
    /// naming the request: `None` then, as no answer is owed.
    pub async fn reply_unless_cancelled(
        self: Arc<Self>,
        req: Request,
    ) -> Option<Result<Reply, ErrorObject>> {
        let running = self.running.clone();
        let id = req.id.clone();
        // Boxed where it is made: the reply's state (a few KB: every
        // method's) is then copied once, not again by each wrapper and by
        // the executor's box.
        let reply = Box::pin(self.reply(req));
        running.track(id, reply).await
    }

    /// Answers every question the shim is waiting on with an error (the
    /// session or the upstream is going away).
    pub fn fail_asks(&self, reason: &str) {
        let asks: Vec<_> = lock(&self.asks).drain().collect();
        for (_, tx) in asks {
            let _ = tx.send(Err(ShimError::Upstream(reason.to_owned()).to_error_object()));
        }
    }

    /// The client can answer no more questions (a stdio client closed its
    /// stdin): those waiting fail with `reason`, and so does every later
    /// one at once. A question left waiting holds the session, and with it
    /// the client's outbox, whose last drop is what lets a stdio shim
    /// exit; and work still finishing (an input round, a task's input
    /// request) can ask after the waiting ones were failed.
    pub fn client_closed(&self, reason: &str) {
        let _ = self.client_gone.set(reason.to_owned());
        self.fail_asks(reason);
    }

    /// The session itself is over (an HTTP DELETE, or expiry), not just
    /// the client's side of it: besides [`LegacySession::client_closed`],
    /// requests waiting on a task (`tasks/result`, a driven `tools/call`)
    /// end at once with `reason`, instead of waiting for a task whose
    /// record went with the session. A stdio client that closes its stdin
    /// may still read its answers, so EOF does not end its waits.
    pub fn end(&self, reason: &str) {
        self.client_closed(reason);
        self.ended.send_replace(true);
    }

    /// The error a wait cut short by [`LegacySession::end`] answers.
    pub(crate) fn ended_error(&self, what: &str) -> ErrorObject {
        let why = self
            .client_gone
            .get()
            .map_or("the session ended", String::as_str);
        ShimError::Internal(format!("{why} while {what} was waiting")).into()
    }

    async fn request(self: &Arc<Self>, mut req: Request) -> Result<Reply, ErrorObject> {
        // The client's progress token goes upstream as one of the shim's,
        // routed back here (see `bridge::progress`).
        let progress = req
            .params
            .as_mut()
            .and_then(|p| self.front.progress.route(self, &req.id, p));
        let creates = progress.is_some() && req.method == "tools/call";
        let answer = self.dispatch(req).await;
        if progress.is_some() {
            // The progress the upstream sent before its answer first.
            self.front.upstream.events_handled().await;
        }
        // A task the call made reports progress under its token until it
        // ends (one made ended, as a plain answer's stand-in is, has none).
        if creates
            && let Ok(Reply::Tree(created)) = &answer
            && let Some(task_id) = created.pointer("/task/taskId").and_then(Value::as_str)
            && created
                .pointer("/task/status")
                .and_then(Value::as_str)
                .is_some_and(|s| matches!(s, "working" | "input_required"))
            && let Some(route) = progress
        {
            lock(&self.task_progress).insert(task_id.to_owned(), route);
        }
        answer
    }

    /// The task's progress route goes once it has ended.
    pub(super) fn task_ended(&self, task_id: &str) {
        lock(&self.task_progress).remove(task_id);
        lock(&self.front.questions_put).remove(task_id);
    }

    /// Marks input request `key` of `task_id` as put to the client; false
    /// when it was already (see [`LegacyFront::questions_put`]).
    pub(super) fn claim_question(&self, task_id: &str, key: &str) -> bool {
        lock(&self.front.questions_put)
            .entry(task_id.to_owned())
            .or_default()
            .insert(key.to_owned())
    }

    /// Lets input request `key` of `task_id` be put to the client again:
    /// the server refused its answer and still asks.
    pub(super) fn reopen_question(&self, task_id: &str, key: &str) {
        if let Some(keys) = lock(&self.front.questions_put).get_mut(task_id) {
            keys.remove(key);
        }
    }

    async fn dispatch(self: &Arc<Self>, req: Request) -> Result<Reply, ErrorObject> {
        let translated = match req.method.as_str() {
            "initialize" => self.initialize(&req),
            "ping" => Ok(json!({})),
            "logging/setLevel" => self.set_level(&req),
            "tools/list" => self.tools_list(req).await,
            "tools/call" => return self.tools_call(req).await,
            "tasks/get" => return self.tasks_get(&req).await,
            "tasks/result" => self.tasks_result(&req).await,
            "tasks/list" => self.tasks_list(&req).await,
            "tasks/cancel" => self.tasks_cancel(&req).await,
            // 2026-07-28 methods 2025-11-25 does not have. Forwarded, a
            // `tasks/update` would reach any task by id, past the ledger's
            // scope check, and a `subscriptions/listen` would wait for an
            // answer that never comes.
            "tasks/update" | "subscriptions/listen" | "server/discover" => {
                Err(ShimError::MethodNotFound(format!(
                    "{} is a 2026-07-28 method; this session speaks 2025-11-25",
                    req.method
                ))
                .into())
            }
            _ => return self.forward(req).await,
        };
        translated.map(Reply::Tree)
    }

    fn notification(&self, n: crate::jsonrpc::Notification) {
        match n.method.as_str() {
            // Session plumbing a modern server has no use for.
            "notifications/initialized" | "notifications/roots/list_changed" => {}
            // Upstream the request has the shim's id, if it is there at all
            // (see `bridge::cancel`): never forwarded as it came.
            CANCELLED => {
                let id = super::cancel::cancelled_id(n.params.as_ref());
                let stopped =
                    id.is_some_and(|id| self.running.cancel_id(&id) || self.abandon_callback(&id));
                if !stopped {
                    tracing::debug!("cancel for no running request; ignored");
                }
            }
            _ => {
                // Checked against the ledger, then forwarded: here and now
                // when the ledger answers at once (memory), else as a task.
                let (ledger, upstream) = (self.front.ledger.clone(), self.front.upstream.clone());
                let (scope, now) = (self.scope.clone(), self.front.clock.now_ms());
                crate::inline::start_here(async move {
                    if !super::may_forward_notification(&*ledger, &scope, now, &n).await {
                        return;
                    }
                    if let Err(e) =
                        upstream.notify(&n.method, n.params.unwrap_or_else(|| json!({})))
                    {
                        tracing::warn!(error = %e, "could not forward a client notification");
                    }
                });
            }
        }
    }

    fn initialize(&self, req: &Request) -> RpcResult {
        // The answer comes from the probe's cached `server/discover`: a
        // session opened on it while the upstream is gone would look
        // healthy and fail on its first real request.
        match self.front.upstream.readiness() {
            Readiness::Up => {}
            Readiness::Restarting(why) => {
                return Err(ShimError::Upstream(format!(
                    "the upstream is restarting ({why}); initialize again shortly"
                ))
                .into());
            }
            Readiness::Down(why) => {
                return Err(ShimError::Upstream(format!("the upstream is down: {why}")).into());
            }
        }
        let client = LegacyClient::from_initialize(req.params.as_ref())?;
        let result = tsession::discover_to_initialize(&self.front.discover, &client)?;
        tracing::info!(
            client = %client.client_info,
            version = client.negotiated_version(),
            "legacy client initialized"
        );
        self.update_client(|declared| *declared = client);
        Ok(result)
    }

    fn set_level(&self, req: &Request) -> RpcResult {
        let level = req
            .params
            .as_ref()
            .and_then(|p| p.get("level"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ShimError::InvalidParams("logging/setLevel needs params.level".into())
            })?;
        // Every later upstream request carries the level in its `_meta`,
        // where the 2026-07-28 schema allows only these.
        if !LOG_LEVELS.contains(&level) {
            return Err(ShimError::InvalidParams(format!(
                "unknown log level {level:?}; one of {}",
                LOG_LEVELS.join(", ")
            ))
            .into());
        }
        self.update_client(|client| client.log_level = Some(level.to_owned()));
        Ok(json!({}))
    }

    /// Changes what the client declared (one that skipped `initialize`
    /// starts as one that declared nothing) and rebuilds the modern `_meta`
    /// that follows from it: built here, once, not for every request. One
    /// lock throughout, so a concurrent change is not lost.
    fn update_client(&self, change: impl FnOnce(&mut LegacyClient)) {
        let mut declared = lock(&self.client);
        let mut client = declared.client.take().unwrap_or_else(default_client);
        change(&mut client);
        *declared = Declared::new(Some(client));
    }

    /// Whether the client declared what request `method` (with `params`)
    /// needs.
    fn client_takes(&self, method: &str, params: Option<&Value>) -> bool {
        // A client that skipped `initialize` declared nothing.
        lock(&self.client)
            .client
            .as_ref()
            .is_some_and(|c| c.takes(method, params))
    }

    /// The modern `_meta` for requests on this session's behalf.
    fn meta(&self) -> Arc<ModernMeta> {
        lock(&self.client).modern_meta.clone()
    }

    /// Sends `method` upstream on this session's behalf: `params` with the
    /// session's modern `_meta`.
    async fn upstream_request(&self, method: &str, params: &Value) -> Result<RpcResult, ShimError> {
        let meta = self.meta();
        self.front
            .upstream
            .request_with_meta(method, params, &meta)
            .await
    }

    /// Sends a legacy-shaped request upstream as a modern one; transport
    /// failures become `-32603` answers.
    async fn call(&self, req: Request) -> RpcResult {
        let params = req.params.unwrap_or_else(|| json!({}));
        self.call_with(&req.method, &params).await
    }

    /// [`Self::call`] of `method` with `params`, which the caller keeps.
    async fn call_with(&self, method: &str, params: &Value) -> RpcResult {
        self.upstream_request(method, params)
            .await
            .map_err(ErrorObject::from)?
    }

    /// Anything the shim does not translate specially: `_meta` in,
    /// `resultType` and cache hints out.
    async fn forward(&self, req: Request) -> Result<Reply, ErrorObject> {
        let params = req.params.unwrap_or_else(|| json!({}));
        match self.call_plain(&req.method, Params::Tree(&params)).await? {
            Reply::Tree(result) => Ok(Reply::Tree(tsession::result_to_legacy_owned(
                result,
                &req.method,
            ))),
            text => Ok(text),
        }
    }

    /// [`Self::call_with`] for an answer passed on as the client's plain
    /// answer: where the upstream hands results over as text, a plain one
    /// comes back as the client's answer text already
    /// ([`crate::translate::raw`]); any other comes back as the upstream's
    /// result tree, still to translate.
    async fn call_plain(&self, method: &str, params: Params<'_>) -> Result<Reply, ErrorObject> {
        let meta = self.meta();
        let Some(answer) = self
            .front
            .upstream
            .request_text(method, params, &meta)
            .await
        else {
            // Boxed: only upstreams without text answers come this way,
            // and the tree request's state would grow every call's future.
            return Box::pin(async {
                match params {
                    Params::Tree(params) => self.call_with(method, params).await,
                    text => self.call_with(method, &text.to_value()).await,
                }
            })
            .await
            .map(Reply::Tree);
        };
        Ok(match answer.map_err(ErrorObject::from)? {
            TextAnswer::Line(line) => {
                match crate::translate::raw::plain_answer_to_legacy(&line, method) {
                    Some(legacy) => Reply::Text(legacy),
                    None => Reply::Tree(TextAnswer::Line(line).outcome()?),
                }
            }
            read => Reply::Tree(read.outcome()?),
        })
    }

    async fn tools_list(&self, req: Request) -> RpcResult {
        let result = self.call(req).await?;
        Ok(crate::translate::tools::tools_list_to_legacy(
            &result,
            &self.front.policy,
        ))
    }

    /// Sends the client `req` (under an id of the shim's, bound for
    /// `route`) and waits for its answer.
    async fn ask(&self, mut req: Request, route: Route, serves: Option<&str>) -> RpcResult {
        let id = Id::Str(format!(
            "mcp-tasks-shim-{}",
            self.next_ask.fetch_add(1, Ordering::Relaxed)
        ));
        req.id = id.clone();
        let (tx, rx) = oneshot::channel();
        {
            // Checked under the lock `fail_asks` drains with: an ask either
            // sees the latch or is drained.
            let mut asks = lock(&self.asks);
            if let Some(reason) = self.client_gone.get() {
                return Err(ShimError::Upstream(reason.clone()).into());
            }
            asks.insert(id.clone(), tx);
        }
        if let Some(task) = serves {
            lock(&self.question_task).insert(id.clone(), task.to_owned());
        }
        // Dropped before the answer when the client's request it serves
        // was cancelled, or its task no longer waits on it: the client is
        // told, so its prompt does not stay up for nothing.
        let mut unanswered = Unanswered {
            session: self,
            question: id,
            settled: false,
        };
        self.send(route, Message::Request(req));
        let outcome = rx.await.unwrap_or_else(|_| {
            Err(ShimError::Internal("the session closed before the client answered".into()).into())
        });
        unanswered.settled = true;
        outcome
    }

    /// Withdraws, at once, every unanswered question about `task_id`
    /// (`notifications/cancelled` naming each, with `why`): its task was
    /// cancelled or ended, or the call driving it was cancelled. The
    /// asking itself ends when its task is seen ended; meanwhile an answer
    /// is ignored. Sent before the answer of a request waiting on the
    /// task, which a transport may put on the same stream and close it.
    pub(super) fn withdraw_questions(&self, task_id: &str, why: &str) {
        // Held throughout, here and where an asking that ends unanswered
        // withdraws itself ([`Unanswered`]): whoever comes second returns
        // only once the withdrawal is out, so an answer it goes on to send
        // (the waiting `tasks/result`'s) comes after it.
        let mut withdrawn = lock(&self.withdrawn);
        let asked: Vec<Id> = lock(&self.question_task)
            .iter()
            .filter(|(_, t)| t.as_str() == task_id)
            .map(|(q, _)| q.clone())
            .collect();
        for q in asked {
            let open = lock(&self.asks).contains_key(&q);
            if open && withdrawn.insert(q.clone()) {
                tracing::info!(question = %q, task = %task_id, %why, "question withdrawn");
                let withdrawal =
                    crate::upstream::stream::cancel_message(&q, &format!("{WITHDRAWN} ({why})"));
                self.send(Route::Withdrawal(q), withdrawal);
            }
        }
    }

    fn resolve_ask(&self, id: &Id, outcome: RpcResult) {
        if lock(&self.withdrawn).contains(id) {
            tracing::info!(%id, "client answered a question already withdrawn; ignored");
            return;
        }
        match lock(&self.asks).remove(id) {
            Some(tx) => {
                let _ = tx.send(outcome);
            }
            None => tracing::warn!(
                %id,
                "client answered a request the shim is not waiting on \
                 (already answered, given up, or never sent); ignored"
            ),
        }
    }

    fn send(&self, route: Route, msg: Message) {
        if self.out.send(route, msg).is_err() {
            tracing::debug!("client outbox closed; message dropped");
        }
    }

    /// Sends the answer to client request `id`.
    fn answer_client(&self, id: Id, outcome: Result<Reply, ErrorObject>) {
        let route = Route::Answer(id.clone());
        let sent = match outcome {
            Ok(reply) => self.out.send_reply(route, id, reply),
            Err(error) => self.out.send(route, Message::error(Some(id), error)),
        };
        if sent.is_err() {
            tracing::debug!("client outbox closed; answer dropped");
        }
    }
}

impl ProgressSink for LegacySession {
    fn send_progress(&self, request: &Id, msg: Message) {
        self.send(Route::During(request.clone()), msg);
    }
}

/// What the client declared (`None` before `initialize`), and the modern
/// `_meta` that follows from it, built once per declaration rather than
/// per request.
#[derive(Debug)]
struct Declared {
    client: Option<LegacyClient>,
    modern_meta: Arc<ModernMeta>,
}

impl Declared {
    fn new(client: Option<LegacyClient>) -> Declared {
        let modern_meta = Arc::new(ModernMeta::for_client(
            client.as_ref().unwrap_or(&default_client()),
        ));
        Declared {
            client,
            modern_meta,
        }
    }
}

fn default_client() -> LegacyClient {
    LegacyClient::undeclared("unknown-legacy-client")
}

/// A question sent to the client and not answered yet; see
/// [`LegacySession::ask`].
struct Unanswered<'a> {
    session: &'a LegacySession,
    question: Id,
    settled: bool,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        let s = self.session;
        // Held to the end (see `withdraw_questions`).
        let mut withdrawn = lock(&s.withdrawn);
        lock(&s.question_task).remove(&self.question);
        let told = withdrawn.remove(&self.question);
        // Gone from `asks` already: answered, or failed with the session.
        if !self.settled && lock(&s.asks).remove(&self.question).is_some() && !told {
            tracing::info!(question = %self.question, "question withdrawn: nothing waits for its answer any more");
            s.send(
                Route::Withdrawal(self.question.clone()),
                crate::upstream::stream::cancel_message(&self.question, WITHDRAWN),
            );
        }
        drop(withdrawn);
    }
}

/// Why the client is told to drop a question of the shim's.
const WITHDRAWN: &str =
    "no longer needed: the request or task it was asked for was cancelled or has ended";

impl crate::bridge::FollowsUpstream for LegacyFront {
    async fn upstream_event(self: &Arc<Self>, event: UpstreamEvent) {
        self.handle_upstream(event).await
    }
    fn events_ended(&self) {
        self.upstream_ended()
    }
}

/// `outcome` of handling a `method` request, a panic in it answered as an
/// internal error, an error logged.
async fn guarded(
    method: &str,
    outcome: impl Future<Output = Result<Reply, ErrorObject>>,
) -> Result<Reply, ErrorObject> {
    let outcome = crate::inline::or_if_panicked(outcome, || Err(panicked(method))).await;
    log_error(method, &outcome);
    outcome
}

/// What a request whose handling panicked is answered.
fn panicked(method: &str) -> ErrorObject {
    ShimError::Internal(format!(
        "the shim failed while handling {method}; see its log"
    ))
    .into()
}

/// Logs an error about to answer a `method` request.
fn log_error(method: &str, outcome: &Result<Reply, ErrorObject>) {
    if let Err(e) = outcome {
        tracing::debug!(%method, code = e.code, error_message = %e.message, "answering with an error");
    }
}
