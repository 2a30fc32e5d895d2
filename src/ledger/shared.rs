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
//! `update` runs the caller's closure between `WATCH` and `MULTI`/`EXEC`,
//! so a concurrent change by another instance makes it read and apply
//! again instead of overwriting (optimistic locking, bounded retries).
//!
//! Expiry is the record's own `expires_at` compared with the caller's
//! clock, exactly as in the other ledgers: reads skip expired records and
//! [`TaskLedger::evict_expired`] (the sweeper) deletes them. Redis key
//! expiry is not used, because the shim's clock, not Redis's, is the
//! reference every instance shares with its clients.
//!
//! The trait is synchronous, so each call is a blocking round trip on the
//! calling (tokio worker) thread. Calls from different threads run at once
//! on a pool of connections ([`DEFAULT_CONNECTIONS`] at most, opened as
//! needed and kept), instead of queueing for one; a connection that failed
//! is dropped, with every idle one (a Redis restart breaks them all), and
//! a new one opened on the next call. Reads and writes time out after
//! [`IO_TIMEOUT`], so a dead Redis turns into errors (`-32603` where the
//! trait can report them), never into a hang.
//!
//! The key layout assumes one Redis node (or one hash slot): the scripts
//! build key names from their arguments.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redis::{Commands, Connection, Script};

use super::stored::{Stored, apply_change};
use super::{LedgerError, Millis, Page, TaskLedger, TaskRecord};

/// Bound on every Redis read or write.
pub const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// Connections an instance opens at most: calls beyond that many at once
/// wait (at most [`IO_TIMEOUT`]) for one to come back.
pub const DEFAULT_CONNECTIONS: usize = 8;

/// `update` gives up after this many conflicting writes by other instances
/// (each retry means somebody else's change to the same task landed).
const UPDATE_RETRIES: usize = 64;

/// Before retrying a conflicting update: a random pause that grows with the
/// attempt (up to 50 µs × attempt), so writers racing for one task stop
/// colliding in lockstep. Without it, four instances updating one task
/// under load ran out of retries (seen in CI-like runs).
fn backoff(attempt: usize) {
    let mut r = [0u8; 2];
    crate::ids::fill(&mut r);
    let micros = u64::from(u16::from_le_bytes(r)) % (50 * attempt as u64 + 1);
    std::thread::sleep(std::time::Duration::from_micros(micros));
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

/// Task records in Redis, shared by every shim instance that names the
/// same server and key prefix. See the module docs.
///
/// ```no_run
/// use mcp_tasks_shim::ledger::{RedisLedger, TaskLedger};
/// let ledger = RedisLedger::open("redis://127.0.0.1:6379/0", "mcp-tasks-shim", 1000)?;
/// assert_eq!(ledger.len(), ledger.len());
/// # Ok::<(), mcp_tasks_shim::ledger::LedgerError>(())
/// ```
pub struct RedisLedger {
    client: redis::Client,
    pool: Pool,
    prefix: String,
    per_scope_cap: usize,
    insert: Script,
    evict: Script,
    drop_scope: Script,
}

impl std::fmt::Debug for RedisLedger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLedger")
            .field(
                "server",
                &self.client.get_connection_info().addr().to_string(),
            )
            .field("prefix", &self.prefix)
            .field("per_scope_cap", &self.per_scope_cap)
            .field("max_connections", &self.pool.max)
            .finish_non_exhaustive()
    }
}

/// The instance's connections: idle ones, and how many exist in all.
struct Pool {
    state: Mutex<PoolState>,
    returned: Condvar,
    max: usize,
}

struct PoolState {
    idle: Vec<Connection>,
    open: usize,
}

impl Pool {
    fn lock(&self) -> MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// An idle connection, or leave to open one (`None`), waiting while
    /// `max` are in use.
    fn take(&self) -> Result<Option<Connection>, LedgerError> {
        let deadline = Instant::now() + IO_TIMEOUT;
        let mut state = self.lock();
        loop {
            if let Some(c) = state.idle.pop() {
                return Ok(Some(c));
            }
            if state.open < self.max {
                state.open += 1;
                return Ok(None);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(LedgerError::Storage(format!(
                    "redis: all {} connections busy for {IO_TIMEOUT:?}",
                    self.max
                )));
            }
            state = self
                .returned
                .wait_timeout(state, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Hands a connection back after a call; `None` when it failed, which
    /// also drops the idle ones when the failure was the link's.
    fn give_back(&self, conn: Option<Connection>, link_failed: bool) {
        let mut state = self.lock();
        match conn {
            Some(c) => state.idle.push(c),
            None => {
                state.open -= 1;
                if link_failed {
                    state.open -= state.idle.len();
                    state.idle.clear();
                }
            }
        }
        drop(state);
        self.returned.notify_all();
    }
}

/// A place in the pool taken by a call. A call that panics (in an
/// `update` closure, say) never hands its connection back; dropping the
/// lease then frees the place, so panics cannot use the pool up.
struct Lease<'a> {
    pool: &'a Pool,
    settled: bool,
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if !self.settled {
            self.pool.give_back(None, false);
        }
    }
}

fn storage(e: redis::RedisError) -> LedgerError {
    // A read or write that ran into IO_TIMEOUT surfaces as the socket's
    // EAGAIN ("Resource temporarily unavailable"), which reads like a
    // local fault rather than a Redis that does not answer.
    if e.is_timeout() {
        return LedgerError::TimedOut {
            store: "redis",
            after: IO_TIMEOUT,
        };
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
    pub fn open(url: &str, prefix: &str, per_scope_cap: usize) -> Result<Self, LedgerError> {
        Self::open_with_connections(url, prefix, per_scope_cap, DEFAULT_CONNECTIONS)
    }

    /// [`RedisLedger::open`] with at most `max_connections` (at least 1)
    /// open at once.
    pub fn open_with_connections(
        url: &str,
        prefix: &str,
        per_scope_cap: usize,
        max_connections: usize,
    ) -> Result<Self, LedgerError> {
        if prefix.is_empty() {
            return Err(LedgerError::Storage("redis key prefix is empty".into()));
        }
        let client = redis::Client::open(url).map_err(storage)?;
        let ledger = RedisLedger {
            client,
            pool: Pool {
                state: Mutex::new(PoolState {
                    idle: Vec::new(),
                    open: 0,
                }),
                returned: Condvar::new(),
                max: max_connections.max(1),
            },
            prefix: prefix.to_owned(),
            per_scope_cap,
            insert: Script::new(&format!("{EVICT_LUA}{INSERT_LUA}")),
            evict: Script::new(&format!("{EVICT_LUA}{EVICT_ONLY_LUA}")),
            drop_scope: Script::new(DROP_SCOPE_LUA),
        };
        ledger.with_conn(|c| redis::cmd("PING").query::<String>(c))?;
        Ok(ledger)
    }

    /// Runs `f` on a connection of the pool, opened first if none is idle.
    /// A connection whose call failed is not kept: a failure of the link
    /// drops the idle ones too, so the next call starts afresh (a Redis
    /// restart costs the calls made while it was down, no more); any other
    /// error may have left it mid-transaction.
    fn with_conn<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T, LedgerError> {
        // The ledger is synchronous and Redis may stall for up to the I/O
        // timeout: on a runtime worker, its other tasks (requests that
        // need no ledger) move to another thread meanwhile, instead of
        // waiting behind this call.
        let on_worker = tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
        if on_worker {
            tokio::task::block_in_place(|| self.with_conn_here(f))
        } else {
            self.with_conn_here(f)
        }
    }

    fn with_conn_here<T>(
        &self,
        f: impl FnOnce(&mut Connection) -> redis::RedisResult<T>,
    ) -> Result<T, LedgerError> {
        let mut conn = match self.pool.take()? {
            Some(c) => c,
            None => match self.connect() {
                Ok(c) => c,
                Err(e) => {
                    self.pool.give_back(None, true);
                    return Err(storage(e));
                }
            },
        };
        let mut lease = Lease {
            pool: &self.pool,
            settled: false,
        };
        let out = f(&mut conn);
        lease.settled = true;
        match &out {
            Ok(_) => self.pool.give_back(Some(conn), false),
            Err(e) => self.pool.give_back(
                None,
                e.is_io_error() || e.is_timeout() || e.is_connection_dropped(),
            ),
        }
        out.map_err(storage)
    }

    fn connect(&self) -> redis::RedisResult<Connection> {
        let c = self.client.get_connection_with_timeout(IO_TIMEOUT)?;
        c.set_read_timeout(Some(IO_TIMEOUT))?;
        c.set_write_timeout(Some(IO_TIMEOUT))?;
        Ok(c)
    }

    fn rec_key(&self, id: &str) -> String {
        format!("{}:rec:{id}", self.prefix)
    }

    fn scope_key(&self, scope: &str) -> String {
        format!("{}:scope:{scope}", self.prefix)
    }

    /// The record of `id` if it is `scope`'s and alive, read with `decode`
    /// ([`Stored::decode`], or [`Stored::decode_without_payload`]).
    fn fetch(
        &self,
        scope: &str,
        id: &str,
        now: Millis,
        decode: fn(&[u8]) -> Result<Stored, LedgerError>,
    ) -> Result<Option<Stored>, LedgerError> {
        let s = self.read(id, decode)?;
        Ok(s.filter(|s| s.scope == scope && !s.expired(now)))
    }

    /// The record of `id`, whatever its scope or expiry.
    fn read(
        &self,
        id: &str,
        decode: fn(&[u8]) -> Result<Stored, LedgerError>,
    ) -> Result<Option<Stored>, LedgerError> {
        let raw: Option<Vec<u8>> = self.with_conn(|c| c.get(self.rec_key(id)))?;
        raw.map(|raw| decode(&raw)).transpose()
    }

    fn apply_update(
        &self,
        scope: &str,
        id: &str,
        now: Millis,
        change: &mut dyn FnMut(&mut TaskRecord),
    ) -> Result<Option<TaskRecord>, LedgerError> {
        let key = self.rec_key(id);
        let exp_key = format!("{}:exp", self.prefix);
        // Most updates are polls that change nothing: settle those with one
        // GET instead of WATCH/GET/UNWATCH. A change found here is applied
        // again below on a watched read, so nothing is written from an
        // unwatched one.
        let Some(stored) = self.fetch(scope, id, now, Stored::decode)? else {
            return Ok(None);
        };
        let (after, changed) = apply_change(&stored.into_record(), change);
        if !changed {
            return Ok(Some(after));
        }
        for attempt in 0..UPDATE_RETRIES {
            if attempt > 0 {
                backoff(attempt);
            }
            let outcome = self.with_conn(|c| {
                redis::cmd("WATCH").arg(&key).exec(c)?;
                let raw: Option<Vec<u8>> = c.get(&key)?;
                let stored = match raw.map(|r| Stored::decode(&r)) {
                    Some(Ok(s)) if s.scope == scope && !s.expired(now) => s,
                    Some(Err(e)) => {
                        redis::cmd("UNWATCH").exec(c)?;
                        return Ok(Attempt::Failed(e));
                    }
                    _ => {
                        redis::cmd("UNWATCH").exec(c)?;
                        return Ok(Attempt::Missing);
                    }
                };
                let seq = stored.seq;
                let (after, changed) = apply_change(&stored.into_record(), change);
                if !changed {
                    redis::cmd("UNWATCH").exec(c)?;
                    return Ok(Attempt::Done(Box::new(after)));
                }
                let body = match Stored::new(seq, after.clone()).encode() {
                    Ok(b) => b,
                    Err(e) => {
                        redis::cmd("UNWATCH").exec(c)?;
                        return Ok(Attempt::Failed(e));
                    }
                };
                let mut pipe = redis::pipe();
                pipe.atomic().set(&key, body);
                match after.expires_at {
                    Some(t) => pipe.zadd(&exp_key, id, t),
                    None => pipe.zrem(&exp_key, id),
                };
                // EXEC answers nil when a watched key changed meanwhile.
                let done: Option<redis::Value> = pipe.query(c)?;
                Ok(match done {
                    Some(_) => Attempt::Done(Box::new(after)),
                    None => Attempt::Conflict,
                })
            })?;
            match outcome {
                Attempt::Done(rec) => return Ok(Some(*rec)),
                Attempt::Missing => return Ok(None),
                Attempt::Failed(e) => return Err(e),
                // Another instance changed the task first: read it again.
                Attempt::Conflict => continue,
            }
        }
        Err(LedgerError::Storage(format!(
            "task {id} kept changing under {UPDATE_RETRIES} updates"
        )))
    }

    fn try_list(
        &self,
        scope: &str,
        before: Option<u64>,
        limit: usize,
        now: Millis,
    ) -> Result<Page, LedgerError> {
        let key = self.scope_key(scope);
        let mut upper = before.map_or_else(|| "+inf".to_owned(), |s| format!("({s}"));
        let mut page = Vec::with_capacity(limit.min(256));
        let mut last_seq = None;
        // One batch is usually enough; expired records still indexed (not
        // swept yet) make the loop fetch more.
        let batch = limit.saturating_add(1).clamp(1, 1000);
        loop {
            let entries: Vec<(String, u64)> = self.with_conn(|c| {
                redis::cmd("ZREVRANGEBYSCORE")
                    .arg(&key)
                    .arg(&upper)
                    .arg("-inf")
                    .arg("WITHSCORES")
                    .arg("LIMIT")
                    .arg(0)
                    .arg(batch)
                    .query(c)
            })?;
            if entries.is_empty() {
                return Ok(Page {
                    records: page,
                    next_cursor: None,
                });
            }
            let keys: Vec<String> = entries.iter().map(|(id, _)| self.rec_key(id)).collect();
            let bodies: Vec<Option<Vec<u8>>> =
                self.with_conn(|c| redis::cmd("MGET").arg(&keys).query(c))?;
            for ((_, seq), body) in entries.iter().zip(bodies) {
                let Some(body) = body else { continue };
                let s = Stored::decode_without_payload(&body)?;
                if s.expired(now) || s.scope != scope {
                    continue;
                }
                if page.len() == limit {
                    let next_cursor = last_seq.map(|seq| super::encode_cursor("r1", scope, seq));
                    return Ok(Page {
                        records: page,
                        next_cursor,
                    });
                }
                last_seq = Some(*seq);
                page.push(s.into_record());
            }
            let Some((_, oldest)) = entries.last() else {
                unreachable!("entries is not empty")
            };
            upper = format!("({oldest}");
            if entries.len() < batch {
                return Ok(Page {
                    records: page,
                    next_cursor: None,
                });
            }
        }
    }
}

/// One optimistic `update` attempt.
enum Attempt {
    Done(Box<TaskRecord>),
    Missing,
    Conflict,
    Failed(LedgerError),
}

impl TaskLedger for RedisLedger {
    fn shared_with_other_instances(&self) -> bool {
        true
    }

    fn check_room(&self, scope: &str, now: Millis) -> Result<(), LedgerError> {
        let key = format!("{}:scope:{scope}", self.prefix);
        // The scope's set keeps expired ids until a sweep or an insert
        // evicts them: at the cap, evict and count again.
        let mut held: usize = self.with_conn(|c| c.zcard(&key))?;
        if held >= self.per_scope_cap {
            self.with_conn(|c| self.evict.arg(&self.prefix).arg(now).invoke::<i64>(c))?;
            held = self.with_conn(|c| c.zcard(&key))?;
        }
        if held >= self.per_scope_cap {
            return Err(LedgerError::ScopeFull(self.per_scope_cap));
        }
        Ok(())
    }

    fn insert(&self, record: TaskRecord, now: Millis) -> Result<(), LedgerError> {
        let seq: u64 = self.with_conn(|c| c.incr(format!("{}:seq", self.prefix), 1))?;
        let scope = record.scope.clone();
        let id = record.id().to_owned();
        let expires = record.expires_at.map(|t| t.to_string()).unwrap_or_default();
        let body = Stored::new(seq, record).encode()?;
        let stored: i64 = self.with_conn(|c| {
            self.insert
                .arg(&self.prefix)
                .arg(now)
                .arg(&scope)
                .arg(&id)
                .arg(self.per_scope_cap)
                .arg(seq)
                .arg(body)
                .arg(expires)
                .invoke(c)
        })?;
        if stored == 0 {
            return Err(LedgerError::ScopeFull(self.per_scope_cap));
        }
        Ok(())
    }

    fn get(&self, scope: &str, task_id: &str, now: Millis) -> Option<TaskRecord> {
        super::logged(
            "shared ledger",
            "get",
            self.try_get(scope, task_id, now),
            None,
        )
    }

    fn try_get(
        &self,
        scope: &str,
        task_id: &str,
        now: Millis,
    ) -> Result<Option<TaskRecord>, LedgerError> {
        Ok(self
            .fetch(scope, task_id, now, Stored::decode)?
            .map(Stored::into_record))
    }

    fn scope_of(&self, task_id: &str, now: Millis) -> Result<Option<String>, LedgerError> {
        let s = self.read(task_id, Stored::decode_without_payload)?;
        Ok(s.filter(|s| !s.expired(now)).map(|s| s.scope))
    }

    fn try_get_task(
        &self,
        scope: &str,
        task_id: &str,
        now: Millis,
    ) -> Result<Option<TaskRecord>, LedgerError> {
        Ok(self
            .fetch(scope, task_id, now, Stored::decode_without_payload)?
            .map(Stored::into_record))
    }

    fn try_update(
        &self,
        scope: &str,
        task_id: &str,
        now: Millis,
        change: &mut dyn FnMut(&mut TaskRecord),
    ) -> Result<Option<TaskRecord>, LedgerError> {
        self.apply_update(scope, task_id, now, change)
    }

    fn update(
        &self,
        scope: &str,
        task_id: &str,
        now: Millis,
        change: &mut dyn FnMut(&mut TaskRecord),
    ) -> Option<TaskRecord> {
        let r = self.try_update(scope, task_id, now, change);
        super::logged("shared ledger", "update", r, None)
    }

    fn list(
        &self,
        scope: &str,
        cursor: Option<&str>,
        limit: usize,
        now: Millis,
    ) -> Result<Page, LedgerError> {
        let before = cursor
            .map(|c| super::decode_cursor("r1", scope, c))
            .transpose()?;
        self.try_list(scope, before, limit, now)
    }

    fn drop_scope(&self, scope: &str) {
        let r = self.with_conn(|c| {
            self.drop_scope
                .arg(&self.prefix)
                .arg(scope)
                .invoke::<i64>(c)
        });
        super::logged("shared ledger", "drop_scope", r.map(drop), ());
    }

    fn evict_expired(&self, now: Millis) -> usize {
        let r = self.with_conn(|c| self.evict.arg(&self.prefix).arg(now).invoke::<i64>(c));
        super::logged(
            "shared ledger",
            "evict_expired",
            r.map(|n| n.max(0) as usize),
            0,
        )
    }

    fn len(&self) -> usize {
        let r = self.with_conn(|c| c.scard::<_, usize>(format!("{}:ids", self.prefix)));
        super::logged("shared ledger", "len", r, 0)
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
