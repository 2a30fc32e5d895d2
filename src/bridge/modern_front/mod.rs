//! 2026-07-28 clients in front of a 2025-11-25 server (design doc §3.2).
//!
//! The shim holds one legacy session with the upstream (initialized
//! lazily, on the first request) and serves modern clients statelessly:
//! every request is judged by its own `_meta`. [`ModernSession`] is one
//! client's ledger scope (a stdio client, or a principal over HTTP).
//!
//! Legacy servers talk back with server→client requests. Those tagged with
//! a task become that task's `inputRequests`; untagged ones that arrive
//! while a `tools/call` is unanswered become an MRTR `input_required`
//! answer whose signed `requestState` names the held upstream call.

mod calls;
mod state;
mod tasks;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::{OnceCell, watch};

use super::cancel::{CANCELLED, Cancellable};
use super::progress::{ProgressRoute, ProgressRoutes, ProgressSink};
use super::{BridgeConfig, Clock, Outbox, Route, lock};
use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, Message, Request};
use crate::ledger::TaskLedger;
use crate::revision::{self, LEGACY_VERSION};
use crate::scope::{Principal, Scope};
use crate::translate::{input, session as tsession};
use crate::upstream::{RpcResult, Upstream, UpstreamEvent};
use crate::wire::legacy::TaskSupport;
use crate::wire::modern::{Payload, RequestMeta};

use calls::OpenCall;
use state::StateSigner;

/// Shared state of the modern-front bridge for one legacy upstream.
#[derive(Debug)]
pub struct ModernFront {
    upstream: Arc<dyn Upstream>,
    ledger: Arc<dyn TaskLedger>,
    config: BridgeConfig,
    clock: Clock,
    init: OnceCell<Value>,
    tools: Mutex<HashMap<String, TaskSupport>>,
    tasks: Mutex<HashMap<String, LiveTask>>,
    open_calls: Mutex<Vec<OpenCall>>,
    held: Mutex<HashMap<String, calls::Held>>,
    /// Rounds the upstream took with it when it went (held id → why), so
    /// that their retry hears the cause, not "invalid requestState".
    lost_rounds: Mutex<HashMap<String, String>>,
    /// Why the upstream went, and whether for good.
    fate: super::UpstreamFate,
    /// Requests tagged with a task not tracked yet (its creation answer may
    /// still be on its way): task id → request.
    early: Mutex<Vec<(String, Request)>>,
    signer: StateSigner,
    sessions: crate::bridge::Sessions<ModernSession>,
    progress: ProgressRoutes<ModernSession>,
    next: AtomicU64,
}

/// What the shim tracks of a task it created, beyond the ledger record.
#[derive(Debug)]
struct LiveTask {
    scope: Scope,
    /// Outstanding input: key → (upstream request id, modern input request).
    inputs: BTreeMap<String, (Id, Value)>,
    /// Keys handed out so far (never reused for the task's life).
    seq: u64,
    /// Set once the background `tasks/result` call has ended.
    outcome: watch::Sender<Option<Payload>>,
    /// How many input requests the task has asked so far: wakes a call
    /// that drives the task for a client without the extension.
    asked: watch::Sender<u64>,
    /// The progress route of the call that made the task, kept until the
    /// task ends (its progress is reported under the call's token).
    progress: Option<ProgressRoute<ModernSession>>,
    /// Driven inside the shim for a plain call: the client never sees the
    /// task, so it has no ledger record (and takes none of the client's
    /// task cap); it is forgotten when its call ends, not by the sweep.
    driven: bool,
    /// Why the task takes no more input (cancelled, or its outcome came):
    /// a question still arriving is answered for the client at once.
    closed: Option<&'static str>,
}

impl LiveTask {
    fn new(scope: Scope, driven: bool) -> Self {
        LiveTask {
            scope,
            inputs: BTreeMap::new(),
            seq: 0,
            outcome: watch::Sender::new(None),
            asked: watch::Sender::new(0),
            progress: None,
            driven,
            closed: None,
        }
    }
}

impl ModernFront {
    /// A bridge over a legacy `upstream`.
    pub fn new(
        upstream: Arc<dyn Upstream>,
        ledger: Arc<dyn TaskLedger>,
        config: BridgeConfig,
    ) -> Arc<Self> {
        Arc::new(ModernFront {
            upstream,
            ledger,
            config,
            clock: Clock::new(),
            init: OnceCell::new(),
            tools: Mutex::new(HashMap::new()),
            tasks: Mutex::new(HashMap::new()),
            open_calls: Mutex::new(Vec::new()),
            held: Mutex::new(HashMap::new()),
            lost_rounds: Mutex::new(HashMap::new()),
            fate: super::UpstreamFate::default(),
            early: Mutex::new(Vec::new()),
            signer: StateSigner::new(),
            sessions: Default::default(),
            progress: ProgressRoutes::default(),
            next: AtomicU64::new(1),
        })
    }

    /// The front's ledger clock, for checks made beside it on the same
    /// records (the HTTP driver's).
    pub(crate) fn clock(&self) -> Clock {
        self.clock
    }

    /// Opens a client scope whose outgoing messages go to `out`. The front
    /// holds it weakly: its listen streams are told of task changes only
    /// while the caller keeps it.
    ///
    /// The session is the upstream's only client (a stdio proxy): the
    /// upstream's own notifications (progress, log messages) are its. See
    /// [`ModernFront::request_session`] for a front that many clients share.
    pub fn session(self: &Arc<Self>, scope: Scope, out: impl Into<Outbox>) -> Arc<ModernSession> {
        let client = scope.key().to_owned();
        self.open_session(scope, client, true, out.into())
    }

    /// A session for one request of a client among many (Streamable HTTP,
    /// where every client shares the one upstream session). The upstream's
    /// notifications that name no task (progress, log messages) could be
    /// anyone's, so none reach it. Its tasks live in the scope of
    /// `principal`, or, without one, in the scope every anonymous caller
    /// shares; untagged server requests (input asked before a task
    /// exists) are never guessed to be an anonymous caller's when another
    /// caller's call is open too, as they would be for calls of one
    /// principal.
    pub fn request_session(
        self: &Arc<Self>,
        principal: Option<Principal>,
        out: impl Into<Outbox>,
    ) -> Arc<ModernSession> {
        let (scope, client) = match principal {
            Some(p) => {
                let scope = Scope::from(p);
                let client = scope.key().to_owned();
                (scope, client)
            }
            None => (
                Scope::anonymous(),
                format!("anonymous:{}", crate::ids::random_id()),
            ),
        };
        self.open_session(scope, client, false, out.into())
    }

    fn open_session(
        self: &Arc<Self>,
        scope: Scope,
        client: String,
        sole_client: bool,
        out: Outbox,
    ) -> Arc<ModernSession> {
        let s = Arc::new(ModernSession {
            front: self.clone(),
            scope,
            client,
            sole_client,
            log_level: Mutex::new(None),
            out,
            subscriptions: Mutex::new(Vec::new()),
            running: Arc::default(),
        });
        self.sessions.add(&s);
        s
    }

    /// The upstream declared `<kind>.listChanged` (`tools`, `prompts`,
    /// `resources`; false until it has been initialized).
    fn upstream_list_changed(&self, kind: &str) -> bool {
        self.init
            .get()
            .and_then(|init| init.get("capabilities")?.get(kind)?.get("listChanged"))
            .and_then(Value::as_bool)
            == Some(true)
    }

    /// The upstream's `InitializeResult`, initializing the legacy session on
    /// first use with every client capability the shim can bridge.
    async fn initialized(&self) -> Result<&Value, ErrorObject> {
        self.init
            .get_or_try_init(|| async {
                let params = json!({
                    "protocolVersion": LEGACY_VERSION,
                    "capabilities": {
                        "elicitation": {"form": {}, "url": {}},
                        "sampling": {},
                        "roots": {"listChanged": false}
                    },
                    "clientInfo": {"name": "mcp-tasks-shim", "version": env!("CARGO_PKG_VERSION")}
                });
                let result = self
                    .upstream
                    .request("initialize", params)
                    .await
                    .map_err(ErrorObject::from)??;
                self.upstream
                    .notify("notifications/initialized", json!({}))?;
                let server = result.get("serverInfo").cloned().unwrap_or_default();
                tracing::info!(%server, "legacy upstream initialized");
                Ok(result)
            })
            .await
    }

    /// Sends a request to the legacy upstream (after initializing it).
    async fn call(&self, method: &str, params: Value) -> RpcResult {
        self.initialized().await?;
        self.upstream
            .request(method, params)
            .await
            .map_err(ErrorObject::from)?
    }

    /// `tools/list` upstream; refreshes the task-support cache. Returns the
    /// legacy result.
    async fn list_tools(&self, params: Value) -> RpcResult {
        let result = self.call("tools/list", params).await?;
        let (_, supports) = crate::translate::tools::tools_list_to_modern(&result, 0);
        lock(&self.tools).extend(supports);
        Ok(result)
    }

    /// The legacy `taskSupport` of `tool` (looked up once if unknown).
    async fn support_of(&self, tool: &str) -> TaskSupport {
        if let Some(s) = lock(&self.tools).get(tool) {
            return *s;
        }
        if let Err(e) = self.list_tools(json!({})).await {
            tracing::warn!(code = e.code, "tools/list failed while looking up {tool:?}");
        }
        lock(&self.tools).get(tool).copied().unwrap_or_default()
    }

    /// Drops expired ledger records, and the tracking of tasks whose record
    /// is gone (expired or dropped with its scope): without this every task
    /// ever created would stay in memory. Returns how many records went.
    pub async fn sweep(&self) -> usize {
        let now = self.clock.now_ms();
        let evicted = self.ledger.evict_expired(now).await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "sweep: could not drop expired tasks");
            0
        });
        // The ledger is asked with no engine lock held (its contract).
        let tracked: Vec<(String, Scope)> = lock(&self.tasks)
            .iter()
            .filter(|(_, live)| !live.driven)
            .map(|(id, live)| (id.clone(), live.scope.clone()))
            .collect();
        let mut gone: Vec<String> = Vec::new();
        for (id, scope) in tracked {
            // A store that cannot say keeps the task tracked until one can.
            if let Ok(None) = self.ledger.get_task(&scope, &id, now).await {
                gone.push(id);
            }
        }
        if !gone.is_empty() {
            let mut tasks = lock(&self.tasks);
            for id in &gone {
                tasks.remove(id);
            }
        }
        evicted
    }

    /// How many client sessions are in memory (each request in progress
    /// and each open listen stream has one; for metrics).
    pub fn sessions_in_memory(&self) -> usize {
        self.sessions.in_memory()
    }

    /// How many `subscriptions/listen` streams of clients are open (for
    /// metrics).
    pub fn listen_streams(&self) -> usize {
        self.live_sessions()
            .iter()
            .map(|s| lock(&s.subscriptions).len())
            .sum()
    }

    /// How many tasks are tracked beyond their ledger record (for metrics).
    pub fn tracked_tasks(&self) -> usize {
        lock(&self.tasks).len()
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

    /// The child process died: the tasks it ran died with it (a restarted
    /// child knows none of them). Each one the shim follows for a client
    /// is marked failed now, naming why, and its listen streams are told,
    /// instead of reading `working` until someone asks `tasks/get`.
    async fn tasks_died_with_the_child(&self, reason: &str) {
        let followed: Vec<(String, Scope)> = lock(&self.tasks)
            .iter()
            .filter(|(_, t)| !t.driven)
            .map(|(id, t)| (id.clone(), t.scope.clone()))
            .collect();
        for (id, scope) in followed {
            match crate::bridge::mark_lost(&*self.ledger, &self.clock, &scope, &id, reason).await {
                Ok((Some(_), true)) => self.notify_subscribers(&scope, &id, None).await,
                Ok(_) => {}
                Err(e) => tracing::warn!(task = %id, error = %e, "could not mark a lost task"),
            }
        }
    }

    /// Ends every open `subscriptions/listen` stream gracefully, with the
    /// `SubscriptionsListenResult` the 2026-07-28 schema defines for a
    /// server tearing a subscription down (at shutdown): without it a
    /// client cannot tell a graceful close from a dropped connection.
    pub fn close_listens(&self) {
        for s in self.live_sessions() {
            s.close_listens();
        }
    }

    /// The upstream is gone for good (its events ended: no restart, or
    /// the restarts gave up). Every open `subscriptions/listen` stream is
    /// answered with `-32603` naming why, which ends it: nothing more will
    /// come on it, and a client left reading a silent stream would never
    /// learn that.
    pub fn upstream_ended(&self) {
        self.fate.ended();
        let reason = self.fate.gone_for_good().unwrap_or_default();
        for s in self.live_sessions() {
            s.end_listens(&reason);
        }
    }

    /// Feeds one upstream event.
    pub async fn handle_upstream(self: &Arc<Self>, event: UpstreamEvent) {
        match event {
            UpstreamEvent::Request(req) => self.server_request(req).await,
            UpstreamEvent::Notification(n) => match n.method.as_str() {
                crate::translate::notify::LEGACY_STATUS => {
                    if let Some(p) = n.params {
                        self.status_changed(&p).await;
                    }
                }
                "notifications/tools/list_changed" => {
                    lock(&self.tools).clear();
                    for s in self.live_sessions() {
                        s.list_changed(tasks::ListKind::Tools);
                    }
                }
                // Listen streams that asked hear of it; a sole client
                // (stdio) outside a stream too, as before.
                m if let Some(kind) = tasks::ListKind::of_notification(m) => {
                    for s in self.live_sessions() {
                        s.list_changed(kind);
                        if s.sole_client {
                            s.relay(&n);
                        }
                    }
                }
                // Progress goes to the request it is about, if it is still
                // routed (see `progress`).
                "notifications/progress" => {
                    if !self.progress.deliver(&n) {
                        tracing::debug!("progress for no routed request; dropped");
                    }
                }
                // Log messages and the rest (resource or prompt list
                // changes...) belong to whoever the upstream works for:
                // relayed only where that can be just one client.
                _ => {
                    for s in self.live_sessions().into_iter().filter(|s| s.sole_client) {
                        s.relay(&n);
                    }
                }
            },
            UpstreamEvent::Closed(reason) => {
                tracing::warn!(%reason, "legacy upstream closed");
                self.fate.closed(&reason);
                self.tasks_died_with_the_child(&reason).await;
                lock(&self.open_calls).clear();
                let lost: Vec<String> = lock(&self.held).drain().map(|(id, _)| id).collect();
                let mut rounds = lock(&self.lost_rounds);
                // Kept for this fault only: an older one's rounds are stale.
                rounds.clear();
                rounds.extend(lost.into_iter().map(|id| (id, reason.clone())));
            }
            UpstreamEvent::Relayed(_) => {}
            UpstreamEvent::Barrier(reached) => {
                let _ = reached.send(());
            }
        }
    }

    /// A server→client request: task input, MRTR input, or neither.
    async fn server_request(self: &Arc<Self>, req: Request) {
        if let Some(task_id) = input::related_task_of(req.params.as_ref()).map(str::to_owned) {
            return self.capture_or_defer(task_id, req).await;
        }
        if !self.interject(&req) {
            self.refuse(req);
        }
    }

    /// Answers a server→client request that belongs to no task or call.
    fn refuse(&self, req: Request) {
        let outcome = match req.method.as_str() {
            // Roots outside any call: the shim exposes none of its own.
            "roots/list" => Ok(json!({"roots": []})),
            "ping" => Ok(json!({})),
            m => Err(ShimError::MethodNotFound(format!(
                "{m} outside a task or tool call cannot be bridged to a 2026-07-28 client"
            ))
            .into()),
        };
        let _ = self.upstream.respond(req.id, outcome);
    }

    fn next_id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    fn live_sessions(&self) -> Vec<Arc<ModernSession>> {
        self.sessions.live()
    }
}

/// One modern client scope.
#[derive(Debug)]
pub struct ModernSession {
    front: Arc<ModernFront>,
    scope: Scope,
    /// Who the client is, for input that names no task: the scope, or a
    /// session of its own when strangers share the scope.
    client: String,
    /// The upstream serves no other client (see [`ModernFront::session`]).
    sole_client: bool,
    /// The `logLevel` of the client's latest request: log messages below
    /// it, or any while it is absent, are not the client's to see.
    log_level: Mutex<Option<String>>,
    out: Outbox,
    subscriptions: Mutex<Vec<tasks::Subscription>>,
    running: Arc<Cancellable>,
}

impl ModernSession {
    /// The client stopped waiting for its request `id`: over 2026-07-28
    /// Streamable HTTP, closing a request's response stream is how a
    /// client cancels it (no `notifications/cancelled` is sent there).
    /// The same as that notification: the work stops, and an upstream
    /// call still open is cancelled under the shim's id.
    pub fn abandon(&self, id: &Id) {
        if self.running.cancel_id(id) {
            tracing::info!(%id, "the client closed its request's stream: request cancelled");
        }
    }

    /// The ledger scope of this session.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    /// Sends the client a message (no answer to a request of its own).
    fn send(&self, route: Route, msg: Message) {
        let _ = self.out.send(route, msg);
    }

    /// Sends the client an upstream notification that names no task; a
    /// log message only at or above the level its latest request asked
    /// for (none when it asked for none, as 2026-07-28 requires).
    fn relay(&self, n: &crate::jsonrpc::Notification) {
        if n.method == "notifications/message" {
            let wanted = lock(&self.log_level).clone();
            let level = n
                .params
                .as_ref()
                .and_then(|p| p.get("level"))
                .and_then(Value::as_str);
            if !log_level_reaches(level, wanted.as_deref()) {
                return;
            }
        }
        let _ = self
            .out
            .send(Route::Session, Message::Notification(n.clone()));
    }

    /// Feeds one client message; requests are answered through the outbox.
    ///
    /// Call it inside a tokio runtime: a request's work starts on the
    /// calling thread, up to its first wait (its translation, a ledger
    /// call, the upstream write), and goes on as a task of the runtime.
    pub fn handle_client(self: &Arc<Self>, msg: Message) {
        match msg {
            Message::Request(req) => {
                let this = self.clone();
                let id = req.id.clone();
                let work = self.running.track(id.clone(), async move {
                    let method = req.method.clone();
                    let handled = crate::inline::or_if_panicked(this.request(req), || {
                        Some(Err(ShimError::Internal(format!(
                            "the shim failed while handling {method}; see its log"
                        ))
                        .into()))
                    });
                    let Some(outcome) = handled.await else {
                        return; // a listen stream stays open
                    };
                    let answer = match outcome {
                        Ok(result) => Message::response(id.clone(), result),
                        Err(error) => Message::error(Some(id.clone()), error),
                    };
                    let _ = this.out.send(Route::Answer(id), answer);
                });
                crate::inline::start_here(async move {
                    work.await;
                });
            }
            // Upstream the request has the shim's id, if it is there at all
            // (see `bridge::cancel`), and the modern `_meta` a cancel
            // carries means nothing to a legacy server: never forwarded.
            Message::Notification(n) if n.method == CANCELLED => {
                if !self.running.cancel(n.params.as_ref()) && !self.end_listen(n.params.as_ref()) {
                    tracing::debug!("cancel for no running request; ignored");
                }
            }
            Message::Notification(n) => {
                // Checked against the ledger, then forwarded: here and now
                // when the ledger answers at once (memory), else as a task.
                let (ledger, upstream) = (self.front.ledger.clone(), self.front.upstream.clone());
                let (scope, now) = (self.scope.clone(), self.front.clock.now_ms());
                crate::inline::start_here(async move {
                    if !super::may_forward_notification(&*ledger, &scope, now, &n).await {
                        return;
                    }
                    let params = tsession::notification_params_to_legacy(n.params);
                    if let Err(e) = upstream.notify(&n.method, params) {
                        tracing::warn!(error = %e, "could not forward a client notification");
                    }
                });
            }
            Message::Response(_) | Message::Error(_) => {
                tracing::warn!("a 2026-07-28 client answered a request; the shim sent none");
            }
        }
    }

    /// `None` only for `subscriptions/listen`, answered at teardown.
    async fn request(self: &Arc<Self>, req: Request) -> Option<RpcResult> {
        // Whatever their `_meta` says (see the list's reasons).
        if revision::is_legacy_only_request(&req.method) {
            return Some(Err(revision::not_a_modern_method(&req.method).into()));
        }
        let (legacy_req, meta) = match tsession::request_to_legacy(&req) {
            Ok(x) => x,
            Err(e) => return Some(Err(e.into())),
        };
        // 2026-07-28 asks for log messages per request; the legacy server
        // logs for its session. The latest request's wish stands.
        lock(&self.log_level).clone_from(&meta.log_level);
        let params = legacy_req.params.unwrap_or_else(|| json!({}));
        Some(match req.method.as_str() {
            "server/discover" => self.discover().await,
            "tools/list" => self.tools_list(params).await,
            "tools/call" => self.tools_call(&req, params, &meta).await,
            "tasks/get" => self.tasks_get(&params, &meta).await,
            "tasks/update" => self.tasks_update(&params, &meta).await,
            "tasks/cancel" => self.tasks_cancel(&params, &meta).await,
            "subscriptions/listen" => return self.listen(&req, &meta).await,
            method => self.forward(&req.id, method, params).await,
        })
    }

    async fn discover(&self) -> RpcResult {
        let init = self.front.initialized().await?;
        let mut discover = tsession::initialize_to_discover(init, self.front.config.cache_ttl_ms)?;
        // Resource subscriptions are not bridged (no `resourceSubscriptions`
        // on listen streams, no `resources/subscribe` in 2026-07-28):
        // advertising them would promise updates that never come.
        if let Some(resources) = discover
            .pointer_mut("/capabilities/resources")
            .and_then(Value::as_object_mut)
        {
            resources.remove("subscribe");
        }
        Ok(discover)
    }

    async fn tools_list(&self, params: Value) -> RpcResult {
        let result = self.front.list_tools(params).await?;
        let (modern, _) =
            crate::translate::tools::tools_list_to_modern(&result, self.front.config.cache_ttl_ms);
        Ok(modern)
    }

    async fn forward(self: &Arc<Self>, id: &Id, method: &str, mut params: Value) -> RpcResult {
        let _progress = self.front.progress.route(self, id, &mut params);
        let (open_id, _open) = self.open_request();
        let call = self.front.call(method, params);
        let result = crate::upstream::CALL_ORIGIN.scope(open_id, call).await?;
        Ok(tsession::result_to_modern(
            &result,
            method,
            self.front.config.cache_ttl_ms,
        ))
    }
}

impl ProgressSink for ModernSession {
    fn send_progress(&self, request: &Id, msg: Message) {
        self.send(Route::During(request.clone()), msg);
    }
}

/// True when a log message at `level` is at least as severe as `wanted`
/// (both RFC 5424 names); false when nothing was asked for, or either is
/// not a level.
fn log_level_reaches(level: Option<&str>, wanted: Option<&str>) -> bool {
    let rank =
        |l: Option<&str>| l.and_then(|l| crate::wire::LOG_LEVELS.iter().position(|x| *x == l));
    matches!((rank(level), rank(wanted)), (Some(l), Some(w)) if l >= w)
}

/// `-32021` unless the request declared the tasks extension.
fn require_tasks(meta: &RequestMeta) -> Result<(), ErrorObject> {
    if meta.declares_tasks() {
        Ok(())
    } else {
        Err(ShimError::TasksExtensionRequired.into())
    }
}

impl crate::bridge::FollowsUpstream for ModernFront {
    async fn upstream_event(self: &Arc<Self>, event: UpstreamEvent) {
        self.handle_upstream(event).await
    }
    fn events_ended(&self) {
        self.upstream_ended()
    }
}

#[cfg(test)]
mod tests {
    use super::log_level_reaches;

    #[test]
    fn log_messages_reach_only_a_client_that_asked_at_their_level() {
        assert!(log_level_reaches(Some("error"), Some("warning")));
        assert!(log_level_reaches(Some("info"), Some("info")));
        assert!(!log_level_reaches(Some("info"), Some("error")));
        assert!(!log_level_reaches(Some("info"), None));
        assert!(!log_level_reaches(None, Some("debug")));
        assert!(!log_level_reaches(Some("loud"), Some("debug")));
    }
}
