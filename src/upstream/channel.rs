//! An upstream in the same process, joined by channels.
//!
//! For embedding: put the shim in front of a server that lives in your own
//! program (any type that reads JSON-RPC messages from a channel and writes
//! its answers to another).
//!
//! ```
//! # async fn demo() {
//! use std::time::Duration;
//! let (conn, mut events, mut server) = mcp_tasks_shim::upstream::channel::pair(Duration::from_secs(5));
//! // Your server: read what the shim sends, answer on `server.to_shim`.
//! tokio::spawn(async move {
//!     while let Some(msg) = server.from_shim.recv().await {
//!         // … handle msg, then e.g. server.to_shim.send(answer) …
//!         let _ = msg;
//!     }
//! });
//! # let _ = (conn, events.try_recv());
//! # }
//! ```

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{Connection, UpstreamEvent};
use crate::jsonrpc::Message;

/// The server's end of an in-process pair.
#[derive(Debug)]
pub struct ServerEnd {
    /// What the shim sends the server.
    pub from_shim: mpsc::UnboundedReceiver<Message>,
    /// Where the server writes its answers, notifications and requests.
    pub to_shim: mpsc::UnboundedSender<Message>,
}

/// A [`Connection`] for the bridges, the events it does not consume, and
/// the server's end. Dropping `to_shim` (all its clones) closes the upstream.
pub fn pair(
    timeout: Duration,
) -> (
    Arc<Connection>,
    mpsc::UnboundedReceiver<UpstreamEvent>,
    ServerEnd,
) {
    let (to_server, from_shim) = mpsc::unbounded_channel();
    let (to_shim, mut from_server) = mpsc::unbounded_channel::<Message>();
    let conn = Arc::new(Connection::new(to_server, timeout));
    let (ev_tx, ev_rx) = mpsc::unbounded_channel();
    let pump = conn.clone();
    tokio::spawn(async move {
        while let Some(m) = from_server.recv().await {
            if let Some(ev) = pump.on_inbound(m) {
                let _ = ev_tx.send(ev);
            }
        }
        pump.close("the in-process server stopped");
        let _ = ev_tx.send(UpstreamEvent::Closed(
            "the in-process server stopped".into(),
        ));
    });
    (conn, ev_rx, ServerEnd { from_shim, to_shim })
}
