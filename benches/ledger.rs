//! What the durable and the shared ledgers cost per call, against the
//! in-memory ledger measured in the same run.
//!
//! For each operation the engines make, on ledgers holding the same
//! records: median ns per call of several batches, and the ratios
//! disk / memory and redis / memory. There is no target: the disk ledger
//! commits every change with an fsync and the Redis ledger makes network
//! round trips, which the memory ledger cannot be compared with; the
//! numbers say what `--ledger PATH` and `--ledger redis://…` cost, and the
//! `list` rows at two sizes show that a page costs the same however many
//! tasks a scope holds.
//!
//! `cargo bench --bench ledger` (needs `redis-server` on the PATH; the bench
//! starts its own on a unix socket, so the Redis figures are a local
//! server's: add the network's round trip for a remote one).
//! `LEDGER_BENCH_DIR` puts the file elsewhere than the temp dir (the fsync
//! cost is the file system's).
//!
//! Each call is awaited on a current-thread runtime (`block_on`), which
//! adds the same small cost to every ledger's figure; the disk ledger's
//! include the hand-off of each transaction to tokio's blocking pool.

use std::hint::black_box;
use std::sync::LazyLock;
use std::time::Instant;

use mcp_tasks_shim::ledger::{DiskLedger, MemoryLedger, RedisLedger, TaskLedger, TaskRecord};
use mcp_tasks_shim::scope::{Principal, Scope};
use mcp_tasks_shim::wire::modern::Payload;
use mcp_tasks_shim::wire::{TaskStatus, legacy};
use serde_json::json;

#[path = "../tests/support/redis.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_server;

/// One timed call on a ledger; the `usize` varies the task it touches.
type Op = dyn Fn(&dyn TaskLedger, usize);

/// Records in the two scopes every ledger is filled with.
const SMALL: usize = 200;
const BIG: usize = 2_000;

/// Batches per measurement; the median is reported.
const BATCHES: usize = 7;

thread_local! {
    /// The runtime every measured call is awaited on (the Redis ledger's
    /// connection runs on it too).
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
}

/// `f` awaited on [`RUNTIME`].
fn block<T>(f: impl std::future::Future<Output = T>) -> T {
    RUNTIME.with(|rt| rt.block_on(f))
}

/// The scope of the principal `name`, built once (not inside a timed call).
fn scope(name: &str) -> Scope {
    Principal::new(name).into()
}

static SMALL_SCOPE: LazyLock<Scope> = LazyLock::new(|| scope("small"));
static BIG_SCOPE: LazyLock<Scope> = LazyLock::new(|| scope("big"));
static INS_SCOPE: LazyLock<Scope> = LazyLock::new(|| scope("ins"));
static RES_SCOPE: LazyLock<Scope> = LazyLock::new(|| scope("res"));

fn record(scope: &Scope, id: &str) -> TaskRecord {
    TaskRecord {
        scope: scope.clone(),
        task: legacy::Task {
            task_id: id.into(),
            status: TaskStatus::Working,
            status_message: None,
            created_at: "2026-11-29T10:00:00.000Z".into(),
            last_updated_at: "2026-11-29T10:00:00.000Z".into(),
            ttl: Some(3_600_000),
            poll_interval: Some(500),
            extra: Default::default(),
        },
        payload: Payload::None,
        cancel_pinned: false,
        synthetic: false,
        expires_at: Some(u64::MAX / 2),
    }
}

/// Median ns per call of `op(i)` over `BATCHES` batches of `n` calls.
fn time(n: usize, mut op: impl FnMut(usize)) -> f64 {
    let mut per_call: Vec<f64> = (0..BATCHES)
        .map(|b| {
            let start = Instant::now();
            for i in 0..n {
                op(b * n + i);
            }
            start.elapsed().as_nanos() as f64 / n as f64
        })
        .collect();
    per_call.sort_by(f64::total_cmp);
    per_call[BATCHES / 2]
}

/// Fills `scope` with `n` records (ids `{name}-{i}`).
fn fill(l: &dyn TaskLedger, scope: &Scope, name: &str, n: usize) {
    for i in 0..n {
        block(l.insert(record(scope, &format!("{name}-{i}")), 0)).expect("insert");
    }
}

fn row(name: &str, memory: f64, disk: f64, redis: f64) {
    println!(
        "{name:<44} {memory:>10.0} {disk:>10.0} {redis:>10.0} {:>9.1}× {:>9.1}×",
        disk / memory,
        redis / memory
    );
}

fn main() {
    let dir = match std::env::var_os("LEDGER_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .expect("a temp dir");
    let mem = MemoryLedger::new(100_000);
    let disk = DiskLedger::open(&dir.path().join("bench.redb"), 100_000).expect("open");
    let server = redis_server::RedisServer::start();
    let redis = block(RedisLedger::open(&server.url(), "bench", 100_000)).expect("redis");
    for l in [&mem as &dyn TaskLedger, &disk, &redis] {
        fill(l, &SMALL_SCOPE, "small", SMALL);
        fill(l, &BIG_SCOPE, "big", BIG);
    }
    println!("ledger file in {}", dir.path().display());
    println!(
        "{:<44} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "operation", "memory ns", "disk ns", "redis ns", "disk/mem", "redis/mem"
    );

    let ops: [(&str, usize, &Op); 6] = [
        ("insert (new task)", 50, &|l, i| {
            block(l.insert(record(&INS_SCOPE, &format!("ins-{i}")), 0)).unwrap()
        }),
        ("get (hit)", 2_000, &|l, i| {
            black_box(block(l.get(&BIG_SCOPE, &format!("big-{}", i % BIG), 0)).unwrap());
        }),
        ("get (foreign scope: a miss)", 2_000, &|l, i| {
            black_box(block(l.get(&SMALL_SCOPE, &format!("big-{}", i % BIG), 0)).unwrap());
        }),
        ("update that changes nothing (a poll)", 2_000, &|l, i| {
            black_box(
                block(
                    l.update(&BIG_SCOPE, &format!("big-{}", i % BIG), 0, &mut |r| {
                        r.task.status = TaskStatus::Working
                    }),
                )
                .unwrap(),
            );
        }),
        ("update with a change (result cached)", 50, &|l, i| {
            black_box(
                block(
                    l.update(&BIG_SCOPE, &format!("big-{}", i % BIG), 0, &mut |r| {
                        r.payload =
                            Payload::Result(json!({"content": [{"type": "text", "text": i}]}))
                    }),
                )
                .unwrap(),
            );
        }),
        ("list: first page of 50 (scope of 200)", 500, &|l, _| {
            black_box(block(l.list(&SMALL_SCOPE, None, 50, 0)).unwrap());
        }),
    ];
    for (name, n, op) in ops {
        let m = time(n, |i| op(&mem, i));
        let d = time(n, |i| op(&disk, i));
        let r = time(n, |i| op(&redis, i));
        row(name, m, d, r);
    }
    let m = time(500, |_| {
        black_box(block(mem.list(&BIG_SCOPE, None, 50, 0)).unwrap());
    });
    let d = time(500, |_| {
        black_box(block(disk.list(&BIG_SCOPE, None, 50, 0)).unwrap());
    });
    let r = time(500, |_| {
        black_box(block(redis.list(&BIG_SCOPE, None, 50, 0)).unwrap());
    });
    row("list: first page of 50 (scope of 2000)", m, d, r);
    concurrent_redis(&server.url());
    big_result(&mem);
    let open = time(5, |_| {
        drop(DiskLedger::open(&dir.path().join("reopen.redb"), 10).expect("open"));
    });
    println!(
        "{:<44} {:>10} {open:>10.0}",
        "open (and close) a ledger file", "-"
    );
}

/// Tasks calling one Redis ledger at once, as a busy shim's requests do:
/// calls per second one call at a time, and with `TASKS` calls in flight
/// on its one multiplexed connection, in the same run. The median of
/// `BATCHES` rounds each.
fn concurrent_redis(url: &str) {
    const TASKS: usize = 8;
    const CALLS: usize = 300;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a runtime");
    let l = std::sync::Arc::new(
        rt.block_on(RedisLedger::open(url, "bench", 100_000))
            .expect("redis"),
    );
    let rate = |tasks: usize| {
        let mut rates: Vec<f64> = (0..BATCHES)
            .map(|_| {
                let start = Instant::now();
                rt.block_on(async {
                    let mut callers = tokio::task::JoinSet::new();
                    for t in 0..tasks {
                        let l = l.clone();
                        callers.spawn(async move {
                            for i in 0..CALLS {
                                let id = format!("big-{}", (t * CALLS + i) % BIG);
                                black_box(l.get(&BIG_SCOPE, &id, 0).await.unwrap());
                            }
                        });
                    }
                    while let Some(done) = callers.join_next().await {
                        done.expect("a caller");
                    }
                });
                (tasks * CALLS) as f64 / start.elapsed().as_secs_f64()
            })
            .collect();
        rates.sort_by(f64::total_cmp);
        rates[BATCHES / 2]
    };
    let single = rate(1);
    let many = rate(TASKS);
    println!(
        "redis get: {single:.0} calls/s one at a time, {many:.0} with {TASKS} tasks \
         calling at once (pipelined on one connection): {:.2}×",
        many / single
    );
}

/// `tasks/get` of a task that finished with a 1 MiB result reads the
/// record without its payload (`get_task`); `tasks/result` needs the
/// payload (`get`). The memory ledger keeps a result as JSON text, so the
/// second decodes 1 MiB and the first should cost what a small record does.
fn big_result(mem: &MemoryLedger) {
    let text = "x".repeat(1 << 20);
    let mut r = record(&RES_SCOPE, "res-1");
    r.task.status = TaskStatus::Completed;
    r.payload = Payload::Result(json!({"content": [{"type": "text", "text": text}]}));
    block(mem.insert(r, 0)).expect("insert");
    let small = time(2_000, |_| {
        black_box(block(mem.get_task(&BIG_SCOPE, "big-7", 0)).unwrap());
    });
    let task_only = time(2_000, |_| {
        black_box(block(mem.get_task(&RES_SCOPE, "res-1", 0)).unwrap());
    });
    let full = time(20, |_| {
        black_box(block(mem.get(&RES_SCOPE, "res-1", 0)).unwrap());
    });
    println!();
    println!("a completed task holding a 1 MiB result (memory ledger)");
    println!(
        "  task only (tasks/get)      {task_only:>10.0} ns  {:>6.2}× a small record's ({small:.0} ns)",
        task_only / small
    );
    println!(
        "  with its result (tasks/result) {full:>10.0} ns  {:>8.0}× the task only",
        full / task_only
    );
    println!();
}
