//! An rmcp 3.x server on axum over Streamable HTTP, behind
//! `TasksCompatLayer` so 2025-11-25 clients are served too (feature `rmcp`).
//!
//! ```text
//! cargo run --features rmcp --example rmcp_layer -- --listen 127.0.0.1:8080
//! ```
//!
//! Serves the crate's rmcp reference server
//! (`reference::rmcp::RmcpReferenceServer`) at `http://ADDR/mcp` with rmcp's
//! own `StreamableHttpService`, mounted in one line behind the layer:
//! 2026-07-28 requests reach rmcp untouched; 2025-11-25 sessions (tasks,
//! `tasks/result`, `tasks/list`, elicitation during `input_required`) are
//! served by the shim's legacy front, whose upstream is the same rmcp
//! service called in-process, with no socket between them. The 2025-11-25
//! view of the tools (their `execution.taskSupport`) is the server's own
//! policy.
//!
//! Prints `listening on http://ADDR/mcp` on stderr once it accepts
//! connections (`--listen 127.0.0.1:0` picks a free port).

use std::net::SocketAddr;
use std::sync::Arc;

use clap::Parser;
use mcp_tasks_shim::layer::{TasksCompatConfig, TasksCompatLayer};
use mcp_tasks_shim::reference::rmcp::RmcpReferenceServer;
use mcp_tasks_shim::revision::Revision;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

/// The rmcp reference server on Streamable HTTP at `/mcp`, for clients of
/// both task revisions.
#[derive(Debug, Parser)]
struct Args {
    /// Address to listen on (loopback unless you put auth in front).
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: SocketAddr,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args = Args::parse();
    let server = RmcpReferenceServer::new();
    let rmcp_service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let mut config = TasksCompatConfig::default().inner_revision(Revision::Modern);
    config.http.bridge.policy = Some(RmcpReferenceServer::task_policy());
    let app =
        axum::Router::new().nest_service("/mcp", TasksCompatLayer::new(config).layer(rmcp_service));
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    eprintln!("listening on http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
