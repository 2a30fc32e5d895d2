//! The in-memory ledger (the default).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use super::{LedgerError, Millis, Page, TaskLedger, TaskRecord};

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
    records: HashMap<String, (u64, TaskRecord)>,
    scopes: HashMap<String, BTreeMap<u64, String>>,
}

impl MemoryLedger {
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
    fn live(&self, scope: &str, task_id: &str, now: Millis) -> Option<&(u64, TaskRecord)> {
        self.records
            .get(task_id)
            .filter(|(_, r)| r.scope == scope && !expired(r, now))
    }

    fn remove(&mut self, task_id: &str) {
        if let Some((seq, r)) = self.records.remove(task_id)
            && let Some(idx) = self.scopes.get_mut(&r.scope)
        {
            idx.remove(&seq);
            if idx.is_empty() {
                self.scopes.remove(&r.scope);
            }
        }
    }

    fn evict_scope(&mut self, scope: &str, now: Millis) {
        let dead: Vec<String> = self
            .scopes
            .get(scope)
            .into_iter()
            .flat_map(|idx| idx.values())
            .filter(|id| self.records.get(*id).is_some_and(|(_, r)| expired(r, now)))
            .cloned()
            .collect();
        for id in dead {
            self.remove(&id);
        }
    }
}

fn expired(r: &TaskRecord, now: Millis) -> bool {
    r.expires_at.is_some_and(|t| t <= now)
}

fn encode_cursor(scope: &str, seq: u64) -> String {
    // Bind the cursor to its scope so one client's cursor is useless to another.
    URL_SAFE_NO_PAD.encode(format!("v1:{seq}:{scope}"))
}

fn decode_cursor(scope: &str, cursor: &str) -> Result<u64, LedgerError> {
    let raw = URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| LedgerError::BadCursor)?;
    let text = String::from_utf8(raw).map_err(|_| LedgerError::BadCursor)?;
    let rest = text.strip_prefix("v1:").ok_or(LedgerError::BadCursor)?;
    let (seq, cursor_scope) = rest.split_once(':').ok_or(LedgerError::BadCursor)?;
    if cursor_scope != scope {
        return Err(LedgerError::BadCursor);
    }
    seq.parse().map_err(|_| LedgerError::BadCursor)
}

impl TaskLedger for MemoryLedger {
    fn insert(&self, record: TaskRecord, now: Millis) -> Result<(), LedgerError> {
        let mut inner = self.lock();
        inner.evict_scope(&record.scope, now);
        let held = inner.scopes.get(&record.scope).map_or(0, BTreeMap::len);
        if held >= self.per_scope_cap {
            return Err(LedgerError::ScopeFull(self.per_scope_cap));
        }
        inner.seq += 1;
        let seq = inner.seq;
        let id = record.id().to_owned();
        inner.remove(&id);
        inner
            .scopes
            .entry(record.scope.clone())
            .or_default()
            .insert(seq, id.clone());
        inner.records.insert(id, (seq, record));
        Ok(())
    }

    fn get(&self, scope: &str, task_id: &str, now: Millis) -> Option<TaskRecord> {
        self.lock()
            .live(scope, task_id, now)
            .map(|(_, r)| r.clone())
    }

    fn contains(&self, scope: &str, task_id: &str, now: Millis) -> bool {
        self.lock().live(scope, task_id, now).is_some()
    }

    fn update(
        &self,
        scope: &str,
        task_id: &str,
        now: Millis,
        change: &mut dyn FnMut(&mut TaskRecord),
    ) -> Option<TaskRecord> {
        let mut inner = self.lock();
        inner.live(scope, task_id, now)?;
        let (_, rec) = inner.records.get_mut(task_id)?;
        change(rec);
        Some(rec.clone())
    }

    fn list(
        &self,
        scope: &str,
        cursor: Option<&str>,
        limit: usize,
        now: Millis,
    ) -> Result<Page, LedgerError> {
        let before = cursor.map(|c| decode_cursor(scope, c)).transpose()?;
        let inner = self.lock();
        let Some(idx) = inner.scopes.get(scope) else {
            return Ok(Page {
                records: vec![],
                next_cursor: None,
            });
        };
        let upper = before.unwrap_or(u64::MAX);
        let mut records = Vec::with_capacity(limit.min(256));
        let mut last_seq = None;
        let mut more = false;
        for (seq, id) in idx.range(..upper).rev() {
            let Some((_, r)) = inner.records.get(id) else {
                continue;
            };
            if expired(r, now) {
                continue;
            }
            if records.len() == limit {
                more = true;
                break;
            }
            records.push(r.clone());
            last_seq = Some(*seq);
        }
        let next_cursor = match (more, last_seq) {
            (true, Some(seq)) => Some(encode_cursor(scope, seq)),
            _ => None,
        };
        Ok(Page {
            records,
            next_cursor,
        })
    }

    fn drop_scope(&self, scope: &str) {
        let mut inner = self.lock();
        if let Some(idx) = inner.scopes.remove(scope) {
            for id in idx.values() {
                inner.records.remove(id);
            }
        }
    }

    fn evict_expired(&self, now: Millis) -> usize {
        let mut inner = self.lock();
        let dead: Vec<String> = inner
            .records
            .iter()
            .filter(|(_, (_, r))| expired(r, now))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &dead {
            inner.remove(id);
        }
        dead.len()
    }

    fn len(&self) -> usize {
        self.lock().records.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::modern::Payload;
    use crate::wire::{TaskStatus, legacy};

    fn rec(scope: &str, id: &str, expires_at: Option<Millis>) -> TaskRecord {
        TaskRecord {
            scope: scope.into(),
            task: legacy::Task {
                task_id: id.into(),
                status: TaskStatus::Working,
                status_message: None,
                created_at: "a".into(),
                last_updated_at: "a".into(),
                ttl: None,
                poll_interval: None,
                extra: Default::default(),
            },
            payload: Payload::None,
            cancel_pinned: false,
            synthetic: false,
            expires_at,
        }
    }

    #[test]
    fn scopes_never_see_each_other() {
        let l = MemoryLedger::default();
        l.insert(rec("alice", "t1", None), 0).unwrap();
        assert!(l.get("alice", "t1", 0).is_some());
        assert_eq!(l.get("bob", "t1", 0), None);
        assert_eq!(l.get("bob", "nope", 0), None);
        assert!(
            l.update("bob", "t1", 0, &mut |r| r.cancel_pinned = true)
                .is_none()
        );
        assert!(!l.get("alice", "t1", 0).unwrap().cancel_pinned);
        assert!(l.list("bob", None, 10, 0).unwrap().records.is_empty());
    }

    #[test]
    fn pages_are_newest_first_with_scope_bound_cursors() {
        let l = MemoryLedger::default();
        for i in 0..5 {
            l.insert(rec("a", &format!("t{i}"), None), 0).unwrap();
        }
        let p1 = l.list("a", None, 2, 0).unwrap();
        let ids: Vec<_> = p1.records.iter().map(|r| r.id().to_owned()).collect();
        assert_eq!(ids, ["t4", "t3"]);
        let c = p1.next_cursor.unwrap();
        let p2 = l.list("a", Some(&c), 2, 0).unwrap();
        assert_eq!(p2.records[0].id(), "t2");
        let p3 = l.list("a", p2.next_cursor.as_deref(), 2, 0).unwrap();
        assert_eq!(p3.records.len(), 1);
        assert_eq!(p3.next_cursor, None);
        assert_eq!(l.list("b", Some(&c), 2, 0), Err(LedgerError::BadCursor));
        assert_eq!(
            l.list("a", Some("garbage!"), 2, 0),
            Err(LedgerError::BadCursor)
        );
    }

    #[test]
    fn expiry_and_caps() {
        let l = MemoryLedger::new(2);
        l.insert(rec("a", "t1", Some(10)), 0).unwrap();
        l.insert(rec("a", "t2", None), 0).unwrap();
        assert_eq!(
            l.insert(rec("a", "t3", None), 5),
            Err(LedgerError::ScopeFull(2))
        );
        assert!(l.get("a", "t1", 10).is_none());
        l.insert(rec("a", "t3", None), 10).unwrap();
        assert_eq!(l.len(), 2);
        l.insert(rec("b", "u1", Some(1)), 0).unwrap();
        assert_eq!(l.evict_expired(100), 1);
        l.drop_scope("a");
        assert!(l.is_empty());
    }
}
