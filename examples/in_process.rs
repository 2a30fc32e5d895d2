//! The shim as a library: a 2025-11-25 client session in front of a
//! 2026-07-28 server that lives in the same process.
//!
//! ```text
//! cargo run --example in_process
//! ```
//!
//! The server here is the crate's modern reference server; any server that
//! reads JSON-RPC messages from a channel and answers on another fits the
//! same place (`upstream::channel::pair`). Implement `upstream::Upstream`
//! instead to wrap a server that is called some other way.

use std::sync::Arc;
use std::time::Duration;

use mcp_tasks_shim::bridge::{BridgeConfig, legacy_front::LegacyFront};
use mcp_tasks_shim::jsonrpc::Message;
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::reference::ReferenceServer;
use mcp_tasks_shim::revision::Revision;
use mcp_tasks_shim::upstream::{AnyUpstream, Link, channel};
use serde_json::json;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. The in-process server, joined to the shim by channels.
    let (conn, events, mut server_end) = channel::pair(Duration::from_secs(10));
    let server = ReferenceServer::new(Revision::Modern, server_end.to_shim.clone());
    tokio::spawn(async move {
        while let Some(msg) = server_end.from_shim.recv().await {
            server.handle(msg);
        }
    });

    // 2. Learn what the server speaks (the spec's probe), then build the
    //    legacy-front bridge over it.
    //    The probe types the upstream by its revision: only a 2026-07-28
    //    one can be bridged for a 2025-11-25 client.
    let link = Link::probe(conn, events, Duration::from_secs(5)).await;
    let Link {
        upstream: AnyUpstream::Modern(upstream),
        events,
        discover,
        ..
    } = link
    else {
        return Err("the in-process server is not a 2026-07-28 one".into());
    };
    let front = LegacyFront::new(
        upstream,
        Arc::new(MemoryLedger::default()),
        BridgeConfig::default(),
        discover,
    );
    front.follow(events);

    // 3. One 2025-11-25 client session: feed it messages, read its outbox.
    let (to_client, mut outbox) = tokio::sync::mpsc::unbounded_channel();
    let session = front.session(
        mcp_tasks_shim::scope::Principal::new("example-client").into(),
        to_client,
    );
    let script = [
        Message::request(
            1,
            "initialize",
            json!({"protocolVersion": "2025-11-25",
            "capabilities": {}, "clientInfo": {"name": "example", "version": "1"}}),
        ),
        Message::request(
            2,
            "tools/call",
            json!({"name": "slow_compute",
            "arguments": {"seconds": 0.2, "label": "in-process"}, "task": {"ttl": 60000}}),
        ),
    ];
    for msg in script {
        session.handle_client(msg);
        println!("{}", outbox.recv().await.ok_or("no answer")?.to_json());
    }
    // 4. The task is in this session's ledger scope; wait for it the
    //    2025-11-25 way, with a blocking tasks/result.
    let list = Message::request(3, "tasks/list", json!({}));
    session.handle_client(list);
    let page = outbox.recv().await.ok_or("no answer")?;
    println!("{}", page.to_json());
    let id = page.to_value()["result"]["tasks"][0]["taskId"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    session.handle_client(Message::request(4, "tasks/result", json!({"taskId": id})));
    loop {
        let m = outbox.recv().await.ok_or("no answer")?;
        println!("{}", m.to_json());
        if m.id().is_some() && !matches!(m, Message::Request(_)) {
            break;
        }
    }
    Ok(())
}
