//! Client requests still being answered, so that the client's
//! `notifications/cancelled` can stop them.
//!
//! A translating front never sends the client's request upstream under
//! the client's id: the upstream knows the shim's own ids, and a request
//! may have become something else there (a task the shim drives, a wait
//! that exists only in the shim). So the client's cancel is not forwarded:
//! it drops the request's work. Upstream requests dropped with it are
//! cancelled upstream under their own ids (see `upstream::Connection`),
//! and work that owns more than a request (a driven task) cleans up as it
//! is dropped. Nothing answers the cancelled request (MCP: the receiver
//! SHOULD NOT respond to a cancelled request).

use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use futures_util::future::{AbortHandle, Abortable};
use serde::Deserialize;
use serde_json::Value;

use super::lock;
use crate::jsonrpc::{Id, IdMap};

/// The method a client cancels a request with.
pub(crate) const CANCELLED: &str = "notifications/cancelled";

/// One session's client requests still being answered.
#[derive(Debug, Default)]
pub(crate) struct Cancellable {
    /// Request id → (registration, how to stop its work).
    running: Mutex<IdMap<(u64, AbortHandle)>>,
    next: AtomicU64,
}

impl Cancellable {
    /// `work` (which answers client request `id`), made stoppable by
    /// [`Cancellable::cancel`]; once it ends either way, `id` is forgotten.
    /// `None` when it was cancelled.
    pub(crate) fn track<F>(
        self: &std::sync::Arc<Self>,
        id: Id,
        work: F,
    ) -> impl Future<Output = Option<F::Output>> + Send + 'static
    where
        F: Future + Send + 'static,
        F::Output: Send,
    {
        let (handle, registration) = AbortHandle::new_pair();
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.running).insert(id.clone(), (n, handle));
        let this = self.clone();
        async move {
            let done = Abortable::new(work, registration).await.ok();
            if done.is_none() {
                tracing::debug!(%id, "client request cancelled; no answer");
            }
            let mut running = lock(&this.running);
            // A later request reusing the id is not ours to forget.
            if running.get(&id).is_some_and(|(m, _)| *m == n) {
                running.remove(&id);
            }
            done
        }
    }

    /// Stops the work of the request a `notifications/cancelled` names
    /// (its `params.requestId`). False when no such request is running:
    /// already answered, or never seen (the spec lets both be ignored).
    pub(crate) fn cancel(&self, params: Option<&Value>) -> bool {
        cancelled_id(params).is_some_and(|id| self.cancel_id(&id))
    }

    /// Stops the work of request `id`; false when it is not running.
    pub(crate) fn cancel_id(&self, id: &Id) -> bool {
        match lock(&self.running).remove(id) {
            Some((_, handle)) => {
                handle.abort();
                true
            }
            None => false,
        }
    }
}

/// The request a `notifications/cancelled` names (its `params.requestId`).
pub(crate) fn cancelled_id(params: Option<&Value>) -> Option<Id> {
    params
        .and_then(|p| p.get("requestId"))
        .and_then(|v| Id::deserialize(v).ok())
}

/// Runs its closure if dropped before [`IfDropped::disarm`]: clean-up for
/// work a cancel may drop half-way.
pub(crate) struct IfDropped(Option<Box<dyn FnOnce() + Send>>);

impl IfDropped {
    pub(crate) fn new(f: impl FnOnce() + Send + 'static) -> Self {
        IfDropped(Some(Box::new(f)))
    }

    /// The work finished: nothing to clean up.
    pub(crate) fn disarm(mut self) {
        self.0 = None;
    }
}

impl std::fmt::Debug for IfDropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "IfDropped(armed)"
        } else {
            "IfDropped(disarmed)"
        })
    }
}

impl Drop for IfDropped {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

/// Starts `work` on the current runtime, if there is one (a drop may run
/// anywhere; a session's drops run inside the runtime).
pub(crate) fn spawn_cleanup(work: impl Future<Output = ()> + Send + 'static) {
    match tokio::runtime::Handle::try_current() {
        Ok(rt) => {
            rt.spawn(work);
        }
        Err(_) => tracing::warn!("no runtime to clean up a cancelled request on"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_cancelled_request_stops_and_is_forgotten() {
        let c = Arc::new(Cancellable::default());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let work = c.track(Id::Num(1), async move {
            let _ = rx.await;
            panic!("the cancelled work ran on");
        });
        let done = tokio::spawn(work);
        assert!(!c.cancel(Some(&json!({"requestId": 2}))));
        assert!(c.cancel(Some(&json!({"requestId": 1, "reason": "x"}))));
        done.await.unwrap();
        drop(tx);
        assert!(!c.cancel(Some(&json!({"requestId": 1}))));
        assert!(lock(&c.running).is_empty());
    }
}
