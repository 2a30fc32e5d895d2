//! Load over HTTP (issue 6, item 8): many concurrent clients, both eras
//! mixed, each running many tasks through one shim, twice.
//!
//! - `mixed_eras_in_front_of_a_modern_server`: half the clients speak
//!   2025-11-25 (bridged: task-augmented `tools/call`, then a streamed
//!   `tasks/result` that carries the task's input requests), half speak
//!   2026-07-28 (passed through: `tasks/get` polling, `tasks/update`).
//! - `modern_clients_in_front_of_a_legacy_server`: every client speaks
//!   2026-07-28 and is bridged to a 2025-11-25 server.
//!
//! Every tenth task asks for input (`confirm_delete`). Checked: every
//! task's result arrives, once, with its own label; each input request is
//! shown once and answered once; no error at all. Then, after the tasks'
//! short retention, the shim's ledger, task tracking and sessions are back
//! to zero (`/metrics`), and its resident memory after a second identical
//! round is not meaningfully above the first (< +20 %).
//!
//! `the_per_client_cap_holds_and_expiry_frees_it`: `--max-tasks-per-client`
//! refuses one principal's task past the cap, not another's, and lets the
//! first create again once its tasks expired.
//!
//! Sizes: `MCP_SHIM_LOAD_CLIENTS` (default 200), `MCP_SHIM_LOAD_TASKS`
//! (tasks per client, default 10; issue 6 asked for 50, which
//! `MCP_SHIM_LOAD_TASKS=50` still runs, in about five times the work),
//! `MCP_SHIM_LOAD_TTL_MS` (task retention, default 15000: each round waits
//! out the retention of its last task before the drain check, so this is
//! what a round costs beyond its work; it must outlive a task's use, which
//! on a 2-CPU machine is about 0.25 s when quiet and was seen past 10 s
//! under a load of 13), `MCP_SHIM_LOAD_MINUTES` (overall bound per test,
//! default 10). Figures are printed (`--nocapture`); measured ones are in
//! docs/performance.md.
//!
//! What 10 tasks per client still prove, and what less than 50: the load
//! is the 200 clients at once, every one with a task in flight, and that
//! is unchanged; each client still runs tasks one after another, the last
//! of its ten asking for input, so every round has 200 input requests.
//! The drain check reads the ledger, task tracking and sessions, which
//! must be exactly zero whatever the count. The memory check compares two
//! rounds of 2,000 tasks: a leak outside those gauges trips it from about
//! 4 KB per task (20 % of the 36–46 MB the shim holds after a round),
//! where 10,000 tasks tripped it from under 1 KB: that guard is five times
//! coarser, the rest is not.

mod support;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Client;
use serde_json::{Value, json};
use support::http::{
    HttpShim, LEGACY, MODERN, STEP, Sse, client, initialize, is_sse, legacy, modern, modern_meta,
    rpc, send,
};
use support::schema::{Revision, assert_valid};
use support::wire::shim_bin;
use tokio::task::JoinSet;

/// Every `INPUT_EVERY`-th task of a client asks for input.
const INPUT_EVERY: usize = 10;
/// How long a quick task works (s).
const QUICK_SECONDS: f64 = 0.02;
/// Bound on `tasks/get` polls of one task.
const MAX_POLLS: usize = 600;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Debug, Clone, Copy)]
struct Sizes {
    clients: usize,
    tasks: usize,
    ttl_ms: u64,
    bound: Duration,
}

fn sizes() -> Sizes {
    Sizes {
        clients: env_or("MCP_SHIM_LOAD_CLIENTS", 200) as usize,
        tasks: env_or("MCP_SHIM_LOAD_TASKS", 10) as usize,
        ttl_ms: env_or("MCP_SHIM_LOAD_TTL_MS", 15_000),
        bound: Duration::from_secs(60 * env_or("MCP_SHIM_LOAD_MINUTES", 10)),
    }
}

/// What all clients of a round saw.
#[derive(Debug, Default)]
struct Tally {
    /// Labels whose result arrived (a second arrival is a failure).
    results: HashSet<String>,
    /// Input requests shown to clients.
    inputs: usize,
    /// Requests sent.
    requests: usize,
}

type Shared = Arc<Mutex<Tally>>;

fn record_result(tally: &Shared, label: &str) {
    let mut t = tally.lock().unwrap();
    assert!(
        t.results.insert(label.to_owned()),
        "the result of {label} arrived twice"
    );
}

fn count(tally: &Shared, requests: usize, inputs: usize) {
    let mut t = tally.lock().unwrap();
    t.requests += requests;
    t.inputs += inputs;
}

/// The task a client runs as its `k`-th: a quick one, or one asking input.
fn tool_call(label: &str, k: usize) -> (Value, bool) {
    if k % INPUT_EVERY == INPUT_EVERY - 1 {
        let p = json!({"name": "confirm_delete", "arguments": {"filename": label}});
        (p, true)
    } else {
        let p = json!({"name": "slow_compute",
            "arguments": {"seconds": QUICK_SECONDS, "label": label}});
        (p, false)
    }
}

/// The text a finished task's result must carry.
fn expected_text(label: &str, input: bool) -> String {
    if input {
        format!("Deleted {label}")
    } else {
        format!("slow_compute '{label}' finished")
    }
}

fn result_text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// A 2025-11-25 client: one session, `tasks` task-augmented calls, each
/// followed by a streamed `tasks/result` on which input requests arrive.
async fn legacy_client(
    c: Client,
    url: String,
    token: String,
    name: String,
    tasks: usize,
    tally: Shared,
) {
    let (sid, _) = initialize(&c, &url, Some(&token)).await;
    let mut next_id = 1i64;
    let mut requests = 2;
    let mut inputs = 0;
    for k in 0..tasks {
        let label = format!("{name}-{k}");
        let (mut params, input) = tool_call(&label, k);
        params["task"] = json!({"ttl": 60_000});
        next_id += 1;
        let (s, body, _) = send(
            legacy(&c, &url, Some(&sid), &rpc(next_id, "tools/call", params)).bearer_auth(&token),
        )
        .await;
        requests += 1;
        assert_eq!(s, 200, "{label}: create: {body}");
        if k == 0 || input {
            assert_valid(Revision::Legacy, &body, Some("tools/call"));
        }
        let task_id = body["result"]["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("{label}: no task: {body}"))
            .to_owned();

        next_id += 1;
        let result_id = next_id;
        let req = legacy(
            &c,
            &url,
            Some(&sid),
            &rpc(result_id, "tasks/result", json!({"taskId": task_id})),
        )
        .bearer_auth(&token);
        let resp = tokio::time::timeout(STEP, req.send())
            .await
            .unwrap_or_else(|_| panic!("{label}: tasks/result not answered"))
            .expect("tasks/result");
        requests += 1;
        assert_eq!(resp.status(), 200, "{label}: tasks/result");
        let mut answers = Vec::new();
        let mut asked = Vec::new();
        if is_sse(resp.headers()) {
            let mut sse = Sse::new(resp);
            while let Some(m) = sse.next().await {
                if m.get("method").is_some() {
                    // An input request, tagged with this task.
                    assert_eq!(m["method"], "elicitation/create", "{label}: {m}");
                    assert_eq!(
                        m["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"],
                        json!(task_id),
                        "{label}: input request of another task: {m}"
                    );
                    assert_valid(Revision::Legacy, &m, None);
                    asked.push(m["id"].clone());
                    let answer = json!({"jsonrpc": "2.0", "id": m["id"],
                        "result": {"action": "accept", "content": {"confirm": true}}});
                    let (s, _, _) =
                        send(legacy(&c, &url, Some(&sid), &answer).bearer_auth(&token)).await;
                    requests += 1;
                    assert_eq!(s, 202, "{label}: answer accepted");
                } else if m["id"] == json!(result_id) {
                    answers.push(m);
                } else {
                    panic!("{label}: unexpected message on tasks/result: {m}");
                }
            }
        } else {
            let body: Value = resp.json().await.expect("JSON");
            answers.push(body);
        }
        inputs += asked.len();
        assert_eq!(
            answers.len(),
            1,
            "{label}: one answer to tasks/result: {answers:?}"
        );
        let answer = &answers[0];
        if k == 0 || input {
            assert_valid(Revision::Legacy, answer, Some("tasks/result"));
        }
        let want = expected_text(&label, input);
        assert!(
            result_text(&answer["result"]).starts_with(&want),
            "{label}: its own result: {answer}"
        );
        assert_eq!(
            asked.len(),
            usize::from(input),
            "{label}: each input request asked exactly once: {asked:?}"
        );
        record_result(&tally, &label);
    }
    let del = c.delete(&url).header("mcp-session-id", &sid);
    let (s, _, _) = send(del.bearer_auth(&token)).await;
    assert_eq!(s, 200, "{name}: DELETE");
    count(&tally, requests + 1, inputs);
}

/// Modern `_meta` declaring the tasks extension and form elicitation (a
/// bridge shows a client only the input requests it declared).
fn meta() -> Value {
    let mut m = modern_meta(true);
    m["io.modelcontextprotocol/clientCapabilities"]["elicitation"] = json!({"form": {}});
    m
}

/// `params` with [`meta`].
fn with_meta(mut params: Value) -> Value {
    params["_meta"] = meta();
    params
}

/// A 2026-07-28 client: `tasks` calls with the tasks extension, each
/// polled with `tasks/get` and answered with `tasks/update` once per input
/// request key.
async fn modern_client(
    c: Client,
    url: String,
    token: String,
    name: String,
    tasks: usize,
    tally: Shared,
) {
    let mut requests = 0;
    let mut inputs = 0;
    for k in 0..tasks {
        let label = format!("{name}-{k}");
        let (params, input) = tool_call(&label, k);
        let (s, body, _) =
            send(modern(&c, &url, 1, "tools/call", with_meta(params)).bearer_auth(&token)).await;
        requests += 1;
        assert_eq!(s, 200, "{label}: create: {body}");
        if k == 0 || input {
            assert_valid(Revision::Modern, &body, Some("tools/call"));
        }
        assert_eq!(body["result"]["resultType"], "task", "{label}: {body}");
        let task_id = body["result"]["taskId"]
            .as_str()
            .expect("taskId")
            .to_owned();
        let mut answered: HashSet<String> = HashSet::new();
        let mut done = None;
        for poll in 0..MAX_POLLS {
            let (s, body, _) = send(
                modern(
                    &c,
                    &url,
                    2,
                    "tasks/get",
                    with_meta(json!({"taskId": task_id})),
                )
                .bearer_auth(&token),
            )
            .await;
            requests += 1;
            assert_eq!(s, 200, "{label}: tasks/get: {body}");
            if poll == 0 || input {
                assert_valid(Revision::Modern, &body, Some("tasks/get"));
            }
            let r = &body["result"];
            let status = r["status"].as_str().unwrap_or_default();
            assert!(
                matches!(status, "working" | "input_required" | "completed"),
                "{label}: poll {poll}, answered {answered:?}: status {status}: {body}"
            );
            if let Some(reqs) = r["inputRequests"].as_object() {
                for (key, req) in reqs {
                    assert!(
                        !answered.contains(key),
                        "{label}: input request {key} shown again after it was answered: {body}"
                    );
                    assert_eq!(req["method"], "elicitation/create", "{label}: {body}");
                    answered.insert(key.clone());
                    inputs += 1;
                    let responses =
                        json!({key.clone(): {"action": "accept", "content": {"confirm": true}}});
                    let (s, ack, _) = send(
                        modern(
                            &c,
                            &url,
                            3,
                            "tasks/update",
                            with_meta(json!({"taskId": task_id, "inputResponses": responses})),
                        )
                        .bearer_auth(&token),
                    )
                    .await;
                    requests += 1;
                    assert_eq!(s, 200, "{label}: tasks/update: {ack}");
                    assert_valid(Revision::Modern, &ack, Some("tasks/update"));
                }
            }
            if status == "completed" {
                done = Some(body);
                break;
            }
            // A 2026-07-28 client's own polling: this is how it learns.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let body = done.unwrap_or_else(|| panic!("{label}: not completed after {MAX_POLLS} polls"));
        let want = expected_text(&label, input);
        assert!(
            result_text(&body["result"]["result"]).starts_with(&want),
            "{label}: its own result: {body}"
        );
        assert_eq!(
            answered.len(),
            usize::from(input),
            "{label}: input request keys shown: {answered:?}"
        );
        record_result(&tally, &label);
    }
    count(&tally, requests, inputs);
}

/// Which clients a round runs.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mix {
    /// Half legacy, half modern.
    Both,
    /// Modern only.
    ModernOnly,
}

/// One round: every client runs all its tasks; returns (tasks, requests,
/// input requests, seconds).
async fn round(
    shim: &HttpShim,
    mix: Mix,
    s: Sizes,
    n: usize,
    tokens: &[String],
) -> (usize, usize, usize, f64) {
    let c = client();
    let tally: Shared = Arc::default();
    let start = Instant::now();
    let mut set = JoinSet::new();
    for (i, token) in tokens.iter().enumerate().take(s.clients) {
        let (c, url, tally) = (c.clone(), shim.url.clone(), tally.clone());
        let token = token.clone();
        let legacy_era = mix == Mix::Both && i % 2 == 0;
        let name = format!("r{n}-{}{i}", if legacy_era { "L" } else { "M" });
        if legacy_era {
            set.spawn(legacy_client(c, url, token, name, s.tasks, tally));
        } else {
            set.spawn(modern_client(c, url, token, name, s.tasks, tally));
        }
    }
    while let Some(r) = set.join_next().await {
        if let Err(e) = r {
            set.abort_all();
            std::panic::resume_unwind(e.into_panic());
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let t = tally.lock().unwrap();
    let total = s.clients * s.tasks;
    assert_eq!(t.results.len(), total, "every task's result arrived");
    let wanted_inputs = s.clients * (s.tasks / INPUT_EVERY);
    assert_eq!(t.inputs, wanted_inputs, "each input request shown once");
    (total, t.requests, t.inputs, secs)
}

/// Reads one gauge off `/metrics`.
async fn gauge(shim: &HttpShim, name: &str) -> u64 {
    let text = tokio::time::timeout(STEP, async {
        client()
            .get(format!("{}/metrics", shim.base))
            .send()
            .await
            .expect("/metrics")
            .text()
            .await
            .expect("/metrics body")
    })
    .await
    .expect("/metrics answered");
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or_else(|| panic!("/metrics has no {name}:\n{text}"))
}

/// The gauges that must return to zero once every task expired and every
/// session was deleted.
const DRAINED: [&str; 3] = [
    "mcp_shim_ledger_tasks",
    "mcp_shim_tracked_tasks",
    "mcp_shim_legacy_sessions",
];

/// Waits (bounded: the retention plus 30 s) until the `names` gauges are
/// all zero; returns them as read.
async fn drained<const N: usize>(shim: &HttpShim, ttl_ms: u64, names: [&str; N]) -> [u64; N] {
    let within = Duration::from_millis(ttl_ms) + Duration::from_secs(30);
    // No event tells of an expiry: the gauges are all there is to watch.
    let what = format!("{names:?} all zero on /metrics");
    support::poll::until_async(&what, within, || async {
        let mut now = [0; N];
        for (i, n) in names.iter().enumerate() {
            now[i] = gauge(shim, n).await;
        }
        (now == [0; N]).then_some(now)
    })
    .await
}

/// The shim's resident set size in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// Two identical rounds through one shim; memory and ledger checks.
async fn two_rounds(upstream: Vec<String>, extra: &[String], mix: Mix, what: &str) {
    let s = sizes();
    let mut flags: Vec<String> = extra.to_vec();
    let mut tokens = Vec::new();
    for i in 0..s.clients {
        let t = format!("load{i}-{}", mcp_tasks_shim::ids::random_id());
        flags.push("--token".into());
        flags.push(format!("{t}=client-{i}"));
        tokens.push(t);
    }
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let shim = HttpShim::spawn(&flags, &upstream);
    let pid = shim.pid();
    let rss0 = rss_kib(pid);
    let run = async {
        let mut rss = Vec::new();
        for n in 1..=2 {
            let (tasks, requests, inputs, secs) = round(&shim, mix, s, n, &tokens).await;
            let peak = rss_kib(pid);
            let left = drained(&shim, s.ttl_ms, DRAINED).await;
            let after = rss_kib(pid);
            eprintln!(
                "{what} round {n}: {} clients x {} tasks = {tasks} tasks, {requests} requests, {inputs} input requests in {secs:.1} s ({:.0} tasks/s, {:.0} requests/s); shim RSS {rss0} KiB at start, {peak} KiB right after, {after} KiB after expiry; ledger/tracked/sessions left: {left:?}",
                s.clients,
                s.tasks,
                tasks as f64 / secs,
                requests as f64 / secs,
            );
            assert_eq!(
                left, [0; 3],
                "{what} round {n}: ledger tasks, tracked tasks and sessions all expire"
            );
            rss.push(after);
        }
        rss
    };
    let rss = tokio::time::timeout(s.bound, run)
        .await
        .unwrap_or_else(|_| panic!("{what}: the load test ended within {:?}", s.bound));
    assert!(
        rss[1] * 10 < rss[0] * 12,
        "{what}: memory after the second round ({} KiB) is not within 20 % of the first ({} KiB)",
        rss[1],
        rss[0]
    );
}

fn reference(revision: &str, ttl: Option<u64>) -> Vec<String> {
    let mut cmd = vec![
        shim_bin().to_owned(),
        "reference-server".into(),
        "--revision".into(),
        revision.into(),
    ];
    if let Some(ms) = ttl {
        cmd.extend(["--task-ttl-ms".into(), ms.to_string()]);
    }
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_eras_in_front_of_a_modern_server() {
    let s = sizes();
    two_rounds(
        reference(MODERN, Some(s.ttl_ms)),
        &[],
        Mix::Both,
        "modern upstream",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_clients_in_front_of_a_legacy_server() {
    let s = sizes();
    let extra = ["--task-ttl".to_owned(), format!("{}ms", s.ttl_ms)];
    two_rounds(
        reference(LEGACY, None),
        &extra,
        Mix::ModernOnly,
        "legacy upstream",
    )
    .await;
}

/// A legacy task-augmented quick call for `token` in session `sid`: the
/// JSON-RPC answer.
async fn legacy_quick_task(c: &Client, url: &str, sid: &str, token: &str, label: &str) -> Value {
    let (p, _) = tool_call(label, 0);
    let mut p = p;
    p["task"] = json!({"ttl": 60_000});
    let (s, body, _) =
        send(legacy(c, url, Some(sid), &rpc(5, "tools/call", p)).bearer_auth(token)).await;
    assert_eq!(s, 200, "{label}: {body}");
    assert_valid(Revision::Legacy, &body, Some("tools/call"));
    body
}

/// The per-client cap holds, binds one principal only, and is freed again
/// when the tasks expire.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_client_cap_holds_and_expiry_frees_it() {
    const CAP: usize = 3;
    let ttl_ms = 2_000;
    let shim = HttpShim::spawn(
        &[
            "--max-tasks-per-client",
            &CAP.to_string(),
            "--token",
            "alice-secret=alice",
            "--token",
            "bob-secret=bob",
        ],
        &reference(MODERN, Some(ttl_ms)),
    );
    let c = client();
    let url = shim.url.as_str();
    let (alice, _) = initialize(&c, url, Some("alice-secret")).await;
    let (bob, _) = initialize(&c, url, Some("bob-secret")).await;
    for k in 0..CAP {
        let body = legacy_quick_task(&c, url, &alice, "alice-secret", &format!("a{k}")).await;
        assert!(body["result"]["task"]["taskId"].is_string(), "{body}");
    }
    let body = legacy_quick_task(&c, url, &alice, "alice-secret", "a-over").await;
    assert_eq!(body["error"]["code"], -32603, "over the cap: {body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("task limit")),
        "{body}"
    );
    // Another principal is not affected.
    let body = legacy_quick_task(&c, url, &bob, "bob-secret", "b0").await;
    assert!(body["result"]["task"]["taskId"].is_string(), "{body}");
    // Once alice's tasks expired (and were swept), she may create again.
    let left = drained(&shim, ttl_ms, ["mcp_shim_ledger_tasks"]).await;
    assert_eq!(left, [0], "every task expired");
    let body = legacy_quick_task(&c, url, &alice, "alice-secret", "a-again").await;
    assert!(body["result"]["task"]["taskId"].is_string(), "{body}");
}
