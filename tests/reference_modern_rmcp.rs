//! The 2026-07-28 reference server against a real third-party peer: the
//! official Rust SDK
//!   client (`rmcp` 3.11, `server/discover` lifecycle, tasks extension
//!   declared) creates tasks, polls them, answers mid-task input with
//!   `tasks/update` (all at once and partially), runs the MRTR round before
//!   a task, and cancels. A recording relay sits between client and server
//!   so the whole conversation is validated against the 2026-07-28 schemas.
//!
//! What rmcp cannot send is covered in `reference_modern_wire.rs`.
//!
//! Set `MCP_SHIM_RECORD=1` to refresh `tests/corpus/recorded/rmcp-modern.jsonl`.

#[path = "support/rmcp_client.rs"]
mod rmcp_client;
mod support;

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::*;
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp_client::{Expect, task_repertoire};
use serde_json::{Value, json};
use support::schema::{Revision, assert_conversation_valid};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::time::timeout;

type Log = Arc<Mutex<Vec<(String, Value)>>>;

fn spawn_server() -> Child {
    Command::new(env!("CARGO_BIN_EXE_mcp-tasks-shim"))
        .args(["reference-server", "--revision", "2026-07-28"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn the reference server")
}

/// Copies lines from `from` to `to`, logging each as `dir`.
fn relay<R, W>(from: R, mut to: W, dir: &'static str, log: Log) -> tokio::task::JoinHandle<()>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        let mut lines = BufReader::new(from).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                log.lock().unwrap().push((dir.to_owned(), v));
            }
            if to.write_all(format!("{line}\n").as_bytes()).await.is_err() {
                break;
            }
            let _ = to.flush().await;
        }
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn rmcp_client_drives_the_modern_reference_server() {
    timeout(Duration::from_secs(90), rmcp_flow())
        .await
        .expect("rmcp flow timed out");
}

async fn rmcp_flow() {
    let log: Log = Arc::default();
    let mut server = spawn_server();
    let (client_end, relay_end) = tokio::io::duplex(1 << 16);
    let (relay_read, relay_write) = tokio::io::split(relay_end);
    let c2s = relay(relay_read, server.stdin.take().unwrap(), "c2s", log.clone());
    // Ends with the server; nothing waits for it.
    drop(relay(
        server.stdout.take().unwrap(),
        relay_write,
        "s2c",
        log.clone(),
    ));

    let config = ClientConfig::new(
        ClientCapabilities::builder()
            .enable_elicitation()
            .enable_tasks()
            .build(),
        Implementation::new("mcp-tasks-shim-rmcp-peer", "1.0.0"),
    );
    let running = config
        .serve_with_lifecycle(
            client_end,
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
        )
        .await
        .expect("discover handshake");
    let client = running.peer().clone();

    task_repertoire(
        &client,
        Expect {
            mrtr_key: Some("user_name"),
            request_state: false,
        },
    )
    .await;

    running.cancel().await.expect("close client");
    // The client's end is closed: its relay logs what is left and ends.
    timeout(Duration::from_secs(10), c2s)
        .await
        .expect("the client's relay ends")
        .expect("the relay task");
    let conversation = log.lock().unwrap().clone();
    assert!(
        conversation
            .iter()
            .any(|(d, m)| d == "c2s" && m["method"] == "server/discover")
    );
    assert_conversation_valid(
        conversation
            .iter()
            .map(|(d, m)| (Revision::Modern, d.as_str(), m)),
    );
    if std::env::var_os("MCP_SHIM_RECORD").is_some() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/corpus/recorded/rmcp-modern.jsonl"
        );
        let text: String = conversation
            .iter()
            .map(|(d, m)| format!("{}\n", json!({"dir": d, "msg": m})))
            .collect();
        std::fs::write(path, text).expect("write transcript");
    }
}
