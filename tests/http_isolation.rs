//! Adversarial isolation over HTTP (issue 6, item 6): 20 principals, each
//! with its own bearer token, create tasks through one shim; then every
//! principal tries every other principal's task ids on every task method.
//!
//! - A 2026-07-28 upstream: 2025-11-25 clients (two sessions per principal)
//!   probe `tasks/get`, `tasks/result`, `tasks/cancel`, and page through
//!   `tasks/list`, also with another principal's cursor.
//! - A 2025-11-25 upstream: 2026-07-28 clients (stateless) probe
//!   `tasks/get`, `tasks/update`, `tasks/cancel`.
//!
//! Nothing foreign may ever show, a foreign cancel or update must change
//! nothing, and the answer to a foreign id must equal, status, headers and
//! body (request id aside), the answer to a fresh random id of the same
//! form. The ids the shim hands out must be distinct 128-bit hex strings.
//!
//! Same-revision pass-through is not tested here: there the upstream owns
//! isolation (docs/limits.md).

mod support;

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use reqwest::{Client, RequestBuilder};
use serde_json::{Value, json};
use support::http::{HttpShim, LEGACY, MODERN, Sse, client, initialize, legacy, modern, rpc, send};
use support::schema::{Revision, assert_valid};
use support::wire::{modern_reference, shim_bin};
use tokio::task::JoinSet;

/// How many principals take part.
const PRINCIPALS: usize = 20;
/// How long each task works: long enough that most probes reach it while
/// it still runs (a foreign cancel would then show), short enough to wait for.
const TASK_SECONDS: f64 = 4.0;

/// One principal: its bearer token and what it created.
#[derive(Debug, Clone)]
struct Principal {
    token: String,
    /// Legacy sessions (modern clients have none).
    sessions: Vec<String>,
    /// (task id, label).
    tasks: Vec<(String, String)>,
}

/// What a client can observe of an answer: HTTP status, headers (but
/// `date`), and the JSON body with the request id set to 0. Callers use
/// request ids of one width, so `content-length` is comparable too.
#[derive(Debug, PartialEq)]
struct Observed {
    status: u16,
    headers: BTreeMap<String, String>,
    body: Value,
}

/// Sends `req` and returns what a client sees, the body schema-validated
/// as an answer to `method` of revision `rev`.
async fn observe(req: RequestBuilder, rev: Revision, method: &str) -> Observed {
    let (status, mut body, headers) = send(req).await;
    assert_valid(rev, &body, Some(method));
    if let Some(o) = body.as_object_mut() {
        o.insert("id".into(), json!(0));
    }
    let headers = headers
        .iter()
        .filter(|(k, _)| k.as_str() != "date")
        .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("<binary>").to_owned()))
        .collect();
    Observed {
        status: status.as_u16(),
        headers,
        body,
    }
}

/// `--token T=P` flags for every principal, and the principals.
fn principals() -> (Vec<String>, Vec<Principal>) {
    let mut flags = Vec::new();
    let mut all = Vec::new();
    for i in 0..PRINCIPALS {
        let token = format!("tok{i}-{}", mcp_tasks_shim::ids::random_id());
        flags.push("--token".to_owned());
        flags.push(format!("{token}=principal-{i}"));
        all.push(Principal {
            token,
            sessions: Vec::new(),
            tasks: Vec::new(),
        });
    }
    (flags, all)
}

/// Asserts that ids are distinct and look like 128 random bits (32
/// lowercase hex characters).
#[track_caller]
fn assert_strong_ids<'a>(what: &str, ids: impl IntoIterator<Item = &'a String>) {
    let mut seen = HashSet::new();
    for id in ids {
        assert!(
            id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
            "{what} {id:?} is not 32 lowercase hex characters (128 bits)"
        );
        assert!(seen.insert(id.clone()), "{what} {id} issued twice");
    }
    assert!(!seen.is_empty(), "no {what} seen");
}

fn slow(label: &str) -> Value {
    json!({"name": "slow_compute", "arguments": {"seconds": TASK_SECONDS, "label": label}})
}

/// A legacy task-augmented `tools/call` in session `sid`; its task id.
async fn legacy_create(c: &Client, url: &str, p: &Principal, sid: &str, label: &str) -> String {
    let mut params = slow(label);
    params["task"] = json!({"ttl": 120_000});
    let req = legacy(c, url, Some(sid), &rpc(1, "tools/call", params)).bearer_auth(&p.token);
    let (s, body, _) = send(req).await;
    assert_eq!(s, 200, "create: {body}");
    assert_valid(Revision::Legacy, &body, Some("tools/call"));
    body["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {body}"))
        .to_owned()
}

/// A 2026-07-28 task-creating `tools/call` with bearer `token`; its id.
async fn modern_create(c: &Client, url: &str, token: &str, label: &str) -> String {
    let req = modern(c, url, 1, "tools/call", slow(label)).bearer_auth(token);
    let (s, body, _) = send(req).await;
    assert_eq!(s, 200, "create: {body}");
    assert_valid(Revision::Modern, &body, Some("tools/call"));
    assert_eq!(body["result"]["resultType"], "task", "{body}");
    body["result"]["taskId"]
        .as_str()
        .expect("taskId")
        .to_owned()
}

/// Every task id `tasks/list` shows in `sid`, all pages; the first page's
/// cursor too.
async fn legacy_list_all(
    c: &Client,
    url: &str,
    token: &str,
    sid: &str,
) -> (Vec<String>, Option<String>) {
    let mut ids = Vec::new();
    let mut cursor: Option<String> = None;
    let mut first_cursor = None;
    for page in 0..100 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let req = legacy(c, url, Some(sid), &rpc(2, "tasks/list", params)).bearer_auth(token);
        let (s, body, _) = send(req).await;
        assert_eq!(s, 200, "tasks/list: {body}");
        assert_valid(Revision::Legacy, &body, Some("tasks/list"));
        for t in body["result"]["tasks"].as_array().expect("tasks") {
            ids.push(t["taskId"].as_str().expect("taskId").to_owned());
        }
        cursor = body["result"]["nextCursor"].as_str().map(str::to_owned);
        if page == 0 {
            first_cursor.clone_from(&cursor);
        }
        if cursor.is_none() {
            return (ids, first_cursor);
        }
    }
    panic!("tasks/list did not end within 100 pages");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn legacy_clients_cannot_reach_each_others_tasks() {
    tokio::time::timeout(std::time::Duration::from_secs(240), legacy_clients())
        .await
        .expect("the legacy isolation test finished within 4 minutes");
}

async fn legacy_clients() {
    let (mut flags, mut all) = principals();
    // Small pages, so that listing crosses page boundaries.
    flags.extend(["--page-size".to_owned(), "1".to_owned()]);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let shim = HttpShim::spawn(&flags, &modern_reference());
    let c = client();
    let url = shim.url.clone();

    // Each principal: two sessions, one task in each.
    let mut set = JoinSet::new();
    for (i, p) in all.iter().cloned().enumerate() {
        let (c, url) = (c.clone(), url.clone());
        set.spawn(async move {
            let mut p = p;
            for s in 0..2 {
                let (sid, _) = initialize(&c, &url, Some(&p.token)).await;
                let label = format!("p{i}-s{s}");
                let id = legacy_create(&c, &url, &p, &sid, &label).await;
                p.sessions.push(sid);
                p.tasks.push((id, label));
            }
            (i, p)
        });
    }
    while let Some(r) = set.join_next().await {
        let (i, p) = r.expect("creator");
        all[i] = p;
    }
    assert_strong_ids("session id", all.iter().flat_map(|p| &p.sessions));
    assert_strong_ids(
        "task id",
        all.iter().flat_map(|p| p.tasks.iter().map(|t| &t.0)),
    );

    // Every principal probes every foreign id on every method, next to a
    // fresh random id of the same form.
    let mut set = JoinSet::new();
    for (j, me) in all.iter().cloned().enumerate() {
        let foreign: Vec<String> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != j)
            .flat_map(|(_, p)| p.tasks.iter().map(|t| t.0.clone()))
            .collect();
        let (c, url) = (c.clone(), url.clone());
        set.spawn(async move {
            let sid = &me.sessions[j % 2];
            let mut probes = 0;
            for method in ["tasks/get", "tasks/result", "tasks/cancel"] {
                let ask = |id: &str, n: i64| {
                    legacy(&c, &url, Some(sid), &rpc(n, method, json!({"taskId": id})))
                        .bearer_auth(&me.token)
                };
                probes += probe_foreign(
                    Revision::Legacy,
                    method,
                    &ask,
                    &foreign,
                    &format!("principal {j}"),
                )
                .await;
            }
            // Listing, both sessions: exactly my own tasks.
            let mine: HashSet<&String> = me.tasks.iter().map(|t| &t.0).collect();
            let mut cursor = None;
            for sid in &me.sessions {
                let (ids, first) = legacy_list_all(&c, &url, &me.token, sid).await;
                let listed: HashSet<&String> = ids.iter().collect();
                assert_eq!(listed, mine, "principal {j} lists exactly its own tasks");
                assert_eq!(ids.len(), mine.len(), "no task listed twice");
                cursor = first;
            }
            (
                j,
                probes,
                cursor.expect("two tasks on pages of one: a cursor"),
            )
        });
    }
    let mut cursors = vec![String::new(); PRINCIPALS];
    let mut probes = 0;
    while let Some(r) = set.join_next().await {
        let (j, n, cursor) = r.expect("prober");
        probes += n;
        cursors[j] = cursor;
    }
    eprintln!("legacy clients: {probes} foreign-id probes, all indistinguishable");

    // Another principal's cursor is, to me, any cursor that is not mine.
    let me = &all[0];
    let ask = |cursor: &str| {
        legacy(
            &c,
            &url,
            Some(&me.sessions[0]),
            &rpc(9, "tasks/list", json!({"cursor": cursor})),
        )
        .bearer_auth(&me.token)
    };
    use base64::Engine;
    let made_up = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("v1:1:nobody");
    let control = observe(ask(&made_up), Revision::Legacy, "tasks/list").await;
    assert_eq!(control.body["error"]["code"], -32602, "{control:?}");
    for cursor in &cursors[1..] {
        let got = observe(ask(cursor), Revision::Legacy, "tasks/list").await;
        assert_eq!(got, control, "a foreign cursor differs from a made-up one");
    }

    // The foreign cancels changed nothing: every task ends completed, with
    // its own result, for its owner.
    let mut set = JoinSet::new();
    for p in all.iter().cloned() {
        let (c, url) = (c.clone(), url.clone());
        set.spawn(async move {
            for (n, (id, label)) in p.tasks.iter().enumerate() {
                let sid = &p.sessions[(n + 1) % 2];
                let req = legacy(
                    &c,
                    &url,
                    Some(sid),
                    &rpc(30, "tasks/result", json!({"taskId": id})),
                )
                .bearer_auth(&p.token);
                let (s, body, _) = send(req).await;
                assert_eq!(s, 200, "{body}");
                assert_valid(Revision::Legacy, &body, Some("tasks/result"));
                let text = body["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default();
                assert!(
                    text.contains(&format!("'{label}'")),
                    "the owner gets its own result for {label}: {body}"
                );
                let req = legacy(
                    &c,
                    &url,
                    Some(sid),
                    &rpc(31, "tasks/get", json!({"taskId": id})),
                )
                .bearer_auth(&p.token);
                let (_, body, _) = send(req).await;
                assert_eq!(body["result"]["status"], "completed", "{label}: {body}");
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r.expect("owner check");
    }
}

/// The legacy reference server command.
fn legacy_reference() -> Vec<String> {
    vec![
        shim_bin().to_owned(),
        "reference-server".into(),
        "--revision".into(),
        LEGACY.into(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn modern_clients_cannot_reach_each_others_tasks() {
    tokio::time::timeout(std::time::Duration::from_secs(240), modern_clients())
        .await
        .expect("the modern isolation test finished within 4 minutes");
}

async fn modern_clients() {
    let (flags, mut all) = principals();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let shim = HttpShim::spawn(&flags, &legacy_reference());
    let c = client();
    let url = shim.url.clone();

    // Each principal: two tasks (modern clients have no sessions).
    let mut set = JoinSet::new();
    for (i, p) in all.iter().cloned().enumerate() {
        let (c, url) = (c.clone(), url.clone());
        set.spawn(async move {
            let mut p = p;
            for t in 0..2 {
                let label = format!("p{i}-t{t}");
                let id = modern_create(&c, &url, &p.token, &label).await;
                p.tasks.push((id, label));
            }
            (i, p)
        });
    }
    while let Some(r) = set.join_next().await {
        let (i, p) = r.expect("creator");
        all[i] = p;
    }
    assert_strong_ids(
        "task id",
        all.iter().flat_map(|p| p.tasks.iter().map(|t| &t.0)),
    );

    let mut set = JoinSet::new();
    for (j, me) in all.iter().cloned().enumerate() {
        let foreign: Vec<String> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != j)
            .flat_map(|(_, p)| p.tasks.iter().map(|t| t.0.clone()))
            .collect();
        let (c, url) = (c.clone(), url.clone());
        set.spawn(async move {
            let mut probes = 0;
            for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
                let ask = |id: &str, n: i64| {
                    let mut params = json!({"taskId": id});
                    if method == "tasks/update" {
                        // What an attacker would send: an answer for the
                        // first input request a legacy task would get.
                        params["inputResponses"] =
                            json!({"elicitation-1": {"action": "accept", "content": {}}});
                    }
                    modern(&c, &url, n, method, params).bearer_auth(&me.token)
                };
                probes += probe_foreign(
                    Revision::Modern,
                    method,
                    &ask,
                    &foreign,
                    &format!("principal {j}"),
                )
                .await;
            }
            probes
        });
    }
    let mut probes = 0;
    while let Some(r) = set.join_next().await {
        probes += r.expect("prober");
    }
    eprintln!("modern clients: {probes} foreign-id probes, all indistinguishable");

    // Every owner still sees its own task run to completion.
    let mut set = JoinSet::new();
    for p in all.iter().cloned() {
        let (c, url) = (c.clone(), url.clone());
        set.spawn(async move {
            for (id, label) in &p.tasks {
                let last = owner_waits(&c, &url, &p.token, id, label).await;
                let text = last["result"]["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default();
                assert!(text.contains(&format!("'{label}'")), "{label}: {last}");
            }
        });
    }
    while let Some(r) = set.join_next().await {
        r.expect("owner check");
    }
}

/// Asks `method` about a fresh random id (the control: an unknown id),
/// then about every id in `foreign`, and asserts each answer equals the
/// control. `ask(id, request id)` builds the request. Returns how many
/// foreign ids were probed.
async fn probe_foreign(
    rev: Revision,
    method: &str,
    ask: &impl Fn(&str, i64) -> RequestBuilder,
    foreign: &[String],
    who: &str,
) -> usize {
    let random = mcp_tasks_shim::ids::random_id();
    let control = observe(ask(&random, 9999), rev, method).await;
    assert_eq!(
        control.body["error"]["code"], -32602,
        "{method} of an unknown id: {control:?}"
    );
    for (n, id) in foreign.iter().enumerate() {
        let got = observe(ask(id, 1000 + n as i64), rev, method).await;
        assert_eq!(
            got, control,
            "{who}: {method} of a foreign id differs from an unknown one"
        );
    }
    foreign.len()
}

/// The owner polls its task (2026-07-28 `tasks/get`) until it completes,
/// checking that it is never anything but working or completed (a foreign
/// cancel or update would show); returns the last answer.
async fn owner_waits(c: &Client, url: &str, token: &str, id: &str, label: &str) -> Value {
    let what = format!("{label} to complete");
    support::poll::until_async(&what, Duration::from_secs(20), || async move {
        let req = modern(c, url, 40, "tasks/get", json!({"taskId": id})).bearer_auth(token);
        let (s, body, _) = send(req).await;
        assert_eq!(s, 200, "{body}");
        assert_valid(Revision::Modern, &body, Some("tasks/get"));
        let status = body["result"]["status"].as_str().unwrap_or_default();
        assert!(
            matches!(status, "working" | "completed"),
            "{label} of its owner is {status}: {body}"
        );
        (status == "completed").then_some(body)
    })
    .await
}

/// 2025-11-25 and 2026-07-28 clients side by side in front of a 2026-07-28
/// server: the modern ones are relayed (same revision), and the upstream
/// sees one client, the shim. A task made by one principal, through the
/// bridge or through the relay, must still be out of every other caller's
/// reach on the relay, anonymous ones included: its id answers exactly as
/// an unknown id, and a cancel or update changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn relayed_modern_clients_cannot_reach_other_principals_tasks() {
    tokio::time::timeout(std::time::Duration::from_secs(240), relayed_clients())
        .await
        .expect("the relayed isolation test finished within 4 minutes");
}

async fn relayed_clients() {
    const MIXED: usize = 6;
    let (flags, mut all) = principals();
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    all.truncate(MIXED);
    let shim = HttpShim::spawn(&flags, &modern_reference());
    let c = client();
    let url = shim.url.clone();

    // Each principal: a task through the bridge (a legacy session) and one
    // through the relay (a modern client).
    for (i, p) in all.iter_mut().enumerate() {
        let (sid, _) = initialize(&c, &url, Some(&p.token)).await;
        let label = format!("p{i}-legacy");
        let id = legacy_create(&c, &url, p, &sid, &label).await;
        p.sessions.push(sid);
        p.tasks.push((id, label));
        let label = format!("p{i}-modern");
        let id = modern_create(&c, &url, &p.token, &label).await;
        p.tasks.push((id, label));
    }

    // Every principal, and an anonymous caller, probes every id not its own.
    let mut probes = 0;
    for j in 0..=MIXED {
        let token = all.get(j).map(|p| p.token.clone());
        let foreign: Vec<String> = all
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != j)
            .flat_map(|(_, p)| p.tasks.iter().map(|t| t.0.clone()))
            .collect();
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            let ask = |id: &str, n: i64| {
                let mut params = json!({"taskId": id});
                if method == "tasks/update" {
                    params["inputResponses"] =
                        json!({"elicitation-1": {"action": "accept", "content": {}}});
                }
                let req = modern(&c, &url, n, method, params);
                match &token {
                    Some(t) => req.bearer_auth(t),
                    None => req,
                }
            };
            probes += probe_foreign(
                Revision::Modern,
                method,
                &ask,
                &foreign,
                &format!("caller {j}"),
            )
            .await;
        }
    }
    eprintln!("relayed modern clients: {probes} foreign-id probes, all indistinguishable");

    // The owners: both tasks still run, then complete, untouched.
    for p in &all {
        for (id, label) in &p.tasks {
            owner_waits(&c, &url, &p.token, id, label).await;
        }
    }
}

/// A session id is not a credential: every request on a legacy session
/// must come from the principal that opened it, a token the shim does not
/// know is refused (not served as anonymous), and the 2026-07-28
/// `tasks/update` cannot reach a task from a legacy session.
#[tokio::test(flavor = "multi_thread")]
async fn legacy_sessions_stay_with_their_principal() {
    let shim = HttpShim::spawn(
        &["--token", "ta=alice", "--token", "tb=bob"],
        &modern_reference(),
    );
    let c = client();
    let url = shim.url.as_str();
    let alice = Principal {
        token: "ta".into(),
        sessions: Vec::new(),
        tasks: Vec::new(),
    };
    let (sid, _) = initialize(&c, url, Some("ta")).await;
    let task = legacy_create(&c, url, &alice, &sid, "mine").await;

    // A wrong token: 401 with a bearer challenge, whatever the session.
    for sid in [Some(sid.as_str()), None] {
        let get = rpc(2, "tasks/get", json!({"taskId": task}));
        let (s, body, h) = send(legacy(&c, url, sid, &get).bearer_auth("typo")).await;
        assert_eq!(s, 401, "{body}");
        assert!(
            h["www-authenticate"]
                .to_str()
                .unwrap()
                .starts_with("Bearer"),
            "{h:?}"
        );
        assert_valid(Revision::Legacy, &body, None);
    }

    // Another principal, or no credentials, on alice's session: exactly
    // what an unknown session gets, and alice's task is untouched.
    let unknown = observe(
        legacy(
            &c,
            url,
            Some("no-such-session"),
            &rpc(3, "tasks/get", json!({"taskId": task})),
        )
        .bearer_auth("tb"),
        Revision::Legacy,
        "tasks/get",
    )
    .await;
    assert_eq!(unknown.status, 404);
    for token in [Some("tb"), None] {
        for (id, method) in [(3, "tasks/get"), (3, "tasks/cancel")] {
            let mut req = legacy(
                &c,
                url,
                Some(&sid),
                &rpc(id, method, json!({"taskId": task})),
            );
            if let Some(t) = token {
                req = req.bearer_auth(t);
            }
            let seen = observe(req, Revision::Legacy, method).await;
            assert_eq!(seen, unknown, "{method} on another's session as {token:?}");
        }
        let mut del = c.delete(url).header("mcp-session-id", &sid);
        if let Some(t) = token {
            del = del.bearer_auth(t);
        }
        let (s, _, _) = send(del).await;
        assert_eq!(s, 404, "DELETE of another's session as {token:?}");
    }

    // `tasks/update` is not a 2025-11-25 method: refused in the session,
    // for its own task and for any other id alike.
    let update = |id: &str| {
        rpc(
            4,
            "tasks/update",
            json!({"taskId": id,
            "inputResponses": {"x": {"action": "accept", "content": {}}}}),
        )
    };
    let own = observe(
        legacy(&c, url, Some(&sid), &update(&task)).bearer_auth("ta"),
        Revision::Legacy,
        "tasks/update",
    )
    .await;
    assert_eq!(own.body["error"]["code"], -32601, "{:?}", own.body);
    let other = observe(
        legacy(
            &c,
            url,
            Some(&sid),
            &update("0123456789abcdef0123456789abcdef"),
        )
        .bearer_auth("ta"),
        Revision::Legacy,
        "tasks/update",
    )
    .await;
    assert_eq!(own.status, other.status);
    assert_eq!(own.body["error"]["code"], other.body["error"]["code"]);

    // Alice still has her session and her task, still working.
    let (s, body, _) = send(
        legacy(
            &c,
            url,
            Some(&sid),
            &rpc(5, "tasks/get", json!({"taskId": task})),
        )
        .bearer_auth("ta"),
    )
    .await;
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["result"]["status"], "working", "{body}");
}

/// A 2026-07-28 server's progress for one principal's call reaches that
/// call's own stream, under the client's token, and no other session:
/// not another principal's GET stream (it used to go to every open
/// session), and the token the server saw was the shim's, not alice's.
#[tokio::test(flavor = "multi_thread")]
async fn progress_reaches_only_the_call_that_asked_for_it() {
    let relay = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/fault_relay.py");
    let upstream = vec![
        "python3".to_owned(),
        relay.to_string_lossy().into_owned(),
        "progress".into(),
        "--".into(),
        shim_bin().to_owned(),
        "reference-server".into(),
        "--revision".into(),
        MODERN.into(),
    ];
    // The probe's wait is a guard: a Python relay starting the server can
    // miss the default 5 s on a loaded machine, and the shim would then
    // take the modern server for a 2025-11-25 one.
    let shim = HttpShim::spawn(
        &[
            "--token",
            "ta=alice",
            "--token",
            "tb=bob",
            "--probe-timeout",
            "60s",
        ],
        &upstream,
    );
    let c = client();
    let url = shim.url.as_str();
    let (alice, _) = initialize(&c, url, Some("ta")).await;
    let (bob, _) = initialize(&c, url, Some("tb")).await;
    let get = c
        .get(url)
        .bearer_auth("tb")
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &bob)
        .header("mcp-protocol-version", LEGACY)
        .send()
        .await
        .expect("bob's GET stream");
    let mut bobs = Sse::new(get);
    // The relay reports progress 0.3 s into the call, which takes 1 s.
    let call = rpc(
        5,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "FAULT"},
               "_meta": {"progressToken": "mine"}}),
    );
    let resp = legacy(&c, url, Some(&alice), &call)
        .bearer_auth("ta")
        .send()
        .await
        .expect("alice's call");
    let mut alices = Sse::new(resp);
    let mut progress = Vec::new();
    loop {
        let m = alices.next().await.expect("the call's answer");
        if m.get("method").is_none() {
            assert!(m.get("result").is_some(), "{m}");
            assert_valid(Revision::Legacy, &m, Some("tools/call"));
            break;
        }
        assert_valid(Revision::Legacy, &m, None);
        progress.push(m);
    }
    assert_eq!(progress.len(), 2, "{progress:#?}");
    for p in &progress {
        assert_eq!(p["method"], "notifications/progress", "{p}");
        assert_eq!(p["params"]["progressToken"], "mine", "{p}");
    }
    let leaked = tokio::time::timeout(Duration::from_secs(1), bobs.next()).await;
    assert!(leaked.is_err(), "bob's stream got {leaked:?}");
}

/// `--max-tasks-per-client` on the relay (2026-07-28 both sides), where
/// the server decides which calls make tasks. A task past the cap used to
/// be handed to the client unrecorded, so the cap did not hold and no
/// other principal was kept from it. Now the call is refused as on the
/// translating paths, and the task the server started is cancelled.
#[tokio::test(flavor = "multi_thread")]
async fn the_task_cap_holds_on_the_relay() {
    let flags = [
        "--token",
        "ta=alice",
        "--token",
        "tb=bob",
        "--max-tasks-per-client",
        "1",
    ];
    let shim = HttpShim::spawn(&flags, &modern_reference());
    let c = client();
    let url = shim.url.clone();
    modern_create(&c, &url, "ta", "first").await;
    let req = modern(&c, &url, 2, "tools/call", slow("second")).bearer_auth("ta");
    let (s, body, _) = send(req).await;
    assert_eq!(s, 200, "{body}");
    assert_valid(Revision::Modern, &body, Some("tools/call"));
    assert_eq!(body["error"]["code"], -32603, "refused, not a task: {body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("at most 1"), "names the cap: {message}");
    assert!(
        message.contains("cancelled"),
        "says the task went: {message}"
    );
    // The cap is alice's: bob still gets his task.
    modern_create(&c, &url, "tb", "bob's").await;
}

/// Two copies of a header that names the caller (or its session, origin
/// or protocol) are refused: the first copy used to win, so a client
/// behind a proxy that appends its own `X-Principal` could pick whose
/// tasks it got.
#[tokio::test(flavor = "multi_thread")]
async fn doubled_identity_headers_are_refused() {
    let flags = [
        "--token",
        "ta=alice",
        "--token",
        "tb=bob",
        "--principal-header",
        "x-principal",
    ];
    let shim = HttpShim::spawn(&flags, &modern_reference());
    let c = client();
    let url = shim.url.clone();
    let tools = |id: i64| modern(&c, &url, id, "tools/list", json!({}));
    let doubled = [
        (
            tools(1)
                .header("authorization", "Bearer tb")
                .header("authorization", "Bearer ta"),
            401,
        ),
        (
            tools(2)
                .header("x-principal", "victim")
                .header("x-principal", "attacker"),
            401,
        ),
        (
            tools(3)
                .header("origin", "http://127.0.0.1")
                .header("origin", "http://evil.example"),
            400,
        ),
        (tools(4).header("mcp-protocol-version", "2026-07-28"), 400),
    ];
    for (i, (req, status)) in doubled.into_iter().enumerate() {
        let (s, body, _) = send(req).await;
        assert_eq!(s.as_u16(), status, "case {i}: {body}");
        assert_valid(Revision::Modern, &body, Some("tools/list"));
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("more than one"),
            "case {i}: {body}"
        );
    }
    // One copy of each still works.
    let (s, body, _) = send(tools(5).header("authorization", "Bearer ta")).await;
    assert_eq!(s, 200, "{body}");
}

/// A question the server asks during one principal's `prompts/get` never
/// goes to another principal's open tool call (here alice's parked MRTR
/// round): the prompt's own request refuses it, as outside any tool call,
/// and alice's round takes her answer. Before, bob's question was added to
/// alice's round, shown to her, and bob's `prompts/get` hung.
#[tokio::test(flavor = "multi_thread")]
async fn a_question_during_one_principals_prompt_stays_out_of_anothers_call() {
    support::peers::require_peers();
    let server = [
        "node".to_owned(),
        support::peers::peers_dir()
            .join("sdk_task_server.mjs")
            .display()
            .to_string(),
    ];
    let shim = HttpShim::spawn(&["--token", "ta=alice", "--token", "tb=bob"], &server);
    let c = client();
    let url = shim.url.as_str();
    // Clients that can answer a form.
    let mut meta = support::http::modern_meta(true);
    meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"] = json!({"form": {}});
    let ask = json!({"name": "ask_plain", "arguments": {}, "_meta": meta});
    let (s, body, _) = send(modern(&c, url, 1, "tools/call", ask).bearer_auth("ta")).await;
    assert_eq!(s, 200, "{body}");
    assert_valid(Revision::Modern, &body, Some("tools/call"));
    let round = &body["result"];
    assert_eq!(round["resultType"], "input_required", "{round}");
    let key = round["inputRequests"]
        .as_object()
        .and_then(|m| m.keys().next().cloned())
        .expect("one input request");

    let get = json!({"name": "ask_prompt", "_meta": meta});
    let (s, prompt, _) = send(modern(&c, url, 2, "prompts/get", get).bearer_auth("tb")).await;
    assert_eq!(s, 200, "{prompt}");
    assert_valid(Revision::Modern, &prompt, Some("prompts/get"));
    let said = prompt["result"]["messages"][0]["content"]["text"].to_string();
    assert!(said.contains("refused"), "{prompt}");

    let retry = json!({"name": "ask_plain", "arguments": {}, "_meta": meta,
        "requestState": round["requestState"],
        "inputResponses": {key: {"action": "accept", "content": {"name": "Ann"}}}});
    let (s, done, _) = send(modern(&c, url, 3, "tools/call", retry).bearer_auth("ta")).await;
    assert_eq!(s, 200, "{done}");
    assert_valid(Revision::Modern, &done, Some("tools/call"));
    assert_eq!(
        done["result"]["content"][0]["text"], "Hello, Ann!",
        "{done}"
    );
}

/// An `initialize` (with `token`, if any) that the shim refuses: its 503,
/// a schema-valid 2025-11-25 error naming the cap, and no session id.
async fn refused_initialize(c: &Client, url: &str, token: Option<&str>, cap: &str) {
    let body = support::http::rpc(
        0,
        "initialize",
        json!({
            "protocolVersion": LEGACY,
            "capabilities": {},
            "clientInfo": {"name": "http-test", "version": "0"},
        }),
    );
    let mut req = legacy(c, url, None, &body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let (status, body, headers) = send(req).await;
    assert_eq!(status, 503, "{token:?} over {cap}: {body}");
    assert_valid(Revision::Legacy, &body, Some("initialize"));
    assert_eq!(body["error"]["code"], -32603, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(cap), "names {cap}: {body}");
    assert!(headers.get("mcp-session-id").is_none(), "{body}");
}

/// Anonymous clients cannot take every 2025-11-25 session: they have a
/// share of `--max-sessions` (half by default), and each principal has its
/// own (a tenth by default), so authenticated principals are still served
/// when anonymous clients, or another principal, are at their cap. Before,
/// one global cap let free anonymous `initialize`s lock every principal
/// out with 503.
#[tokio::test(flavor = "multi_thread")]
async fn anonymous_sessions_and_one_principal_cannot_lock_the_others_out() {
    let shim = HttpShim::spawn(
        &[
            "--max-sessions",
            "4",
            "--token",
            "ta=alice",
            "--token",
            "tb=bob",
        ],
        &modern_reference(),
    );
    let (c, url) = (client(), shim.url.as_str());
    let (anon, _) = initialize(&c, url, None).await;
    initialize(&c, url, None).await;
    refused_initialize(&c, url, None, "--max-anonymous-sessions").await;
    initialize(&c, url, Some("ta")).await;
    refused_initialize(&c, url, Some("ta"), "--max-sessions-per-principal").await;
    initialize(&c, url, Some("tb")).await;
    // Every session is taken now: the global cap holds for everyone.
    refused_initialize(&c, url, Some("tb"), "(4, --max-sessions)").await;
    // A session that ends frees its place in its share.
    let (status, _, _) = send(
        c.delete(url)
            .header("mcp-session-id", &anon)
            .header("mcp-protocol-version", LEGACY),
    )
    .await;
    assert!(status.is_success(), "DELETE: {status}");
    initialize(&c, url, None).await;
}

/// The caps as configured, from the command line and the config file
/// (the command line wins).
#[tokio::test(flavor = "multi_thread")]
async fn session_caps_follow_the_flags_and_the_config_file() {
    let config = support::wire::temp_path("session-caps.toml");
    std::fs::write(
        &config,
        "max_anonymous_sessions = 1\nmax_sessions_per_principal = 1\n",
    )
    .unwrap();
    let config_arg = config.to_string_lossy().into_owned();
    let shim = HttpShim::spawn(
        &[
            "--config",
            &config_arg,
            "--max-sessions-per-principal",
            "2",
            "--principal-header",
            "x-user",
        ],
        &modern_reference(),
    );
    let (c, url) = (client(), shim.url.as_str());
    initialize(&c, url, None).await;
    refused_initialize(&c, url, None, "(1, --max-anonymous-sessions)").await;
    for user in ["alice", "alice", "bob"] {
        let body = support::http::rpc(
            0,
            "initialize",
            json!({"protocolVersion": LEGACY, "capabilities": {},
                   "clientInfo": {"name": "http-test", "version": "0"}}),
        );
        let (status, body, _) = send(legacy(&c, url, None, &body).header("x-user", user)).await;
        assert_eq!(status, 200, "{user}: {body}");
        assert_valid(Revision::Legacy, &body, Some("initialize"));
    }
    let body = support::http::rpc(
        0,
        "initialize",
        json!({"protocolVersion": LEGACY, "capabilities": {},
               "clientInfo": {"name": "http-test", "version": "0"}}),
    );
    let (status, body, _) = send(legacy(&c, url, None, &body).header("x-user", "alice")).await;
    assert_eq!(status, 503, "alice's third: {body}");
    assert_valid(Revision::Legacy, &body, Some("initialize"));
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("(2, --max-sessions-per-principal)"),
        "{body}"
    );
}
