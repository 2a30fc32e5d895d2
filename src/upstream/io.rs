//! An upstream over any byte stream pair (`AsyncRead` + `AsyncWrite`), such
//! as the two ends of [`tokio::io::duplex`]: a stdio server living in the
//! same process, reached with no child process and no socket.
//!
//! The bytes are newline-delimited JSON-RPC, as on a child's stdio.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use super::{Connection, Link, UpstreamEvent};
use crate::transport::{self, Inbound};

/// Wires a [`Connection`] to `reader` (what the server writes) and `writer`
/// (what the server reads). Returns the connection and the events it does
/// not consume; the last is `Closed` when `reader` ends.
pub fn wire<R, W>(
    reader: R,
    writer: W,
    request_timeout: Duration,
    max_message_bytes: usize,
) -> (Arc<Connection>, mpsc::UnboundedReceiver<UpstreamEvent>)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, out_rx) = mpsc::unbounded_channel();
    tokio::spawn(transport::write_lines(writer, out_rx));
    let conn = Arc::new(Connection::new(out, request_timeout));
    let (in_tx, mut in_rx) = mpsc::unbounded_channel();
    tokio::spawn(transport::read_lines(reader, in_tx, max_message_bytes));
    let (ev_tx, events) = mpsc::unbounded_channel();
    let reader_conn = conn.clone();
    tokio::spawn(async move {
        while let Some(inbound) = in_rx.recv().await {
            match inbound {
                Inbound::Message(m) => {
                    if let Some(ev) = reader_conn.on_inbound(m) {
                        let _ = ev_tx.send(ev);
                    }
                }
                Inbound::Invalid {
                    error,
                    answer_to: Some(id),
                    ..
                } => {
                    tracing::warn!(%error, %id, "upstream answer refused");
                    let answer = super::oversized_answer(id, &error);
                    if let Some(ev) = reader_conn.on_inbound(answer) {
                        let _ = ev_tx.send(ev);
                    }
                }
                Inbound::Invalid { error, .. } => {
                    // Not a fault here: this unsupervised link has no one to
                    // report to (the CLI uses `supervised`).
                    tracing::warn!(%error, "upstream sent a malformed message; ignored");
                }
            }
        }
        let reason = "the upstream server closed its output";
        reader_conn.close(reason);
        let _ = ev_tx.send(UpstreamEvent::Closed(reason.into()));
    });
    (conn, events)
}

/// [`wire`], then probes the server's revision ([`Link::probe`]). The
/// server must already be running on the other ends of the pair.
pub async fn connect<R, W>(
    reader: R,
    writer: W,
    request_timeout: Duration,
    probe_timeout: Duration,
    max_message_bytes: usize,
) -> Link
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (conn, events) = wire(reader, writer, request_timeout, max_message_bytes);
    Link::probe(conn, events, probe_timeout).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::revision::Revision;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    /// A 2025-11-25 server on a duplex pair: `server/discover` is refused,
    /// so the probe must say legacy, and a later request gets its answer.
    #[tokio::test]
    async fn a_server_on_a_duplex_pair_is_probed_and_answers() {
        let (shim_side, server_side) = tokio::io::duplex(64 * 1024);
        let (shim_r, shim_w) = tokio::io::split(shim_side);
        let (server_r, mut server_w) = tokio::io::split(server_side);
        tokio::spawn(async move {
            let mut lines = BufReader::new(server_r).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let msg: serde_json::Value = serde_json::from_str(&line).unwrap();
                let id = msg["id"].clone();
                let answer = if msg["method"] == "server/discover" {
                    serde_json::json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32601, "message": "Method not found"}})
                } else {
                    serde_json::json!({"jsonrpc": "2.0", "id": id, "result": {"echo": msg["method"]}})
                };
                let mut out = serde_json::to_vec(&answer).unwrap();
                out.push(b'\n');
                server_w.write_all(&out).await.unwrap();
            }
        });
        let link = connect(
            shim_r,
            shim_w,
            Duration::from_secs(5),
            Duration::from_secs(5),
            1 << 20,
        )
        .await;
        assert_eq!(link.revision(), Revision::Legacy);
        let answer = link
            .upstream
            .request("tools/list", serde_json::json!({}))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(answer["echo"], "tools/list");
    }
}
