//! The shim's Streamable HTTP front inside your own axum server: your
//! routes and layers beside it, a 2026-07-28 server in the same process
//! behind it, and 2025-11-25 clients served at `/mcp`.
//!
//! ```text
//! cargo run --example embed_axum -- 127.0.0.1:8080
//! ```
//!
//! Then point a 2025-11-25 client (or `curl`) at `http://127.0.0.1:8080/mcp`;
//! `/health` and `/metrics` are there too. Ctrl-C answers every client
//! still waiting on a task, then stops.
//!
//! The server here is the crate's modern reference server joined by
//! channels; an upstream child process (`upstream::supervised::connect`) or
//! HTTP server (`upstream::http::connect`) gives a [`Link`] the same way.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use mcp_tasks_shim::driver::http::{ConfiguredPrincipals, HttpOptions, HttpShim};
use mcp_tasks_shim::ledger::MemoryLedger;
use mcp_tasks_shim::reference::ReferenceServer;
use mcp_tasks_shim::revision::Revision;
use mcp_tasks_shim::upstream::{Link, channel};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());

    // 1. The in-process server, and the probe that learns its revision.
    let (conn, events, mut server_end) = channel::pair(Duration::from_secs(30));
    let server = ReferenceServer::new(Revision::Modern, server_end.to_shim.clone());
    tokio::spawn(async move {
        while let Some(msg) = server_end.from_shim.recv().await {
            server.handle(msg);
        }
    });
    let link = Link::probe(conn, events, Duration::from_secs(5)).await;

    // 2. The shim's routes merged into the application's own.
    let shim = HttpShim::new(
        HttpOptions::default(),
        link,
        Arc::new(MemoryLedger::default()),
        Arc::new(ConfiguredPrincipals::default()),
    )?;
    let app = Router::new()
        .route("/health", get(|| async { "ok" }))
        .merge(shim.router())
        .merge(shim.metrics_router("/metrics"))
        .layer(middleware::from_fn(served_by));

    // 3. Serve; on Ctrl-C answer the waiting clients first, so the
    //    graceful shutdown does not wait for tasks that may run for hours.
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("serving http://{}/mcp", listener.local_addr()?);
    let stopping = shim.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = tokio::signal::ctrl_c().await;
            stopping.begin_shutdown("the server is shutting down");
        })
        .await?;
    shim.finish().await;
    Ok(())
}

/// An application layer: every response, the shim's included, names the
/// server that answered.
async fn served_by(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    resp.headers_mut()
        .insert("x-served-by", "embed-axum-example".parse().unwrap());
    resp
}
