//! Bounded waits for a state that no event announces: a file another
//! process writes, a gauge on `/metrics`, a status only `GET` shows. Where
//! the product offers an event (a log line, a notification, a blocking
//! `tasks/result`, a child's exit), tests wait for that instead.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often a state is looked at again.
pub const EVERY: Duration = Duration::from_millis(20);

/// Calls `look` until it finds something, at most `within`; fails naming
/// `what` when it never does.
#[track_caller]
pub fn until<T>(what: &str, within: Duration, mut look: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = look() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(EVERY);
    }
}

/// [`until`] for an async `look`.
pub async fn until_async<T, F>(what: &str, within: Duration, mut look: impl FnMut() -> F) -> T
where
    F: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = look().await {
            return v;
        }
        next_look(what, deadline).await;
    }
}

/// A look that borrows the state it reads through (see [`until_with`]).
pub type Look<'a, T> = std::pin::Pin<Box<dyn Future<Output = Option<T>> + Send + 'a>>;

/// [`until_async`] for a `look` that needs `state` mutably (a client that
/// numbers its requests).
pub async fn until_with<S, T>(
    what: &str,
    within: Duration,
    state: &mut S,
    mut look: impl for<'a> FnMut(&'a mut S) -> Look<'a, T>,
) -> T {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(v) = look(state).await {
            return v;
        }
        next_look(what, deadline).await;
    }
}

/// Between two async looks: fails once `deadline` has passed, else waits
/// [`EVERY`] (on tokio's clock, so paused tests advance through it).
async fn next_look(what: &str, deadline: tokio::time::Instant) {
    assert!(
        tokio::time::Instant::now() < deadline,
        "timed out waiting for {what}"
    );
    tokio::time::sleep(EVERY).await;
}
