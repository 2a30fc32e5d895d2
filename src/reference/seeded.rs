//! Ids and timestamps of the reference servers: random and wall-clock by
//! default, reproducible under `--seed N` so that two runs of one
//! conversation can be snapshotted and compared byte for byte.
//!
//! Seeded ids are SHA-256 of the seed and a counter (32 hex characters,
//! the same form as random ones); seeded timestamps start at
//! 2026-01-01T00:00:00Z and advance one millisecond per timestamp taken,
//! so they follow the order of events, not the time they took.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// Set once, by [`set_seed`].
static SEED: OnceLock<Seeded> = OnceLock::new();

#[derive(Debug)]
struct Seeded {
    seed: u64,
    ids: AtomicU64,
    ticks: AtomicU64,
}

/// Makes ids and timestamps reproducible from `seed` (process-wide; the
/// first call wins).
pub(crate) fn set_seed(seed: u64) {
    let _ = SEED.set(Seeded {
        seed,
        ids: AtomicU64::new(0),
        ticks: AtomicU64::new(0),
    });
}

/// A task, session or state id.
pub(crate) fn id() -> String {
    let Some(s) = SEED.get() else {
        return crate::ids::random_id();
    };
    use sha2::Digest;
    let n = s.ids.fetch_add(1, Ordering::Relaxed);
    let hash = sha2::Sha256::digest(format!("{}:{n}", s.seed).as_bytes());
    hash[..16].iter().map(|b| format!("{b:02x}")).collect()
}

/// A task timestamp: `clock`'s wall time, or the seeded sequence.
pub(crate) fn now_iso(clock: &crate::bridge::Clock) -> String {
    let Some(s) = SEED.get() else {
        return clock.now_iso();
    };
    let tick = s.ticks.fetch_add(1, Ordering::Relaxed);
    let base = time::macros::datetime!(2026-01-01 00:00:00 UTC);
    let ms = i64::try_from(tick).unwrap_or(i64::MAX);
    crate::ids::format_iso(base + time::Duration::milliseconds(ms))
}
