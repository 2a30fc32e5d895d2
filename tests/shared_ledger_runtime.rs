//! The library's Redis ledger on a current-thread runtime, as an embedding
//! application may run it: a Redis that stops answering must cost the
//! calls that wait on it, never the runtime's other tasks.

#[path = "support/redis.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_server;

use std::sync::Arc;

use mcp_tasks_shim::ledger::{LedgerError, RedisLedger, TaskLedger, TaskRecord};
use mcp_tasks_shim::scope::{Principal, Scope};
use mcp_tasks_shim::wire::{TaskStatus, legacy};

/// The scope of the principal `name`.
fn scope(name: &str) -> Scope {
    Principal::new(name).into()
}

fn record(scope: &Scope, id: &str) -> TaskRecord {
    TaskRecord::new(
        scope.clone(),
        legacy::Task {
            task_id: id.into(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: "2026-11-29T10:00:00.000Z".into(),
            last_updated_at: "2026-11-29T10:00:00.000Z".into(),
            ttl: None,
            poll_interval: Some(500),
            extra: Default::default(),
        },
        None,
    )
}

/// A read from a frozen Redis waits without holding the runtime's only
/// thread: another task answers meanwhile, and the read itself ends at
/// its I/O timeout saying so. (A blocking call there held the thread
/// until the timeout, and the other task answered only after it.)
#[tokio::test(flavor = "current_thread")]
async fn a_frozen_redis_does_not_stall_a_current_thread_runtime() {
    let server = redis_server::RedisServer::start();
    let ledger = Arc::new(
        RedisLedger::open(&server.url(), "frozen", 10)
            .await
            .expect("redis answers"),
    );
    ledger
        .insert(record(&scope("alice"), "t"), 0)
        .await
        .expect("insert");
    server.freeze();
    let reader = {
        let ledger = ledger.clone();
        tokio::spawn(async move { ledger.get(&scope("alice"), "t", 0).await })
    };
    // The read starts (sends its request) before anything else runs.
    tokio::task::yield_now().await;
    let (ask, asked) = tokio::sync::oneshot::channel::<()>();
    let (reply, replied) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        if asked.await.is_ok() {
            let _ = reply.send(());
        }
    });
    ask.send(()).expect("the other task listens");
    replied.await.expect("the other task answers");
    assert!(
        !reader.is_finished(),
        "the read of a frozen redis ended before another task could run: it held the thread"
    );
    let read = reader.await.expect("the read task");
    assert!(
        matches!(read, Err(LedgerError::TimedOut { store: "redis", .. })),
        "{read:?}"
    );
    server.thaw();
    // The timed-out connection was dropped; the next call connects again.
    let back = ledger
        .get(&scope("alice"), "t", 0)
        .await
        .expect("redis is back");
    assert_eq!(back.map(|r| r.task.task_id), Some("t".to_owned()));
}
