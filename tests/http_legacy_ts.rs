//! Issue 5, legacy clients over Streamable HTTP: the official TypeScript SDK
//! client (`@modelcontextprotocol/sdk` 1.32.2, `StreamableHTTPClientTransport`)
//! runs its whole task repertoire against the shim's HTTP front in front of
//! the 2026-07-28 reference server:
//!
//! ```text
//! mcp-tasks-shim http --listen 127.0.0.1:0 --page-size 4 -- \
//!     mcp-tasks-shim reference-server --revision 2026-07-28
//! node legacy_client.mjs --profile shim --http http://127.0.0.1:PORT/mcp
//! ```
//!
//! The script (`tests/peers/legacy_client.mjs`, the same one the stdio
//! tests use) checks creation, polling, blocking `tasks/result`, elicitation
//! while `input_required` (answered by the SDK, the answer reaches the tool),
//! `tasks/list` pages, cancel, double cancel `-32602`, failed tasks, unknown
//! ids `-32602` and status notifications (on the GET stream). Every message
//! the client saw is validated against the 2025-11-25 schema.
//!
//! A second test checks with raw HTTP that the elicitation travels on the
//! SSE stream of the pending `tasks/result`, before its answer, and that the
//! client's JSON-RPC answer POSTed in the session is accepted with `202`.
//!
//! Needs Node and `tests/peers/node_modules`: run `scripts/test.sh`.

mod support;

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use support::http::{HttpShim, Sse, client, initialize, legacy, rpc, send};
use support::peers::{assert_shim_http_run, require_peers, run_legacy_client_http};
use support::schema::{Revision, assert_valid};
use support::wire::{modern_reference, temp_path};

/// The script bounds itself at 60 s; this is the backstop.
const TIMEOUT: Duration = Duration::from_secs(90);
const RELATED: &str = "io.modelcontextprotocol/related-task";

#[test]
fn ts_sdk_http_client_through_the_shim_against_the_modern_reference() {
    require_peers();
    let shim = HttpShim::spawn(&["--page-size", "4"], &modern_reference());
    let client_view = temp_path("ts-http-client-view.jsonl");
    let run = run_legacy_client_http("shim", &client_view, &shim.url, TIMEOUT);
    assert_shim_http_run(&run, &client_view);
}

#[tokio::test(flavor = "multi_thread")]
async fn elicitation_travels_on_the_tasks_result_stream() {
    let shim = HttpShim::spawn(&[], &modern_reference());
    let c = client();
    let url = shim.url.as_str();
    let (sid, _) = initialize(&c, url, None).await;

    let params = json!({"name": "confirm_delete", "arguments": {"filename": "raw.txt"},
        "task": {"ttl": 60000}});
    let (s, created, _) = send(legacy(&c, url, Some(&sid), &rpc(1, "tools/call", params))).await;
    assert_eq!(s, StatusCode::OK, "{created}");
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();

    // tasks/result as SSE: first the question, tagged with the task.
    let resp = tokio::time::timeout(
        support::http::STEP,
        legacy(
            &c,
            url,
            Some(&sid),
            &rpc(2, "tasks/result", json!({"taskId": task})),
        )
        .send(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut sse = Sse::new(resp);
    let ask = sse.next().await.expect("the elicitation on the stream");
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert_eq!(ask["params"]["_meta"][RELATED]["taskId"], task.as_str());
    assert_eq!(ask["params"]["message"], "Delete raw.txt?");
    assert_valid(Revision::Legacy, &ask, None);

    // The answer is POSTed in the session: 202.
    let answer = json!({"jsonrpc": "2.0", "id": ask["id"],
        "result": {"action": "accept", "content": {"confirm": true}}});
    let (s, _, _) = send(legacy(&c, url, Some(&sid), &answer)).await;
    assert_eq!(s, StatusCode::ACCEPTED);

    // Then the final result ends the same stream.
    let done = sse.next().await.expect("the result on the stream");
    assert_eq!(done["id"], 2, "{done}");
    assert_valid(Revision::Legacy, &done, Some("tasks/result"));
    assert_eq!(done["result"]["content"][0]["text"], "Deleted raw.txt");
    assert_eq!(done["result"]["_meta"][RELATED]["taskId"], task.as_str());
    assert!(
        sse.next().await.is_none(),
        "the stream ends after the answer"
    );
}
