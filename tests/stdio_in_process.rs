//! `stdio::serve_stdio` over in-process byte streams: the crate's
//! 2026-07-28 reference server on one duplex pair (reached with
//! `upstream::io::connect`), a 2025-11-25 client on another. No sockets,
//! no child processes.

mod support;

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks_shim::driver::stdio::{self, ProxyOptions};
use mcp_tasks_shim::jsonrpc::Message;
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::reference::ReferenceServer;
use mcp_tasks_shim::revision::Revision;
use mcp_tasks_shim::upstream;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// The reference server's wire loop on one end of a duplex pair.
fn spawn_modern_server(end: tokio::io::DuplexStream) {
    let (r, mut w) = tokio::io::split(end);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Message>();
    let server = ReferenceServer::new(Revision::Modern, tx);
    tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            if w.write_all(&msg.to_line()).await.is_err() {
                break;
            }
        }
    });
    tokio::spawn(async move {
        let mut lines = BufReader::new(r).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            server.handle(Message::parse(line.as_bytes()).expect("shim sent valid JSON-RPC"));
        }
    });
}

#[tokio::test]
async fn a_legacy_client_runs_a_task_on_an_in_process_modern_server() {
    let (shim_up, server_end) = tokio::io::duplex(64 * 1024);
    spawn_modern_server(server_end);
    let (from_server, to_server) = tokio::io::split(shim_up);
    let opts = ProxyOptions::default();
    let link = upstream::io::connect(
        from_server,
        to_server,
        Duration::from_secs(10),
        Duration::from_secs(10),
        opts.max_message_bytes,
    )
    .await;
    assert_eq!(link.revision(), Revision::Modern);

    let (client_end, shim_down) = tokio::io::duplex(64 * 1024);
    let (shim_r, shim_w) = tokio::io::split(shim_down);
    let session = tokio::spawn(stdio::serve_stdio(
        shim_r,
        shim_w,
        link,
        Arc::new(MemoryLedger::default()),
        opts,
    ));
    let (client_r, mut client_w) = tokio::io::split(client_end);
    let mut lines = BufReader::new(client_r).lines();
    let mut next_id = 0;
    let mut ask = async |method: &str, params: Value| -> Value {
        next_id += 1;
        let req = json!({"jsonrpc": "2.0", "id": next_id, "method": method, "params": params});
        let mut bytes = serde_json::to_vec(&req).unwrap();
        bytes.push(b'\n');
        client_w.write_all(&bytes).await.unwrap();
        loop {
            let line = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
                .await
                .expect("an answer in time")
                .unwrap()
                .expect("the shim's output open");
            let msg: Value = serde_json::from_str(&line).unwrap();
            let answered = if msg.get("id") == Some(&json!(next_id)) {
                Some(method)
            } else {
                None
            };
            support::schema::assert_valid(Revision::Legacy, &msg, answered);
            if answered.is_some() {
                return msg;
            }
        }
    };

    let init = ask(
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "in-process", "version": "1"}}),
    )
    .await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25", "{init}");

    let tools = ask("tools/list", json!({})).await;
    let slow = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "slow_compute")
        .expect("slow_compute listed")
        .clone();
    assert!(
        slow["execution"]["taskSupport"].is_string(),
        "taskSupport missing: {slow}"
    );

    let call = ask(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0.2, "label": "duplex"},
               "task": {"ttl": 60_000}}),
    )
    .await;
    let task_id = call["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {call}"))
        .to_owned();

    let result = ask("tasks/result", json!({"taskId": task_id})).await;
    assert!(
        result["result"]["content"].to_string().contains("duplex"),
        "{result}"
    );

    // The duplex end closes once both its halves are gone.
    drop(client_w);
    drop(lines);
    let ending = tokio::time::timeout(Duration::from_secs(20), session)
        .await
        .expect("the session ends")
        .unwrap()
        .unwrap();
    assert_eq!(ending, stdio::Ending::ClientClosed);
}
