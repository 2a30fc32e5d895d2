//! One upstream poller per task, however many waiters.
//!
//! Waiters (`tasks/result` calls, driven plain calls) subscribe to a task's
//! [`Watcher`]; the first subscription starts the poller, which reads
//! `tasks/get` at the upstream's `pollIntervalMs` and publishes each
//! snapshot. Upstream `notifications/tasks` publish directly and wake the
//! poller; each watch also opens a listen stream for them (see
//! [`super::listen`]), closed with the watch. The poller stops when the
//! task is terminal or nobody waits. Once a watch shows the task's end,
//! no later snapshot replaces it, however it arrives.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, watch};

use super::listen::{ListenGuard, Listens};
use super::{BridgeConfig, lock};
use crate::jsonrpc::ErrorObject;
use crate::translate::session::ModernMeta;
use crate::upstream::ModernUpstream;
use crate::wire::modern::DetailedTask;

/// What the poller last learnt about a task.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Seen {
    /// Nothing yet.
    Nothing,
    /// The latest upstream snapshot.
    Task(Box<DetailedTask>),
    /// Polling stopped on an error (upstream gone, garbled answer).
    Gone(ErrorObject),
    /// The upstream answered that it has no such task (`-32602`): it
    /// restarted, or dropped the task. Carries its error.
    Lost(ErrorObject),
}

impl Seen {
    /// The watch's last word: the task ended, or its poller stopped on an
    /// error. Nothing reads the task after it.
    fn is_final(&self) -> bool {
        match self {
            Seen::Nothing => false,
            Seen::Task(d) => d.task.status.is_terminal(),
            Seen::Gone(_) | Seen::Lost(_) => true,
        }
    }
}

/// The shared state of one watched task.
#[derive(Debug)]
pub(crate) struct Watcher {
    tx: watch::Sender<Seen>,
    /// Failed by [`Watchers::fail_all`]: its poller publishes no more.
    failed: std::sync::atomic::AtomicBool,
    wake: Notify,
    dispatched: Mutex<HashSet<String>>,
    /// The task's listen stream, if one is open.
    listen: Mutex<Option<ListenGuard>>,
}

impl Watcher {
    /// True the first time `key` is claimed: each input request goes to the
    /// client once, however many polls repeat it.
    pub(crate) fn claim(&self, key: &str) -> bool {
        self.dispatched
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key.to_owned())
    }

    /// Publishes `seen` unless the watch holds its last word already; true
    /// if it did. Snapshots come on two streams (the poller's reads and the
    /// upstream's notifications) and can arrive out of order: one written
    /// over the task's end took the end back from waiters, who then waited
    /// for a poller that had stopped on it.
    fn offer(&self, seen: Seen) -> bool {
        self.tx.send_if_modified(|last| {
            if last.is_final() {
                return false;
            }
            *last = seen;
            true
        })
    }

    /// Re-polls now (an answer was sent, or a cancel was pinned), and tells
    /// waiters to look again.
    pub(crate) fn poke(&self) {
        self.wake.notify_one();
        self.tx.send_modify(|_| {});
    }
}

/// The registry of watched tasks of one upstream.
#[derive(Debug)]
pub(crate) struct Watchers {
    upstream: Arc<dyn ModernUpstream>,
    config: BridgeConfig,
    map: Mutex<HashMap<String, Arc<Watcher>>>,
    listens: Arc<Listens>,
}

impl Watchers {
    /// Watchers of tasks on `upstream`; `listen`: it declared the tasks
    /// extension, so listen streams are worth trying.
    pub(crate) fn new(
        upstream: Arc<dyn ModernUpstream>,
        config: BridgeConfig,
        listen: bool,
    ) -> Arc<Self> {
        Arc::new(Watchers {
            listens: Listens::new(upstream.clone(), listen, config.max_listen_streams),
            upstream,
            config,
            map: Mutex::new(HashMap::new()),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Watcher>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Subscribes to `task_id`, starting its poller if none runs. `meta` is
    /// the modern `_meta` the poller's `tasks/get` requests carry.
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        task_id: &str,
        meta: Arc<ModernMeta>,
    ) -> (Arc<Watcher>, watch::Receiver<Seen>) {
        let mut map = self.lock();
        if let Some(w) = map.get(task_id) {
            return (w.clone(), w.tx.subscribe());
        }
        let (tx, rx) = watch::channel(Seen::Nothing);
        let w = Arc::new(Watcher {
            tx,
            failed: std::sync::atomic::AtomicBool::new(false),
            wake: Notify::new(),
            dispatched: Mutex::new(HashSet::new()),
            listen: Mutex::new(None),
        });
        map.insert(task_id.to_owned(), w.clone());
        drop(map);
        // Before the poller starts, so the poller's exit always closes it.
        *lock(&w.listen) = self
            .listens
            .open(task_id, meta.members(), Arc::downgrade(self));
        tokio::spawn(self.clone().poll(task_id.to_owned(), w.clone(), meta));
        (w, rx)
    }

    /// Publishes a snapshot from an upstream notification, if anyone watches.
    pub(crate) fn publish(&self, d: DetailedTask) {
        if let Some(w) = self.lock().get(&d.task.task_id)
            && w.offer(Seen::Task(Box::new(d)))
        {
            w.wake.notify_one();
        }
    }

    /// Lets input request `key` of `task_id` go to the client again (the
    /// server refused its answer and still asks), and re-polls.
    pub(crate) fn reopen(&self, task_id: &str, key: &str) {
        if let Some(w) = self.lock().get(task_id) {
            w.dispatched
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(key);
            w.poke();
        }
    }

    /// Pokes the watcher of `task_id`, if any.
    pub(crate) fn poke(&self, task_id: &str) {
        if let Some(w) = self.lock().get(task_id) {
            w.poke();
        }
    }

    /// Ends every watch with `error` (the upstream is gone): waiters see
    /// [`Seen::Gone`] now, pollers stop.
    pub(crate) fn fail_all(&self, error: ErrorObject) {
        let all: Vec<_> = self.lock().drain().map(|(_, w)| w).collect();
        for w in all {
            w.failed.store(true, std::sync::atomic::Ordering::SeqCst);
            w.tx.send_replace(Seen::Gone(error.clone()));
            w.wake.notify_one();
        }
    }

    /// How many pollers run (for tests and metrics).
    pub(crate) fn active(&self) -> usize {
        self.lock().len()
    }

    /// How many waiters (a blocking `tasks/result`, a driven call) hold a
    /// subscription to a watched task (for metrics).
    pub(crate) fn waiters(&self) -> usize {
        self.lock().values().map(|w| w.tx.receiver_count()).sum()
    }

    /// How many upstream listen streams are open (for tests and metrics).
    pub(crate) fn listen_streams(&self) -> usize {
        self.listens.open_streams()
    }

    async fn poll(self: Arc<Self>, task_id: String, w: Arc<Watcher>, meta: Arc<ModernMeta>) {
        // When this read is due. Reads are due on a fixed grid (previous due
        // time + interval), not "previous start + interval": the timer wakes
        // up to a millisecond late, and measuring from the late start added
        // that lateness to every period, so reads drifted to ~interval + 1 ms
        // apart and a completion could wait longer than one interval.
        let mut due = tokio::time::Instant::now();
        loop {
            // The end told by a notification (which wakes this poller) is
            // the last word: reading the task again would only be an extra
            // upstream request, one still in flight when the shim stops.
            if w.failed.load(std::sync::atomic::Ordering::SeqCst) || w.tx.borrow().is_final() {
                break;
            }
            let started = tokio::time::Instant::now();
            let read = self.upstream.get_task(&task_id, &meta);
            let seen = match read.await {
                Ok(Ok(d)) => Seen::Task(Box::new(d)),
                Ok(Err(e)) if e.code == crate::error::codes::INVALID_PARAMS => Seen::Lost(e),
                Ok(Err(e)) => Seen::Gone(e),
                Err(e) => Seen::Gone(e.to_error_object()),
            };
            let interval = match &seen {
                Seen::Task(d) if !d.task.status.is_terminal() => d
                    .task
                    .poll_interval_ms
                    .map_or(self.config.default_poll_ms, |p| p.max(0) as u64)
                    .max(self.config.min_poll_ms),
                _ => 0,
            };
            if w.failed.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            // Not taken: a notification told the task's end first.
            if !w.offer(seen) || interval == 0 {
                break;
            }
            if w.tx.receiver_count() == 0 && self.leave(&task_id, &w, Leave::IfUnwatched) {
                return;
            }
            // A read that answered after the next one was due (slow upstream)
            // moves the grid instead of firing the missed reads back to back:
            // at most one read per interval, one in flight.
            // A late wake-up is made up on the grid, but never by a read
            // sooner than half an interval after the previous one started.
            let period = Duration::from_millis(interval);
            due = (due + period)
                .max(started + period / 2)
                .max(tokio::time::Instant::now());
            tokio::select! {
                _ = tokio::time::sleep_until(armed_for(due)) => {}
                _ = w.wake.notified() => {
                    // An early read restarts the grid from itself.
                    due = tokio::time::Instant::now();
                }
                _ = w.tx.closed() => {
                    if self.leave(&task_id, &w, Leave::IfUnwatched) {
                        return;
                    }
                }
            }
        }
        self.leave(&task_id, &w, Leave::Now);
    }

    /// Takes the watch `w` of `task_id` out of the registry and closes its
    /// listen stream: true when it did, and its poller must stop.
    /// [`Leave::IfUnwatched`] is asked under the registry's lock, which
    /// [`Watchers::subscribe`] holds too: a waiter that subscribes after
    /// the last one left either finds no watch and starts a new poller,
    /// or joins this one before it is asked, and it polls on. (Deciding
    /// first and leaving the registry after let a waiter join a poller
    /// that had stopped: it waited for a snapshot nobody would read, until
    /// its client gave up.)
    fn leave(&self, task_id: &str, w: &Arc<Watcher>, when: Leave) -> bool {
        let mut map = self.lock();
        if when == Leave::IfUnwatched && w.tx.receiver_count() > 0 {
            return false;
        }
        if map.get(task_id).is_some_and(|cur| Arc::ptr_eq(cur, w)) {
            map.remove(task_id);
        }
        drop(map);
        lock(&w.listen).take();
        true
    }
}

/// When a poller leaves the registry ([`Watchers::leave`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leave {
    /// Its task ended, its upstream is gone, or it failed: whoever joins
    /// now still reads the last snapshot, which says so.
    Now,
    /// Its last waiter left: only if nobody has joined since.
    IfUnwatched,
}

/// tokio's timer rounds a deadline up to its next millisecond tick, so
/// a sleep until `due` wakes up to a millisecond after it, and a read
/// that saw a completion would carry that lateness on top of its wait.
/// Armed this much early, reads land in the millisecond before their due
/// time instead of the one after: centred on the grid, still one read per
/// interval on average.
const TIMER_LEAD: Duration = Duration::from_millis(1);

/// When to arm the timer for a read due at `due` (see [`TIMER_LEAD`]).
fn armed_for(due: tokio::time::Instant) -> tokio::time::Instant {
    due.checked_sub(TIMER_LEAD).unwrap_or(due)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::ReferenceServer;
    use crate::revision::Revision;
    use crate::translate::session::LegacyClient;
    use crate::upstream::channel;
    use crate::wire::TaskStatus;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// Watchers of an in-process 2026-07-28 reference server, the id of a
    /// task it works on for an hour, and how many `tasks/get` it was sent.
    async fn watched_server() -> (Arc<Watchers>, String, Arc<ModernMeta>, Arc<AtomicUsize>) {
        let (conn, _events, mut server_end) = channel::pair(Duration::from_secs(10));
        let server = ReferenceServer::new(Revision::Modern, server_end.to_shim.clone());
        let reads = Arc::new(AtomicUsize::new(0));
        let counted = reads.clone();
        tokio::spawn(async move {
            while let Some(m) = server_end.from_shim.recv().await {
                if matches!(&m, crate::jsonrpc::Message::Request(r) if r.method == "tasks/get") {
                    counted.fetch_add(1, Ordering::SeqCst);
                }
                server.handle(m);
            }
        });
        let meta = Arc::new(ModernMeta::for_client(&LegacyClient::undeclared("watch")));
        let call = serde_json::json!({"name": "slow_compute", "arguments": {"seconds": 3600}});
        let created = conn
            .request_with_meta("tools/call", &call, &meta)
            .await
            .unwrap()
            .unwrap();
        let task_id = created["taskId"].as_str().unwrap().to_owned();
        let upstream: Arc<dyn ModernUpstream> = conn;
        let watchers = Watchers::new(upstream, BridgeConfig::default(), false);
        (watchers, task_id, meta, reads)
    }

    /// The first snapshot the watch's poller reads.
    async fn first_read(rx: &mut watch::Receiver<Seen>) -> Box<DetailedTask> {
        let seen = tokio::time::timeout(
            Duration::from_secs(10),
            rx.wait_for(|s| matches!(s, Seen::Task(_))),
        )
        .await
        .expect("the poller reads the task")
        .unwrap()
        .clone();
        let Seen::Task(d) = seen else { unreachable!() };
        d
    }

    /// A waiter that joins a watch whose last waiter just left is watched
    /// on: the poller leaves the registry only while nobody holds the
    /// watch. Deciding that first and leaving later let a waiter join a
    /// stopped poller and wait for good.
    #[tokio::test]
    async fn a_watch_someone_holds_is_not_retired() {
        let (watchers, task_id, meta, _) = watched_server().await;
        let (w, first) = watchers.subscribe(&task_id, meta.clone());
        let (_, second) = watchers.subscribe(&task_id, meta.clone());
        drop(first);
        assert!(
            !watchers.leave(&task_id, &w, Leave::IfUnwatched),
            "a waiter still holds it"
        );
        assert_eq!(watchers.active(), 1);
        drop(second);
        assert!(
            watchers.leave(&task_id, &w, Leave::IfUnwatched),
            "nobody holds it"
        );
        assert_eq!(watchers.active(), 0);
        // A later waiter starts a poller of its own, which reads the task.
        let (_, mut again) = watchers.subscribe(&task_id, meta);
        let d = first_read(&mut again).await;
        assert_eq!(d.task.status, TaskStatus::Working);
    }

    /// A notification of the task's end, then an older snapshot (one sent
    /// before the end, arriving after it on another stream): waiters go on
    /// seeing the end, and the poller, done, leaves the registry without
    /// reading the task again.
    #[tokio::test(start_paused = true)]
    async fn an_older_snapshot_does_not_take_back_the_end() {
        let (watchers, task_id, meta, reads) = watched_server().await;
        let (_w, mut rx) = watchers.subscribe(&task_id, meta);
        let working = first_read(&mut rx).await;
        let mut completed = (*working).clone();
        completed.task.status = TaskStatus::Completed;
        completed.payload =
            crate::wire::modern::Payload::Result(serde_json::json!({"content": []}));
        watchers.publish(completed);
        watchers.publish(*working);
        let is_completed =
            |s: &Seen| matches!(s, Seen::Task(d) if d.task.status == TaskStatus::Completed);
        assert!(
            is_completed(&rx.borrow_and_update()),
            "the end stands: {:?}",
            *rx.borrow()
        );
        // Woken by the notification, the poller finds the end told and
        // stops: the read it made before is its only one.
        tokio::time::timeout(Duration::from_secs(10), async {
            while watchers.active() > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the poller leaves");
        assert!(
            is_completed(&rx.borrow()),
            "still the end: {:?}",
            *rx.borrow()
        );
        assert_eq!(reads.load(Ordering::SeqCst), 1, "a read after the end");
    }
}
