//! A [`TaskLedger`] that times every call of the one it wraps into
//! `mcp_shim_ledger_operation_duration_seconds{store,op}`: the HTTP front
//! wraps its ledger once, so every engine's calls are timed in one place.

use std::sync::Arc;
use std::time::Instant;

use super::{
    Change, Current, Detail, Found, KeptChange, LedgerError, Listed, Millis, TaskLedger, TaskRecord,
};
use crate::scope::Scope;
use crate::telemetry::Telemetry;

/// `inner`, timed.
#[derive(Debug)]
pub(crate) struct TimedLedger {
    inner: Arc<dyn TaskLedger>,
    telemetry: Arc<Telemetry>,
    store: &'static str,
}

impl TimedLedger {
    /// Times `inner`'s calls into `telemetry`.
    pub(crate) fn wrap(
        inner: Arc<dyn TaskLedger>,
        telemetry: Arc<Telemetry>,
    ) -> Arc<dyn TaskLedger> {
        let store = inner.store_name();
        Arc::new(TimedLedger {
            inner,
            telemetry,
            store,
        })
    }

    async fn timed<T>(&self, op: &'static str, call: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let out = call.await;
        self.telemetry
            .ledger_took(self.store, op, started.elapsed());
        out
    }
}

/// Each call goes to `inner` as is, timed under its own name; `get` and
/// `get_task` are `fetch` by [`Detail`], timed under those names.
#[async_trait::async_trait]
impl TaskLedger for TimedLedger {
    async fn insert(&self, record: TaskRecord, now: Millis) -> Result<(), LedgerError> {
        self.timed("insert", self.inner.insert(record, now)).await
    }

    async fn check_room(&self, scope: &Scope, now: Millis) -> Result<(), LedgerError> {
        let call = self.inner.check_room(scope, now);
        self.timed("check_room", call).await
    }

    async fn fetch(&self, scope: &Scope, task_id: &str, now: Millis, detail: Detail) -> Found {
        let op = match detail {
            Detail::Full => "get",
            Detail::TaskOnly => "get_task",
        };
        self.timed(op, self.inner.fetch(scope, task_id, now, detail))
            .await
    }

    async fn is_current(&self, scope: &Scope, rec: &TaskRecord, now: Millis) -> Current {
        let call = self.inner.is_current(scope, rec, now);
        self.timed("is_current", call).await
    }

    fn is_current_now(&self, scope: &Scope, rec: &TaskRecord, now: Millis) -> Option<Current> {
        let started = Instant::now();
        let out = self.inner.is_current_now(scope, rec, now)?;
        self.telemetry
            .ledger_took(self.store, "is_current", started.elapsed());
        Some(out)
    }

    async fn update(&self, scope: &Scope, task_id: &str, now: Millis, change: Change<'_>) -> Found {
        let call = self.inner.update(scope, task_id, now, change);
        self.timed("update", call).await
    }

    async fn update_kept(&self, scope: &Scope, id: &str, now: Millis, change: KeptChange) -> Found {
        let call = self.inner.update_kept(scope, id, now, change);
        self.timed("update_kept", call).await
    }

    async fn list(&self, scope: &Scope, cursor: Option<&str>, limit: usize, now: Millis) -> Listed {
        let call = self.inner.list(scope, cursor, limit, now);
        self.timed("list", call).await
    }

    async fn scope_of(&self, task_id: &str, now: Millis) -> Result<Option<Scope>, LedgerError> {
        let call = self.inner.scope_of(task_id, now);
        self.timed("scope_of", call).await
    }

    async fn drop_scope(&self, scope: &Scope) -> Result<(), LedgerError> {
        self.timed("drop_scope", self.inner.drop_scope(scope)).await
    }

    async fn evict_expired(&self, now: Millis) -> Result<usize, LedgerError> {
        let call = self.inner.evict_expired(now);
        self.timed("evict_expired", call).await
    }

    async fn len(&self) -> Result<usize, LedgerError> {
        self.timed("len", self.inner.len()).await
    }

    async fn is_empty(&self) -> Result<bool, LedgerError> {
        self.timed("is_empty", self.inner.is_empty()).await
    }

    fn shared_with_other_instances(&self) -> bool {
        self.inner.shared_with_other_instances()
    }

    fn store_name(&self) -> &'static str {
        self.store
    }
}
