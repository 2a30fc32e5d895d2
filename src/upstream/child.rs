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
use crate::transport;

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
    let (conn, events) = super::io::wire(
        spawned.stdout,
        spawned.stdin,
        request_timeout,
        max_message_bytes,
    );
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
