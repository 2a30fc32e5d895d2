//! The engines' clock: monotonic milliseconds for the ledger, wall time for
//! task timestamps. One place, so tests and engines agree.

use std::time::Instant;

use crate::ledger::Millis;

/// Milliseconds since the clock was made, plus wall-clock timestamps.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    /// A clock starting now.
    pub fn new() -> Self {
        Clock {
            start: Instant::now(),
        }
    }

    /// Monotonic ms since start.
    pub fn now_ms(&self) -> Millis {
        self.start.elapsed().as_millis() as Millis
    }

    /// ISO 8601 wall time.
    pub fn now_iso(&self) -> String {
        crate::ids::now_iso()
    }

    /// When something with a `ttl` in ms created now expires.
    pub fn expiry(&self, ttl_ms: Option<i64>) -> Option<Millis> {
        ttl_ms.map(|t| self.now_ms().saturating_add(t.max(0) as Millis))
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
