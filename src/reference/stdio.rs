//! Newline-delimited JSON-RPC on stdin/stdout; logs go to stderr.
//!
//! stdin is read with blocking reads on a thread of its own, and stdout
//! written with blocking writes on the runtime's thread (`reference-server`
//! gives stdio a current-thread runtime). tokio's `stdin()`/`stdout()` hand
//! every read and every write to its blocking pool, a thread hop each way
//! per message: that made
//! this fixture cost more CPU per request than the shim in front of it, and
//! on a 2-CPU machine that cost landed in every latency the overhead bench
//! measures (docs/performance.md).

use std::collections::HashSet;
use std::io::{BufRead, BufWriter, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::ReferenceServer;
use crate::bridge::lock;
use crate::jsonrpc::{Id, Message, salvage_id};
use crate::revision::Revision;

/// After stdin closes, the requests read are answered first (a piped
/// `printf req | server` must see its answers, a slow call included), and
/// then other output gets this long of silence before the process exits
/// (a running 60 s task must not hold the exit).
const DRAIN_IDLE: Duration = Duration::from_millis(200);
/// Upper bound on the whole drain: the shim gives a child as long after
/// closing its input before killing it.
const DRAIN_MAX: Duration = Duration::from_secs(3);

/// The ids of requests read and not yet answered.
type Unanswered = Arc<Mutex<HashSet<Id>>>;

pub(crate) async fn serve(revision: Revision) -> std::io::Result<()> {
    let (tx, rx) = mpsc::unbounded_channel();
    let server = ReferenceServer::new(revision, tx.clone());
    let rt = tokio::runtime::Handle::current();
    let (eof_tx, eof_rx) = oneshot::channel::<()>();
    let unanswered = Unanswered::default();
    let writer = tokio::spawn(write_loop(rx, eof_rx, unanswered.clone()));
    tracing::info!(%revision, "reference server listening on stdio");

    let (read_tx, read_rx) = oneshot::channel();
    std::thread::Builder::new()
        .name("stdin".into())
        .spawn(move || {
            // The server spawns its tool runs and timers onto the runtime.
            let _in_runtime = rt.enter();
            let read = read_loop(&server, &tx, &unanswered);
            // In-flight work keeps its own senders; the writer drains them.
            drop(server);
            drop(tx);
            let _ = read_tx.send(read);
        })?;
    let read = read_rx
        .await
        .unwrap_or_else(|_| Err(std::io::Error::other("the stdin thread panicked")));
    tracing::info!("stdin closed; draining output");
    let _ = eof_tx.send(());
    let written = writer.await.map_err(std::io::Error::other)?;
    read.and(written)
}

/// Feeds each stdin line to the server until end of input.
fn read_loop(
    server: &ReferenceServer,
    tx: &mpsc::UnboundedSender<Message>,
    unanswered: &Unanswered,
) -> std::io::Result<()> {
    let mut input = std::io::stdin().lock();
    let mut line = String::new();
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        tracing::debug!(target: "mcp_tasks_shim::reference::wire", dir = "in", %line);
        match Message::parse(line.as_bytes()) {
            Ok(msg) => {
                // Waits on something else are not waited for: a listen
                // stream ends when its client ends it, a blocking
                // `tasks/result` when its task does (a job may run for
                // hours). A shim stopping this server is then not held for
                // its grace period by a task still running.
                if let Message::Request(r) = &msg
                    && !matches!(r.method.as_str(), "subscriptions/listen" | "tasks/result")
                {
                    lock(unanswered).insert(r.id.clone());
                }
                server.handle(msg)
            }
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
}

/// Writes the server's messages until every sender is gone, or, once
/// stdin closed, until the drain's idle or overall bound.
async fn write_loop(
    mut rx: mpsc::UnboundedReceiver<Message>,
    mut eof: oneshot::Receiver<()>,
    unanswered: Unanswered,
) -> std::io::Result<()> {
    // Blocking writes on the runtime's one thread: a client that stops
    // reading stalls this fixture, as it would most stdio servers.
    let mut out = BufWriter::new(std::io::stdout());
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
                let until = if lock(&unanswered).is_empty() {
                    deadline.min(tokio::time::Instant::now() + DRAIN_IDLE)
                } else {
                    deadline
                };
                tokio::time::timeout_at(until, rx.recv())
                    .await
                    .unwrap_or_default()
            }
        };
        let Some(msg) = next else { break };
        if let Message::Response(crate::jsonrpc::Response { id, .. })
        | Message::Error(crate::jsonrpc::ErrorResponse { id: Some(id), .. }) = &msg
        {
            lock(&unanswered).remove(id);
        }
        buf.clear();
        write_line(&msg, &mut buf);
        tracing::debug!(target: "mcp_tasks_shim::reference::wire", dir = "out",
            line = %String::from_utf8_lossy(&buf));
        buf.push(b'\n');
        out.write_all(&buf)?;
        // Lines already queued go out in the same write.
        if rx.is_empty() {
            out.flush()?;
        }
    }
    out.flush()
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
