//! Bridge engines: stateful, one per direction, each owning its state.
//!
//! - [`legacy_front`]: 2025-11-25 clients in front of a 2026-07-28 server.
//! - [`modern_front`]: 2026-07-28 clients in front of a 2025-11-25 server.
//!
//! An engine is fed client messages (`handle_client`) and upstream events
//! (`handle_upstream`), and answers through the client's [`Outbox`], each
//! message with its [`Route`]. It never touches a socket or a pipe: a
//! driver feeds it and places what it sends (see [`crate::driver`]).

mod cancel;
pub mod clock;
pub mod legacy_front;
mod listen;
pub mod modern_front;
mod outbox;
mod progress;
pub mod summary;
mod watch;

pub(crate) use cancel::IfDropped;
pub use clock::Clock;
pub use outbox::{Deliver, Outbox, PeerGone, Route};

use std::sync::{Arc, Mutex, Weak};

use crate::translate::tools::TaskPolicy;

/// Locks `m`. A poisoned lock only means a panic elsewhere; the data is
/// still usable. One for every engine and its parts.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a front knows of its upstream's end: why it last went away, and
/// whether that was for good (its events ended: no restart follows).
/// Shared by both fronts.
#[derive(Debug, Default)]
pub(crate) struct UpstreamFate(std::sync::Mutex<(Option<String>, bool)>);

impl UpstreamFate {
    /// The upstream went away (it may be restarted).
    pub(crate) fn closed(&self, reason: &str) {
        lock(&self.0).0 = Some(reason.to_owned());
    }

    /// No successor will come.
    pub(crate) fn ended(&self) {
        lock(&self.0).1 = true;
    }

    /// Why the upstream is gone, once it is gone for good.
    pub(crate) fn gone_for_good(&self) -> Option<String> {
        let fate = lock(&self.0);
        fate.1.then(|| {
            fate.0
                .clone()
                .unwrap_or_else(|| "the upstream server is gone".to_owned())
        })
    }
}

/// How often a running shim drops expired tasks (and idle legacy HTTP
/// sessions) from memory. Lookups never see an expired task anyway; this
/// only bounds how long its memory is held.
pub const SWEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The ledger refused a task the server had already started for a call
/// (the client's cap, a failing store): the client is told the call
/// failed (`refused`), so the task must not run on unseen (a retry would
/// do the work twice). Runs `cancel` (the upstream `tasks/cancel`) in the
/// background and returns the client's error, which says so.
pub(crate) fn cancel_unrecorded(
    task_id: String,
    cancel: impl std::future::Future<
        Output = Result<crate::upstream::RpcResult, crate::error::ShimError>,
    > + Send
    + 'static,
    refused: crate::ledger::LedgerError,
) -> crate::jsonrpc::ErrorObject {
    tokio::spawn(async move {
        match cancel.await {
            Ok(Ok(_)) => tracing::info!(task = %task_id, "task not recorded; cancelled upstream"),
            other => {
                tracing::warn!(task = %task_id, ?other, "task not recorded; could not cancel it upstream")
            }
        }
    });
    let mut error: crate::jsonrpc::ErrorObject = crate::error::ShimError::from(refused).into();
    error
        .message
        .push_str(" (the task the server had started for this call was cancelled)");
    error
}

/// What an upstream's events are fed to: a front, or the HTTP driver that
/// hands them to its front.
pub(crate) trait FollowsUpstream: Send + Sync + 'static {
    /// One upstream event (a notification, a server request, its close).
    fn upstream_event(
        self: &Arc<Self>,
        event: crate::upstream::UpstreamEvent,
    ) -> impl std::future::Future<Output = ()> + Send;
    /// The events ended: the upstream is gone for good.
    fn events_ended(&self);
}

/// Feeds each upstream event to `follower` until the events end, then
/// tells it they did. Each event is handled to the end before the next is
/// taken: what one stores in the ledger is stored before a later one is
/// looked at.
pub(crate) fn spawn_follower<F: FollowsUpstream>(
    follower: Arc<F>,
    mut events: tokio::sync::mpsc::UnboundedReceiver<crate::upstream::UpstreamEvent>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        while let Some(ev) = events.recv().await {
            follower.upstream_event(ev).await;
        }
        follower.events_ended();
    })
}

/// The client sessions a front has opened, held weakly: a session lives
/// as long as its client's requests and streams use it, not as long as
/// the front.
#[derive(Debug)]
pub(crate) struct Sessions<S>(Mutex<Vec<Weak<S>>>);

impl<S> Default for Sessions<S> {
    fn default() -> Self {
        Sessions(Mutex::new(Vec::new()))
    }
}

impl<S> Sessions<S> {
    /// Keeps `s`, forgetting the sessions gone meanwhile.
    pub(crate) fn add(&self, s: &Arc<S>) {
        let mut sessions = lock(&self.0);
        sessions.retain(|w| w.strong_count() > 0);
        sessions.push(Arc::downgrade(s));
    }

    /// How many are still in memory.
    pub(crate) fn in_memory(&self) -> usize {
        lock(&self.0)
            .iter()
            .filter(|w| w.strong_count() > 0)
            .count()
    }

    /// The ones still in memory.
    pub(crate) fn live(&self) -> Vec<Arc<S>> {
        lock(&self.0).iter().filter_map(Weak::upgrade).collect()
    }
}

/// Calls `sweep` on `front` every [`SWEEP_EVERY`] until the front is gone.
pub fn spawn_sweeper<F, Swept>(
    front: std::sync::Weak<F>,
    sweep: impl Fn(std::sync::Arc<F>) -> Swept + Send + 'static,
) -> tokio::task::JoinHandle<()>
where
    F: Send + Sync + 'static,
    Swept: std::future::Future<Output = usize> + Send,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(SWEEP_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(front) = front.upgrade() else { break };
            let evicted = sweep(front).await;
            if evicted > 0 {
                tracing::debug!(evicted, "sweep: expired entries dropped");
            }
        }
    })
}

/// Whether a client notification may go upstream on behalf of `scope`.
/// One that names a task (`params.taskId`), or is named like a task
/// method (`tasks/cancel` or `tasks/update` sent without an id), passes the
/// scope check a request about that task would pass: forwarded as it came,
/// it would reach any task by id, past the ledger's scope, on a server that
/// acts on such notifications. One that fails is dropped and logged.
pub(crate) async fn may_forward_notification(
    ledger: &dyn crate::ledger::TaskLedger,
    scope: &crate::scope::Scope,
    now: crate::ledger::Millis,
    n: &crate::jsonrpc::Notification,
) -> bool {
    let task_id = n
        .params
        .as_ref()
        .and_then(|p| p.get("taskId"))
        .and_then(serde_json::Value::as_str);
    if task_id.is_none() && !n.method.starts_with("tasks/") {
        return true;
    }
    let Some(id) = task_id else {
        tracing::warn!(method = %n.method, "a client notification naming no task; dropped");
        return false;
    };
    let allowed = match ledger.get_task(scope, id, now).await {
        Ok(rec) => rec.is_some(),
        Err(e) => {
            tracing::warn!(method = %n.method, error = %e, "cannot check a client notification's task; dropped");
            return false;
        }
    };
    if !allowed {
        tracing::warn!(
            method = %n.method,
            "a client notification about a task not in its scope (or naming none); dropped"
        );
    }
    allowed
}

/// Settings shared by the engines.
#[derive(Debug, Clone)]
pub struct BridgeConfig {
    /// `execution.taskSupport` overrides for legacy clients. When `None`,
    /// every tool is `optional` if the upstream offers tasks, else `forbidden`.
    pub policy: Option<TaskPolicy>,
    /// `tasks/list` page size.
    pub page_size: usize,
    /// Poll interval when the upstream suggests none (ms).
    pub default_poll_ms: u64,
    /// Floor on upstream-suggested poll intervals (ms), so a bad hint
    /// cannot make the shim hammer the upstream.
    pub min_poll_ms: u64,
    /// How many MRTR input rounds one call may take before the shim gives up.
    pub max_input_rounds: usize,
    /// Modern clients without the tasks extension calling a legacy tool whose
    /// `taskSupport` is `required`: run it as a task inside the shim and
    /// answer with the final result, instead of `-32021`.
    pub drive_required_tasks: bool,
    /// The `params.task.ttl` the shim asks a legacy server for (ms).
    pub task_ttl_ms: Option<i64>,
    /// `ttlMs` cache hint on `server/discover` and list results (ms).
    pub cache_ttl_ms: i64,
    /// Most upstream `subscriptions/listen` streams open at once (one per
    /// watched task); tasks beyond it are only polled. 0: never listen.
    pub max_listen_streams: usize,
    /// Longest retention the shim grants a task it keeps itself (a
    /// synthetic task for a plain answer, its result cached): a client's
    /// `params.task.ttl` above it is lowered to it (ms).
    pub max_task_ttl_ms: i64,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        BridgeConfig {
            policy: None,
            page_size: 50,
            default_poll_ms: 500,
            min_poll_ms: 10,
            max_input_rounds: 8,
            drive_required_tasks: false,
            task_ttl_ms: None,
            cache_ttl_ms: 0,
            max_listen_streams: 256,
            max_task_ttl_ms: 3_600_000,
        }
    }
}

/// The retention a client is shown for a task whose server granted none
/// (`ttl: null`, "unlimited"): the shim keeps such a task's record
/// `max_task_ttl_ms` after creation (see [`Clock::record_expiry`]) and then
/// answers for it as for an unknown task, so "unlimited" would promise
/// what the shim does not keep.
pub(crate) fn bounded_ttl(ttl: &mut Option<i64>, max_task_ttl_ms: i64) {
    ttl.get_or_insert(max_task_ttl_ms);
}

/// [`bounded_ttl`] for a task member (`ttl` or `ttlMs`) of a JSON answer:
/// a `null` there becomes the bound.
pub(crate) fn bounded_ttl_member(task: Option<&mut serde_json::Value>, key: &str, max: i64) {
    if let Some(ttl) = task.and_then(|t| t.get_mut(key))
        && ttl.is_null()
    {
        *ttl = serde_json::Value::from(max);
    }
}

/// Marks `scope`'s task `id`, which the upstream no longer knows (`why`:
/// its `-32602` message, or how the upstream went), as failed: the error that says so, `-32603`
/// [`ShimError::TaskLost`](crate::error::ShimError::TaskLost), becomes its
/// status message and its cached outcome. A task that had ended (or was
/// cancelled) is left as it was. Returns the record as it now stands, and
/// whether this call changed it (the caller then tells the client).
///
/// A task at the end of its retention is not lost but expired: the
/// upstream counted its TTL from a moment before the shim's record did, so
/// it forgets the task a little earlier. Such a record is left to expire
/// and reads as gone (`None`), as it will to every later request.
pub(crate) async fn mark_lost(
    ledger: &dyn crate::ledger::TaskLedger,
    clock: &Clock,
    scope: &crate::scope::Scope,
    id: &str,
    why: &str,
) -> Result<(Option<crate::ledger::TaskRecord>, bool), crate::error::ShimError> {
    let reason = crate::error::ShimError::TaskLost(why.to_owned()).to_error_object();
    let now = clock.now_iso();
    let now_ms = clock.now_ms();
    let (mut changed, mut expiring) = (false, false);
    let rec = ledger
        .update(scope, id, now_ms, &mut |r| {
            if r.is_terminal() {
                return;
            }
            if r.expires_at
                .is_some_and(|at| at <= now_ms + EXPIRY_SLACK_MS)
            {
                expiring = true;
                return;
            }
            r.task = crate::translate::task::lost_view(&r.task, &reason, &now);
            r.payload = crate::wire::modern::Payload::Error(reason.clone());
            changed = true;
        })
        .await?;
    if expiring {
        tracing::info!(
            task = id,
            "the upstream let a task go at the end of its ttl"
        );
        return Ok((None, false));
    }
    if changed {
        tracing::warn!(task = id, upstream = %why, "the upstream lost a running task; it reads as failed");
    }
    Ok((rec, changed))
}

/// How much earlier than the shim's record an upstream may forget a task
/// for it still to count as expired, not lost: the record's TTL starts
/// when the creation's answer reaches the shim.
const EXPIRY_SLACK_MS: u64 = 1_000;
