//! The task ledger: which tasks belong to which scope (session or
//! principal), what was last seen of them, cached payloads and cancel pins.
//!
//! ```text
//!                 tasks/cancel (pinned)
//!   working ──────────────────────────────▶ cancelled   (terminal, sticky)
//!     │  ▲ input answered                       ▲
//!     ▼  │                                      │ pinned cancel wins over
//!   input_required ─────────────────────────────┘ whatever upstream says
//!     │
//!     ├──▶ completed   (result cached; isError → legacy "failed")
//!     └──▶ failed      (JSON-RPC error cached)
//! ```
//!
//! A record is visible only through its own scope: a lookup from another
//! scope is exactly a miss, so foreign and unknown ids cannot be told apart.
//! Records expire at `created + ttl` (the upstream's `ttlMs`), and each
//! scope holds at most a configured number of records.

pub mod disk;
pub mod memory;
pub mod shared;
mod stored;
pub(crate) mod timed;

#[cfg(test)]
mod contract;

pub use disk::DiskLedger;
pub use memory::MemoryLedger;
pub use shared::RedisLedger;

use crate::scope::Scope;
use crate::wire::legacy;
use crate::wire::modern::Payload;

/// The attribute [`TaskLedger`] implementations are written with (the
/// `async-trait` crate's), for a ledger of one's own without depending on
/// that crate directly.
pub use async_trait::async_trait;

/// Milliseconds on the ledger's clock (monotonic, supplied by the caller so
/// the ledger itself reads no clock).
pub type Millis = u64;

/// What the shim remembers of one task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// Who may see the task.
    pub scope: Scope,
    /// The task as last seen, in legacy form (the pinned cancel applied).
    pub task: legacy::Task,
    /// The cached outcome (result, error) once terminal, or pending input.
    pub payload: Payload,
    /// A client cancelled it: it reports `cancelled` from now on.
    pub cancel_pinned: bool,
    /// Minted by the shim for a plain upstream answer (no upstream task).
    pub synthetic: bool,
    /// When the record stops existing (`None`: no expiry).
    pub expires_at: Option<Millis>,
}

impl TaskRecord {
    /// A task a server has just created, as the shim first records it for
    /// `scope`: no outcome yet, no cancel pinned, not synthetic.
    pub fn new(scope: Scope, task: legacy::Task, expires_at: Option<Millis>) -> Self {
        TaskRecord {
            scope,
            task,
            payload: Payload::None,
            cancel_pinned: false,
            synthetic: false,
            expires_at,
        }
    }

    /// The task id.
    pub fn id(&self) -> &str {
        &self.task.task_id
    }

    /// True once the task can change no more, as far as the shim knows.
    pub fn is_terminal(&self) -> bool {
        self.cancel_pinned || self.task.status.is_terminal()
    }
}

/// Whether a record that expires at `expires_at` is gone at `now`: every
/// store's one rule.
fn expired(expires_at: Option<Millis>, now: Millis) -> bool {
    expires_at.is_some_and(|t| t <= now)
}

/// How much of a record [`TaskLedger::fetch`] brings back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// The whole record, its cached outcome included ([`TaskLedger::get`]).
    Full,
    /// The task and its flags, with [`Payload::None`] whatever is cached
    /// ([`TaskLedger::get_task`]).
    TaskOnly,
}

/// What a lookup of one record answers: the record, `Ok(None)` for a
/// miss, or the store's failure (never a miss).
pub type Found = Result<Option<TaskRecord>, LedgerError>;

/// What [`TaskLedger::list`] answers: a page, or why there is none.
pub type Listed = Result<Page, LedgerError>;

/// What [`TaskLedger::is_current`] answers: whether a record still stands
/// as read, or the store's failure.
pub type Current = Result<bool, LedgerError>;

/// One page of a scope's tasks, newest first.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The records on this page.
    pub records: Vec<TaskRecord>,
    /// Opaque cursor of the next page, if any.
    pub next_cursor: Option<String>,
}

/// Why a ledger call failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LedgerError {
    /// The cursor was not made by this ledger (or is from another scope).
    #[error("invalid cursor")]
    BadCursor,
    /// The scope already holds its maximum number of tasks.
    #[error("task limit reached: at most {0} tasks per client")]
    ScopeFull(usize),
    /// The backing store failed.
    #[error("ledger storage failed: {0}")]
    Storage(String),
    /// The backing store (a server) did not answer a call in time.
    #[error("ledger storage failed: the {store} call timed out (no reply within {after:?})")]
    TimedOut {
        /// Which store: `redis`.
        store: &'static str,
        /// The I/O timeout that ran out.
        after: std::time::Duration,
    },
}

impl From<LedgerError> for crate::error::ShimError {
    fn from(e: LedgerError) -> Self {
        match e {
            LedgerError::BadCursor => crate::error::ShimError::InvalidParams(e.to_string()),
            LedgerError::ScopeFull(_) | LedgerError::Storage(_) | LedgerError::TimedOut { .. } => {
                crate::error::ShimError::Internal(e.to_string())
            }
        }
    }
}

/// A change to one record, as [`TaskLedger::update`] applies it. It may
/// run more than once (a shared store reads and applies it again when
/// another instance changed the record meanwhile), so it must derive the
/// new record from the one it is given.
pub type Change<'a> = &'a mut (dyn FnMut(&mut TaskRecord) + Send);

/// A change [`TaskLedger::update_kept`] may keep to apply later: owned,
/// and applied as many times as the store needs.
pub type KeptChange = std::sync::Arc<dyn Fn(&mut TaskRecord) + Send + Sync>;

/// Storage of task records, scoped.
///
/// Implementations are shared by all sessions of a shim process, so every
/// method takes `&self`. Every call is `async` and never blocks the
/// runtime thread it is awaited on, whatever the runtime's flavour: the
/// memory ledger answers at once, the disk ledger runs its transactions
/// on tokio's blocking pool, the Redis ledger talks to its server over an
/// async connection, each call bounded by its I/O timeout. Engines await
/// them holding no lock.
///
/// Every call that reads or changes a record can fail with
/// [`LedgerError::Storage`] or [`LedgerError::TimedOut`] (`-32603` for a
/// client): the store could not be asked. A failure is never a miss.
/// "Unknown task" makes a client drop its task, so a caller that cannot
/// tell whether a record exists answers with the error instead.
#[async_trait::async_trait]
pub trait TaskLedger: Send + Sync + std::fmt::Debug {
    /// Adds a new record. Fails with [`LedgerError::ScopeFull`] when the
    /// scope is at its cap (after expired records were dropped).
    async fn insert(&self, record: TaskRecord, now: Millis) -> Result<(), LedgerError>;

    /// Whether `scope` can take one more task now: [`LedgerError::ScopeFull`]
    /// when it holds its cap of live ones. Asked before a call that may
    /// create a task goes upstream, so a client at its cap is refused
    /// before the server starts work. Advisory: two calls may both pass,
    /// and [`TaskLedger::insert`] still enforces the cap.
    async fn check_room(&self, scope: &Scope, now: Millis) -> Result<(), LedgerError>;

    /// The record of `task_id` if it exists, belongs to `scope` and has not
    /// expired (`Ok(None)` for anything else, indistinguishably), as much
    /// of it as `detail` asks. [`Detail::TaskOnly`] is for callers that
    /// need the task and its flags, not its cached outcome: a `tasks/get`
    /// of a task that finished with a 1 MiB result must not copy (or,
    /// where stored as text, parse) that result.
    async fn fetch(&self, scope: &Scope, task_id: &str, now: Millis, detail: Detail) -> Found;

    /// The whole record of `task_id` ([`TaskLedger::fetch`], [`Detail::Full`]).
    async fn get(&self, scope: &Scope, task_id: &str, now: Millis) -> Found {
        self.fetch(scope, task_id, now, Detail::Full).await
    }

    /// The record of `task_id` without its cached outcome
    /// ([`TaskLedger::fetch`], [`Detail::TaskOnly`]).
    async fn get_task(&self, scope: &Scope, task_id: &str, now: Millis) -> Found {
        self.fetch(scope, task_id, now, Detail::TaskOnly).await
    }

    /// Whether `rec` is what [`TaskLedger::get_task`] would read of its
    /// task from `scope` now: `Ok(false)` when the record changed, expired,
    /// or is not `scope`'s. For a caller that keeps a record it read and
    /// polls the same task again: a store that can compare in place
    /// (the memory ledger) answers without copying the record out. The
    /// default reads the record and compares.
    async fn is_current(&self, scope: &Scope, rec: &TaskRecord, now: Millis) -> Current {
        Ok(self.get_task(scope, rec.id(), now).await?.as_ref() == Some(rec))
    }

    /// [`TaskLedger::is_current`] answered without waiting, by a store
    /// that can (the memory ledger: a look-up under its lock); `None` from
    /// one that has to ask elsewhere, and then the caller awaits
    /// [`TaskLedger::is_current`]. A client polling a task that tells
    /// nothing new asks this on every poll: answered here, the poll goes
    /// upstream without a future built, boxed and freed for it.
    fn is_current_now(&self, _scope: &Scope, _rec: &TaskRecord, _now: Millis) -> Option<Current> {
        None
    }

    /// Applies `change` to the record if [`TaskLedger::get`] would return
    /// it, and stores the result (a change that changes nothing writes
    /// nothing); returns the record as it now stands, `Ok(None)` for a
    /// miss. The scope and id of a record never change, whatever `change`
    /// does to them. On an error nothing was stored as far as the caller
    /// can know, except where the store says otherwise (the Redis ledger
    /// keeps a change it could not store and stores it when the server is
    /// back, see [`RedisLedger`]).
    async fn update(&self, scope: &Scope, task_id: &str, now: Millis, change: Change<'_>) -> Found;

    /// [`TaskLedger::update`] for a change that must not be lost to a
    /// store outage: what the upstream said of a task (its new status, its
    /// outcome). It fails as `update` does, but a store that can keep the
    /// change (the Redis ledger) keeps one it could not store, stores it
    /// when it can, and applies it before any later call on the task, so
    /// a read once the store is back shows it. The default is `update`.
    async fn update_kept(&self, scope: &Scope, id: &str, now: Millis, change: KeptChange) -> Found {
        self.update(scope, id, now, &mut |r| change(r)).await
    }

    /// A page of `scope`'s records, newest first, `limit` at most, each
    /// without its payload, as [`TaskLedger::get_task`] reads it: a page
    /// lists tasks, and decoding fifty cached results to list them cost
    /// more than the rest of the page.
    async fn list(&self, scope: &Scope, cursor: Option<&str>, limit: usize, now: Millis) -> Listed;

    /// Whose task `task_id` is: its scope, if the record is alive. For
    /// the shim's own checks, never for a client's eyes: the HTTP front
    /// asks it on the same-revision path, where requests bypass the
    /// ledger, so that one scope's task id never reaches the upstream on
    /// another scope's behalf.
    async fn scope_of(&self, task_id: &str, now: Millis) -> Result<Option<Scope>, LedgerError>;

    /// Forgets every record of `scope` (session deleted).
    async fn drop_scope(&self, scope: &Scope) -> Result<(), LedgerError>;

    /// Drops expired records; returns how many.
    async fn evict_expired(&self, now: Millis) -> Result<usize, LedgerError>;

    /// How many records are held in all (expired ones until swept).
    async fn len(&self) -> Result<usize, LedgerError>;

    /// True when no record is held.
    async fn is_empty(&self) -> Result<bool, LedgerError> {
        Ok(self.len().await? == 0)
    }

    /// Whether other shim instances may be writing this ledger at the same
    /// time (a shared store). A record this instance did not make may then
    /// belong to a task held by another instance's upstream session, which
    /// this instance's upstream rightly does not know.
    fn shared_with_other_instances(&self) -> bool {
        false
    }

    /// The store's name in `/metrics` (the `store` label of
    /// `mcp_shim_ledger_operation_duration_seconds`): `memory`, `disk`,
    /// `redis`, or `custom` for a ledger of your own.
    fn store_name(&self) -> &'static str {
        "custom"
    }
}

/// [`LedgerError::ScopeFull`] when a scope that holds `held` live records
/// is at `cap`: the one cap rule of every store, before an insert and in
/// [`TaskLedger::check_room`].
fn room(held: usize, cap: usize) -> Result<(), LedgerError> {
    if held >= cap {
        return Err(LedgerError::ScopeFull(cap));
    }
    Ok(())
}

/// One page of a `tasks/list` being filled, newest first: every store
/// walks its scope index from the cursor's position down and offers each
/// live record here, until the page says it is full.
struct PageBuilder {
    /// The store's cursor tag (see [`encode_cursor`]).
    tag: &'static str,
    scope: Scope,
    limit: usize,
    records: Vec<TaskRecord>,
    /// The sequence number of the last record taken: the next page starts
    /// below it.
    last_seq: Option<u64>,
}

impl PageBuilder {
    /// A page of at most `limit` records of `scope`; the position of
    /// `cursor` (one made by the store of `tag` for `scope`), if any, is
    /// where the walk starts (below it).
    fn start(
        tag: &'static str,
        scope: &Scope,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<(Self, Option<u64>), LedgerError> {
        let before = cursor.map(|c| decode_cursor(tag, scope, c)).transpose()?;
        let page = PageBuilder {
            tag,
            scope: scope.clone(),
            limit,
            records: Vec::with_capacity(limit.min(256)),
            last_seq: None,
        };
        Ok((page, before))
    }

    /// Whether another record fits: false once the page is full, when a
    /// live record still offered means there is a next page.
    fn has_room(&self) -> bool {
        self.records.len() < self.limit
    }

    /// Takes the record at `seq` (the caller asked [`Self::has_room`]).
    fn push(&mut self, seq: u64, record: TaskRecord) {
        self.last_seq = Some(seq);
        self.records.push(record);
    }

    /// The page; `more`: a live record was left over, so it gets a cursor.
    fn finish(self, more: bool) -> Page {
        let next_cursor = match (more, self.last_seq) {
            (true, Some(seq)) => Some(encode_cursor(self.tag, &self.scope, seq)),
            _ => None,
        };
        Page {
            records: self.records,
            next_cursor,
        }
    }
}

/// An opaque `tasks/list` cursor: the position `seq` in `scope`, tagged with
/// the ledger kind that made it. Binding it to its scope makes one client's
/// cursor useless to another; the tag keeps one ledger from reading
/// another's positions. The scope goes in as a digest: an anonymous HTTP
/// session's scope is its session id, the one thing that admits its
/// requests, and a cursor seen in a log or a trace must not hand it out.
fn encode_cursor(tag: &str, scope: &Scope, seq: u64) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(format!("{tag}:{seq}:{}", scope_digest(scope)))
}

/// 128 bits of SHA-256 of `scope`, in hex: enough to tell scopes apart,
/// and nothing to read a scope (a 128-bit random session id) back from.
fn scope_digest(scope: &Scope) -> String {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(scope.key().as_bytes());
    hash[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The position in a cursor made by [`encode_cursor`] with the same `tag`
/// and `scope`; anything else is [`LedgerError::BadCursor`].
fn decode_cursor(tag: &str, scope: &Scope, cursor: &str) -> Result<u64, LedgerError> {
    use base64::Engine;
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .map_err(|_| LedgerError::BadCursor)?;
    let text = String::from_utf8(raw).map_err(|_| LedgerError::BadCursor)?;
    let rest = text
        .strip_prefix(tag)
        .and_then(|r| r.strip_prefix(':'))
        .ok_or(LedgerError::BadCursor)?;
    let (seq, cursor_scope) = rest.split_once(':').ok_or(LedgerError::BadCursor)?;
    if cursor_scope != scope_digest(scope) {
        return Err(LedgerError::BadCursor);
    }
    seq.parse().map_err(|_| LedgerError::BadCursor)
}

#[cfg(test)]
mod cursor_tests {
    use super::*;

    /// An anonymous HTTP session's scope is its session id: its cursors
    /// must not carry it (a reviewer took a session over from one).
    #[test]
    fn a_cursor_does_not_reveal_its_scope() {
        use base64::Engine;
        let scope = &Scope::session("8d2f0c3a9b7e41d6a5c0f1e2d3b4a596");
        let cursor = encode_cursor("v1", scope, 42);
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&cursor)
            .unwrap();
        let text = String::from_utf8(raw).unwrap();
        assert!(!text.contains("8d2f0c3a9b7e41d6"), "{text}");
        assert_eq!(decode_cursor("v1", scope, &cursor).unwrap(), 42);
        for (tag, other) in [("v1", &Scope::session("other")), ("d1", scope)] {
            assert!(matches!(
                decode_cursor(tag, other, &cursor),
                Err(LedgerError::BadCursor)
            ));
        }
    }
}
