//! The [`TaskLedger`] contract, checked against every implementation, plus
//! what only the durable one promises (a reopened file remembers).

use super::*;
use crate::wire::modern::Payload;
use crate::wire::{TaskStatus, legacy};

fn rec(scope: &str, id: &str, expires_at: Option<Millis>) -> TaskRecord {
    TaskRecord {
        scope: scope.into(),
        task: legacy::Task {
            task_id: id.into(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: "2026-11-29T10:00:00.000Z".into(),
            last_updated_at: "2026-11-29T10:00:00.000Z".into(),
            ttl: None,
            poll_interval: Some(500),
            extra: Default::default(),
        },
        payload: Payload::None,
        cancel_pinned: false,
        synthetic: false,
        expires_at,
    }
}

fn ids(page: &Page) -> Vec<&str> {
    page.records.iter().map(TaskRecord::id).collect()
}

/// Runs every contract check against ledgers made by `make(cap)`.
fn contract(make: &dyn Fn(usize) -> Box<dyn TaskLedger>) {
    isolation(&*make(100));
    paging(&*make(100));
    expiry_and_caps(&*make(2));
    updates_keep_payloads(&*make(100));
    updates_cannot_move_a_record(&*make(100));
}

fn isolation(l: &dyn TaskLedger) {
    l.insert(rec("alice", "t1", None), 0).unwrap();
    assert_eq!(l.scope_of("t1", 0), Ok(Some("alice".into())));
    assert_eq!(l.scope_of("nope", 0), Ok(None));
    assert!(l.get("alice", "t1", 0).is_some());
    assert_eq!(l.get("bob", "t1", 0), None);
    assert_eq!(l.get("bob", "nope", 0), None);
    assert!(
        l.update("bob", "t1", 0, &mut |r| r.cancel_pinned = true)
            .is_none()
    );
    assert!(!l.get("alice", "t1", 0).unwrap().cancel_pinned);
    assert!(l.list("bob", None, 10, 0).unwrap().records.is_empty());
    l.drop_scope("bob");
    assert!(l.get("alice", "t1", 0).is_some());
}

fn paging(l: &dyn TaskLedger) {
    for i in 0..5 {
        l.insert(rec("a", &format!("t{i}"), None), 0).unwrap();
        l.insert(rec("b", &format!("u{i}"), None), 0).unwrap();
    }
    let p1 = l.list("a", None, 2, 0).unwrap();
    assert_eq!(ids(&p1), ["t4", "t3"]);
    let c = p1.next_cursor.unwrap();
    let p2 = l.list("a", Some(&c), 2, 0).unwrap();
    assert_eq!(ids(&p2), ["t2", "t1"]);
    let p3 = l.list("a", p2.next_cursor.as_deref(), 2, 0).unwrap();
    assert_eq!(ids(&p3), ["t0"]);
    assert_eq!(p3.next_cursor, None);
    // An exactly full last page has no next cursor.
    assert_eq!(l.list("a", None, 5, 0).unwrap().next_cursor, None);
    assert_eq!(l.list("b", Some(&c), 2, 0), Err(LedgerError::BadCursor));
    assert_eq!(
        l.list("a", Some("garbage!"), 2, 0),
        Err(LedgerError::BadCursor)
    );
    // Re-inserting an id moves it to the front.
    l.insert(rec("a", "t1", None), 0).unwrap();
    assert_eq!(ids(&l.list("a", None, 2, 0).unwrap()), ["t1", "t4"]);
    assert_eq!(l.len(), 10);
}

fn expiry_and_caps(l: &dyn TaskLedger) {
    assert_eq!(l.check_room("a", 0), Ok(()));
    l.insert(rec("a", "t1", Some(10)), 0).unwrap();
    assert_eq!(l.check_room("a", 0), Ok(()));
    l.insert(rec("a", "t2", None), 0).unwrap();
    assert_eq!(l.check_room("a", 5), Err(LedgerError::ScopeFull(2)));
    assert_eq!(l.check_room("b", 5), Ok(()), "another scope has room");
    assert_eq!(
        l.insert(rec("a", "t3", None), 5),
        Err(LedgerError::ScopeFull(2))
    );
    assert!(l.get("a", "t1", 9).is_some());
    assert_eq!(l.scope_of("t1", 9), Ok(Some("a".into())));
    assert_eq!(
        l.scope_of("t1", 10),
        Ok(None),
        "an expired task is no one's"
    );
    assert!(l.get("a", "t1", 10).is_none());
    assert!(l.update("a", "t1", 10, &mut |_| {}).is_none());
    assert_eq!(ids(&l.list("a", None, 10, 10).unwrap()), ["t2"]);
    // The expired task no longer counts.
    assert_eq!(l.check_room("a", 10), Ok(()));
    l.insert(rec("a", "t3", None), 10).unwrap();
    assert_eq!(l.len(), 2);
    l.insert(rec("b", "u1", Some(1)), 0).unwrap();
    assert_eq!(l.evict_expired(100), 1);
    assert_eq!(l.evict_expired(100), 0);
    l.drop_scope("a");
    assert!(l.is_empty());
}

/// A change to the id or scope is dropped, and the record answered is the
/// one stored: no client can hand its task to another principal.
fn updates_cannot_move_a_record(l: &dyn TaskLedger) {
    l.insert(rec("a", "t1", None), 0).unwrap();
    let updated = l
        .update("a", "t1", 1, &mut |r| {
            r.scope = "b".into();
            r.task.task_id = "t2".into();
            r.task.status = TaskStatus::Completed;
        })
        .unwrap();
    assert_eq!((updated.scope.as_str(), updated.id()), ("a", "t1"));
    assert_eq!(updated.task.status, TaskStatus::Completed);
    assert_eq!(l.get("a", "t1", 1).unwrap(), updated);
    assert_eq!(l.get("b", "t1", 1), None);
    assert_eq!(l.get("b", "t2", 1), None);
    assert_eq!(l.get("a", "t2", 1), None);
}

fn updates_keep_payloads(l: &dyn TaskLedger) {
    l.insert(rec("a", "t1", Some(1_000)), 0).unwrap();
    let error = crate::jsonrpc::ErrorObject {
        code: -32603,
        message: "boom".into(),
        data: Some(serde_json::json!({"why": "test"})),
    };
    let updated = l
        .update("a", "t1", 1, &mut |r| {
            r.task.status = TaskStatus::Failed;
            r.payload = Payload::Error(error.clone());
        })
        .unwrap();
    assert_eq!(updated.payload, Payload::Error(error.clone()));
    assert_eq!(l.get("a", "t1", 1).unwrap(), updated);
    let result = serde_json::json!({"content": [{"type": "text", "text": "hi"}], "isError": false});
    l.update("a", "t1", 1, &mut |r| {
        r.cancel_pinned = true;
        r.payload = Payload::Result(result.clone());
        r.task.extra.insert("x-vendor".into(), 7.into());
    })
    .unwrap();
    let got = l.get("a", "t1", 1).unwrap();
    assert!(got.cancel_pinned && got.is_terminal());
    assert_eq!(got.payload, Payload::Result(result));
    // The same record without its payload; the payload stays cached.
    let task_only = l.try_get_task("a", "t1", 1).unwrap().unwrap();
    assert_eq!(task_only.payload, Payload::None);
    assert_eq!(
        task_only,
        TaskRecord {
            payload: Payload::None,
            ..got.clone()
        }
    );
    assert_eq!(l.try_get_task("b", "t1", 1).unwrap(), None);
    // A page lists tasks without their payloads, the same way.
    let page = l.list("a", None, 10, 1).unwrap();
    assert_eq!(page.records, std::slice::from_ref(&task_only));
    assert_eq!(l.get("a", "t1", 1).unwrap(), got);
    assert_eq!(got.task.extra["x-vendor"], 7);
    assert_eq!(l.get("b", "t1", 1), None);
    // An unchanged update answers the record as is.
    assert_eq!(l.update("a", "t1", 1, &mut |_| {}).unwrap(), got);
    let inputs: serde_json::Map<String, serde_json::Value> =
        serde_json::from_value(serde_json::json!({"k": {"method": "elicitation/create"}})).unwrap();
    l.insert(
        TaskRecord {
            payload: Payload::Input(inputs.clone()),
            synthetic: true,
            ..rec("a", "t2", None)
        },
        1,
    )
    .unwrap();
    let t2 = l.get("a", "t2", 1).unwrap();
    assert!(t2.synthetic);
    assert_eq!(t2.payload, Payload::Input(inputs));
}

#[test]
fn memory_ledger_keeps_the_contract() {
    contract(&|cap| Box::new(MemoryLedger::new(cap)));
}

#[test]
fn disk_ledger_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let n = std::sync::atomic::AtomicUsize::new(0);
    contract(&|cap| {
        let i = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = dir.path().join(format!("ledger-{i}.redb"));
        Box::new(DiskLedger::open(&path, cap).unwrap())
    });
}

#[test]
fn a_reopened_disk_ledger_remembers_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.redb");
    let cursor = {
        let l = DiskLedger::open(&path, 100).unwrap();
        for i in 0..3 {
            l.insert(rec("alice", &format!("t{i}"), None), 0).unwrap();
        }
        l.insert(rec("bob", "b0", Some(50)), 0).unwrap();
        l.update("alice", "t1", 0, &mut |r| r.cancel_pinned = true)
            .unwrap();
        l.list("alice", None, 1, 0).unwrap().next_cursor.unwrap()
    };
    let l = DiskLedger::open(&path, 100).unwrap();
    assert_eq!(l.len(), 4);
    assert!(l.get("alice", "t1", 0).unwrap().cancel_pinned);
    assert_eq!(l.get("bob", "t1", 0), None);
    // Cursors and ordering carry over; new records still sort newest.
    assert_eq!(
        ids(&l.list("alice", Some(&cursor), 10, 0).unwrap()),
        ["t1", "t0"]
    );
    l.insert(rec("alice", "t3", None), 0).unwrap();
    assert_eq!(ids(&l.list("alice", None, 1, 0).unwrap()), ["t3"]);
    // Expiry is on the shared clock: still due after the restart.
    assert_eq!(l.evict_expired(50), 1);
}

#[test]
fn a_disk_ledger_is_one_process_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.redb");
    let first = DiskLedger::open(&path, 10).unwrap();
    let err = DiskLedger::open(&path, 10).unwrap_err();
    assert!(err.to_string().contains("in use"), "{err}");
    drop(first);
    DiskLedger::open(&path, 10).unwrap();
    let not_a_ledger = dir.path().join("junk");
    std::fs::write(&not_a_ledger, b"definitely not redb").unwrap();
    let err = DiskLedger::open(&not_a_ledger, 10).unwrap_err();
    assert!(matches!(err, LedgerError::Storage(_)), "{err}");
    let missing_dir = dir.path().join("no/such/dir/ledger.redb");
    assert!(DiskLedger::open(&missing_dir, 10).is_err());
}

#[test]
fn per_process_scopes_can_be_swept() {
    let dir = tempfile::tempdir().unwrap();
    let l = DiskLedger::open(&dir.path().join("l.redb"), 10).unwrap();
    l.insert(rec("session:abc", "s1", None), 0).unwrap();
    l.insert(rec("session:abd", "s2", None), 0).unwrap();
    l.insert(rec("sessions-of-alice", "a1", None), 0).unwrap();
    l.insert(rec("alice", "a2", None), 0).unwrap();
    assert_eq!(l.drop_scopes_with_prefix("session:").unwrap(), 2);
    assert_eq!(l.len(), 2);
    assert!(l.get("sessions-of-alice", "a1", 0).is_some());
}

#[path = "../../tests/support/redis.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_server;

#[test]
fn redis_ledger_keeps_the_contract() {
    let server = redis_server::RedisServer::start();
    let n = std::sync::atomic::AtomicUsize::new(0);
    contract(&|cap| {
        // One key prefix per ledger: each check starts from an empty store.
        let i = n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Box::new(RedisLedger::open(&server.url(), &format!("contract-{i}"), cap).unwrap())
    });
}

#[test]
fn redis_ledgers_on_one_server_share_tasks_and_the_cap() {
    let server = redis_server::RedisServer::start();
    let a = RedisLedger::open(&server.url(), "shim", 2).unwrap();
    let b = RedisLedger::open(&server.url(), "shim", 2).unwrap();
    let other = RedisLedger::open(&server.url(), "another-deployment", 2).unwrap();
    a.insert(rec("alice", "t1", None), 0).unwrap();
    b.insert(rec("alice", "t2", Some(50)), 0).unwrap();
    // The cap counts what every instance stored.
    assert_eq!(
        a.insert(rec("alice", "t3", None), 0),
        Err(LedgerError::ScopeFull(2))
    );
    assert_eq!(ids(&b.list("alice", None, 10, 0).unwrap()), ["t2", "t1"]);
    // A cursor from one instance pages on the other.
    let cursor = a.list("alice", None, 1, 0).unwrap().next_cursor.unwrap();
    assert_eq!(ids(&b.list("alice", Some(&cursor), 10, 0).unwrap()), ["t1"]);
    // A cancel pin set through one is seen through the other.
    b.update("alice", "t1", 0, &mut |r| r.cancel_pinned = true)
        .unwrap();
    assert!(a.get("alice", "t1", 0).unwrap().cancel_pinned);
    assert_eq!(a.get("bob", "t1", 0), None);
    // Another prefix is another ledger.
    assert_eq!(other.get("alice", "t1", 0), None);
    assert_eq!(other.len(), 0);
    // Either instance's sweeper evicts for both.
    assert_eq!(b.evict_expired(50), 1);
    assert_eq!(a.len(), 1);
    a.insert(rec("alice", "t3", None), 60).unwrap();
}

#[test]
fn redis_updates_from_many_threads_all_land() {
    let server = redis_server::RedisServer::start();
    let url = server.url();
    let first = RedisLedger::open(&url, "race", 10).unwrap();
    first.insert(rec("alice", "t", None), 0).unwrap();
    // Each thread is its own instance (own connection) appending to the
    // status message: optimistic locking must not lose any append.
    std::thread::scope(|s| {
        for i in 0..4 {
            let url = &url;
            s.spawn(move || {
                let l = RedisLedger::open(url, "race", 10).unwrap();
                for j in 0..25 {
                    l.update("alice", "t", 0, &mut |r| {
                        let m = r.task.status_message.get_or_insert_with(String::new);
                        m.push_str(&format!("{i}.{j};"));
                    })
                    .unwrap();
                }
            });
        }
    });
    let msg = first
        .get("alice", "t", 0)
        .unwrap()
        .task
        .status_message
        .unwrap();
    assert_eq!(msg.matches(';').count(), 100, "{msg}");
}

/// Clients connected to `url`'s server, this probe included.
fn redis_clients(url: &str) -> usize {
    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
    let info: String = redis::cmd("INFO").arg("clients").query(&mut c).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("INFO clients names connected_clients")
}

#[test]
fn redis_calls_from_many_threads_share_a_bounded_pool() {
    let mut server = redis_server::RedisServer::start();
    let url = server.url();
    let l = RedisLedger::open_with_connections(&url, "pool", 1_000, 3).unwrap();
    let threads = 8;
    std::thread::scope(|s| {
        for t in 0..threads {
            let l = &l;
            s.spawn(move || {
                for j in 0..40 {
                    let id = format!("t{t}-{j}");
                    l.insert(rec("alice", &id, None), 0).unwrap();
                    assert!(l.try_get("alice", &id, 0).unwrap().is_some());
                }
            });
        }
    });
    assert_eq!(l.len(), threads * 40, "every call landed");
    let open = redis_clients(&url) - 1;
    assert!(
        (1..=3).contains(&open),
        "{open} connections for a pool of 3"
    );

    // A call that panics mid-way gives its place back: more panics than
    // the pool has places, then a call that must not wait for a free one.
    // (`update` applies the change once to see whether it changes
    // anything, then again on the connection, between WATCH and EXEC:
    // the second one panics.)
    for _ in 0..5 {
        let mut calls = 0;
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = l.update("alice", "t0-0", 0, &mut |r| {
                calls += 1;
                assert!(calls < 2, "a bug in a change");
                r.cancel_pinned = !r.cancel_pinned;
            });
        }));
        assert!(panicked.is_err(), "the change ran on the connection");
    }
    let started = std::time::Instant::now();
    assert!(l.try_get("alice", "t0-0", 0).unwrap().is_some());
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "the pool was used up by panics"
    );

    // A restart breaks every pooled connection: one call may fail on a
    // dead one, which drops them all, and the next works.
    server.restart();
    let failed = (0..5)
        .take_while(|_| l.insert(rec("alice", "after", None), 0).is_err())
        .count();
    assert!(failed <= 1, "{failed} calls failed after the restart");
    assert_eq!(l.len(), 1, "the restarted (empty) server took the insert");
}

#[test]
fn a_dead_redis_is_an_error_not_a_hang() {
    let server = redis_server::RedisServer::start();
    let url = server.url();
    let l = RedisLedger::open(&url, "gone", 10).unwrap();
    l.insert(rec("alice", "t", None), 0).unwrap();
    drop(server);
    assert!(matches!(
        l.insert(rec("alice", "u", None), 0),
        Err(LedgerError::Storage(_))
    ));
    assert!(l.list("alice", None, 10, 0).is_err());
    assert_eq!(l.get("alice", "t", 0), None);
    // The fallible reads say why, so the fronts answer -32603, not -32602.
    assert!(matches!(
        l.try_get("alice", "t", 0),
        Err(LedgerError::Storage(_))
    ));
    assert!(matches!(
        l.try_update("alice", "t", 0, &mut |r| r.cancel_pinned = true),
        Err(LedgerError::Storage(_))
    ));
    assert!(RedisLedger::open(&url, "gone", 10).is_err());
}
