//! Modern clients against a legacy server, with a real third-party client:
//! the official Rust SDK (`rmcp` 3.11, `server/discover` lifecycle, tasks
//! extension declared) talks to the real binary running
//! `mcp-tasks-shim stdio --record FILE -- mcp-tasks-shim reference-server --revision 2025-11-25`.
//! It discovers, lists, creates tasks, polls them, reads results inline,
//! answers mid-task input with `tasks/update` (all at once, and partially),
//! runs the MRTR round before a task, cancels; a second client without the
//! extension gets -32021. The shim's own transcript of each conversation is
//! validated against the 2026-07-28 schemas, message by message.
//!
//! What rmcp cannot send is covered in `modern_front_wire.rs`.

mod modern_front_common;
#[path = "support/rmcp_client.rs"]
mod rmcp_client;
mod support;

use std::path::Path;
use std::time::Duration;

use modern_front_common::{legacy_reference, record_path, spawn_shim};
use rmcp::model::*;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp_client::{Expect, mcp_code, params, task_repertoire};
use serde_json::{Value, json};
use support::schema::{Revision, assert_conversation_valid};
use tokio::process::Child;
use tokio::time::timeout;

async fn connect(
    record: &Path,
    with_tasks: bool,
) -> (Child, RunningService<rmcp::RoleClient, ClientConfig>) {
    let record = record.to_str().unwrap();
    let mut shim = spawn_shim(&["--record", record], &legacy_reference());
    let transport = (shim.stdout.take().unwrap(), shim.stdin.take().unwrap());
    let caps = ClientCapabilities::builder().enable_elicitation();
    let caps = if with_tasks {
        caps.enable_tasks().build()
    } else {
        caps.build()
    };
    let config = ClientConfig::new(
        caps,
        Implementation::new("mcp-tasks-shim-rmcp-peer", "1.0.0"),
    );
    let running = config
        .serve_with_lifecycle(
            transport,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover through the shim");
    (shim, running)
}

/// Closes the client, waits for the shim to exit, and validates every
/// message of its transcript against the 2026-07-28 schemas.
async fn finish(
    mut shim: Child,
    running: RunningService<rmcp::RoleClient, ClientConfig>,
    record: &Path,
) {
    running.cancel().await.expect("close client");
    let status = timeout(Duration::from_secs(10), shim.wait())
        .await
        .expect("the shim exits after its client")
        .unwrap();
    assert!(status.success(), "{status}");
    let text = std::fs::read_to_string(record).expect("the shim wrote its transcript");
    let conversation: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("transcript lines are JSON"))
        .collect();
    assert!(
        conversation
            .iter()
            .any(|r| r["dir"] == "s2c" && r["msg"]["result"]["supportedVersions"].is_array()),
        "the transcript holds the discover answer"
    );
    assert_conversation_valid(conversation.iter().map(|r| {
        (
            Revision::Modern,
            r["dir"].as_str().unwrap_or("?"),
            &r["msg"],
        )
    }));
}

#[tokio::test(flavor = "multi_thread")]
async fn rmcp_client_with_tasks_through_the_shim() {
    timeout(Duration::from_secs(45), with_tasks())
        .await
        .expect("rmcp flow timed out");
}

async fn with_tasks() {
    let record = record_path("modern-front-rmcp");
    let (shim, running) = connect(&record, true).await;
    let client = running.peer().clone();

    // server/discover, answered from the legacy InitializeResult.
    let info = running.peer_info().expect("discover result");
    let server = info.server_info.clone().expect("serverInfo moved to _meta");
    assert_eq!(server.name, "mcp-tasks-shim-reference", "{server:?}");

    task_repertoire(
        &client,
        Expect {
            mrtr_key: None,
            request_state: true,
        },
    )
    .await;

    finish(shim, running, &record).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn rmcp_client_without_tasks_through_the_shim() {
    timeout(Duration::from_secs(30), without_tasks())
        .await
        .expect("rmcp flow timed out");
}

async fn without_tasks() {
    let record = record_path("modern-front-rmcp-no-tasks");
    let (shim, running) = connect(&record, false).await;
    let client = running.peer().clone();

    // tasks/get without the extension: -32021 (before any lookup).
    let e = client
        .get_task(GetTaskParams::new("no-such-task"))
        .await
        .expect_err("-32021");
    assert_eq!(mcp_code(&e), Some(-32021), "{e}");
    // A tool the legacy server runs only as a task: -32021.
    let e = client
        .call_tool_once(params("confirm_delete", json!({"filename": "a"})))
        .await
        .expect_err("-32021");
    assert_eq!(mcp_code(&e), Some(-32021), "{e}");
    // An optional one runs as a plain call.
    match client
        .call_tool_once(params(
            "slow_compute",
            json!({"seconds": 0, "label": "plain"}),
        ))
        .await
        .expect("plain")
    {
        CallToolResponse::Complete(r) => {
            assert!(r.content[0].as_text().unwrap().text.contains("plain"))
        }
        other => panic!("{other:?}"),
    }

    finish(shim, running, &record).await;
}
