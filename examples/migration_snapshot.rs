//! A migration snapshot with the library: record what a 2025-11-25 client
//! sees through the shim in front of a 2026-07-28 server, normalise the
//! transcript with the default masks, and hold it against an insta snapshot.
//!
//! ```text
//! cargo run --example migration_snapshot
//! ```
//!
//! The same steps belong in a `#[test]` of your own (see
//! `tests/migration_snapshot.rs`, which records the real binary, and
//! docs/migration-testing.md). The server here is the crate's 2026-07-28
//! reference server, seeded so its task ids and timestamps repeat; put
//! your own server behind the `Link` instead.
//!
//! A mismatch panics and leaves `snapshots/*.snap.new` for `cargo insta
//! review`; run with `INSTA_UPDATE=always` to accept a new snapshot.

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks_shim::driver::stdio::{self, ProxyOptions};
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::reference::{self, ReferenceServer};
use mcp_tasks_shim::revision::Revision;
use mcp_tasks_shim::testing::{Masks, Transcript};
use mcp_tasks_shim::upstream::{Link, channel};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. The upgraded server, in this process, seeded.
    reference::set_seed(1);
    let (conn, events, mut server_end) = channel::pair(Duration::from_secs(10));
    let server = ReferenceServer::new(Revision::Modern, server_end.to_shim.clone());
    tokio::spawn(async move {
        while let Some(msg) = server_end.from_shim.recv().await {
            server.handle(msg);
        }
    });
    let link = Link::probe(conn, events, Duration::from_secs(5)).await;

    // 2. The shim in front of it, recording the client's side (`--record`).
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("client.jsonl");
    let opts = ProxyOptions {
        record: Some(path.clone()),
        ..ProxyOptions::default()
    };
    let (client_end, shim_end) = tokio::io::duplex(64 * 1024);
    let (shim_in, shim_out) = tokio::io::split(shim_end);
    let shim = tokio::spawn(stdio::serve_stdio(
        shim_in,
        shim_out,
        link,
        Arc::new(MemoryLedger::default()),
        opts,
    ));

    // 3. An old client's conversation: each request waits for its answer.
    let (from_shim, mut to_shim) = tokio::io::split(client_end);
    let mut lines = BufReader::new(from_shim).lines();
    let mut ask = async |id: u64, method: &str, params: Value| -> Result<Value, String> {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let line = format!("{line}\n");
        let sent = to_shim.write_all(line.as_bytes()).await;
        sent.map_err(|e| e.to_string())?;
        loop {
            let line = lines.next_line().await.map_err(|e| e.to_string())?;
            let msg: Value =
                serde_json::from_str(&line.ok_or("the shim closed")?).map_err(|e| e.to_string())?;
            if msg["id"] == id && msg.get("method").is_none() {
                return Ok(msg);
            }
        }
    };
    ask(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "example", "version": "1"}}),
    )
    .await?;
    let created = ask(
        2,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "example"},
               "task": {"ttl": 60_000}}),
    )
    .await?;
    let task = created["result"]["task"]["taskId"].clone();
    ask(3, "tasks/result", json!({"taskId": task})).await?;
    // The client leaves (its halves share one stream: shut the writing
    // side): the session ends and the transcript is complete.
    to_shim.shutdown().await?;
    shim.await??;

    // 4. Normalise and snapshot.
    let transcript = Transcript::read(&path)?;
    let normalized = transcript.normalized(&Masks::default());
    println!("{}", serde_json::to_string_pretty(&normalized)?);
    insta::with_settings!({snapshot_path => "../snapshots"}, {
        insta::assert_json_snapshot!("migration_example", normalized);
    });
    Ok(())
}
