//! [`start_here`]: a request's work runs on the thread that read the
//! request until it first waits; when woken, it continues on the thread
//! that woke it if that thread runs [`InlineWakes`], else on the runtime.
//!
//! An engine answering a client request does everything up to writing the
//! upstream request (parse, translate, ledger look-ups) without waiting.
//! Spawning that work would first wake a runtime worker to do it, and wake
//! one again to take over the waiting future: on a stdio session those two
//! wake-ups were the largest costs of a translated round trip, and on a
//! two-core machine they take the core the upstream needs. So the reading
//! thread polls the work itself, and the future is spawned by its waker:
//! when the answer it waits for arrives, from the thread delivering it.
//! A thread reading an upstream's output with plain blocking reads runs
//! [`InlineWakes`]: the answer's future is polled right there, once the
//! line is routed, so a translated round trip touches the same two threads
//! a bare relay does (the one reading the client, the one reading the
//! upstream) and no runtime worker at all.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

/// Where a started future is, for its waker.
enum Slot {
    /// Being polled by [`start_here`]; `woken` if its waker ran meanwhile.
    Polling { woken: bool },
    /// Waiting, owned by whoever holds its waker.
    Parked(Work),
    /// Woken on a thread running [`InlineWakes`], in its queue.
    Queued(Work),
    /// Finished, or handed to the runtime (later wake-ups are stale).
    Gone,
}

struct Deferred {
    slot: Mutex<Slot>,
    rt: tokio::runtime::Handle,
}

impl Deferred {
    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        // A poisoned lock only means a panic elsewhere; the data is still usable.
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }
}

thread_local! {
    /// Futures woken on this thread, when it runs [`InlineWakes`].
    static WOKEN_HERE: RefCell<Option<Vec<Arc<Deferred>>>> = const { RefCell::new(None) };
}

impl Wake for Deferred {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut slot = self.lock();
        match std::mem::replace(&mut *slot, Slot::Gone) {
            Slot::Polling { .. } => *slot = Slot::Polling { woken: true },
            Slot::Parked(work) => {
                // (`try_with`: a thread tearing down its locals spawns.)
                let queued = WOKEN_HERE
                    .try_with(|q| {
                        q.try_borrow_mut()
                            .ok()
                            .and_then(|mut q| q.as_mut().map(|q| q.push(self.clone())))
                            .is_some()
                    })
                    .unwrap_or(false);
                if queued {
                    *slot = Slot::Queued(work);
                } else {
                    drop(slot);
                    // Polled again with the runtime's waker, which replaces
                    // this one wherever it was registered.
                    self.rt.spawn(work);
                }
            }
            queued @ Slot::Queued(_) => *slot = queued,
            Slot::Gone => {}
        }
    }
}

/// `work`'s output, or `panicked()`'s if `work` panics: a request whose
/// handling hits a bug still gets an answer (an error) instead of leaving
/// its client waiting for good.
///
/// Not an `async fn`: one would keep `work` twice in its state (the
/// argument, and the wrapper polling it), and a request's future is large
/// enough for the extra copy to show in every round trip.
pub(crate) fn or_if_panicked<T>(
    work: impl Future<Output = T>,
    panicked: impl FnOnce() -> T,
) -> impl Future<Output = T> {
    use futures_util::FutureExt;
    std::panic::AssertUnwindSafe(work)
        .catch_unwind()
        .map(|out| match out {
            Ok(out) => out,
            Err(_) => {
                log_panic();
                panicked()
            }
        })
}

/// [`or_if_panicked`] for work that does not wait: `work`'s output, or
/// `None` (logged) if it panics.
pub(crate) fn unless_panicked<T>(work: impl FnOnce() -> T) -> Option<T> {
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work));
    caught.map_err(|_| log_panic()).ok()
}

fn log_panic() {
    tracing::error!("handling a client request panicked; answering it with an error");
}

/// Runs `work` on the calling thread until it first has to wait; once
/// woken, it continues on the waking thread if that runs [`InlineWakes`],
/// else as a task of the current runtime (the calling thread must be
/// inside one, see [`tokio::runtime::Handle::enter`]).
///
/// A future waiting here is owned by its waker: it must be woken in the
/// end (every upstream request has a timeout; a session's questions end
/// with the session), as a spawned task would have to be to finish.
pub(crate) fn start_here(work: impl Future<Output = ()> + Send + 'static) {
    let deferred = Arc::new(Deferred {
        slot: Mutex::new(Slot::Polling { woken: false }),
        rt: tokio::runtime::Handle::current(),
    });
    poll_here(&deferred, Box::pin(work));
}

/// One poll of `work` (whose slot says `Polling`) on this thread.
fn poll_here(deferred: &Arc<Deferred>, mut work: Work) {
    let waker = Waker::from(deferred.clone());
    let polled = poll_catching(work.as_mut(), &mut Context::from_waker(&waker));
    let mut slot = deferred.lock();
    match (polled, &*slot) {
        (Some(Poll::Pending), Slot::Polling { woken: false }) => *slot = Slot::Parked(work),
        // Woken while polled: it wants polling again at once, which is
        // the runtime's job (a future that keeps waking itself must not
        // hold this thread).
        (Some(Poll::Pending), _) => {
            *slot = Slot::Gone;
            drop(slot);
            deferred.rt.spawn(work);
        }
        (Some(Poll::Ready(())), _) | (None, _) => *slot = Slot::Gone,
    }
}

/// One poll of a client request's work; `None` if it panicked. A spawned
/// task's panic would end that task alone, so a request polled outside
/// one ends the same way: logged here, and no answer from it.
fn poll_catching<F: Future + ?Sized>(
    work: Pin<&mut F>,
    cx: &mut Context<'_>,
) -> Option<Poll<F::Output>> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.poll(cx))) {
        Ok(polled) => Some(polled),
        Err(_) => {
            tracing::error!("handling a client request panicked; it gets no answer");
            None
        }
    }
}

/// While alive, futures of [`start_here`] woken on this thread are kept
/// for [`InlineWakes::run`] to poll here, instead of being spawned. For a
/// thread that delivers answers (reading an upstream's output with
/// blocking reads): it calls `run` after each message it routed, outside
/// any lock. Dropping it spawns whatever is still queued.
pub(crate) struct InlineWakes(());

impl InlineWakes {
    /// Starts keeping this thread's wake-ups.
    pub(crate) fn start() -> InlineWakes {
        WOKEN_HERE.with_borrow_mut(|q| {
            q.get_or_insert_with(Vec::new);
        });
        InlineWakes(())
    }

    /// Polls every future woken on this thread since the last call.
    pub(crate) fn run(&self) {
        while let Some(deferred) = WOKEN_HERE.with_borrow_mut(|q| q.as_mut().and_then(Vec::pop)) {
            let work = {
                let mut slot = deferred.lock();
                match std::mem::replace(&mut *slot, Slot::Polling { woken: false }) {
                    Slot::Queued(work) => work,
                    other => {
                        *slot = other;
                        continue;
                    }
                }
            };
            poll_here(&deferred, work);
        }
    }
}

impl Drop for InlineWakes {
    fn drop(&mut self) {
        let left = WOKEN_HERE.with_borrow_mut(Option::take).unwrap_or_default();
        for deferred in left {
            let mut slot = deferred.lock();
            if let Slot::Queued(work) = std::mem::replace(&mut *slot, Slot::Gone) {
                drop(slot);
                deferred.rt.spawn(work);
            }
        }
    }
}

/// `work` run as part of the caller's future, as `.await` would run it,
/// except that a caller dropped before `work` finished (an HTTP client
/// that hung up) leaves the rest of it to run as a task of the runtime,
/// as if spawned. That is what `tokio::spawn(work).await` gives, without
/// handing every request to the scheduler and waking the caller back: on
/// a two-core machine that round trip, often through the other core, cost
/// more than the work. A panic in `work` is caught as a task's would be.
pub(crate) fn finish_even_if_dropped<F>(work: F) -> FinishEvenIfDropped<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    FinishEvenIfDropped {
        work: Some(Box::pin(work)),
    }
}

/// The future of [`finish_even_if_dropped`]: `Err` if `work` panicked.
pub(crate) struct FinishEvenIfDropped<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    work: Option<Pin<Box<F>>>,
}

/// `work` panicked (see [`finish_even_if_dropped`]).
#[derive(Debug)]
pub(crate) struct Panicked;

impl<F> Future for FinishEvenIfDropped<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    type Output = Result<F::Output, Panicked>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(work) = self.work.as_mut() else {
            return Poll::Ready(Err(Panicked));
        };
        match poll_catching(work.as_mut(), cx) {
            Some(Poll::Pending) => Poll::Pending,
            Some(Poll::Ready(v)) => {
                self.work = None;
                Poll::Ready(Ok(v))
            }
            None => {
                self.work = None;
                Poll::Ready(Err(Panicked))
            }
        }
    }
}

impl<F> Drop for FinishEvenIfDropped<F>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn drop(&mut self) {
        if let Some(work) = self.work.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(rt) => {
                    rt.spawn(work);
                }
                Err(_) => tracing::warn!("no runtime to finish an abandoned request on"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Work that finishes without waiting runs entirely on the caller.
    #[tokio::test]
    async fn work_that_never_waits_runs_on_the_spot() {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let caller = std::thread::current().id();
        start_here(async move {
            let _ = tx.send(std::thread::current().id());
        });
        assert_eq!(rx.try_recv().ok(), Some(caller));
    }

    /// Awaited, the work's output comes back on the caller's task; the
    /// caller dropped halfway, the rest still runs; a panic is an error.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn work_outlives_a_caller_that_goes_away() {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let caller = std::thread::current().id();
        let answered = finish_even_if_dropped(async move {
            let n = rx.await.unwrap_or(0);
            (n, std::thread::current().id())
        });
        let _ = tx.send(7);
        let (n, thread) = answered.await.expect("no panic");
        assert_eq!((n, thread), (7, caller), "polled on the caller's task");

        // The caller stops waiting before the work is done.
        let (release, wait) = tokio::sync::oneshot::channel::<()>();
        let (done_tx, done) = tokio::sync::oneshot::channel::<&str>();
        let abandoned = finish_even_if_dropped(async move {
            let _ = wait.await;
            let _ = done_tx.send("finished");
        });
        let gave_up = tokio::time::timeout(Duration::from_millis(20), abandoned).await;
        assert!(gave_up.is_err(), "the work waits for its release");
        let _ = release.send(());
        let finished = tokio::time::timeout(Duration::from_secs(5), done).await;
        assert_eq!(finished.ok().and_then(Result::ok), Some("finished"));

        let panicked = finish_even_if_dropped(async { panic!("engine bug") }).await;
        assert!(matches!(panicked, Err(Panicked)));
    }

    /// Work that waits resumes when woken, from another thread or from a
    /// timer, and even when woken before its first poll returned.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn waiting_work_resumes_when_woken() {
        let (done_tx, mut done) = tokio::sync::mpsc::unbounded_channel();
        // Woken from another thread, later.
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let d = done_tx.clone();
        start_here(async move {
            let _ = d.send(rx.await.unwrap_or(0));
        });
        // Woken by a timer.
        let d = done_tx.clone();
        start_here(async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = d.send(2);
        });
        // Woken while still being polled: the waker runs before the first
        // poll returns `Pending`.
        let d = done_tx.clone();
        start_here(async move {
            let mut first = true;
            std::future::poll_fn(|cx| {
                if std::mem::take(&mut first) {
                    cx.waker().wake_by_ref();
                    Poll::Pending
                } else {
                    Poll::Ready(())
                }
            })
            .await;
            let _ = d.send(3);
        });
        drop(done_tx);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(10));
            let _ = tx.send(1);
        });
        let mut got = Vec::new();
        while let Ok(Some(n)) = tokio::time::timeout(Duration::from_secs(5), done.recv()).await {
            got.push(n);
        }
        got.sort_unstable();
        assert_eq!(got, vec![1, 2, 3]);
    }
}
