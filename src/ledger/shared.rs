//! The shared ledger (`--ledger redis://…`): the contract of
//! [`MemoryLedger`](super::MemoryLedger) kept in Redis, so that several shim
//! instances behind one load balancer serve each principal's tasks from any
//! instance (docs/scaling.md).
//!
//! ```text
//!   {p}:rec:{id}       string  JSON of the record (the same encoding as
//!                              the disk ledger's)
//!   {p}:scope:{scope}  zset    id → seq      newest-first pages: O(page)
//!   {p}:exp            zset    id → expires_at   eviction: O(expired)
//!   {p}:ids            set     every live id      `len` for /metrics
//!   {p}:seq            counter insertion order across instances
//! ```
//!
//! Changes that touch several keys are Lua scripts, which Redis runs
//! atomically: two instances inserting into one scope cannot both pass the
//! per-scope cap, and an eviction never leaves a half-removed record.
//! `update` reads the record, applies the caller's change, and stores the
//! result with a script that writes only if the record still reads as it
//! was read: a concurrent change by another instance makes it read and
//! apply again instead of overwriting (optimistic locking, bounded
//! retries, a short random pause before each).
//!
//! Expiry is the record's own `expires_at` compared with the caller's
//! clock, exactly as in the other ledgers: reads skip expired records and
//! [`TaskLedger::evict_expired`] (the sweeper) deletes them. Redis key
//! expiry is not used, because the shim's clock, not Redis's, is the
//! reference every instance shares with its clients.
//!
//! Every call is async, over one multiplexed connection (the `redis`
//! crate's tokio client): calls made at once are pipelined on it instead
//! of queueing for it, and no call blocks a runtime thread, on any
//! runtime flavour. A connection that failed is dropped and a new one
//! opened on the next call (a Redis restart costs the calls made while it
//! was down, no more). Each call, connecting included, is bounded by
//! [`IO_TIMEOUT`] (`tokio::time::timeout`), so a dead or frozen Redis
//! turns into errors (`-32603`), never into a hang.
//!
//! A change [`TaskLedger::update_kept`] could not store (what the
//! upstream said of a task: its status, its outcome) is kept in this
//! process, by task, oldest first (at most `MAX_UNFLUSHED` tasks' worth;
//! beyond that one is dropped, logged at `error`). A background task
//! stores them with a growing pause while Redis fails, and every call
//! on a task (a read, an update, a page of its scope) stores its kept
//! changes first, so a read once Redis is back never shows the record as
//! it was before them; while Redis still fails, that read fails
//! (`-32603`). A shim that stops before Redis is back loses them.
//!
//! The key layout assumes one Redis node (or one hash slot): the scripts
//! build key names from their arguments.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis::Script;
use redis::aio::MultiplexedConnection;

use super::stored::{Stored, apply_change};
use super::{
    Change, Detail, Found, KeptChange, LedgerError, Listed, Millis, PageBuilder, TaskLedger,
    TaskRecord,
};
use crate::scope::Scope;

/// Bound on every Redis call (and on opening a connection).
pub const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// `update` gives up after this many conflicting writes by other instances
/// (each retry means somebody else's change to the same task landed).
const UPDATE_RETRIES: usize = 64;

/// Before retrying a conflicting update: a random pause that grows with the
/// attempt (up to 50 µs × attempt), so writers racing for one task stop
/// colliding in lockstep. Without it, four instances updating one task
/// under load ran out of retries (seen in CI-like runs).
async fn backoff(attempt: usize) {
    let mut r = [0u8; 2];
    crate::ids::fill(&mut r);
    let micros = u64::from(u16::from_le_bytes(r)) % (50 * attempt as u64 + 1);
    tokio::time::sleep(Duration::from_micros(micros)).await;
}

/// Shared by the scripts: drop every record expired at `now` (ARGV[2]).
const EVICT_LUA: &str = r"
local function evict(p, now)
  local dead = redis.call('ZRANGEBYSCORE', p .. ':exp', '-inf', now)
  for _, id in ipairs(dead) do
    local raw = redis.call('GET', p .. ':rec:' .. id)
    if raw then
      local scope = cjson.decode(raw).scope
      redis.call('ZREM', p .. ':scope:' .. scope, id)
      redis.call('DEL', p .. ':rec:' .. id)
    end
    redis.call('SREM', p .. ':ids', id)
    redis.call('ZREM', p .. ':exp', id)
  end
  return #dead
end
local function remove(p, id)
  local raw = redis.call('GET', p .. ':rec:' .. id)
  if raw then
    local scope = cjson.decode(raw).scope
    redis.call('ZREM', p .. ':scope:' .. scope, id)
    redis.call('DEL', p .. ':rec:' .. id)
    redis.call('SREM', p .. ':ids', id)
    redis.call('ZREM', p .. ':exp', id)
  end
end
";

/// ARGV: prefix, now, scope, id, cap, seq, record JSON, expires_at or "".
/// Returns 1 when stored, 0 when the scope is full.
const INSERT_LUA: &str = r"
local p, now, scope, id = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
evict(p, now)
remove(p, id)
if redis.call('ZCARD', p .. ':scope:' .. scope) >= tonumber(ARGV[5]) then
  return 0
end
redis.call('SET', p .. ':rec:' .. id, ARGV[7])
redis.call('ZADD', p .. ':scope:' .. scope, ARGV[6], id)
redis.call('SADD', p .. ':ids', id)
if ARGV[8] ~= '' then
  redis.call('ZADD', p .. ':exp', ARGV[8], id)
end
return 1
";

/// ARGV: prefix, now. Returns how many records went.
const EVICT_ONLY_LUA: &str = r"
return evict(ARGV[1], ARGV[2])
";

/// ARGV: prefix, scope. Returns how many records went.
const DROP_SCOPE_LUA: &str = r"
local p = ARGV[1]
local key = p .. ':scope:' .. ARGV[2]
local ids = redis.call('ZRANGE', key, 0, -1)
for _, id in ipairs(ids) do
  redis.call('DEL', p .. ':rec:' .. id)
  redis.call('SREM', p .. ':ids', id)
  redis.call('ZREM', p .. ':exp', id)
end
redis.call('DEL', key)
return #ids
";

/// ARGV: record key, the record as read, the new record, expiry key, id,
/// expires_at or "". Returns 1 when stored, 0 when the record no longer
/// reads as it was read (changed, or gone).
const REPLACE_LUA: &str = r"
if redis.call('GET', ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('SET', ARGV[1], ARGV[3])
if ARGV[6] ~= '' then
  redis.call('ZADD', ARGV[4], ARGV[6], ARGV[5])
else
  redis.call('ZREM', ARGV[4], ARGV[5])
end
return 1
";

/// Task records in Redis, shared by every shim instance that names the
/// same server and key prefix. See the module docs.
///
/// ```no_run
/// use mcp_tasks_shim::ledger::{RedisLedger, TaskLedger};
/// # async fn f() -> Result<(), mcp_tasks_shim::ledger::LedgerError> {
/// let ledger = RedisLedger::open("redis://127.0.0.1:6379/0", "mcp-tasks-shim", 1000).await?;
/// println!("{} tasks", ledger.len().await?);
/// # Ok(()) }
/// ```
pub struct RedisLedger {
    /// Shared with the task that stores kept changes in the background.
    redis: Arc<Redis>,
}

/// The connection, the scripts, and the changes not stored yet.
struct Redis {
    client: redis::Client,
    /// The open connection, if any: cloned out for each call (clones share
    /// it), dropped when a call finds the link broken.
    conn: Mutex<Option<MultiplexedConnection>>,
    prefix: String,
    per_scope_cap: usize,
    insert: Script,
    evict: Script,
    drop_scope: Script,
    replace: Script,
    /// Changes that could not be stored, by (scope, task id), in order.
    unflushed: Mutex<HashMap<TaskKey, Kept>>,
    /// Held while kept changes are being stored, so a read waits for a
    /// store in flight instead of reading around it.
    flushing: tokio::sync::Mutex<()>,
    /// Whether the background task that stores kept changes runs.
    flusher: AtomicBool,
}

/// The changes kept for one task, oldest first, and the latest clock
/// they were made at.
struct Kept {
    changes: Vec<KeptChange>,
    now: Millis,
}

/// Tasks with changes kept at most: beyond that a change that cannot be
/// stored is dropped (and logged), so a long outage cannot use up memory.
const MAX_UNFLUSHED: usize = 10_000;

/// The first pause of the background retry; it doubles up to
/// [`MAX_FLUSH_PAUSE`] while the store keeps failing.
const FIRST_FLUSH_PAUSE: Duration = Duration::from_millis(100);
/// The longest pause between two background retries.
const MAX_FLUSH_PAUSE: Duration = Duration::from_secs(5);

impl std::fmt::Debug for RedisLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = &self.redis;
        f.debug_struct("RedisLedger")
            .field("server", &r.client.get_connection_info().addr().to_string())
            .field("prefix", &r.prefix)
            .field("per_scope_cap", &r.per_scope_cap)
            .finish_non_exhaustive()
    }
}

/// The error of a call that ran into [`IO_TIMEOUT`].
fn timed_out() -> LedgerError {
    LedgerError::TimedOut {
        store: "redis",
        after: IO_TIMEOUT,
    }
}

fn storage(e: redis::RedisError) -> LedgerError {
    // A read or write that ran into IO_TIMEOUT surfaces as the socket's
    // EAGAIN ("Resource temporarily unavailable"), which reads like a
    // local fault rather than a Redis that does not answer.
    if e.is_timeout() {
        return timed_out();
    }
    LedgerError::Storage(format!("redis: {e}"))
}

/// The URL schemes of a Redis server the redis client is built for
/// (`unix` is its other name for `redis+unix`). Not `rediss`: the client
/// is built without TLS.
pub const SCHEMES: [&str; 3] = ["redis", "redis+unix", "unix"];

/// The scheme of a `--ledger` value written as a URL (`scheme://…`),
/// lower-cased: schemes are case-insensitive (RFC 3986, 3.1). `None` for
/// anything else, which is a file path.
pub fn url_scheme(location: &str) -> Option<String> {
    let (scheme, _) = location.split_once("://")?;
    let mut chars = scheme.chars();
    let is_scheme = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
    is_scheme.then(|| scheme.to_ascii_lowercase())
}

/// True for a `--ledger` value that names a Redis server rather than a file.
pub fn is_redis_url(s: &str) -> bool {
    url_scheme(s).is_some_and(|scheme| SCHEMES.contains(&scheme.as_str()))
}

/// `url` as errors and logs may show it: the password masked, in the
/// userinfo (`redis://:***@host/0`) or in the `pass` parameter of a socket
/// URL. A URL the client cannot parse shows its scheme only, since where
/// its password starts and ends is then anybody's guess.
pub fn redacted(url: &str) -> String {
    const MASK: &str = "***";
    let Some(mut parsed) = redis::parse_redis_url(url) else {
        return url_scheme(url).map_or_else(|| "…".to_owned(), |s| format!("{s}://…"));
    };
    if parsed.password().is_some() {
        // Fails only for a URL without a host, which has no password.
        let _ = parsed.set_password(Some(MASK));
    }
    let secret = |key: &str| key == "pass" || key == "password";
    if parsed.query_pairs().any(|(k, _)| secret(&k)) {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(k, v)| {
                let v = if secret(&k) {
                    MASK.into()
                } else {
                    v.into_owned()
                };
                (k.into_owned(), v)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

impl RedisLedger {
    /// Connects to the Redis server at `url` (`redis://host:port/db` or
    /// `redis+unix:///path/to/socket`) and checks it answers. Keys are
    /// named `{prefix}:…`: instances meant to share tasks use the same
    /// prefix, unrelated deployments on one server use different ones.
    /// Must be called on a tokio runtime (any flavour), which then drives
    /// the connection.
    pub async fn open(url: &str, prefix: &str, per_scope_cap: usize) -> Result<Self, LedgerError> {
        if prefix.is_empty() {
            return Err(LedgerError::Storage("redis key prefix is empty".into()));
        }
        let client = redis::Client::open(url).map_err(storage)?;
        let ledger = Redis {
            client,
            conn: Mutex::new(None),
            prefix: prefix.to_owned(),
            per_scope_cap,
            insert: Script::new(&format!("{EVICT_LUA}{INSERT_LUA}")),
            evict: Script::new(&format!("{EVICT_LUA}{EVICT_ONLY_LUA}")),
            drop_scope: Script::new(DROP_SCOPE_LUA),
            replace: Script::new(REPLACE_LUA),
            unflushed: Mutex::new(HashMap::new()),
            flushing: tokio::sync::Mutex::new(()),
            flusher: AtomicBool::new(false),
        };
        let mut c = ledger.conn().await?;
        let _: String = ledger.run(redis::cmd("PING").query_async(&mut c)).await?;
        Ok(RedisLedger {
            redis: Arc::new(ledger),
        })
    }
}

impl Redis {
    /// The open connection, or a new one.
    async fn conn(&self) -> Result<MultiplexedConnection, LedgerError> {
        if let Some(c) = self.lock().as_ref() {
            return Ok(c.clone());
        }
        let config = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(IO_TIMEOUT))
            .set_response_timeout(Some(IO_TIMEOUT));
        let opened = tokio::time::timeout(
            IO_TIMEOUT,
            self.client
                .get_multiplexed_async_connection_with_config(&config),
        )
        .await
        .map_err(|_| timed_out())?
        .map_err(storage)?;
        // Two calls may have connected at once: the first one kept wins,
        // the other connection closes when its last clone goes.
        let mut held = self.lock();
        Ok(held.get_or_insert(opened).clone())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<MultiplexedConnection>> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Awaits one call, bounded by [`IO_TIMEOUT`]. A call that timed out
    /// or failed on the link drops the connection, so the next call
    /// connects afresh (a restarted Redis is found again).
    async fn run<T>(
        &self,
        call: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, LedgerError> {
        match tokio::time::timeout(IO_TIMEOUT, call).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => {
                if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
                    self.lock().take();
                }
                Err(storage(e))
            }
            Err(_) => {
                self.lock().take();
                Err(timed_out())
            }
        }
    }

    fn rec_key(&self, id: &str) -> String {
        format!("{}:rec:{id}", self.prefix)
    }

    fn scope_key(&self, scope: &Scope) -> String {
        format!("{}:scope:{}", self.prefix, scope.key())
    }

    /// The stored bytes of `id`'s record, whatever its scope or expiry.
    async fn read_raw(&self, id: &str) -> Result<Option<Vec<u8>>, LedgerError> {
        let mut c = self.conn().await?;
        self.run(redis::cmd("GET").arg(self.rec_key(id)).query_async(&mut c))
            .await
    }

    /// The stored record of `id`, whatever its scope or expiry, as much of
    /// it as `detail` asks.
    async fn read(&self, id: &str, detail: Detail) -> Result<Option<Stored>, LedgerError> {
        self.read_raw(id)
            .await?
            .map(|raw| Stored::decode_for(&raw, detail))
            .transpose()
    }

    /// [`TaskLedger::update`], without storing kept changes first (this is
    /// what stores them).
    async fn update(&self, scope: &Scope, id: &str, now: Millis, change: Change<'_>) -> Found {
        let key = self.rec_key(id);
        let exp_key = format!("{}:exp", self.prefix);
        for attempt in 0..UPDATE_RETRIES {
            if attempt > 0 {
                backoff(attempt).await;
            }
            // Most updates are polls that change nothing: those cost one GET.
            let Some(raw) = self.read_raw(id).await? else {
                return Ok(None);
            };
            let stored = Stored::decode(&raw)?;
            if !stored.alive_in(scope, now) {
                return Ok(None);
            }
            let seq = stored.seq;
            let (after, changed) = apply_change(&stored.into_record(), change);
            if !changed {
                return Ok(Some(after));
            }
            let body = Stored::new(seq, after.clone()).encode()?;
            let expires = after.expires_at.map(|t| t.to_string()).unwrap_or_default();
            let mut c = self.conn().await?;
            let stored: i64 = self
                .run(
                    self.replace
                        .arg(&key)
                        .arg(raw)
                        .arg(body)
                        .arg(&exp_key)
                        .arg(id)
                        .arg(expires)
                        .invoke_async(&mut c),
                )
                .await?;
            if stored == 1 {
                return Ok(Some(after));
            }
            // Another instance changed the task first: read it again.
        }
        Err(LedgerError::Storage(format!(
            "task {id} kept changing under {UPDATE_RETRIES} updates"
        )))
    }

    /// `page` filled from its scope's records below position `before`.
    async fn list(&self, mut page: PageBuilder, before: Option<u64>, now: Millis) -> Listed {
        let key = self.scope_key(&page.scope);
        let mut upper = before.map_or_else(|| "+inf".to_owned(), |s| format!("({s}"));
        // One batch is usually enough; expired records still indexed (not
        // swept yet) make the loop fetch more.
        let batch = page.limit.saturating_add(1).clamp(1, 1000);
        loop {
            let entries = self.index_below(&key, &upper, batch).await?;
            let keys: Vec<String> = entries.iter().map(|(id, _)| self.rec_key(id)).collect();
            let bodies: Vec<Option<Vec<u8>>> = match keys.is_empty() {
                true => Vec::new(),
                false => {
                    let mut c = self.conn().await?;
                    self.run(redis::cmd("MGET").arg(&keys).query_async(&mut c))
                        .await?
                }
            };
            for ((_, seq), body) in entries.iter().zip(bodies) {
                let Some(body) = body else { continue };
                let s = Stored::decode_without_payload(&body)?;
                if !s.alive_in(&page.scope, now) {
                    continue;
                }
                if !page.has_room() {
                    return Ok(page.finish(true));
                }
                page.push(*seq, s.into_record());
            }
            match entries.last() {
                Some((_, oldest)) if entries.len() == batch => upper = format!("({oldest}"),
                _ => return Ok(page.finish(false)),
            }
        }
    }

    /// Up to `batch` (id, seq) entries of the scope index `key` below
    /// `upper`, newest first.
    async fn index_below(
        &self,
        key: &str,
        upper: &str,
        batch: usize,
    ) -> Result<Vec<(String, u64)>, LedgerError> {
        let mut c = self.conn().await?;
        self.run(
            redis::cmd("ZREVRANGEBYSCORE")
                .arg(key)
                .arg(upper)
                .arg("-inf")
                .arg("WITHSCORES")
                .arg("LIMIT")
                .arg(0)
                .arg(batch)
                .query_async(&mut c),
        )
        .await
    }

    async fn zcard(&self, key: &str) -> Result<usize, LedgerError> {
        let mut c = self.conn().await?;
        self.run(redis::cmd("ZCARD").arg(key).query_async(&mut c))
            .await
    }

    async fn evict_at(&self, now: Millis) -> Result<i64, LedgerError> {
        let mut c = self.conn().await?;
        self.run(self.evict.arg(&self.prefix).arg(now).invoke_async(&mut c))
            .await
    }

    async fn insert(&self, record: TaskRecord, now: Millis) -> Result<(), LedgerError> {
        let mut c = self.conn().await?;
        let seq: u64 = self
            .run(
                redis::cmd("INCR")
                    .arg(format!("{}:seq", self.prefix))
                    .query_async(&mut c),
            )
            .await?;
        let scope = record.scope.key().to_owned();
        let id = record.id().to_owned();
        let expires = record.expires_at.map(|t| t.to_string()).unwrap_or_default();
        let body = Stored::new(seq, record).encode()?;
        let stored: i64 = self
            .run(
                self.insert
                    .arg(&self.prefix)
                    .arg(now)
                    .arg(&scope)
                    .arg(&id)
                    .arg(self.per_scope_cap)
                    .arg(seq)
                    .arg(body)
                    .arg(expires)
                    .invoke_async(&mut c),
            )
            .await?;
        if stored == 0 {
            return Err(LedgerError::ScopeFull(self.per_scope_cap));
        }
        Ok(())
    }
}

/// A kept change's task: its scope and id.
type TaskKey = (Scope, String);

impl Redis {
    fn kept(&self) -> std::sync::MutexGuard<'_, HashMap<TaskKey, Kept>> {
        self.unflushed.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// [`Self::flush`] for the one task a call reads or changes.
    async fn flush_task(&self, scope: &Scope, task_id: &str) -> Result<(), LedgerError> {
        self.flush(|(s, i)| s == scope && i == task_id).await
    }

    /// Stores the kept changes of the tasks `wanted` picks, oldest first,
    /// before a call that reads or changes them: a read after Redis is
    /// back shows them, never the record as it was before them. Fails
    /// (the changes still kept) while Redis does.
    async fn flush(&self, wanted: impl Fn(&TaskKey) -> bool) -> Result<(), LedgerError> {
        if !self.kept().keys().any(&wanted) {
            return Ok(());
        }
        let _flushing = self.flushing.lock().await;
        let keys: Vec<TaskKey> = self.kept().keys().filter(|k| wanted(k)).cloned().collect();
        for key in keys {
            let Some((changes, now)) = self.kept().get(&key).map(|k| (k.changes.clone(), k.now))
            else {
                continue;
            };
            let (scope, id) = &key;
            let stored = self
                .update(scope, id, now, &mut |r| {
                    for change in &changes {
                        change(r);
                    }
                })
                .await?;
            let mut kept = self.kept();
            if let Some(k) = kept.get_mut(&key) {
                k.changes.drain(..changes.len());
                if k.changes.is_empty() {
                    kept.remove(&key);
                }
            }
            drop(kept);
            match stored {
                Some(_) => {
                    tracing::info!(task = %id, changes = changes.len(), "shared ledger: stored the changes kept while redis failed")
                }
                None => {
                    tracing::info!(task = %id, "shared ledger: the task of kept changes is gone; dropped them")
                }
            }
        }
        Ok(())
    }

    /// Keeps `change` of `scope`'s task `id` to store later (see
    /// [`TaskLedger::update_kept`]), and makes sure something retries.
    fn keep(self: &Arc<Self>, scope: &Scope, id: &str, now: Millis, change: KeptChange) {
        let mut kept = self.kept();
        let key = (scope.clone(), id.to_owned());
        if !kept.contains_key(&key) && kept.len() >= MAX_UNFLUSHED {
            tracing::error!(task = %id, held = kept.len(), "shared ledger: too many changes wait for redis; this one is lost");
            return;
        }
        let k = kept.entry(key).or_insert_with(|| Kept {
            changes: Vec::new(),
            now,
        });
        k.changes.push(change);
        k.now = k.now.max(now);
        drop(kept);
        tracing::warn!(task = %id, "shared ledger: change kept until redis answers again");
        if !self.flusher.swap(true, Ordering::AcqRel) {
            tokio::spawn(retry_kept(Arc::downgrade(self)));
        }
    }
}

/// Stores kept changes in the background, with a growing pause between
/// attempts, until none is left (or the ledger is gone).
async fn retry_kept(redis: std::sync::Weak<Redis>) {
    let mut pause = FIRST_FLUSH_PAUSE;
    loop {
        tokio::time::sleep(pause).await;
        let Some(redis) = redis.upgrade() else { return };
        match redis.flush(|_| true).await {
            Ok(()) => {
                redis.flusher.store(false, Ordering::Release);
                // A change kept after the flush looked, whose keeper saw
                // this task still running, is this task's to store.
                if redis.kept().is_empty() || redis.flusher.swap(true, Ordering::AcqRel) {
                    return;
                }
                pause = FIRST_FLUSH_PAUSE;
            }
            Err(e) => {
                tracing::debug!(error = %e, "shared ledger: redis still fails; kept changes wait");
                pause = (pause * 2).min(MAX_FLUSH_PAUSE);
            }
        }
    }
}

/// Whether `e` is the store failing (worth trying again), not an answer.
fn store_failed(e: &LedgerError) -> bool {
    matches!(e, LedgerError::Storage(_) | LedgerError::TimedOut { .. })
}

#[async_trait::async_trait]
impl TaskLedger for RedisLedger {
    fn store_name(&self) -> &'static str {
        "redis"
    }

    fn shared_with_other_instances(&self) -> bool {
        true
    }

    async fn check_room(&self, scope: &Scope, now: Millis) -> Result<(), LedgerError> {
        let (r, key) = (&self.redis, self.redis.scope_key(scope));
        // The scope's set keeps expired ids until a sweep or an insert
        // evicts them: at the cap, evict and count again.
        if super::room(r.zcard(&key).await?, r.per_scope_cap).is_ok() {
            return Ok(());
        }
        r.evict_at(now).await?;
        super::room(r.zcard(&key).await?, r.per_scope_cap)
    }

    async fn insert(&self, record: TaskRecord, now: Millis) -> Result<(), LedgerError> {
        // A new record replaces any of the same id: what was kept for the
        // old one does not apply to it.
        let id = record.id().to_owned();
        self.redis.kept().retain(|(_, kept_id), _| *kept_id != id);
        self.redis.insert(record, now).await
    }

    async fn fetch(&self, scope: &Scope, task_id: &str, now: Millis, detail: Detail) -> Found {
        self.redis.flush_task(scope, task_id).await?;
        let s = self.redis.read(task_id, detail).await?;
        Ok(s.filter(|s| s.alive_in(scope, now))
            .map(Stored::into_record))
    }

    async fn update(&self, scope: &Scope, task_id: &str, now: Millis, change: Change<'_>) -> Found {
        self.redis.flush_task(scope, task_id).await?;
        self.redis.update(scope, task_id, now, change).await
    }

    /// Keeps a change Redis did not take, in this process: a background
    /// task stores it once Redis answers again, and every later call on
    /// the task stores it first. At most 10,000 tasks' changes (`MAX_UNFLUSHED`)
    /// are kept; a shim that stops before Redis is back loses them.
    async fn update_kept(&self, scope: &Scope, id: &str, now: Millis, change: KeptChange) -> Found {
        let stored = match self.redis.flush_task(scope, id).await {
            Ok(()) => self.redis.update(scope, id, now, &mut |r| change(r)).await,
            Err(e) => Err(e),
        };
        match stored {
            Err(e) if store_failed(&e) => {
                self.redis.keep(scope, id, now, change);
                Err(e)
            }
            other => other,
        }
    }

    async fn list(&self, scope: &Scope, cursor: Option<&str>, limit: usize, now: Millis) -> Listed {
        let (page, before) = PageBuilder::start("r1", scope, cursor, limit)?;
        self.redis.flush(|(s, _)| s == scope).await?;
        self.redis.list(page, before, now).await
    }

    async fn scope_of(&self, task_id: &str, now: Millis) -> Result<Option<Scope>, LedgerError> {
        self.redis.flush(|(_, i)| i == task_id).await?;
        let s = self.redis.read(task_id, Detail::TaskOnly).await?;
        Ok(s.filter(|s| !s.expired(now))
            .map(|s| Scope::from_key(&s.scope)))
    }

    async fn drop_scope(&self, scope: &Scope) -> Result<(), LedgerError> {
        let r = &self.redis;
        let mut c = r.conn().await?;
        let mut script = r.drop_scope.prepare_invoke();
        script.arg(&r.prefix).arg(scope.key());
        let _: i64 = r.run(script.invoke_async(&mut c)).await?;
        r.kept().retain(|(s, _), _| s != scope);
        Ok(())
    }

    async fn evict_expired(&self, now: Millis) -> Result<usize, LedgerError> {
        Ok(self.redis.evict_at(now).await?.max(0) as usize)
    }

    async fn len(&self) -> Result<usize, LedgerError> {
        let r = &self.redis;
        let mut c = r.conn().await?;
        let mut ids = redis::cmd("SCARD");
        ids.arg(format!("{}:ids", r.prefix));
        r.run(ids.query_async(&mut c)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_scheme_followed_by_two_slashes_makes_a_url() {
        assert_eq!(url_scheme("REDIS+Unix:///s").as_deref(), Some("redis+unix"));
        assert_eq!(url_scheme("http://x").as_deref(), Some("http"));
        for path in [
            "/var/lib/l.redb",
            "l.redb",
            "./http://x",
            "a b://c",
            "c:\\l.redb",
        ] {
            assert_eq!(url_scheme(path), None, "{path}");
        }
        assert!(is_redis_url("Redis://h/0") && is_redis_url("unix:///s"));
        assert!(!is_redis_url("rediss://h/0"));
    }

    #[test]
    fn a_redacted_url_keeps_all_but_the_password() {
        assert_eq!(redacted("redis://h:1/2"), "redis://h:1/2");
        assert_eq!(redacted("redis://u@h:1/2"), "redis://u@h:1/2");
        assert_eq!(redacted("REDIS://u:p%40ss@h/2"), "redis://u:***@h/2");
        assert_eq!(
            redacted("unix:///s?user=u&password=p"),
            "unix:///s?user=u&password=***"
        );
        assert_eq!(redacted("redis://:p@h:port/2"), "redis://…");
    }
}
