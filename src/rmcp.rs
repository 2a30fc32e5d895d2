//! An [`rmcp`] 3.x server behind the shim, in the same process
//! (feature `rmcp`).
//!
//! rmcp 3.x speaks 2026-07-28 only. [`link`] serves any rmcp
//! [`ServerHandler`] on one end of an in-memory duplex pair and connects
//! the shim's upstream to the other, so no child process and no socket lie
//! between them; [`serve_stdio`] then puts the shim's stdio front on the
//! process's own stdin/stdout, so 2025-11-25 clients reach the server:
//!
//! ```no_run
//! # async fn run(server: impl ::rmcp::ServerHandler) -> std::io::Result<()> {
//! use mcp_tasks_shim::{ledger::MemoryLedger, driver::stdio::ProxyOptions};
//! let ledger = std::sync::Arc::new(MemoryLedger::default());
//! mcp_tasks_shim::rmcp::serve_stdio(server, ledger, ProxyOptions::default()).await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;

use ::rmcp::{ServerHandler, ServiceExt};

use crate::driver::stdio::{self, Ending, ProxyOptions};
use crate::ledger::TaskLedger;
use crate::upstream::{self, Link};

/// Bytes in flight between the shim and the in-process server, each way.
const DUPLEX_BUFFER: usize = 256 * 1024;

/// Serves `handler` with rmcp on an in-memory duplex pair and returns the
/// shim's [`Link`] to it, probed (`server/discover`) with the timeouts of
/// `opts`. The server runs until the link's side of the pair is dropped.
pub async fn link<S>(handler: S, opts: &ProxyOptions) -> Link
where
    S: ServerHandler + Send + 'static,
{
    let (shim_end, server_end) = tokio::io::duplex(DUPLEX_BUFFER);
    tokio::spawn(async move {
        match handler.serve(tokio::io::split(server_end)).await {
            Ok(running) => {
                if let Err(error) = running.waiting().await {
                    tracing::warn!(%error, "the in-process rmcp server stopped");
                }
            }
            Err(error) => tracing::warn!(%error, "the in-process rmcp server did not start"),
        }
    });
    let (from_server, to_server) = tokio::io::split(shim_end);
    upstream::io::connect(
        from_server,
        to_server,
        opts.request_timeout,
        opts.probe_timeout,
        opts.max_message_bytes,
    )
    .await
}

/// Serves `handler` through the shim on this process's stdin/stdout: the
/// client side speaks whatever the client speaks (a 2025-11-25 client gets
/// the legacy front), the server side is `handler` in this process
/// ([`link`]). Returns when the client closes stdin or the server stops.
pub async fn serve_stdio<S>(
    handler: S,
    ledger: Arc<dyn TaskLedger>,
    opts: ProxyOptions,
) -> std::io::Result<Ending>
where
    S: ServerHandler + Send + 'static,
{
    let link = link(handler, &opts).await;
    stdio::serve_stdio(tokio::io::stdin(), tokio::io::stdout(), link, ledger, opts).await
}
