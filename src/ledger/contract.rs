//! The [`TaskLedger`] contract, checked against every implementation, plus
//! what only the durable one promises (a reopened file remembers).

use super::*;
use crate::scope::Principal;
use crate::wire::modern::Payload;
use crate::wire::{TaskStatus, legacy};

/// The scope of the principal `name` (as a resolver's principal is filed).
pub(super) fn sc(name: &str) -> Scope {
    Principal::new(name).into()
}

/// A working task `id` of [`sc`]`(scope)`.
pub(super) fn rec(scope: &str, id: &str, expires_at: Option<Millis>) -> TaskRecord {
    TaskRecord {
        scope: sc(scope),
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

/// The per-scope cap of each ledger [`contract`] is given, in order.
const CAPS: [usize; 6] = [100, 100, 2, 100, 100, 100];

/// Runs every contract check, each on its own fresh ledger (made with the
/// cap of [`CAPS`] in the same place).
async fn contract(ledgers: Vec<Box<dyn TaskLedger>>) {
    let [i, p, e, k, m, c]: [Box<dyn TaskLedger>; 6] = ledgers.try_into().expect("six ledgers");
    isolation(&*i).await;
    paging(&*p).await;
    expiry_and_caps(&*e).await;
    updates_keep_payloads(&*k).await;
    updates_cannot_move_a_record(&*m).await;
    is_current_is_a_fresh_read(&*c).await;
}

async fn isolation(l: &dyn TaskLedger) {
    l.insert(rec("alice", "t1", None), 0).await.unwrap();
    assert_eq!(l.scope_of("t1", 0).await, Ok(Some(sc("alice"))));
    assert_eq!(l.scope_of("nope", 0).await, Ok(None));
    assert!(l.get(&sc("alice"), "t1", 0).await.unwrap().is_some());
    assert_eq!(l.get(&sc("bob"), "t1", 0).await.unwrap(), None);
    assert_eq!(l.get(&sc("bob"), "nope", 0).await.unwrap(), None);
    assert!(
        l.update(&sc("bob"), "t1", 0, &mut |r| r.cancel_pinned = true)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        !l.get(&sc("alice"), "t1", 0)
            .await
            .unwrap()
            .unwrap()
            .cancel_pinned
    );
    assert!(
        l.list(&sc("bob"), None, 10, 0)
            .await
            .unwrap()
            .records
            .is_empty()
    );
    l.drop_scope(&sc("bob")).await.unwrap();
    assert!(l.get(&sc("alice"), "t1", 0).await.unwrap().is_some());
}

async fn paging(l: &dyn TaskLedger) {
    for i in 0..5 {
        l.insert(rec("a", &format!("t{i}"), None), 0).await.unwrap();
        l.insert(rec("b", &format!("u{i}"), None), 0).await.unwrap();
    }
    let p1 = l.list(&sc("a"), None, 2, 0).await.unwrap();
    assert_eq!(ids(&p1), ["t4", "t3"]);
    let c = p1.next_cursor.unwrap();
    let p2 = l.list(&sc("a"), Some(&c), 2, 0).await.unwrap();
    assert_eq!(ids(&p2), ["t2", "t1"]);
    let p3 = l
        .list(&sc("a"), p2.next_cursor.as_deref(), 2, 0)
        .await
        .unwrap();
    assert_eq!(ids(&p3), ["t0"]);
    assert_eq!(p3.next_cursor, None);
    // An exactly full last page has no next cursor.
    assert_eq!(
        l.list(&sc("a"), None, 5, 0).await.unwrap().next_cursor,
        None
    );
    assert_eq!(
        l.list(&sc("b"), Some(&c), 2, 0).await,
        Err(LedgerError::BadCursor)
    );
    assert_eq!(
        l.list(&sc("a"), Some("garbage!"), 2, 0).await,
        Err(LedgerError::BadCursor)
    );
    // Re-inserting an id moves it to the front.
    l.insert(rec("a", "t1", None), 0).await.unwrap();
    assert_eq!(
        ids(&l.list(&sc("a"), None, 2, 0).await.unwrap()),
        ["t1", "t4"]
    );
    assert_eq!(l.len().await.unwrap(), 10);
}

async fn expiry_and_caps(l: &dyn TaskLedger) {
    assert_eq!(l.check_room(&sc("a"), 0).await, Ok(()));
    l.insert(rec("a", "t1", Some(10)), 0).await.unwrap();
    assert_eq!(l.check_room(&sc("a"), 0).await, Ok(()));
    l.insert(rec("a", "t2", None), 0).await.unwrap();
    assert_eq!(
        l.check_room(&sc("a"), 5).await,
        Err(LedgerError::ScopeFull(2))
    );
    assert_eq!(
        l.check_room(&sc("b"), 5).await,
        Ok(()),
        "another scope has room"
    );
    assert_eq!(
        l.insert(rec("a", "t3", None), 5).await,
        Err(LedgerError::ScopeFull(2))
    );
    assert!(l.get(&sc("a"), "t1", 9).await.unwrap().is_some());
    assert_eq!(l.scope_of("t1", 9).await, Ok(Some(sc("a"))));
    assert_eq!(
        l.scope_of("t1", 10).await,
        Ok(None),
        "an expired task is no one's"
    );
    assert!(l.get(&sc("a"), "t1", 10).await.unwrap().is_none());
    assert!(
        l.update(&sc("a"), "t1", 10, &mut |_| {})
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(ids(&l.list(&sc("a"), None, 10, 10).await.unwrap()), ["t2"]);
    // The expired task no longer counts.
    assert_eq!(l.check_room(&sc("a"), 10).await, Ok(()));
    l.insert(rec("a", "t3", None), 10).await.unwrap();
    assert_eq!(l.len().await.unwrap(), 2);
    l.insert(rec("b", "u1", Some(1)), 0).await.unwrap();
    assert_eq!(l.evict_expired(100).await.unwrap(), 1);
    assert_eq!(l.evict_expired(100).await.unwrap(), 0);
    l.drop_scope(&sc("a")).await.unwrap();
    assert!(l.is_empty().await.unwrap());
}

/// A change to the id or scope is dropped, and the record answered is the
/// one stored: no client can hand its task to another principal.
async fn updates_cannot_move_a_record(l: &dyn TaskLedger) {
    l.insert(rec("a", "t1", None), 0).await.unwrap();
    let updated = l
        .update(&sc("a"), "t1", 1, &mut |r| {
            r.scope = sc("b");
            r.task.task_id = "t2".into();
            r.task.status = TaskStatus::Completed;
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!((&updated.scope, updated.id()), (&sc("a"), "t1"));
    assert_eq!(updated.task.status, TaskStatus::Completed);
    assert_eq!(l.get(&sc("a"), "t1", 1).await.unwrap().unwrap(), updated);
    assert_eq!(l.get(&sc("b"), "t1", 1).await.unwrap(), None);
    assert_eq!(l.get(&sc("b"), "t2", 1).await.unwrap(), None);
    assert_eq!(l.get(&sc("a"), "t2", 1).await.unwrap(), None);
}

/// `is_current` (and `is_current_now`, where a store answers it) says
/// what reading the record again and comparing would: after each kind of
/// change, for another scope, once expired, gone.
async fn is_current_is_a_fresh_read(l: &dyn TaskLedger) {
    type Edit = fn(&mut TaskRecord);
    let changes: [(&str, Edit); 11] = [
        ("status", |r| r.task.status = TaskStatus::InputRequired),
        ("status message", |r| {
            r.task.status_message = Some("half way".into())
        }),
        ("created at", |r| {
            r.task.created_at = "2026-11-29T10:00:01.000Z".into()
        }),
        ("last updated", |r| {
            r.task.last_updated_at = "2026-11-29T10:00:01.000Z".into()
        }),
        ("ttl", |r| r.task.ttl = Some(60_000)),
        ("poll interval", |r| r.task.poll_interval = None),
        ("extra", |r| {
            r.task.extra.insert("x-vendor".into(), 7.into());
        }),
        ("cancel pinned", |r| r.cancel_pinned = true),
        ("synthetic", |r| r.synthetic = true),
        ("expiry", |r| r.expires_at = Some(2_000)),
        ("payload, which a task-only read leaves out", |r| {
            r.payload = Payload::Result(serde_json::json!({"content": []}));
        }),
    ];
    l.insert(rec("a", "t1", Some(1_000)), 0).await.unwrap();
    for (what, change) in changes {
        let before = l.get_task(&sc("a"), "t1", 1).await.unwrap().unwrap();
        assert_eq!(current(l, &sc("a"), &before, 1).await, Ok(true), "{what}");
        l.update(&sc("a"), "t1", 1, &mut |r| change(r))
            .await
            .unwrap();
        let after = l.get_task(&sc("a"), "t1", 1).await.unwrap().unwrap();
        let changed = after != before;
        assert_eq!(
            current(l, &sc("a"), &before, 1).await,
            Ok(!changed),
            "{what}"
        );
        assert_eq!(current(l, &sc("a"), &after, 1).await, Ok(true), "{what}");
        // A full read of a record with a payload is not what a task-only
        // read gives.
        let full = l.get(&sc("a"), "t1", 1).await.unwrap().unwrap();
        let task_only = full.payload == Payload::None;
        assert_eq!(
            current(l, &sc("a"), &full, 1).await,
            Ok(task_only),
            "{what}"
        );
    }
    let now = l.get_task(&sc("a"), "t1", 1).await.unwrap().unwrap();
    assert_eq!(current(l, &sc("b"), &now, 1).await, Ok(false));
    let elsewhere = TaskRecord {
        scope: sc("b"),
        ..now.clone()
    };
    assert_eq!(current(l, &sc("b"), &elsewhere, 1).await, Ok(false));
    assert_eq!(
        current(l, &sc("a"), &now, 2_000).await,
        Ok(false),
        "expired"
    );
    l.drop_scope(&sc("a")).await.unwrap();
    assert_eq!(current(l, &sc("a"), &now, 1).await, Ok(false), "gone");
}

/// `l.is_current`, checked against `l.is_current_now` where the store
/// answers that: the two must never disagree.
async fn current(l: &dyn TaskLedger, scope: &Scope, rec: &TaskRecord, now: Millis) -> Current {
    let awaited = l.is_current(scope, rec, now).await;
    if let Some(at_once) = l.is_current_now(scope, rec, now) {
        assert_eq!(at_once, awaited, "is_current_now and is_current disagree");
    }
    awaited
}

async fn updates_keep_payloads(l: &dyn TaskLedger) {
    l.insert(rec("a", "t1", Some(1_000)), 0).await.unwrap();
    let error = crate::jsonrpc::ErrorObject {
        code: -32603,
        message: "boom".into(),
        data: Some(serde_json::json!({"why": "test"})),
    };
    let updated = l
        .update(&sc("a"), "t1", 1, &mut |r| {
            r.task.status = TaskStatus::Failed;
            r.payload = Payload::Error(error.clone());
        })
        .await
        .unwrap()
        .unwrap();
    assert_eq!(updated.payload, Payload::Error(error.clone()));
    assert_eq!(l.get(&sc("a"), "t1", 1).await.unwrap().unwrap(), updated);
    let result = serde_json::json!({"content": [{"type": "text", "text": "hi"}], "isError": false});
    l.update(&sc("a"), "t1", 1, &mut |r| {
        r.cancel_pinned = true;
        r.payload = Payload::Result(result.clone());
        r.task.extra.insert("x-vendor".into(), 7.into());
    })
    .await
    .unwrap()
    .unwrap();
    let got = l.get(&sc("a"), "t1", 1).await.unwrap().unwrap();
    assert!(got.cancel_pinned && got.is_terminal());
    assert_eq!(got.payload, Payload::Result(result));
    // The same record without its payload; the payload stays cached.
    let task_only = l.get_task(&sc("a"), "t1", 1).await.unwrap().unwrap();
    assert_eq!(task_only.payload, Payload::None);
    assert_eq!(
        task_only,
        TaskRecord {
            payload: Payload::None,
            ..got.clone()
        }
    );
    assert_eq!(l.get_task(&sc("b"), "t1", 1).await.unwrap(), None);
    // A page lists tasks without their payloads, the same way.
    let page = l.list(&sc("a"), None, 10, 1).await.unwrap();
    assert_eq!(page.records, std::slice::from_ref(&task_only));
    assert_eq!(l.get(&sc("a"), "t1", 1).await.unwrap().unwrap(), got);
    assert_eq!(got.task.extra["x-vendor"], 7);
    assert_eq!(l.get(&sc("b"), "t1", 1).await.unwrap(), None);
    // An unchanged update answers the record as is.
    assert_eq!(
        l.update(&sc("a"), "t1", 1, &mut |_| {})
            .await
            .unwrap()
            .unwrap(),
        got
    );
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
    .await
    .unwrap();
    let t2 = l.get(&sc("a"), "t2", 1).await.unwrap().unwrap();
    assert!(t2.synthetic);
    assert_eq!(t2.payload, Payload::Input(inputs));
}

#[tokio::test]
async fn memory_ledger_keeps_the_contract() {
    let ledgers = CAPS
        .iter()
        .map(|&cap| Box::new(MemoryLedger::new(cap)) as Box<dyn TaskLedger>)
        .collect();
    contract(ledgers).await;
}

#[tokio::test]
async fn disk_ledger_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let ledgers = CAPS
        .iter()
        .enumerate()
        .map(|(i, &cap)| {
            let path = dir.path().join(format!("ledger-{i}.redb"));
            Box::new(DiskLedger::open(&path, cap).unwrap()) as Box<dyn TaskLedger>
        })
        .collect();
    contract(ledgers).await;
}

#[tokio::test]
async fn a_reopened_disk_ledger_remembers_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.redb");
    let cursor = {
        let l = DiskLedger::open(&path, 100).unwrap();
        for i in 0..3 {
            l.insert(rec("alice", &format!("t{i}"), None), 0)
                .await
                .unwrap();
        }
        l.insert(rec("bob", "b0", Some(50)), 0).await.unwrap();
        l.update(&sc("alice"), "t1", 0, &mut |r| r.cancel_pinned = true)
            .await
            .unwrap()
            .unwrap();
        l.list(&sc("alice"), None, 1, 0)
            .await
            .unwrap()
            .next_cursor
            .unwrap()
    };
    let l = DiskLedger::open(&path, 100).unwrap();
    assert_eq!(l.len().await.unwrap(), 4);
    assert!(
        l.get(&sc("alice"), "t1", 0)
            .await
            .unwrap()
            .unwrap()
            .cancel_pinned
    );
    assert_eq!(l.get(&sc("bob"), "t1", 0).await.unwrap(), None);
    // Cursors and ordering carry over; new records still sort newest.
    assert_eq!(
        ids(&l.list(&sc("alice"), Some(&cursor), 10, 0).await.unwrap()),
        ["t1", "t0"]
    );
    l.insert(rec("alice", "t3", None), 0).await.unwrap();
    assert_eq!(
        ids(&l.list(&sc("alice"), None, 1, 0).await.unwrap()),
        ["t3"]
    );
    // Expiry is on the shared clock: still due after the restart.
    assert_eq!(l.evict_expired(50).await.unwrap(), 1);
}

#[tokio::test]
async fn a_disk_ledger_is_one_process_at_a_time() {
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

/// The start-up sweep drops the scopes that end with their session and
/// nothing else: not a principal named like one, not a key from before
/// scopes were typed that merely starts like one.
#[tokio::test]
async fn per_process_scopes_can_be_swept() {
    let dir = tempfile::tempdir().unwrap();
    let l = DiskLedger::open(&dir.path().join("l.redb"), 10).unwrap();
    let kept = [
        sc("session:abc"),
        Scope::from_key("sessions-of-alice"),
        Scope::anonymous(),
    ];
    let swept = [Scope::session("abc"), Scope::session("abd"), Scope::stdio()];
    for (i, scope) in kept.iter().chain(&swept).enumerate() {
        let record = TaskRecord {
            scope: scope.clone(),
            ..rec("x", &format!("t{i}"), None)
        };
        l.insert(record, 0).await.unwrap();
    }
    assert_eq!(l.drop_session_scopes().unwrap(), 3);
    assert_eq!(l.len().await.unwrap(), 3);
    for (i, scope) in kept.iter().enumerate() {
        let id = format!("t{i}");
        assert_eq!(l.get(scope, &id, 0).await.unwrap().unwrap().scope, *scope);
    }
}

#[path = "../../tests/support/redis.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_server;

#[tokio::test]
async fn redis_ledger_keeps_the_contract() {
    let server = redis_server::RedisServer::start();
    let mut ledgers: Vec<Box<dyn TaskLedger>> = Vec::new();
    for (i, &cap) in CAPS.iter().enumerate() {
        // One key prefix per ledger: each check starts from an empty store.
        let l = RedisLedger::open(&server.url(), &format!("contract-{i}"), cap)
            .await
            .unwrap();
        ledgers.push(Box::new(l));
    }
    contract(ledgers).await;
}

#[tokio::test]
async fn redis_ledgers_on_one_server_share_tasks_and_the_cap() {
    let server = redis_server::RedisServer::start();
    let a = RedisLedger::open(&server.url(), "shim", 2).await.unwrap();
    let b = RedisLedger::open(&server.url(), "shim", 2).await.unwrap();
    let other = RedisLedger::open(&server.url(), "another-deployment", 2)
        .await
        .unwrap();
    a.insert(rec("alice", "t1", None), 0).await.unwrap();
    b.insert(rec("alice", "t2", Some(50)), 0).await.unwrap();
    // The cap counts what every instance stored.
    assert_eq!(
        a.insert(rec("alice", "t3", None), 0).await,
        Err(LedgerError::ScopeFull(2))
    );
    assert_eq!(
        ids(&b.list(&sc("alice"), None, 10, 0).await.unwrap()),
        ["t2", "t1"]
    );
    // A cursor from one instance pages on the other.
    let cursor = a
        .list(&sc("alice"), None, 1, 0)
        .await
        .unwrap()
        .next_cursor
        .unwrap();
    assert_eq!(
        ids(&b.list(&sc("alice"), Some(&cursor), 10, 0).await.unwrap()),
        ["t1"]
    );
    // A cancel pin set through one is seen through the other.
    b.update(&sc("alice"), "t1", 0, &mut |r| r.cancel_pinned = true)
        .await
        .unwrap();
    assert!(
        a.get(&sc("alice"), "t1", 0)
            .await
            .unwrap()
            .unwrap()
            .cancel_pinned
    );
    assert_eq!(a.get(&sc("bob"), "t1", 0).await.unwrap(), None);
    // Another prefix is another ledger.
    assert_eq!(other.get(&sc("alice"), "t1", 0).await.unwrap(), None);
    assert_eq!(other.len().await.unwrap(), 0);
    // Either instance's sweeper evicts for both.
    assert_eq!(b.evict_expired(50).await.unwrap(), 1);
    assert_eq!(a.len().await.unwrap(), 1);
    a.insert(rec("alice", "t3", None), 60).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_updates_from_many_instances_all_land() {
    let server = redis_server::RedisServer::start();
    let url = server.url();
    let first = RedisLedger::open(&url, "race", 10).await.unwrap();
    first.insert(rec("alice", "t", None), 0).await.unwrap();
    // Each task is its own instance (own connection) appending to the
    // status message: optimistic locking must not lose any append.
    let mut writers = tokio::task::JoinSet::new();
    for i in 0..4 {
        let url = url.clone();
        writers.spawn(async move {
            let l = RedisLedger::open(&url, "race", 10).await.unwrap();
            for j in 0..25 {
                l.update(&sc("alice"), "t", 0, &mut |r| {
                    let m = r.task.status_message.get_or_insert_with(String::new);
                    m.push_str(&format!("{i}.{j};"));
                })
                .await
                .unwrap();
            }
        });
    }
    while let Some(done) = writers.join_next().await {
        done.unwrap();
    }
    let msg = first
        .get(&sc("alice"), "t", 0)
        .await
        .unwrap()
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_calls_at_once_share_one_connection_that_survives_a_restart() {
    let mut server = redis_server::RedisServer::start();
    let url = server.url();
    let l = std::sync::Arc::new(RedisLedger::open(&url, "pool", 1_000).await.unwrap());
    let tasks = 8;
    let mut callers = tokio::task::JoinSet::new();
    for t in 0..tasks {
        let l = l.clone();
        callers.spawn(async move {
            for j in 0..40 {
                let id = format!("t{t}-{j}");
                l.insert(rec("alice", &id, None), 0).await.unwrap();
                assert!(l.get(&sc("alice"), &id, 0).await.unwrap().is_some());
            }
        });
    }
    while let Some(done) = callers.join_next().await {
        done.unwrap();
    }
    assert_eq!(l.len().await.unwrap(), tasks * 40, "every call landed");
    assert_eq!(redis_clients(&url) - 1, 1, "one multiplexed connection");

    // A restart breaks the connection: one call may fail on it, which
    // drops it, and the next connects afresh.
    server.restart();
    let mut failed = 0;
    for _ in 0..5 {
        if l.insert(rec("alice", "after", None), 0).await.is_ok() {
            break;
        }
        failed += 1;
    }
    assert!(failed <= 1, "{failed} calls failed after the restart");
    assert_eq!(
        l.len().await.unwrap(),
        1,
        "the restarted (empty) server took the insert"
    );
}

#[tokio::test]
async fn a_dead_redis_is_an_error_not_a_hang() {
    let server = redis_server::RedisServer::start();
    let url = server.url();
    let l = RedisLedger::open(&url, "gone", 10).await.unwrap();
    l.insert(rec("alice", "t", None), 0).await.unwrap();
    drop(server);
    assert!(matches!(
        l.insert(rec("alice", "u", None), 0).await,
        Err(LedgerError::Storage(_))
    ));
    assert!(l.list(&sc("alice"), None, 10, 0).await.is_err());
    // A failure is never a miss, so the fronts answer -32603, not -32602.
    assert!(matches!(
        l.get(&sc("alice"), "t", 0).await,
        Err(LedgerError::Storage(_))
    ));
    assert!(matches!(
        l.update(&sc("alice"), "t", 0, &mut |r| r.cancel_pinned = true)
            .await,
        Err(LedgerError::Storage(_))
    ));
    assert!(l.len().await.is_err());
    assert!(RedisLedger::open(&url, "gone", 10).await.is_err());
}

/// A task's outcome seen while Redis does not answer is kept, not
/// dropped: once Redis is back, the next read of the task stores it
/// first and shows it, and the background retry stores it even if
/// nothing on this instance reads the task (another instance sees it).
#[tokio::test]
async fn a_change_redis_did_not_take_is_stored_when_it_is_back() {
    let server = redis_server::RedisServer::start();
    let url = server.url();
    let here = RedisLedger::open(&url, "kept", 10).await.unwrap();
    let there = RedisLedger::open(&url, "kept", 10).await.unwrap();
    for id in ["read-here", "read-there"] {
        here.insert(rec("alice", id, None), 0).await.unwrap();
    }
    server.freeze();
    let finish = |id: &str| {
        let id = id.to_owned();
        let change: KeptChange = std::sync::Arc::new(move |r| {
            r.task.status = TaskStatus::Completed;
            r.payload = Payload::Result(serde_json::json!({"content": [], "id": id}));
        });
        change
    };
    for id in ["read-here", "read-there"] {
        let stored = here.update_kept(&sc("alice"), id, 0, finish(id)).await;
        assert!(
            matches!(stored, Err(LedgerError::TimedOut { .. })),
            "{stored:?}"
        );
    }
    server.thaw();
    let got = here
        .get(&sc("alice"), "read-here", 0)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.task.status, TaskStatus::Completed);
    assert!(matches!(got.payload, Payload::Result(_)));
    // Nothing reads "read-there" here: the background retry stores it.
    // (It is scheduled on a timer, so this polls, bounded.)
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let seen = there
            .get(&sc("alice"), "read-there", 0)
            .await
            .unwrap()
            .unwrap();
        if seen.task.status == TaskStatus::Completed {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the kept change never reached redis"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A read while Redis is still down answers the storage error, and the
/// kept change stays kept for the read after it comes back.
#[tokio::test]
async fn a_read_during_the_outage_fails_and_the_change_stays_kept() {
    let server = redis_server::RedisServer::start();
    let l = RedisLedger::open(&server.url(), "kept", 10).await.unwrap();
    l.insert(rec("alice", "t", None), 0).await.unwrap();
    server.freeze();
    let pin: KeptChange = std::sync::Arc::new(|r| r.cancel_pinned = true);
    assert!(l.update_kept(&sc("alice"), "t", 0, pin).await.is_err());
    assert!(matches!(
        l.get_task(&sc("alice"), "t", 0).await,
        Err(LedgerError::TimedOut { .. })
    ));
    assert!(l.list(&sc("alice"), None, 10, 0).await.is_err());
    server.thaw();
    assert!(l.list(&sc("alice"), None, 10, 0).await.unwrap().records[0].cancel_pinned);
}
