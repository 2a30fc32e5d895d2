//! A 2026-07-28 client's `subscriptions/listen` over HTTP, in front of a
//! 2025-11-25 server, through the real binary: the stream must stay open
//! and carry the task to its end, with the terminal `notifications/tasks`
//! holding the result (docs/translation.md, "status notifications").
//!
//! The upstream is a child process (`-- reference-server`) in one test and
//! an HTTP server (`--upstream-url`) in the other. Every message the shim
//! sends is validated against the 2026-07-28 schemas.

mod support;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use support::http::{HttpReference, HttpShim, LEGACY, STEP, Sse, client, modern, send};
use support::schema::{Revision, assert_valid};
use support::wire::shim_bin;
use tokio::time::timeout;

/// Bound on one whole flow.
const BOUND: Duration = Duration::from_secs(40);
/// The id of the `subscriptions/listen` request (its subscription id).
const LISTEN_ID: i64 = 2;

const SUB: &str = "io.modelcontextprotocol/subscriptionId";

/// Creates a one-second `slow_compute` task, listens to it, and reads the
/// stream until the task ends there.
async fn listen_follows_a_task_to_its_end(shim: &HttpShim) {
    let c = client();
    let (status, created, _) = send(modern(
        &c,
        &shim.url,
        1,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": "listened"}}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    assert_valid(Revision::Modern, &created, Some("tools/call"));
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let task_id = created["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned();

    let resp = timeout(
        STEP,
        modern(
            &c,
            &shim.url,
            LISTEN_ID,
            "subscriptions/listen",
            json!({"notifications": {"taskIds": [task_id]}}),
        )
        .send(),
    )
    .await
    .expect("timed out opening the listen stream")
    .expect("listen request failed");
    assert_eq!(resp.status(), StatusCode::OK);
    let mut sse = Sse::new(resp);

    let mut seen: Vec<Value> = Vec::new();
    let done = loop {
        // Each wait is bounded by `STEP`; the task ends after one second.
        let Some(m) = sse.next().await else {
            panic!("the listen stream ended before the task did; it carried {seen:#?}");
        };
        assert_valid(Revision::Modern, &m, None);
        assert_eq!(
            m["params"]["_meta"][SUB],
            json!(LISTEN_ID),
            "every stream message names its subscription: {m}"
        );
        seen.push(m.clone());
        if m["method"] == "notifications/tasks" {
            assert_eq!(m["params"]["taskId"], json!(task_id), "{m}");
            let status = m["params"]["status"].as_str().unwrap_or_default();
            if matches!(status, "completed" | "failed" | "cancelled") {
                break m;
            }
            assert_eq!(status, "working", "{m}");
        }
    };

    let ack = &seen[0];
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([task_id]),
        "{ack}"
    );
    let terminals = seen
        .iter()
        .filter(|m| m["method"] == "notifications/tasks" && m["params"]["status"] != "working")
        .count();
    assert_eq!(
        terminals, 1,
        "a terminal status is announced once: {seen:#?}"
    );

    // The terminal notification carries the outcome the schema requires.
    let p = &done["params"];
    assert_eq!(p["status"], "completed", "{done}");
    assert_eq!(
        p["result"]["content"][0]["text"], "slow_compute 'listened' finished after 1 s",
        "{done}"
    );
    assert_eq!(p["result"]["isError"], false, "{done}");

    // ...and says what tasks/get says.
    let (status, got, _) = send(modern(
        &c,
        &shim.url,
        3,
        "tasks/get",
        json!({"taskId": task_id}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{got}");
    assert_valid(Revision::Modern, &got, Some("tasks/get"));
    assert_eq!(got["result"]["status"], "completed", "{got}");
    assert_eq!(got["result"]["result"], p["result"], "{got}");
}

#[tokio::test(flavor = "multi_thread")]
async fn listen_over_http_with_a_child_upstream() {
    let upstream = [shim_bin(), "reference-server", "--revision", LEGACY];
    let shim = HttpShim::spawn(&[], &upstream);
    timeout(BOUND, listen_follows_a_task_to_its_end(&shim))
        .await
        .expect("listen flow timed out");
}

#[tokio::test(flavor = "multi_thread")]
async fn listen_over_http_with_an_http_upstream() {
    let server = HttpReference::start(LEGACY, &[]);
    let none: [&str; 0] = [];
    let shim = HttpShim::spawn(&["--upstream-url", &server.url], &none);
    timeout(BOUND, listen_follows_a_task_to_its_end(&shim))
        .await
        .expect("listen flow timed out");
}

/// A listen stream open when the shim is told to stop (SIGTERM) ends
/// gracefully: its last message is the `SubscriptionsListenResult` the
/// schema defines for a server tearing a subscription down, not a bare
/// end of the connection (which an SDK reads as a lost subscription).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_stream_ends_gracefully_at_shutdown() {
    let reference = [
        shim_bin().to_owned(),
        "reference-server".to_owned(),
        "--revision".to_owned(),
        LEGACY.to_owned(),
    ];
    let mut shim = HttpShim::spawn(&[], &reference);
    let c = client();
    timeout(BOUND, async {
        let (status, created, _) = send(modern(
            &c,
            &shim.url,
            1,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "held"}}),
        ))
        .await;
        assert_eq!(status, StatusCode::OK, "{created}");
        let task_id = created["result"]["taskId"].clone();
        let resp = modern(
            &c,
            &shim.url,
            LISTEN_ID,
            "subscriptions/listen",
            json!({"notifications": {"taskIds": [task_id]}}),
        )
        .send()
        .await
        .expect("listen request");
        assert_eq!(resp.status(), StatusCode::OK);
        let mut sse = Sse::new(resp);
        let ack = sse.next().await.expect("the acknowledgement");
        assert_eq!(
            ack["method"], "notifications/subscriptions/acknowledged",
            "{ack}"
        );
        let status = tokio::task::spawn_blocking(move || {
            let st = shim.terminate(Duration::from_secs(8));
            (st, shim)
        });
        let mut rest = Vec::new();
        while let Some(m) = sse.next().await {
            assert_valid(Revision::Modern, &m, Some("subscriptions/listen"));
            rest.push(m);
        }
        let last = rest
            .last()
            .unwrap_or_else(|| panic!("nothing after the ack"));
        assert_eq!(last["id"], json!(LISTEN_ID), "{rest:#?}");
        assert_eq!(last["result"]["resultType"], "complete", "{last}");
        assert_eq!(last["result"]["_meta"][SUB], json!(LISTEN_ID), "{last}");
        let (st, _shim) = status.await.expect("terminate");
        assert!(st.is_some_and(|s| s.success()), "{st:?}");
    })
    .await
    .expect("timed out");
}

/// Creates a 30 s `slow_compute` task as `who`; returns its id.
async fn create_as(c: &reqwest::Client, url: &str, who: &str, id: i64) -> String {
    let (status, created, _) = send(
        modern(
            c,
            url,
            id,
            "tools/call",
            json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": who}}),
        )
        .header("x-principal", who),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    assert_valid(Revision::Modern, &created, Some("tools/call"));
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    created["result"]["taskId"]
        .as_str()
        .expect("a task id")
        .to_owned()
}

/// Opens `who`'s listen stream `id` for `task_ids`; returns it with its
/// acknowledgement.
async fn listen_as(
    c: &reqwest::Client,
    url: &str,
    who: &str,
    id: i64,
    task_ids: &[&str],
) -> (Sse, Value) {
    let resp = timeout(
        STEP,
        modern(
            c,
            url,
            id,
            "subscriptions/listen",
            json!({"notifications": {"taskIds": task_ids}}),
        )
        .header("x-principal", who)
        .send(),
    )
    .await
    .expect("timed out opening the listen stream")
    .expect("listen request failed");
    assert_eq!(resp.status(), StatusCode::OK);
    let mut sse = Sse::new(resp);
    let ack = sse.next().await.expect("an acknowledgement");
    assert_valid(Revision::Modern, &ack, None);
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(ack["params"]["_meta"][SUB], json!(id), "{ack}");
    (sse, ack)
}

/// Reads `sse` (listen `id`) until `task_id` ends; every message must be
/// schema-valid, name the subscription, and be about `task_id`.
async fn until_ended(sse: &mut Sse, id: i64, task_id: &str) -> Value {
    loop {
        let Some(m) = sse.next().await else {
            panic!("the listen stream ended before task {task_id} did");
        };
        assert_valid(Revision::Modern, &m, None);
        assert_eq!(m["params"]["_meta"][SUB], json!(id), "{m}");
        assert_eq!(m["method"], "notifications/tasks", "{m}");
        assert_eq!(m["params"]["taskId"], json!(task_id), "another's task: {m}");
        if m["params"]["status"] != "working" {
            return m;
        }
    }
}

/// Cancels `task_id` as `who`.
async fn cancel_as(c: &reqwest::Client, url: &str, who: &str, id: i64, task_id: &str) {
    let (status, r, _) = send(
        modern(c, url, id, "tasks/cancel", json!({"taskId": task_id})).header("x-principal", who),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{r}");
    assert_valid(Revision::Modern, &r, Some("tasks/cancel"));
}

/// Two 2026-07-28 peers (`--upstream-url` to the 2026-07-28 reference
/// server): each principal's listen stream is relayed, and carries its own
/// tasks only. Alice asks for both tasks; the upstream is asked for hers
/// alone, so Bob's cancel (which comes first, on the same upstream stream
/// were it asked for) never reaches her stream, while Bob's stream sees it.
#[tokio::test(flavor = "multi_thread")]
async fn a_relayed_listen_carries_the_callers_tasks_only() {
    let server = HttpReference::start("2026-07-28", &[]);
    let none: [&str; 0] = [];
    let shim = HttpShim::spawn(
        &[
            "--upstream-url",
            &server.url,
            "--principal-header",
            "x-principal",
        ],
        &none,
    );
    timeout(BOUND, async {
        let c = client();
        let url = shim.url.as_str();
        let alices = create_as(&c, url, "alice", 1).await;
        let bobs = create_as(&c, url, "bob", 2).await;

        let (mut alice, ack) = listen_as(&c, url, "alice", 10, &[&alices, &bobs]).await;
        assert_eq!(
            ack["params"]["notifications"]["taskIds"],
            json!([alices]),
            "{ack}"
        );
        let (mut bob, ack) = listen_as(&c, url, "bob", 20, &[&bobs, &alices]).await;
        assert_eq!(
            ack["params"]["notifications"]["taskIds"],
            json!([bobs]),
            "{ack}"
        );

        cancel_as(&c, url, "bob", 3, &bobs).await;
        let ended = until_ended(&mut bob, 20, &bobs).await;
        assert_eq!(ended["params"]["status"], "cancelled", "{ended}");
        cancel_as(&c, url, "alice", 4, &alices).await;
        let ended = until_ended(&mut alice, 10, &alices).await;
        assert_eq!(ended["params"]["status"], "cancelled", "{ended}");
    })
    .await
    .expect("relayed listen flow timed out");
}
