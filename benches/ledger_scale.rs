//! What the in-memory ledger costs at scale: bytes per tracked task, and
//! whether a `tasks/list` page depends on how many tasks other principals
//! hold.
//!
//! - **Memory**: a counting global allocator measures the live heap bytes
//!   a `MemoryLedger` holds after 1,000,000 realistic records were inserted
//!   (32-hex ids, principal-like scopes, ISO timestamps, a small cached
//!   `CallToolResult`), spread round-robin over 10,000 principals.
//!   Target ≤ 1 KiB per task.
//! - **Page latency**: one principal's first page and its second page (by
//!   cursor; each principal holds 100 tasks, page size 50) in ledgers of
//!   10k, 100k and 1M tasks (100 per principal, more principals). Target:
//!   the 1M / 10k ratio ≈ 1 (O(page), independent of the total). Measured
//!   on the ledger directly and through the legacy front's `tasks/list`
//!   (all tasks terminal, so the front makes no upstream calls).
//!
//! Run with `cargo bench --bench ledger_scale`. The three ledgers are held
//! at once and measured in alternating rounds, so load on the machine hits
//! all alike; the median over rounds is reported.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcp_tasks_shim::bridge::BridgeConfig;
use mcp_tasks_shim::bridge::legacy_front::{LegacyFront, LegacySession};
use mcp_tasks_shim::ids::format_iso;
use mcp_tasks_shim::jsonrpc::Message;
use mcp_tasks_shim::ledger::{MemoryLedger, TaskLedger, TaskRecord};
use mcp_tasks_shim::scope::Scope;
use mcp_tasks_shim::upstream::channel;
use mcp_tasks_shim::wire::modern::Payload;
use mcp_tasks_shim::wire::{TaskStatus, legacy};
use serde_json::{Value, json};

/// Live heap bytes and allocation count, for the memory figure.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counters are
// only bookkeeping beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        ALLOCS.fetch_sub(1, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Target: heap bytes per tracked task.
const TARGET_BYTES: f64 = 1024.0;
/// Tasks per principal in every ledger.
const PER_PRINCIPAL: usize = 100;
/// `tasks/list` page size (the bridge default).
const PAGE: usize = 50;
/// Rounds of page measurements; the median is reported.
const ROUNDS: usize = 15;
/// Calls per round per kind.
const CALLS: usize = 400;
/// What "≈ 1" means for the 1M / 10k ratio on this noisy machine.
const RATIO_TOLERANCE: f64 = 1.5;

/// Small deterministic PRNG (xorshift64*) for ids.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// 128 bits as 32 hex digits, like `ids::random_id`.
    fn id(&mut self) -> String {
        format!("{:016x}{:016x}", self.next(), self.next())
    }
}

/// A principal's scope, as a resolver's principal is filed.
fn scope(p: usize) -> Scope {
    principal(p).into()
}

fn principal(p: usize) -> mcp_tasks_shim::scope::Principal {
    mcp_tasks_shim::scope::Principal::new(format!("user-{p:06}@corp.example.com"))
}

/// A completed task as the legacy front stores it, with its cached result.
fn record(rng: &mut Rng, scope: Scope, i: usize) -> TaskRecord {
    let t = time::OffsetDateTime::UNIX_EPOCH + time::Duration::seconds(1_795_000_000 + i as i64);
    let created_at = format_iso(t);
    let last_updated_at = format_iso(t + time::Duration::milliseconds(1_250));
    let text = format!("Report {i} is ready: 42 rows processed, 0 warnings.");
    TaskRecord {
        scope,
        task: legacy::Task {
            task_id: rng.id(),
            status: TaskStatus::Completed,
            status_message: None,
            created_at,
            last_updated_at,
            ttl: Some(3_600_000),
            poll_interval: Some(5_000),
            extra: Default::default(),
        },
        payload: Payload::Result(json!({
            "content": [{"type": "text", "text": text}],
            "isError": false,
        })),
        cancel_pinned: false,
        synthetic: false,
        // Ledger time is Unix-epoch ms (it survives restarts): expire in
        // 2100, so the front's clock never sees these records as expired.
        expires_at: Some(4_102_444_800_000),
    }
}

/// `f`'s output: the memory ledger's calls never wait, so each is
/// measured as the plain function call it is, without a runtime.
fn now<T>(f: impl std::future::Future<Output = T>) -> T {
    futures_util::FutureExt::now_or_never(f).expect("the memory ledger answers at once")
}

/// A ledger with `principals × PER_PRINCIPAL` tasks, inserted round-robin.
fn build(principals: usize, seed: u64) -> MemoryLedger {
    let ledger = MemoryLedger::new(10_000);
    let mut rng = Rng(seed);
    for i in 0..principals * PER_PRINCIPAL {
        let rec = record(&mut rng, scope(i % principals), i);
        now(ledger.insert(rec, 0)).expect("under the cap");
    }
    ledger
}

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "MISS" }
}

/// One ledger under test, and the legacy front over it.
struct Subject {
    total: usize,
    ledger: Arc<MemoryLedger>,
    /// The scope measured (a principal in the middle of the insert order).
    scope: Scope,
    /// The cursor of the second page of `scope`.
    cursor: String,
    session: Arc<LegacySession>,
    outbox: tokio::sync::mpsc::UnboundedReceiver<Message>,
    /// Keeps the front (and the session's upstream) alive.
    _front: Arc<LegacyFront>,
}

fn subject(total: usize, ledger: MemoryLedger) -> Subject {
    let principals = total / PER_PRINCIPAL;
    let scope = scope(principals / 2);
    let ledger = Arc::new(ledger);
    let first = now(ledger.list(&scope, None, PAGE, 0)).expect("list");
    assert_eq!(first.records.len(), PAGE);
    let cursor = first.next_cursor.expect("a second page");
    // All tasks are terminal: the front answers tasks/list from the ledger
    // alone, so an upstream that never answers is enough.
    let (conn, _events, _server) = channel::pair(Duration::from_secs(5));
    let upstream = conn;
    let front = LegacyFront::new(
        upstream,
        ledger.clone(),
        BridgeConfig::default(),
        json!({"capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}),
    );
    let (tx, outbox) = tokio::sync::mpsc::unbounded_channel();
    let session = front.session(principal(principals / 2).into(), tx);
    Subject {
        total,
        ledger,
        scope,
        cursor,
        session,
        outbox,
        _front: front,
    }
}

/// Median-able ns per call of one kind, one round.
fn time_ledger(s: &Subject, deep: bool) -> f64 {
    let cursor = deep.then_some(s.cursor.as_str());
    let start = Instant::now();
    for _ in 0..CALLS {
        let page = now(s.ledger.list(&s.scope, cursor, PAGE, 0)).expect("list");
        black_box(&page);
    }
    start.elapsed().as_nanos() as f64 / CALLS as f64
}

/// The same through the front: `tasks/list` in, the answer out of the outbox.
async fn time_front(s: &mut Subject, deep: bool) -> f64 {
    let params = if deep {
        json!({"cursor": s.cursor})
    } else {
        json!({})
    };
    let start = Instant::now();
    for i in 0..CALLS {
        s.session
            .handle_client(Message::request(i as i64, "tasks/list", params.clone()));
        let answer = tokio::time::timeout(Duration::from_secs(10), s.outbox.recv())
            .await
            .expect("an answer in time")
            .expect("session open");
        black_box(&answer);
    }
    start.elapsed().as_nanos() as f64 / CALLS as f64
}

fn check_front_answer(s: &mut Subject, rt: &tokio::runtime::Runtime) {
    rt.block_on(async {
        s.session.handle_client(Message::request(
            0,
            "tasks/list",
            json!({"cursor": s.cursor}),
        ));
        let v = s.outbox.recv().await.expect("answer").to_value();
        let tasks = v["result"]["tasks"].as_array().expect("a page of tasks");
        assert_eq!(tasks.len(), PAGE, "{v}");
        assert!(v["result"].get("nextCursor").is_none(), "last page");
    });
}

fn main() {
    let total_tasks = 1_000_000;
    let principals = total_tasks / PER_PRINCIPAL;

    // Memory: the live heap the 1M-task ledger holds, records included.
    let (bytes0, allocs0) = (live(), ALLOCS.load(Ordering::Relaxed));
    let start = Instant::now();
    let big = build(principals, 0x5EED_0001);
    let build_s = start.elapsed().as_secs_f64();
    let held = (live() - bytes0) as f64;
    let allocs = ALLOCS.load(Ordering::Relaxed) - allocs0;
    assert_eq!(now(big.len()).expect("len"), total_tasks);
    let per_task = held / total_tasks as f64;
    // What the cached result alone costs, for the breakdown.
    let before = live();
    let one = record(&mut Rng(7), scope(1), 1);
    let one_record = (live() - before) as f64;
    let before = live();
    let payload = black_box(one.payload.clone());
    let payload_bytes = (live() - before) as f64;
    drop(payload);
    drop(one);

    println!(
        "ledger memory: {total_tasks} tasks over {principals} principals, built in {build_s:.1} s"
    );
    println!(
        "  live heap held      {:>10.1} MiB   ({} allocations)",
        held / 1_048_576.0,
        allocs
    );
    println!(
        "  per tracked task    {per_task:>10.0} B     target ≤ {TARGET_BYTES:.0} B  {}",
        verdict(per_task <= TARGET_BYTES)
    );
    println!(
        "  of which one record as built {one_record:.0} B (its cached result {payload_bytes:.0} B)"
    );

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let _guard = rt.enter();
    let mut subjects = [
        subject(10_000, build(10_000 / PER_PRINCIPAL, 0x5EED_0002)),
        subject(100_000, build(100_000 / PER_PRINCIPAL, 0x5EED_0003)),
        subject(total_tasks, big),
    ];
    for s in subjects.iter_mut() {
        check_front_answer(s, &rt);
    }
    // [subject][kind] → per-round ns; kinds: ledger first, ledger deep,
    // front first, front deep.
    let mut ns: Vec<Vec<Vec<f64>>> = (0..subjects.len())
        .map(|_| (0..4).map(|_| Vec::with_capacity(ROUNDS)).collect())
        .collect();
    for _ in 0..ROUNDS {
        for (i, s) in subjects.iter_mut().enumerate() {
            ns[i][0].push(time_ledger(s, false));
            ns[i][1].push(time_ledger(s, true));
            ns[i][2].push(rt.block_on(time_front(s, false)));
            ns[i][3].push(rt.block_on(time_front(s, true)));
        }
    }
    let med: Vec<Vec<f64>> = ns
        .into_iter()
        .map(|kinds| kinds.into_iter().map(median).collect())
        .collect();
    let kinds = [
        "ledger.list first page",
        "ledger.list cursor page",
        "front tasks/list first page",
        "front tasks/list cursor page",
    ];
    println!(
        "tasks/list page latency, page size {PAGE}, {PER_PRINCIPAL} tasks per principal \
         (median of {ROUNDS} rounds × {CALLS} calls)"
    );
    println!(
        "{:<30} {:>10} {:>10} {:>10} {:>10}  target",
        "kind", "10k µs", "100k µs", "1M µs", "1M/10k"
    );
    for (k, name) in kinds.iter().enumerate() {
        let ratio = med[2][k] / med[0][k];
        println!(
            "{:<30} {:>10.2} {:>10.2} {:>10.2} {:>9.2}×  ≈ 1 (≤ {RATIO_TOLERANCE}×) {}",
            name,
            med[0][k] / 1000.0,
            med[1][k] / 1000.0,
            med[2][k] / 1000.0,
            ratio,
            verdict(ratio <= RATIO_TOLERANCE)
        );
    }
    let totals: Vec<usize> = subjects.iter().map(|s| s.total).collect();
    assert_eq!(totals, [10_000, 100_000, total_tasks]);
    black_box(Value::Null);
}
