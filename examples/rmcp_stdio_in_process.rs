//! An rmcp 3.x server on stdio for 2025-11-25 clients, with the shim in the
//! same process (feature `rmcp`).
//!
//! ```text
//! cargo run --features rmcp --example rmcp_stdio_in_process
//! ```
//!
//! The server is the crate's rmcp reference server
//! (`reference::rmcp::RmcpReferenceServer`, the reference tool set on
//! rmcp's `TaskManager` and MRTR). rmcp speaks 2026-07-28 only; the shim
//! runs it on an in-memory duplex pair as its upstream, and serves this
//! binary's own stdin/stdout as the client side, so a 2025-11-25 client
//! (task-augmented calls, `tasks/result`, `tasks/list`, elicitation during
//! `input_required`) can launch the binary as any stdio server. The
//! 2025-11-25 view of the tools (their `execution.taskSupport`) is the
//! server's own policy.
//!
//! Logs go to stderr (`RUST_LOG`), never to stdout, which is the protocol.

use std::sync::Arc;

use mcp_tasks_shim::bridge::BridgeConfig;
use mcp_tasks_shim::driver::stdio::ProxyOptions;
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::reference::rmcp::RmcpReferenceServer;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let opts = ProxyOptions {
        bridge: BridgeConfig {
            policy: Some(RmcpReferenceServer::task_policy()),
            ..BridgeConfig::default()
        },
        ..ProxyOptions::default()
    };
    let ending = mcp_tasks_shim::rmcp::serve_stdio(
        RmcpReferenceServer::new(),
        Arc::new(MemoryLedger::default()),
        opts,
    )
    .await?;
    tracing::info!(?ending, "session over");
    Ok(())
}
