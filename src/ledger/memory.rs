//! The in-memory ledger (the default).
//!
//! Records are kept in a compact form and turned into [`TaskRecord`]s on
//! the way out: at a million tracked tasks the per-record overhead is what
//! decides the footprint (see docs/performance.md, `ledger_scale`). So each
//! id is stored once (an `Arc<str>` shared by the id map and the scope
//! index), each scope string once per scope, the hash table holds only a
//! pointer per record, and a task's rarely-used parts (`extra`, a status
//! message) take no room when absent. A cached result is kept as compact
//! JSON text: a small `CallToolResult` costs about 110 bytes that way
//! against about 875 as a `serde_json::Value` tree; reading a record back
//! parses it (about a microsecond for a small result).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::Map;

use super::{
    Change, Current, Detail, Found, LedgerError, Listed, Millis, PageBuilder, TaskLedger,
    TaskRecord,
};
use crate::scope::Scope;
use crate::wire::modern::Payload;
use crate::wire::{Extra, TaskStatus, legacy};

/// Tasks in memory: a map by id, plus per scope an ordered index by
/// insertion sequence so a page costs O(page · log n), not O(total).
#[derive(Debug)]
pub struct MemoryLedger {
    inner: Mutex<Inner>,
    per_scope_cap: usize,
}

#[derive(Debug, Default)]
struct Inner {
    seq: u64,
    records: HashMap<Arc<str>, Box<Stored>>,
    scopes: HashMap<Arc<str>, BTreeMap<u64, Arc<str>>>,
}

/// A [`TaskRecord`] as held: the id is the map key, the scope is shared.
#[derive(Debug)]
struct Stored {
    seq: u64,
    scope: Arc<str>,
    status: TaskStatus,
    cancel_pinned: bool,
    synthetic: bool,
    status_message: Option<Box<str>>,
    created_at: Box<str>,
    last_updated_at: Box<str>,
    ttl: Option<i64>,
    poll_interval: Option<i64>,
    extra: Option<Box<Extra>>,
    payload: StoredPayload,
    expires_at: Option<Millis>,
}

/// [`Payload`] as held: results as JSON text, the rare rest as is.
#[derive(Debug)]
enum StoredPayload {
    None,
    Result(Box<str>),
    Other(Box<Payload>),
}

impl StoredPayload {
    fn new(p: &Payload) -> Self {
        match p {
            Payload::None => StoredPayload::None,
            Payload::Result(v) => match serde_json::to_string(v) {
                Ok(s) => StoredPayload::Result(s.into_boxed_str()),
                Err(_) => StoredPayload::Other(Box::new(p.clone())),
            },
            other => StoredPayload::Other(Box::new(other.clone())),
        }
    }

    fn to_payload(&self) -> Payload {
        match self {
            StoredPayload::None => Payload::None,
            // Text this ledger wrote from a `Value` parses back to that `Value`.
            StoredPayload::Result(s) => match serde_json::from_str(s) {
                Ok(v) => Payload::Result(v),
                Err(e) => {
                    tracing::error!(error = %e, "cached result does not parse back");
                    Payload::None
                }
            },
            StoredPayload::Other(p) => (**p).clone(),
        }
    }
}

impl Stored {
    fn new(seq: u64, scope: Arc<str>, r: TaskRecord) -> Self {
        let mut s = Stored {
            seq,
            scope,
            status: r.task.status,
            cancel_pinned: false,
            synthetic: false,
            status_message: None,
            created_at: Box::default(),
            last_updated_at: Box::default(),
            ttl: None,
            poll_interval: None,
            extra: None,
            payload: StoredPayload::None,
            expires_at: None,
        };
        s.absorb(&r);
        s
    }

    /// Copies every field of `r` but its id and scope, which never change.
    /// (By reference: `update` hands the caller the record it stored, so
    /// it must not be rebuilt from here, decoding a cached result again.)
    fn absorb(&mut self, r: &TaskRecord) {
        let t = &r.task;
        self.status = t.status;
        self.status_message = t.status_message.as_deref().map(Box::from);
        self.created_at = t.created_at.as_str().into();
        self.last_updated_at = t.last_updated_at.as_str().into();
        self.ttl = t.ttl;
        self.poll_interval = t.poll_interval;
        self.extra = (!t.extra.is_empty()).then(|| Box::new(t.extra.clone()));
        self.payload = StoredPayload::new(&r.payload);
        self.cancel_pinned = r.cancel_pinned;
        self.synthetic = r.synthetic;
        self.expires_at = r.expires_at;
    }

    /// The record, its cached outcome as `detail` asks: for
    /// [`Detail::TaskOnly`] a cached result is left as text.
    fn to_record(&self, id: &str, detail: Detail) -> TaskRecord {
        let mut r = self.to_record_without_payload(id);
        if detail == Detail::Full {
            r.payload = self.payload.to_payload();
        }
        r
    }

    /// The record with [`Payload::None`].
    fn to_record_without_payload(&self, id: &str) -> TaskRecord {
        TaskRecord {
            scope: Scope::from_key(&self.scope),
            task: legacy::Task {
                task_id: id.to_owned(),
                status: self.status,
                status_message: self.status_message.as_deref().map(str::to_owned),
                // `String::from`, not `to_string`: a boxed str's goes
                // through `Display` and its padding, on every read.
                created_at: String::from(&*self.created_at),
                last_updated_at: String::from(&*self.last_updated_at),
                ttl: self.ttl,
                poll_interval: self.poll_interval,
                extra: self.extra.as_deref().cloned().unwrap_or_else(Map::new),
            },
            payload: Payload::None,
            cancel_pinned: self.cancel_pinned,
            synthetic: self.synthetic,
            expires_at: self.expires_at,
        }
    }

    /// Whether `rec` is this record as [`Detail::TaskOnly`] reads it
    /// (`to_record(id, TaskOnly) == *rec`, the id being the one it was
    /// found by), compared field by field where it is held.
    fn reads_as(&self, rec: &TaskRecord) -> bool {
        // Destructured whole: a field added to either type must be
        // compared here too.
        let TaskRecord {
            scope,
            task,
            payload,
            cancel_pinned,
            synthetic,
            expires_at,
        } = rec;
        let legacy::Task {
            task_id: _,
            status,
            status_message,
            created_at,
            last_updated_at,
            ttl,
            poll_interval,
            extra,
        } = task;
        scope.key() == &*self.scope
            && *payload == Payload::None
            && *status == self.status
            && status_message.as_deref() == self.status_message.as_deref()
            && **created_at == *self.created_at
            && **last_updated_at == *self.last_updated_at
            && *ttl == self.ttl
            && *poll_interval == self.poll_interval
            && self
                .extra
                .as_deref()
                .map_or(extra.is_empty(), |e| e == extra)
            && *cancel_pinned == self.cancel_pinned
            && *synthetic == self.synthetic
            && *expires_at == self.expires_at
    }

    fn expired(&self, now: Millis) -> bool {
        super::expired(self.expires_at, now)
    }
}

impl MemoryLedger {
    /// Whether `rec` is what `scope` reads of its task now, compared in
    /// place ([`TaskLedger::is_current`]).
    fn holds(&self, scope: &Scope, rec: &TaskRecord, now: Millis) -> bool {
        self.lock()
            .live(scope, rec.id(), now)
            .is_some_and(|stored| stored.reads_as(rec))
    }

    /// A ledger holding at most `per_scope_cap` live tasks per scope.
    pub fn new(per_scope_cap: usize) -> Self {
        MemoryLedger {
            inner: Mutex::new(Inner::default()),
            per_scope_cap,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Default for MemoryLedger {
    fn default() -> Self {
        MemoryLedger::new(10_000)
    }
}

impl Inner {
    fn live(&self, scope: &Scope, task_id: &str, now: Millis) -> Option<&Stored> {
        self.records
            .get(task_id)
            .map(Box::as_ref)
            .filter(|r| &*r.scope == scope.key() && !r.expired(now))
    }

    fn remove(&mut self, task_id: &str) {
        if let Some(r) = self.records.remove(task_id)
            && let Some(idx) = self.scopes.get_mut(&r.scope)
        {
            idx.remove(&r.seq);
            if idx.is_empty() {
                self.scopes.remove(&r.scope);
            }
        }
    }

    /// Drops `scope`'s expired records, then answers whether it has room
    /// for one more under `cap`.
    fn room_in(&mut self, scope: &Scope, now: Millis, cap: usize) -> Result<(), LedgerError> {
        self.evict_scope(scope, now);
        super::room(self.scopes.get(scope.key()).map_or(0, BTreeMap::len), cap)
    }

    fn evict_scope(&mut self, scope: &Scope, now: Millis) {
        let dead: Vec<Arc<str>> = self
            .scopes
            .get(scope.key())
            .into_iter()
            .flat_map(|idx| idx.values())
            .filter(|id| self.records.get(&***id).is_some_and(|r| r.expired(now)))
            .cloned()
            .collect();
        for id in dead {
            self.remove(&id);
        }
    }

    /// The shared copy of `scope`, if the scope holds any record.
    fn shared_scope(&self, scope: &Scope) -> Arc<str> {
        self.scopes
            .get_key_value(scope.key())
            .map_or_else(|| Arc::from(scope.key()), |(k, _)| k.clone())
    }
}

#[async_trait::async_trait]
impl TaskLedger for MemoryLedger {
    fn store_name(&self) -> &'static str {
        "memory"
    }

    async fn check_room(&self, scope: &Scope, now: Millis) -> Result<(), LedgerError> {
        self.lock().room_in(scope, now, self.per_scope_cap)
    }

    async fn insert(&self, record: TaskRecord, now: Millis) -> Result<(), LedgerError> {
        let mut inner = self.lock();
        inner.room_in(&record.scope, now, self.per_scope_cap)?;
        inner.seq += 1;
        let seq = inner.seq;
        inner.remove(record.id());
        let id: Arc<str> = Arc::from(record.id());
        let scope = inner.shared_scope(&record.scope);
        inner
            .scopes
            .entry(scope.clone())
            .or_default()
            .insert(seq, id.clone());
        inner
            .records
            .insert(id, Box::new(Stored::new(seq, scope, record)));
        Ok(())
    }

    async fn fetch(&self, scope: &Scope, task_id: &str, now: Millis, detail: Detail) -> Found {
        Ok(self
            .lock()
            .live(scope, task_id, now)
            .map(|r| r.to_record(task_id, detail)))
    }

    async fn is_current(&self, scope: &Scope, rec: &TaskRecord, now: Millis) -> Current {
        Ok(self.holds(scope, rec, now))
    }

    fn is_current_now(&self, scope: &Scope, rec: &TaskRecord, now: Millis) -> Option<Current> {
        Some(Ok(self.holds(scope, rec, now)))
    }

    async fn scope_of(&self, task_id: &str, now: Millis) -> Result<Option<Scope>, LedgerError> {
        Ok(self
            .lock()
            .records
            .get(task_id)
            .filter(|r| !r.expired(now))
            .map(|r| Scope::from_key(&r.scope)))
    }

    /// `change` may not move a record: edits to its id or scope are dropped.
    async fn update(&self, scope: &Scope, task_id: &str, now: Millis, change: Change<'_>) -> Found {
        let mut inner = self.lock();
        let Some(live) = inner.live(scope, task_id, now) else {
            return Ok(None);
        };
        let mut rec = live.to_record(task_id, Detail::Full);
        change(&mut rec);
        let Some(stored) = inner.records.get_mut(task_id) else {
            return Ok(None);
        };
        stored.absorb(&rec);
        // What was stored, without reading it back: only a moved id or
        // scope differs, and those edits were dropped.
        if rec.task.task_id != task_id {
            rec.task.task_id = task_id.to_owned();
        }
        if rec.scope != *scope {
            rec.scope = scope.clone();
        }
        Ok(Some(rec))
    }

    async fn list(&self, scope: &Scope, cursor: Option<&str>, limit: usize, now: Millis) -> Listed {
        let (mut page, before) = PageBuilder::start("v1", scope, cursor, limit)?;
        let inner = self.lock();
        let Some(idx) = inner.scopes.get(scope.key()) else {
            return Ok(page.finish(false));
        };
        for (seq, id) in idx.range(..before.unwrap_or(u64::MAX)).rev() {
            let Some(r) = inner.records.get(&**id).filter(|r| !r.expired(now)) else {
                continue;
            };
            if !page.has_room() {
                return Ok(page.finish(true));
            }
            page.push(*seq, r.to_record_without_payload(id));
        }
        Ok(page.finish(false))
    }

    async fn drop_scope(&self, scope: &Scope) -> Result<(), LedgerError> {
        let mut inner = self.lock();
        if let Some(idx) = inner.scopes.remove(scope.key()) {
            for id in idx.values() {
                inner.records.remove(id);
            }
        }
        Ok(())
    }

    async fn evict_expired(&self, now: Millis) -> Result<usize, LedgerError> {
        let mut inner = self.lock();
        let dead: Vec<Arc<str>> = inner
            .records
            .iter()
            .filter(|(_, r)| r.expired(now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &dead {
            inner.remove(id);
        }
        Ok(dead.len())
    }

    async fn len(&self) -> Result<usize, LedgerError> {
        Ok(self.lock().records.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::contract::rec;

    /// The compact form gives back every field as stored (the contract
    /// checks isolation, paging, expiry and caps on every ledger).
    #[tokio::test]
    async fn records_come_back_as_stored() {
        let l = MemoryLedger::default();
        let a = rec("a", "t1", Some(99)).scope;
        let mut r = rec("a", "t1", Some(99));
        r.task.status_message = Some("half way".into());
        r.task
            .extra
            .insert("x-vendor".into(), serde_json::json!({"k": [1, 2.5, null]}));
        r.payload = Payload::Result(serde_json::json!({"content": [{"type": "text",
            "text": "ünïcode \u{1F600}"}], "isError": false, "z": 1, "a": -0.0}));
        l.insert(r.clone(), 0).await.unwrap();
        assert_eq!(l.get(&a, "t1", 0).await.unwrap(), Some(r.clone()));
        r.payload = Payload::Error(crate::jsonrpc::ErrorObject::new(-32603, "boom"));
        let stored = l
            .update(&a, "t1", 0, &mut |x| x.payload = r.payload.clone())
            .await
            .unwrap();
        assert_eq!(stored, Some(r.clone()));
        // Listed without the payload (see `TaskLedger::list`).
        r.payload = Payload::None;
        assert_eq!(l.list(&a, None, 5, 0).await.unwrap().records, vec![r]);
    }
}
