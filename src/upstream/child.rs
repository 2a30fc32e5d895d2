//! An upstream child process wired to a [`Connection`], probed once.
//!
//! Used where several client sessions share one upstream (HTTP): a reader
//! task feeds the connection and hands every other upstream message to the
//! caller as an [`UpstreamEvent`].

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::{Connection, UpstreamEvent};
use crate::revision::Revision;
use crate::transport::{self, Inbound};

/// A running upstream child and what the probe learnt of it.
#[derive(Debug)]
pub struct ChildLink {
    /// Requests go here.
    pub conn: Arc<Connection>,
    /// Notifications, server requests and the final `Closed`.
    pub events: mpsc::UnboundedReceiver<UpstreamEvent>,
    /// The revision it speaks.
    pub revision: Revision,
    /// Its `server/discover` result (modern upstreams).
    pub discover: serde_json::Value,
    /// The process, to stop it on shutdown.
    pub child: tokio::process::Child,
}

/// Starts `program args…`, connects to it and probes its revision.
pub async fn connect(
    program: &str,
    args: &[String],
    request_timeout: Duration,
    probe_timeout: Duration,
    max_message_bytes: usize,
) -> std::io::Result<ChildLink> {
    let spawned = transport::child::spawn(program, args)?;
    let (out, out_rx) = mpsc::unbounded_channel();
    tokio::spawn(transport::write_lines(spawned.stdin, out_rx));
    let conn = Arc::new(Connection::new(out, request_timeout));
    let (in_tx, mut in_rx) = mpsc::unbounded_channel();
    tokio::spawn(transport::read_lines(
        spawned.stdout,
        in_tx,
        max_message_bytes,
    ));
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
    let verdict = super::probe(&*conn, probe_timeout).await;
    tracing::info!(%verdict, "upstream probe");
    let (revision, discover) = verdict.into_revision();
    Ok(ChildLink {
        conn,
        events,
        revision,
        discover,
        child: spawned.child,
    })
}
