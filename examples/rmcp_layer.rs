//! An rmcp 3.x server on axum over Streamable HTTP (feature `rmcp`).
//!
//! ```text
//! cargo run --features rmcp --example rmcp_layer -- --listen 127.0.0.1:8080
//! ```
//!
//! Serves the crate's rmcp reference server
//! (`reference::rmcp::RmcpReferenceServer`) at `http://ADDR/mcp` with rmcp's
//! own `StreamableHttpService`. 2026-07-28 requests reach it untouched.

use std::net::SocketAddr;
use std::sync::Arc;

use clap::Parser;
use mcp_tasks_shim::reference::rmcp::RmcpReferenceServer;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

/// The rmcp reference server on Streamable HTTP at `/mcp`.
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
    let app = axum::Router::new().nest_service("/mcp", rmcp_service);
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    eprintln!("listening on http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
