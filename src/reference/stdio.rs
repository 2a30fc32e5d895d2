//! Newline-delimited JSON-RPC on stdin/stdout; logs go to stderr.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::ReferenceServer;
use crate::jsonrpc::{Message, salvage_id};
use crate::revision::Revision;

/// After stdin closes, answers still being produced get this long of
/// silence before the process exits (a piped `printf req | server` must
/// still see its answers; a running 60 s task must not hold the exit).
const DRAIN_IDLE: Duration = Duration::from_millis(200);
/// Upper bound on the whole drain.
const DRAIN_MAX: Duration = Duration::from_secs(3);

pub(crate) async fn serve(revision: Revision) -> std::io::Result<()> {
    let (tx, rx) = mpsc::unbounded_channel();
    let server = ReferenceServer::new(revision, tx.clone());
    let (eof_tx, eof_rx) = tokio::sync::oneshot::channel::<()>();
    let writer = tokio::spawn(write_loop(rx, eof_rx));
    tracing::info!(%revision, "reference server listening on stdio");

    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        tracing::debug!(target: "mcp_tasks_shim::reference::wire", dir = "in", %line);
        match Message::parse(line.as_bytes()) {
            Ok(msg) => server.handle(msg),
            Err(e) => {
                // A parse error has no readable id; an invalid envelope may.
                let id = match e {
                    crate::error::ShimError::Parse(_) => None,
                    _ => salvage_id(line.as_bytes()),
                };
                let _ = tx.send(Message::error(id, e.to_error_object()));
            }
        }
    }
    tracing::info!("stdin closed; draining output");
    let _ = eof_tx.send(());
    drop(server);
    drop(tx);
    writer.await.map_err(std::io::Error::other)?
}

async fn write_loop(
    mut rx: mpsc::UnboundedReceiver<Message>,
    mut eof: tokio::sync::oneshot::Receiver<()>,
) -> std::io::Result<()> {
    let mut out = tokio::io::stdout();
    let mut buf = Vec::with_capacity(1024);
    let mut draining = None;
    loop {
        let next = match draining {
            None => tokio::select! {
                m = rx.recv() => m,
                _ = &mut eof => {
                    draining = Some(tokio::time::Instant::now() + DRAIN_MAX);
                    continue;
                }
            },
            Some(deadline) => {
                let idle = tokio::time::Instant::now() + DRAIN_IDLE;
                tokio::time::timeout_at(idle.min(deadline), rx.recv())
                    .await
                    .unwrap_or_default()
            }
        };
        let Some(msg) = next else { break };
        buf.clear();
        write_line(&msg, &mut buf);
        tracing::debug!(target: "mcp_tasks_shim::reference::wire", dir = "out",
            line = %String::from_utf8_lossy(&buf));
        buf.push(b'\n');
        out.write_all(&buf).await?;
        out.flush().await?;
    }
    Ok(())
}

/// Serialises one message. An error whose request id could not be read
/// leaves `id` out: both schemas make it optional but never `null`.
fn write_line(msg: &Message, buf: &mut Vec<u8>) {
    match msg {
        Message::Error(e) if e.id.is_none() => {
            let mut v = msg.to_value();
            if let Some(m) = v.as_object_mut() {
                m.remove("id");
            }
            // Serialising a JSON value into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *buf, &v);
        }
        _ => msg.write_json(buf),
    }
}
