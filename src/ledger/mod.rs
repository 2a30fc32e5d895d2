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

#[cfg(test)]
mod contract;

pub use disk::DiskLedger;
pub use memory::MemoryLedger;
pub use shared::RedisLedger;

use crate::wire::legacy;
use crate::wire::modern::Payload;

/// Milliseconds on the ledger's clock (monotonic, supplied by the caller so
/// the ledger itself reads no clock).
pub type Millis = u64;

/// What the shim remembers of one task.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    /// Who may see the task.
    pub scope: String,
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
    pub fn new(scope: String, task: legacy::Task, expires_at: Option<Millis>) -> Self {
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

/// Storage of task records, scoped.
///
/// Implementations are shared by all sessions of a shim process, so every
/// method takes `&self`. Calls are synchronous and short: in memory, on
/// a local file, or one round trip to a server (the Redis ledger, which
/// hands its runtime worker's other work elsewhere first, with
/// `tokio::task::block_in_place`, and bounds each call by its I/O
/// timeout); engines call them while holding no other lock.
pub trait TaskLedger: Send + Sync + std::fmt::Debug {
    /// Adds a new record. Fails with [`LedgerError::ScopeFull`] when the
    /// scope is at its cap (after expired records were dropped).
    fn insert(&self, record: TaskRecord, now: Millis) -> Result<(), LedgerError>;

    /// Whether `scope` can take one more task now: [`LedgerError::ScopeFull`]
    /// when it holds its cap of live ones. Asked before a call that may
    /// create a task goes upstream, so a client at its cap is refused
    /// before the server starts work. Advisory: two calls may both pass,
    /// and [`TaskLedger::insert`] still enforces the cap.
    fn check_room(&self, scope: &str, now: Millis) -> Result<(), LedgerError> {
        let _ = (scope, now);
        Ok(())
    }

    /// The record of `task_id` if it exists, belongs to `scope` and has not
    /// expired. Anything else is `None`, indistinguishably.
    fn get(&self, scope: &str, task_id: &str, now: Millis) -> Option<TaskRecord>;

    /// [`TaskLedger::get`] that tells a storage failure from a miss, for
    /// the answers a client acts on: "unknown task" makes a client drop
    /// its task, so an unreachable store must say `-32603` instead. Stores
    /// that cannot fail (memory) keep this default.
    fn try_get(
        &self,
        scope: &str,
        task_id: &str,
        now: Millis,
    ) -> Result<Option<TaskRecord>, LedgerError> {
        Ok(self.get(scope, task_id, now))
    }

    /// [`TaskLedger::try_get`] for callers that need the task and its
    /// flags, not its cached outcome: the record comes back with
    /// [`Payload::None`] whatever is
    /// cached, so a `tasks/get` of a task that finished with a 1 MiB
    /// result does not copy (or, where stored as text, parse) that result.
    /// Stores that keep the payload apart override this; the default reads
    /// the whole record and drops the payload.
    fn try_get_task(
        &self,
        scope: &str,
        task_id: &str,
        now: Millis,
    ) -> Result<Option<TaskRecord>, LedgerError> {
        Ok(self.try_get(scope, task_id, now)?.map(|mut r| {
            r.payload = crate::wire::modern::Payload::None;
            r
        }))
    }

    /// [`TaskLedger::update`] that tells a storage failure from a miss
    /// (see [`TaskLedger::try_get`]).
    fn try_update(
        &self,
        scope: &str,
        task_id: &str,
        now: Millis,
        change: &mut dyn FnMut(&mut TaskRecord),
    ) -> Result<Option<TaskRecord>, LedgerError> {
        Ok(self.update(scope, task_id, now, change))
    }

    /// Whether [`TaskLedger::get`] would find the record, without copying it.
    fn contains(&self, scope: &str, task_id: &str, now: Millis) -> bool {
        self.get(scope, task_id, now).is_some()
    }

    /// Applies `change` to the record if [`TaskLedger::get`] would return it;
    /// returns the updated record.
    fn update(
        &self,
        scope: &str,
        task_id: &str,
        now: Millis,
        change: &mut dyn FnMut(&mut TaskRecord),
    ) -> Option<TaskRecord>;

    /// A page of `scope`'s records, newest first, `limit` at most, each
    /// without its payload, as [`TaskLedger::try_get_task`] reads it: a
    /// page lists tasks, and decoding fifty cached results to list them
    /// cost more than the rest of the page.
    fn list(
        &self,
        scope: &str,
        cursor: Option<&str>,
        limit: usize,
        now: Millis,
    ) -> Result<Page, LedgerError>;

    /// Whose task `task_id` is: its scope, if the record is alive. For
    /// the shim's own checks, never for a client's eyes: the HTTP front
    /// asks it on the same-revision path, where requests bypass the
    /// ledger, so that one scope's task id never reaches the upstream on
    /// another scope's behalf.
    fn scope_of(&self, task_id: &str, now: Millis) -> Result<Option<String>, LedgerError>;

    /// Forgets every record of `scope` (session deleted).
    fn drop_scope(&self, scope: &str);

    /// Drops expired records; returns how many.
    fn evict_expired(&self, now: Millis) -> usize;

    /// How many records are held in all.
    fn len(&self) -> usize;

    /// True when no record is held.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether other shim instances may be writing this ledger at the same
    /// time (a shared store). A record this instance did not make may then
    /// belong to a task held by another instance's upstream session, which
    /// this instance's upstream rightly does not know.
    fn shared_with_other_instances(&self) -> bool {
        false
    }
}

/// Logs a storage failure of `ledger` where the trait has no way to report
/// it, and carries on with `fallback` (the out-of-process ledgers' `get`,
/// `update`, `drop_scope`, `evict_expired`, `len`).
fn logged<T>(ledger: &str, what: &str, r: Result<T, LedgerError>, fallback: T) -> T {
    r.unwrap_or_else(|e| {
        tracing::error!(error = %e, "{ledger}: {what} failed");
        fallback
    })
}

/// An opaque `tasks/list` cursor: the position `seq` in `scope`, tagged with
/// the ledger kind that made it. Binding it to its scope makes one client's
/// cursor useless to another; the tag keeps one ledger from reading
/// another's positions. The scope goes in as a digest: an anonymous HTTP
/// session's scope is its session id, the one thing that admits its
/// requests, and a cursor seen in a log or a trace must not hand it out.
fn encode_cursor(tag: &str, scope: &str, seq: u64) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(format!("{tag}:{seq}:{}", scope_digest(scope)))
}

/// 128 bits of SHA-256 of `scope`, in hex: enough to tell scopes apart,
/// and nothing to read a scope (a 128-bit random session id) back from.
fn scope_digest(scope: &str) -> String {
    use sha2::Digest;
    let hash = sha2::Sha256::digest(scope.as_bytes());
    hash[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// The position in a cursor made by [`encode_cursor`] with the same `tag`
/// and `scope`; anything else is [`LedgerError::BadCursor`].
fn decode_cursor(tag: &str, scope: &str, cursor: &str) -> Result<u64, LedgerError> {
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
        let scope = "session:8d2f0c3a9b7e41d6a5c0f1e2d3b4a596";
        let cursor = encode_cursor("v1", scope, 42);
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&cursor)
            .unwrap();
        let text = String::from_utf8(raw).unwrap();
        assert!(!text.contains("8d2f0c3a9b7e41d6"), "{text}");
        assert_eq!(decode_cursor("v1", scope, &cursor).unwrap(), 42);
        for (tag, other) in [("v1", "session:other"), ("d1", scope)] {
            assert!(matches!(
                decode_cursor(tag, other, &cursor),
                Err(LedgerError::BadCursor)
            ));
        }
    }
}
