//! A [`TaskLedger`] that times every call of the one it wraps into
//! `mcp_shim_ledger_operation_duration_seconds{store,op}`: the HTTP front
//! wraps its ledger once, so every engine's calls are timed in one place.

use std::sync::Arc;
use std::time::Instant;

use super::{Change, KeptChange, LedgerError, Millis, Page, TaskLedger, TaskRecord};
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

#[async_trait::async_trait]
impl TaskLedger for TimedLedger {
    async fn insert(&self, record: TaskRecord, now: Millis) -> Result<(), LedgerError> {
        self.timed("insert", self.inner.insert(record, now)).await
    }

    async fn check_room(&self, scope: &str, now: Millis) -> Result<(), LedgerError> {
        self.timed("check_room", self.inner.check_room(scope, now))
            .await
    }

    async fn get(
        &self,
        scope: &str,
        task_id: &str,
        now: Millis,
    ) -> Result<Option<TaskRecord>, LedgerError> {
        self.timed("get", self.inner.get(scope, task_id, now)).await
    }

    async fn get_task(
        &self,
        scope: &str,
        task_id: &str,
        now: Millis,
    ) -> Result<Option<TaskRecord>, LedgerError> {
        self.timed("get_task", self.inner.get_task(scope, task_id, now))
            .await
    }

    async fn update(
        &self,
        scope: &str,
        task_id: &str,
        now: Millis,
        change: Change<'_>,
    ) -> Result<Option<TaskRecord>, LedgerError> {
        self.timed("update", self.inner.update(scope, task_id, now, change))
            .await
    }

    async fn update_kept(
        &self,
        scope: &str,
        task_id: &str,
        now: Millis,
        change: KeptChange,
    ) -> Result<Option<TaskRecord>, LedgerError> {
        self.timed(
            "update_kept",
            self.inner.update_kept(scope, task_id, now, change),
        )
        .await
    }

    async fn list(
        &self,
        scope: &str,
        cursor: Option<&str>,
        limit: usize,
        now: Millis,
    ) -> Result<Page, LedgerError> {
        self.timed("list", self.inner.list(scope, cursor, limit, now))
            .await
    }

    async fn scope_of(&self, task_id: &str, now: Millis) -> Result<Option<String>, LedgerError> {
        self.timed("scope_of", self.inner.scope_of(task_id, now))
            .await
    }

    async fn drop_scope(&self, scope: &str) -> Result<(), LedgerError> {
        self.timed("drop_scope", self.inner.drop_scope(scope)).await
    }

    async fn evict_expired(&self, now: Millis) -> Result<usize, LedgerError> {
        self.timed("evict_expired", self.inner.evict_expired(now))
            .await
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
