//! [`start_here`]: a request's work runs on the thread that read the
//! request until it first waits, and goes to the runtime only when woken.
//!
//! An engine answering a client request does everything up to writing the
//! upstream request (parse, translate, ledger look-ups) without waiting.
//! Spawning that work would first wake a runtime worker to do it, and wake
//! one again to take over the waiting future: on a stdio session those two
//! wake-ups were the largest costs of a translated round trip, and on a
//! two-core machine they take the core the upstream needs. So the reading
//! thread polls the work itself, and the future is spawned by its waker:
//! when the answer it waits for arrives, from the thread delivering it (a
//! runtime worker reading the upstream), which schedules it locally.

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

impl Wake for Deferred {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let mut slot = self.lock();
        match std::mem::replace(&mut *slot, Slot::Gone) {
            Slot::Polling { .. } => *slot = Slot::Polling { woken: true },
            Slot::Parked(work) => {
                drop(slot);
                // Polled again with the runtime's waker, which replaces
                // this one wherever it was registered.
                self.rt.spawn(work);
            }
            Slot::Gone => {}
        }
    }
}

/// Runs `work` on the calling thread until it first has to wait; once
/// woken, it continues as a task of the current runtime (the calling
/// thread must be inside one, see [`tokio::runtime::Handle::enter`]).
///
/// A future waiting here is owned by its waker: it must be woken in the
/// end (every upstream request has a timeout; a session's questions end
/// with the session), as a spawned task would have to be to finish.
pub(crate) fn start_here(work: impl Future<Output = ()> + Send + 'static) {
    let deferred = Arc::new(Deferred {
        slot: Mutex::new(Slot::Polling { woken: false }),
        rt: tokio::runtime::Handle::current(),
    });
    let waker = Waker::from(deferred.clone());
    let mut work: Work = Box::pin(work);
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        work.as_mut().poll(&mut Context::from_waker(&waker))
    }));
    let mut slot = deferred.lock();
    match (polled, &*slot) {
        (Ok(Poll::Pending), Slot::Polling { woken: false }) => *slot = Slot::Parked(work),
        (Ok(Poll::Pending), _) => {
            *slot = Slot::Gone;
            drop(slot);
            deferred.rt.spawn(work);
        }
        (Ok(Poll::Ready(())), _) => *slot = Slot::Gone,
        // A spawned task's panic would end that task alone; so here.
        (Err(_), _) => {
            *slot = Slot::Gone;
            tracing::error!("handling a client request panicked; it gets no answer");
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
