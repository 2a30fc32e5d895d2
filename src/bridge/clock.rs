//! The engines' clock: milliseconds for the ledger, wall time for task
//! timestamps. One place, so tests and engines agree.
//!
//! Ledger time is Unix-epoch milliseconds read once at start, advanced by
//! the monotonic clock from then on. Epoch-based so that an `expires_at`
//! written by one shim process still means the same instant to the next
//! one reading a durable ledger; monotonic in between so a wall-clock step
//! while running neither expires tasks early nor keeps them late.

use std::time::{SystemTime, UNIX_EPOCH};

// tokio's Instant, so a test's `tokio::time::pause` + `advance` moves
// ledger time and wire timestamps together with every engine timer.
use tokio::time::Instant;

use crate::ledger::Millis;

/// Ledger milliseconds, plus wall-clock timestamps.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
    /// Unix-epoch ms at `start`.
    epoch_ms: Millis,
}

impl Clock {
    /// A clock starting now.
    pub fn new() -> Self {
        let epoch_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as Millis);
        Clock {
            start: Instant::now(),
            epoch_ms,
        }
    }

    /// Unix-epoch ms as of this clock's start, plus monotonic time since.
    pub fn now_ms(&self) -> Millis {
        self.epoch_ms
            .saturating_add(self.start.elapsed().as_millis() as Millis)
    }

    /// ISO 8601 wall time.
    /// Derived from the same origin as [`Clock::now_ms`], so paused tests
    /// see `createdAt`/`lastUpdatedAt` agree with ledger expiry.
    pub fn now_iso(&self) -> String {
        let nanos = i128::from(self.now_ms()) * 1_000_000;
        time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
            .map_or_else(|_| crate::ids::now_iso(), crate::ids::format_iso)
    }

    /// When something with a `ttl` in ms created now expires.
    pub fn expiry(&self, ttl_ms: Option<i64>) -> Option<Millis> {
        ttl_ms.map(|t| self.now_ms().saturating_add(t.max(0) as Millis))
    }

    /// When the record of an upstream task created now expires: at the end
    /// of the ttl the server granted, or after `unlimited_ms` when it
    /// granted none (`ttl: null`, "unlimited"). A record that never expires
    /// would count against its client's task cap for good, long after the
    /// task ended.
    pub fn record_expiry(&self, ttl_ms: Option<i64>, unlimited_ms: i64) -> Millis {
        let ttl = ttl_ms.unwrap_or(unlimited_ms);
        self.now_ms().saturating_add(ttl.max(0) as Millis)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ledger_time_is_shared_between_processes() {
        // Two clocks made apart (two shim processes) share an origin, not
        // "ms since I started".
        let a = Clock::new();
        let b = Clock::new();
        assert!(a.now_ms() > 1_600_000_000_000, "epoch based");
        assert!(b.now_ms() >= a.epoch_ms);
        assert_eq!(a.expiry(Some(-5)).map(|t| t >= a.epoch_ms), Some(true));
    }

    #[tokio::test(start_paused = true)]
    async fn paused_time_moves_ledger_time_and_timestamps_together() {
        let c = Clock::new();
        let (ms, iso) = (c.now_ms(), c.now_iso());
        let expires = c.expiry(Some(60_000)).expect("a ttl");
        tokio::time::advance(std::time::Duration::from_secs(61)).await;
        assert_eq!(c.now_ms(), ms + 61_000, "no real time passes while paused");
        assert!(c.now_ms() > expires, "the ttl ran out on paused time");
        let later = time::OffsetDateTime::parse(
            &c.now_iso(),
            &time::format_description::well_known::Rfc3339,
        )
        .expect("ISO 8601");
        let before =
            time::OffsetDateTime::parse(&iso, &time::format_description::well_known::Rfc3339)
                .expect("ISO 8601");
        assert_eq!(
            (later - before).whole_seconds(),
            61,
            "{iso} then {}",
            c.now_iso()
        );
    }
}
