//! Upstream `subscriptions/listen` streams for watched tasks, so a waiter
//! hears of a change when it happens instead of at the next poll.
//!
//! One stream per watched task, opened when its watch starts and closed
//! (dropped: `notifications/cancelled` on stdio, the connection on HTTP)
//! when the watch ends. One stream per upstream re-opened whenever the set
//! of watched tasks changes would need fewer streams, but every change
//! would cancel and re-send the whole list (quadratic traffic under load)
//! and leave a gap between the old stream and the new one. The number of
//! streams is bounded by [`super::BridgeConfig::max_listen_streams`];
//! tasks over the bound are polled only.
//!
//! Streams only add speed: the poller keeps reading `tasks/get` at the
//! upstream's interval, so a stream that is refused, lost or never
//! acknowledged costs latency, never a result. A stream lost while its
//! task is still watched (a dropped connection, an upstream restart) is
//! opened again after a backoff. An upstream that does not
//! declare the tasks extension, or that refuses a listen as unknown
//! (`-32601`), not allowed (`-32021`) or without task notifications (an
//! acknowledgement without `taskIds`), is not asked again.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};

use serde_json::{Map, Value, json};
use tokio::task::AbortHandle;

use super::watch::Watchers;
use crate::error::{ShimError, codes};
use crate::jsonrpc::Notification;
use crate::translate::notify::MODERN_STATUS;
use crate::upstream::{ModernUpstream, StreamEvent};
use crate::wire::modern::DetailedTask;

/// The listen method.
const LISTEN: &str = "subscriptions/listen";
/// The server's first message on a stream.
const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
/// First wait before a lost stream is opened again; doubled after each
/// loss without an acknowledgement in between.
const REOPEN_START: std::time::Duration = std::time::Duration::from_millis(200);
/// Longest wait between attempts.
const REOPEN_MAX: std::time::Duration = std::time::Duration::from_secs(30);

/// How one stream ended.
enum Ending {
    /// For good: refused, declined, or nobody listens any more.
    Done,
    /// Lost while still wanted; `acknowledged` if it had been working.
    Lost { acknowledged: bool },
}

/// The listen streams of one upstream.
#[derive(Debug)]
pub(crate) struct Listens {
    upstream: Arc<dyn ModernUpstream>,
    /// Off when the upstream cannot push task notifications.
    enabled: AtomicBool,
    open: AtomicUsize,
    max: usize,
}

/// Keeps one stream open; dropping it closes the stream.
#[derive(Debug)]
pub(crate) struct ListenGuard(AbortHandle);

impl Drop for ListenGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Counts an open stream for as long as its task runs (abort included).
struct Slot(Arc<Listens>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Listens {
    /// Streams for `upstream`, at most `max` at once; none when the
    /// upstream does not `declare` the tasks extension.
    pub(crate) fn new(upstream: Arc<dyn ModernUpstream>, declared: bool, max: usize) -> Arc<Self> {
        Arc::new(Listens {
            upstream,
            enabled: AtomicBool::new(declared && max > 0),
            open: AtomicUsize::new(0),
            max,
        })
    }

    /// How many streams are open (or opening) now.
    pub(crate) fn open_streams(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// Opens a stream for `task_id` whose notifications go to `watchers`;
    /// `None` when listening is off or the bound is reached. `meta` is the
    /// modern `_meta` of the request (it declares the tasks extension).
    pub(crate) fn open(
        self: &Arc<Self>,
        task_id: &str,
        meta: &Map<String, Value>,
        watchers: Weak<Watchers>,
    ) -> Option<ListenGuard> {
        if !self.enabled.load(Ordering::SeqCst) {
            return None;
        }
        let reserved = self
            .open
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < self.max).then_some(n + 1)
            });
        if reserved.is_err() {
            tracing::debug!(
                task = task_id,
                max = self.max,
                "listen streams at their bound; polling only"
            );
            return None;
        }
        let slot = Slot(self.clone());
        let params = json!({"notifications": {"taskIds": [task_id]}, "_meta": meta});
        let task = tokio::spawn(self.clone().run(task_id.to_owned(), params, watchers, slot));
        Some(ListenGuard(task.abort_handle()))
    }

    /// Keeps a stream open for `task_id` until the watch ends (the task is
    /// aborted then) or the upstream refuses.
    async fn run(
        self: Arc<Self>,
        task_id: String,
        params: Value,
        watchers: Weak<Watchers>,
        _slot: Slot,
    ) {
        let mut delay = REOPEN_START;
        loop {
            match self.listen_once(&task_id, params.clone(), &watchers).await {
                Ending::Done => return,
                Ending::Lost { acknowledged } => {
                    if acknowledged {
                        delay = REOPEN_START;
                    }
                    if watchers.strong_count() == 0 || !self.enabled.load(Ordering::SeqCst) {
                        return;
                    }
                    tracing::debug!(task = %task_id, ?delay, "listen stream lost; opening it again");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(REOPEN_MAX);
                }
            }
        }
    }

    async fn listen_once(&self, task_id: &str, params: Value, watchers: &Weak<Watchers>) -> Ending {
        let mut stream = match self.upstream.open_stream(LISTEN, params).await {
            Ok(s) => s,
            Err(ShimError::MethodNotFound(why)) => {
                self.refused(&why);
                return Ending::Done;
            }
            Err(e) => {
                tracing::debug!(task = %task_id, error = %e, "no listen stream");
                return Ending::Lost {
                    acknowledged: false,
                };
            }
        };
        let mut acknowledged = false;
        while let Some(event) = stream.next().await {
            let n = match event {
                StreamEvent::Notification(n) => n,
                StreamEvent::Ended(Ok(Err(e)))
                    if e.code == codes::METHOD_NOT_FOUND || e.code == codes::MISSING_CAPABILITY =>
                {
                    self.refused(&e.message);
                    return Ending::Done;
                }
                StreamEvent::Ended(end) => {
                    tracing::debug!(task = %task_id, ?end, "listen stream ended");
                    return Ending::Lost { acknowledged };
                }
            };
            let Some(watchers) = watchers.upgrade() else {
                return Ending::Done;
            };
            match n.method.as_str() {
                ACKNOWLEDGED => match agreed(&n, task_id) {
                    // A change between the watch's first read (or the
                    // previous stream's loss) and the subscription taking
                    // effect was pushed to nobody: read once more now that
                    // nothing can slip through.
                    Some(true) => {
                        acknowledged = true;
                        watchers.poke(task_id);
                    }
                    Some(false) => {
                        tracing::debug!(task = %task_id, "upstream declined to listen to the task");
                        return Ending::Done;
                    }
                    None => {
                        self.refused("acknowledged without task notifications");
                        return Ending::Done;
                    }
                },
                MODERN_STATUS => match n.params.map(DetailedTask::from_owned_value) {
                    Some(Ok(mut d)) => {
                        d.task.extra.remove("_meta");
                        watchers.publish(d);
                    }
                    _ => tracing::warn!("malformed notifications/tasks from upstream"),
                },
                _ => {}
            }
        }
        Ending::Lost { acknowledged }
    }

    fn refused(&self, why: &str) {
        if self.enabled.swap(false, Ordering::SeqCst) {
            tracing::info!(
                reason = why,
                "upstream refuses subscriptions/listen; polling only from now on"
            );
        }
    }
}

/// Whether the acknowledgement agreed to `task_id`; `None` when it agreed
/// to no task notifications at all.
fn agreed(ack: &Notification, task_id: &str) -> Option<bool> {
    let ids = ack
        .params
        .as_ref()?
        .get("notifications")?
        .get("taskIds")?
        .as_array()?;
    Some(ids.iter().any(|t| t.as_str() == Some(task_id)))
}
