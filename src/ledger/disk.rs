//! The on-disk ledger (`--ledger PATH`): the contract of
//! [`MemoryLedger`](super::MemoryLedger), kept in a [redb] file so that a
//! shim restart loses no task ownership, cancel pins or cached results.
//!
//! ```text
//!   records    task id           → JSON of the record and its sequence number
//!   by_scope   (scope, seq)      → task id      newest-first pages: O(page)
//!   by_expiry  (expires_at, id)  → ()           eviction: O(expired)
//!   counts     scope             → live records  the per-scope cap: O(1)
//!   meta       "seq" | "format"  → u64
//! ```
//!
//! Every change is one redb write transaction committed with immediate
//! durability (an fsync): a crash right after an answer still finds what
//! the answer promised. Changes that change nothing write nothing, so the
//! steady stream of unchanged poll results costs reads only. Every
//! transaction runs on tokio's blocking pool (`spawn_blocking`), so a
//! commit waits for its fsync there, not on a runtime thread; the cost of
//! a commit is what `benches/ledger.rs` measures (docs/performance.md).
//! An update reads the record, applies the caller's change on the calling
//! task, and stores the result in a second transaction only if the record
//! still reads as it did (else it reads and applies again).
//!
//! redb locks the file: a second shim process on the same file is refused
//! at open ([`DiskLedger::open`]) instead of corrupting it.
//!
//! A storage failure is [`LedgerError::Storage`] (`-32603`) from every
//! call.

use std::path::{Path, PathBuf};

use redb::{
    Database, ReadableDatabase, ReadableTable, ReadableTableMetadata, Table, TableDefinition,
};

use super::stored::{Stored, apply_change};
use super::{
    Change, Detail, Found, LedgerError, Listed, Millis, PageBuilder, TaskLedger, TaskRecord,
};
use crate::scope::Scope;

const RECORDS: TableDefinition<&str, &[u8]> = TableDefinition::new("records");
const BY_SCOPE: TableDefinition<(&str, u64), &str> = TableDefinition::new("by_scope");
const BY_EXPIRY: TableDefinition<(u64, &str), ()> = TableDefinition::new("by_expiry");
const COUNTS: TableDefinition<&str, u64> = TableDefinition::new("counts");
const META: TableDefinition<&str, u64> = TableDefinition::new("meta");

/// The layout version written into `meta`; a file of another version is
/// refused rather than misread.
const FORMAT: u64 = 1;

/// redb's page cache. The ledger's working set is small (live tasks), and
/// the default would let a busy shim hold far more than it needs.
const CACHE_BYTES: usize = 16 * 1024 * 1024;

/// Task records in a redb file. See the module docs.
pub struct DiskLedger {
    /// Shared with the blocking-pool threads that run the transactions.
    disk: std::sync::Arc<Disk>,
}

/// The file and its settings, used from the blocking pool.
struct Disk {
    /// `None` after an I/O error that redb wants the file reopened for
    /// (a full disk, say): the next call reopens it.
    db: std::sync::RwLock<Option<Database>>,
    path: PathBuf,
    per_scope_cap: usize,
}

impl std::fmt::Debug for DiskLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiskLedger")
            .field("path", &self.disk.path)
            .field("per_scope_cap", &self.disk.per_scope_cap)
            .finish_non_exhaustive()
    }
}

fn storage(e: impl Into<redb::Error>) -> LedgerError {
    let e = e.into();
    if matches!(e, redb::Error::PreviousIo) {
        return LedgerError::Storage(format!("{REOPEN}: {e}"));
    }
    LedgerError::Storage(e.to_string())
}

/// Starts the message of an error after which redb serves nothing more
/// until the file is reopened.
const REOPEN: &str = "an earlier write failed (the ledger is reopened for the next request)";

/// What a panic inside redb said, for the error that stands in for it.
fn panic_text(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("a panic")
}

/// Opens the file, checking every page: a file damaged outside redb is
/// refused (`Corrupted`) where a plain open may panic, or panic later.
fn open_database(path: &Path) -> Result<Database, LedgerError> {
    let opened = std::panic::catch_unwind(|| {
        Database::builder()
            .set_cache_size(CACHE_BYTES)
            .set_check_integrity_on_open(true)
            .create(path)
    });
    match opened {
        Ok(Ok(db)) => Ok(db),
        Ok(Err(redb::DatabaseError::DatabaseAlreadyOpen)) => Err(LedgerError::Storage(format!(
            "ledger {} is in use by another process (one shim per ledger file)",
            path.display()
        ))),
        Ok(Err(e)) => Err(LedgerError::Storage(format!(
            "cannot open ledger {}: {e}",
            path.display()
        ))),
        Err(p) => Err(LedgerError::Storage(format!(
            "cannot open ledger {}: the file is damaged ({})",
            path.display(),
            panic_text(&*p)
        ))),
    }
}

/// The ledger's tables inside one write transaction.
struct Tables<'t> {
    records: Table<'t, &'static str, &'static [u8]>,
    by_scope: Table<'t, (&'static str, u64), &'static str>,
    by_expiry: Table<'t, (u64, &'static str), ()>,
    counts: Table<'t, &'static str, u64>,
    meta: Table<'t, &'static str, u64>,
}

impl<'t> Tables<'t> {
    fn open(txn: &'t redb::WriteTransaction) -> Result<Self, LedgerError> {
        Ok(Tables {
            records: txn.open_table(RECORDS).map_err(storage)?,
            by_scope: txn.open_table(BY_SCOPE).map_err(storage)?,
            by_expiry: txn.open_table(BY_EXPIRY).map_err(storage)?,
            counts: txn.open_table(COUNTS).map_err(storage)?,
            meta: txn.open_table(META).map_err(storage)?,
        })
    }

    fn read(&self, id: &str) -> Result<Option<Stored>, LedgerError> {
        match self.records.get(id).map_err(storage)? {
            Some(g) => Stored::decode(g.value()).map(Some),
            None => Ok(None),
        }
    }

    fn count(&self, scope: &str) -> Result<u64, LedgerError> {
        Ok(self
            .counts
            .get(scope)
            .map_err(storage)?
            .map_or(0, |g| g.value()))
    }

    /// Drops every record expired at `now`, then answers (as the inner
    /// result) whether `scope` has room for one more under `cap`.
    fn room_after_evicting(
        &mut self,
        scope: &Scope,
        now: Millis,
        cap: usize,
    ) -> Result<Result<(), LedgerError>, LedgerError> {
        self.evict(now)?;
        Ok(super::room(self.count(scope.key())? as usize, cap))
    }

    fn next_seq(&mut self) -> Result<u64, LedgerError> {
        let seq = self
            .meta
            .get("seq")
            .map_err(storage)?
            .map_or(0, |g| g.value())
            + 1;
        self.meta.insert("seq", seq).map_err(storage)?;
        Ok(seq)
    }

    /// Writes `s` under `id` with its index entries (a new record).
    fn put(&mut self, id: &str, s: &Stored) -> Result<(), LedgerError> {
        self.records
            .insert(id, s.encode()?.as_slice())
            .map_err(storage)?;
        self.by_scope
            .insert((s.scope.as_str(), s.seq), id)
            .map_err(storage)?;
        if let Some(t) = s.expires_at {
            self.by_expiry.insert((t, id), ()).map_err(storage)?;
        }
        let n = self.count(&s.scope)?;
        self.counts
            .insert(s.scope.as_str(), n + 1)
            .map_err(storage)?;
        Ok(())
    }

    /// Removes `id` and its index entries; false if there was none.
    fn remove(&mut self, id: &str) -> Result<bool, LedgerError> {
        let Some(s) = self.read(id)? else {
            return Ok(false);
        };
        self.records.remove(id).map_err(storage)?;
        self.by_scope
            .remove((s.scope.as_str(), s.seq))
            .map_err(storage)?;
        if let Some(t) = s.expires_at {
            self.by_expiry.remove((t, id)).map_err(storage)?;
        }
        match self.count(&s.scope)? {
            0 | 1 => self.counts.remove(s.scope.as_str()).map(drop),
            n => self.counts.insert(s.scope.as_str(), n - 1).map(drop),
        }
        .map_err(storage)?;
        Ok(true)
    }

    /// Drops every record expired at `now`.
    fn evict(&mut self, now: Millis) -> Result<usize, LedgerError> {
        let dead = {
            let upper = (now.saturating_add(1), "");
            let mut dead = Vec::new();
            for entry in self.by_expiry.range(..upper).map_err(storage)? {
                let (k, _) = entry.map_err(storage)?;
                dead.push(k.value().1.to_owned());
            }
            dead
        };
        for id in &dead {
            self.remove(id)?;
        }
        Ok(dead.len())
    }

    fn ids_of_scope(&self, scope: &str) -> Result<Vec<String>, LedgerError> {
        let mut ids = Vec::new();
        for entry in self
            .by_scope
            .range((scope, 0)..=(scope, u64::MAX))
            .map_err(storage)?
        {
            let (_, v) = entry.map_err(storage)?;
            ids.push(v.value().to_owned());
        }
        Ok(ids)
    }
}

impl DiskLedger {
    /// Opens (or creates) the ledger file at `path`, holding at most
    /// `per_scope_cap` live tasks per scope. Fails when the file cannot be
    /// opened, is not a ledger, or another process has it open.
    pub fn open(path: &Path, per_scope_cap: usize) -> Result<Self, LedgerError> {
        let db = open_database(path)?;
        let ledger = Disk {
            db: std::sync::RwLock::new(Some(db)),
            path: path.to_owned(),
            per_scope_cap,
        };
        ledger.write(|t| {
            let format = t.meta.get("format").map_err(storage)?.map(|g| g.value());
            check_format(t, format, path)
        })?;
        tracing::info!(path = %path.display(), records = ledger.len()?, "durable ledger opened");
        Ok(DiskLedger {
            disk: std::sync::Arc::new(ledger),
        })
    }
}

fn check_format(t: &mut Tables<'_>, format: Option<u64>, path: &Path) -> Result<(), LedgerError> {
    match format {
        None => t.meta.insert("format", FORMAT).map(drop).map_err(storage),
        Some(FORMAT) => Ok(()),
        Some(other) => Err(LedgerError::Storage(format!(
            "ledger {} has format {other}, this shim reads format {FORMAT}",
            path.display()
        ))),
    }
}

impl DiskLedger {
    /// The file this ledger lives in.
    pub fn path(&self) -> &Path {
        &self.disk.path
    }

    /// Forgets every scope that ends with its session (a stdio client's,
    /// an anonymous HTTP session's: [`Scope::ends_with_session`]) and
    /// nothing else; returns how many records went. After a restart nobody
    /// can reach those. Synchronous: it is meant for start-up, before any
    /// runtime runs.
    pub fn drop_session_scopes(&self) -> Result<usize, LedgerError> {
        let mut dropped = 0;
        for prefix in Scope::session_key_prefixes() {
            dropped += self.disk.drop_scopes_with_prefix(prefix)?;
        }
        Ok(dropped)
    }

    /// The stored record of `id`, whatever its scope or expiry, as much
    /// of it as `detail` asks.
    async fn read(&self, id: &str, detail: Detail) -> Result<Option<Stored>, LedgerError> {
        let id = id.to_owned();
        self.blocking(move |d| d.read(&id, detail)).await
    }

    /// Runs `f` on the file on tokio's blocking pool: a transaction reads
    /// the file and a commit waits for an fsync, neither on a runtime
    /// thread.
    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Disk) -> Result<T, LedgerError> + Send + 'static,
    ) -> Result<T, LedgerError> {
        let disk = self.disk.clone();
        tokio::task::spawn_blocking(move || f(&disk))
            .await
            .unwrap_or_else(|e| {
                Err(LedgerError::Storage(format!(
                    "durable ledger call did not finish: {e}"
                )))
            })
    }
}

impl Disk {
    /// Runs `f` on the open database. A panic inside redb (a file damaged
    /// while in use) becomes an error, so the request that asked gets an
    /// answer; an error after which redb wants the file reopened closes
    /// it, and the next call reopens it.
    fn with_db<T>(
        &self,
        f: impl FnOnce(&Database) -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        let closed = self.db.read().unwrap_or_else(|p| p.into_inner()).is_none();
        if closed {
            let mut db = self.db.write().unwrap_or_else(|p| p.into_inner());
            if db.is_none() {
                *db = Some(open_database(&self.path)?);
                tracing::info!(path = %self.path.display(), "durable ledger reopened");
            }
        }
        let out = {
            let db = self.db.read().unwrap_or_else(|p| p.into_inner());
            let Some(db) = db.as_ref() else {
                return Err(LedgerError::Storage("the ledger is closed".into()));
            };
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(db))).unwrap_or_else(|p| {
                Err(LedgerError::Storage(format!(
                    "ledger {} is damaged ({})",
                    self.path.display(),
                    panic_text(&*p)
                )))
            })
        };
        if let Err(LedgerError::Storage(m)) = &out
            && m.starts_with(REOPEN)
        {
            tracing::warn!(path = %self.path.display(), "durable ledger closed after an I/O error; reopening on next use");
            *self.db.write().unwrap_or_else(|p| p.into_inner()) = None;
        }
        out
    }

    fn drop_scopes_with_prefix(&self, prefix: &str) -> Result<usize, LedgerError> {
        self.write(|t| {
            let mut scopes = Vec::new();
            for entry in t.counts.range(prefix..).map_err(storage)? {
                let (k, _) = entry.map_err(storage)?;
                let scope = k.value();
                if !scope.starts_with(prefix) {
                    break;
                }
                scopes.push(scope.to_owned());
            }
            let mut dropped = 0;
            for scope in scopes {
                for id in t.ids_of_scope(&scope)? {
                    dropped += usize::from(t.remove(&id)?);
                }
            }
            Ok(dropped)
        })
    }

    /// Runs `f` in one write transaction, committed if `f` succeeds.
    fn write<T>(
        &self,
        f: impl FnOnce(&mut Tables<'_>) -> Result<T, LedgerError>,
    ) -> Result<T, LedgerError> {
        self.with_db(|db| {
            let txn = db.begin_write().map_err(storage)?;
            let out = {
                let mut tables = Tables::open(&txn)?;
                f(&mut tables)?
            };
            txn.commit().map_err(storage)?;
            Ok(out)
        })
    }

    /// The record of `id`, whatever its scope or expiry, as much of it as
    /// `detail` asks.
    fn read(&self, id: &str, detail: Detail) -> Result<Option<Stored>, LedgerError> {
        self.with_db(|db| Self::read_in(db, id, detail))
    }

    fn read_in(db: &Database, id: &str, detail: Detail) -> Result<Option<Stored>, LedgerError> {
        let txn = db.begin_read().map_err(storage)?;
        let records = match txn.open_table(RECORDS) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(storage(e)),
        };
        let Some(g) = records.get(id).map_err(storage)? else {
            return Ok(None);
        };
        Stored::decode_for(g.value(), detail).map(Some)
    }

    /// `page` filled from `scope`'s records below position `before`.
    fn list_in(db: &Database, mut page: PageBuilder, before: Option<u64>, now: Millis) -> Listed {
        let txn = db.begin_read().map_err(storage)?;
        let (by_scope, records) = match (txn.open_table(BY_SCOPE), txn.open_table(RECORDS)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(redb::TableError::TableDoesNotExist(_)), _)
            | (_, Err(redb::TableError::TableDoesNotExist(_))) => return Ok(page.finish(false)),
            (Err(e), _) | (_, Err(e)) => return Err(storage(e)),
        };
        let scope = page.scope.key();
        let range = (scope, 0)..(scope, before.unwrap_or(u64::MAX));
        for entry in by_scope.range(range).map_err(storage)?.rev() {
            let (k, v) = entry.map_err(storage)?;
            let Some(g) = records.get(v.value()).map_err(storage)? else {
                continue;
            };
            let s = Stored::decode_without_payload(g.value())?;
            if s.expired(now) {
                continue;
            }
            if !page.has_room() {
                return Ok(page.finish(true));
            }
            page.push(k.value().1, s.into_record());
        }
        Ok(page.finish(false))
    }
}

impl Disk {
    fn check_room(&self, scope: &Scope, now: Millis) -> Result<(), LedgerError> {
        // The stored count includes expired records not yet swept: below
        // the cap it settles the question with a read; at the cap, a
        // write evicts before counting again (as insert does).
        let held = self.with_db(|db| {
            let txn = db.begin_read().map_err(storage)?;
            match txn.open_table(COUNTS) {
                Ok(t) => Ok(t
                    .get(scope.key())
                    .map_err(storage)?
                    .map_or(0, |g| g.value())),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(0),
                Err(e) => Err(storage(e)),
            }
        })?;
        if super::room(held as usize, self.per_scope_cap).is_ok() {
            return Ok(());
        }
        self.write(|t| t.room_after_evicting(scope, now, self.per_scope_cap))?
    }

    fn insert(&self, record: TaskRecord, now: Millis) -> Result<(), LedgerError> {
        self.write(|t| {
            if let Err(full) = t.room_after_evicting(&record.scope, now, self.per_scope_cap)? {
                return Ok(Err(full));
            }
            // Same id again replaces the old record.
            let id = record.id().to_owned();
            t.remove(&id)?;
            let seq = t.next_seq()?;
            t.put(&id, &Stored::new(seq, record))?;
            Ok(Ok(()))
        })?
    }

    /// Stores `after` in place of the record of `id` if that still reads
    /// as `before` (the change was applied off the blocking pool, to a
    /// record read in another transaction). `Ok(false)`: it changed
    /// meanwhile, or went.
    fn replace(
        &self,
        scope: &Scope,
        id: &str,
        now: Millis,
        before: &TaskRecord,
        after: TaskRecord,
    ) -> Result<bool, LedgerError> {
        self.write(|t| match t.read(id)? {
            Some(s) if s.alive_in(scope, now) => {
                let seq = s.seq;
                if s.into_record() != *before {
                    return Ok(false);
                }
                t.remove(id)?;
                t.put(id, &Stored::new(seq, after))?;
                Ok(true)
            }
            _ => Ok(false),
        })
    }

    fn drop_scope(&self, scope: &Scope) -> Result<(), LedgerError> {
        self.write(|t| {
            for id in t.ids_of_scope(scope.key())? {
                t.remove(&id)?;
            }
            Ok(())
        })
    }

    fn len(&self) -> Result<usize, LedgerError> {
        self.with_db(|db| {
            let txn = db.begin_read().map_err(storage)?;
            match txn.open_table(RECORDS) {
                Ok(t) => Ok(t.len().map_err(storage)? as usize),
                Err(redb::TableError::TableDoesNotExist(_)) => Ok(0),
                Err(e) => Err(storage(e)),
            }
        })
    }
}

/// An `update` reads, applies the change here and stores it in a second
/// transaction if the record is unchanged: the change is the caller's
/// borrowed closure, which cannot go to the blocking pool.
const UPDATE_RETRIES: usize = 64;

#[async_trait::async_trait]
impl TaskLedger for DiskLedger {
    fn store_name(&self) -> &'static str {
        "disk"
    }

    async fn check_room(&self, scope: &Scope, now: Millis) -> Result<(), LedgerError> {
        let scope = scope.clone();
        self.blocking(move |d| d.check_room(&scope, now)).await
    }

    async fn insert(&self, record: TaskRecord, now: Millis) -> Result<(), LedgerError> {
        self.blocking(move |d| d.insert(record, now)).await
    }

    async fn fetch(&self, scope: &Scope, task_id: &str, now: Millis, detail: Detail) -> Found {
        let s = self.read(task_id, detail).await?;
        Ok(s.filter(|s| s.alive_in(scope, now))
            .map(Stored::into_record))
    }

    async fn scope_of(&self, task_id: &str, now: Millis) -> Result<Option<Scope>, LedgerError> {
        let s = self.read(task_id, Detail::TaskOnly).await?;
        Ok(s.filter(|s| !s.expired(now))
            .map(|s| Scope::from_key(&s.scope)))
    }

    async fn update(&self, scope: &Scope, task_id: &str, now: Millis, change: Change<'_>) -> Found {
        for _ in 0..UPDATE_RETRIES {
            let Some(before) = self.get(scope, task_id, now).await? else {
                return Ok(None);
            };
            let (after, changed) = apply_change(&before, change);
            if !changed {
                return Ok(Some(after));
            }
            let (scope, id, stored) = (scope.clone(), task_id.to_owned(), after.clone());
            if self
                .blocking(move |d| d.replace(&scope, &id, now, &before, stored))
                .await?
            {
                return Ok(Some(after));
            }
        }
        Err(LedgerError::Storage(format!(
            "task {task_id} kept changing under {UPDATE_RETRIES} updates"
        )))
    }

    async fn list(&self, scope: &Scope, cursor: Option<&str>, limit: usize, now: Millis) -> Listed {
        let (page, before) = PageBuilder::start("d1", scope, cursor, limit)?;
        self.blocking(move |d| d.with_db(|db| Disk::list_in(db, page, before, now)))
            .await
    }

    async fn drop_scope(&self, scope: &Scope) -> Result<(), LedgerError> {
        let scope = scope.clone();
        self.blocking(move |d| d.drop_scope(&scope)).await
    }

    async fn evict_expired(&self, now: Millis) -> Result<usize, LedgerError> {
        self.blocking(move |d| d.write(|t| t.evict(now))).await
    }

    async fn len(&self) -> Result<usize, LedgerError> {
        self.blocking(|d| d.len()).await
    }
}
