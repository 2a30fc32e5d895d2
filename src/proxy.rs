//! The stdio proxy driver: one client on a byte stream (the shim's own
//! stdin/stdout), one upstream child process, and the engine chosen by the
//! revisions the two speak.
//!
//! ```text
//!  client lines ──▶ Inbound ──▶ ┌────────┐ ──▶ Connection ──▶ child stdin
//!  client lines ◀── outbox  ◀── │ driver │ ◀── events     ◀── child stdout
//!                               └────────┘
//!        mode: probing → passthrough | legacy-front | modern-front
//! ```

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use crate::bridge::BridgeConfig;
use crate::bridge::legacy_front::{LegacyFront, LegacySession};
use crate::bridge::modern_front::{ModernFront, ModernSession};
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message};
use crate::ledger::TaskLedger;
use crate::revision::{self, ClientSignal, ProbeVerdict, Revision};
use crate::transport::{self, Inbound, Outbox, child::ChildUpstream};
use crate::upstream::{Connection, Upstream};

/// How the proxy was configured.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// Engine settings.
    pub bridge: BridgeConfig,
    /// How long to wait for the `server/discover` probe.
    pub probe_timeout: Duration,
    /// How long any upstream request may take.
    pub request_timeout: Duration,
    /// Largest accepted message (bytes).
    pub max_message_bytes: usize,
    /// Where to append the client-side transcript (JSONL), if anywhere.
    pub record: Option<std::path::PathBuf>,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        ProxyOptions {
            bridge: BridgeConfig::default(),
            probe_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(300),
            max_message_bytes: crate::jsonrpc::DEFAULT_MAX_MESSAGE_BYTES,
            record: None,
        }
    }
}

/// How the session was resolved.
enum Mode {
    /// Same revision both sides: messages relayed unchanged. `inflight`
    /// holds client request ids awaiting an upstream answer.
    Passthrough { inflight: HashSet<Id> },
    /// A legacy client in front of a modern server.
    LegacyFront(Arc<LegacyFront>, Arc<LegacySession>),
    /// A modern client in front of a legacy server.
    ModernFront(Arc<ModernFront>, Arc<ModernSession>),
}

/// Why the proxy stopped.
#[derive(Debug, PartialEq, Eq)]
pub enum Ending {
    /// The client closed its side; the upstream was shut down.
    ClientClosed,
    /// The upstream exited or broke; pending requests were answered with errors.
    UpstreamGone(String),
}

/// Runs the proxy until the client or the upstream goes away.
pub async fn run<R, W>(
    client_in: R,
    client_out: W,
    mut upstream: ChildUpstream,
    ledger: Arc<dyn TaskLedger>,
    opts: ProxyOptions,
) -> std::io::Result<Ending>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let max = opts.max_message_bytes;
    let (client_tx, mut client_rx) = mpsc::unbounded_channel();
    tokio::spawn(transport::read_lines(client_in, client_tx, max));
    let to_client = spawn_client_writer(client_out, opts.record.clone())?;
    let recorder = to_client.recorder.clone();

    let (up_tx, mut up_rx) = mpsc::unbounded_channel();
    tokio::spawn(transport::read_lines(upstream.stdout, up_tx, max));
    let (up_out, up_out_rx) = mpsc::unbounded_channel();
    let writer = tokio::spawn(transport::write_lines(upstream.stdin, up_out_rx));
    let conn = Arc::new(Connection::new(up_out.clone(), opts.request_timeout));

    let verdict = probe(&conn, &mut up_rx, opts.probe_timeout).await;
    tracing::info!(?verdict, "upstream probe");
    let upstream_rev = match verdict {
        ProbeVerdict::Modern(_) | ProbeVerdict::ModernRefused(_) => Revision::Modern,
        ProbeVerdict::Legacy => Revision::Legacy,
    };
    let discover = match verdict {
        ProbeVerdict::Modern(d) => d,
        _ => json!({"supportedVersions": [revision::MODERN_VERSION], "capabilities": {}}),
    };

    let mut mode: Option<Mode> = None;
    let ending = loop {
        tokio::select! {
            inbound = client_rx.recv() => {
                let Some(inbound) = inbound else { break Ending::ClientClosed };
                let msg = match inbound {
                    Inbound::Message(m) => m,
                    Inbound::Invalid { id, error } => {
                        tracing::warn!(error = %error, "refusing a malformed client message");
                        to_client.send(Message::error(id, error.into()));
                        continue;
                    }
                };
                record(&recorder, "c2s", &msg);
                let mode = mode.get_or_insert_with(|| {
                    choose(&msg, upstream_rev, &conn, &discover, &ledger, &opts, &to_client.outbox)
                });
                match mode {
                    Mode::Passthrough { inflight } => {
                        if let Message::Request(r) = &msg {
                            inflight.insert(r.id.clone());
                        }
                        let _ = up_out.send(msg);
                    }
                    Mode::LegacyFront(_, session) => session.handle_client(msg),
                    Mode::ModernFront(_, session) => session.handle_client(msg),
                }
            }
            inbound = up_rx.recv() => {
                let Some(inbound) = inbound else {
                    break Ending::UpstreamGone(exit_reason(&mut upstream.child).await);
                };
                let Inbound::Message(msg) = inbound else {
                    tracing::warn!("upstream sent a malformed message; ignored");
                    continue;
                };
                route_upstream(msg, mode.as_mut(), &conn, &to_client.outbox);
            }
        }
    };

    match &ending {
        Ending::UpstreamGone(reason) => {
            conn.close(reason);
            if let Some(Mode::Passthrough { inflight }) = &mut mode {
                for id in inflight.drain() {
                    let err = ShimError::Upstream(reason.clone());
                    to_client.send(Message::error(Some(id), err.into()));
                }
            }
            // Let the engines flush their error answers.
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ending::ClientClosed => {
            drop(up_out);
            conn.close("the client closed the session");
            let _ = writer.await;
            shutdown_child(&mut upstream.child).await;
        }
    }
    drop(mode);
    // Our clone of the recorder must go too, or the transcript writer never
    // sees its channel close and `finish` waits forever.
    drop(recorder);
    to_client.finish().await;
    Ok(ending)
}

fn choose(
    first: &Message,
    upstream: Revision,
    conn: &Arc<Connection>,
    discover: &serde_json::Value,
    ledger: &Arc<dyn TaskLedger>,
    opts: &ProxyOptions,
    outbox: &Outbox,
) -> Mode {
    let client = match revision::detect_client(first) {
        ClientSignal::Is(r) => r,
        // An unknown modern version still speaks the modern transport.
        ClientSignal::UnknownVersion(_) => Revision::Modern,
        ClientSignal::Ambiguous => upstream,
    };
    tracing::info!(%client, %upstream, "session revisions");
    match (client, upstream) {
        (Revision::Legacy, Revision::Modern) => {
            let up: Arc<dyn Upstream> = conn.clone();
            let front = LegacyFront::new(up, ledger.clone(), opts.bridge.clone(), discover.clone());
            let session = front.session(crate::ids::random_id(), outbox.clone());
            Mode::LegacyFront(front, session)
        }
        (Revision::Modern, Revision::Legacy) => {
            let up: Arc<dyn Upstream> = conn.clone();
            let front = ModernFront::new(up, ledger.clone(), opts.bridge.clone());
            let session = front.session(crate::ids::random_id(), outbox.clone());
            Mode::ModernFront(front, session)
        }
        _ => Mode::Passthrough {
            inflight: HashSet::new(),
        },
    }
}

fn route_upstream(msg: Message, mode: Option<&mut Mode>, conn: &Connection, outbox: &Outbox) {
    match mode {
        Some(Mode::Passthrough { inflight }) => {
            let ours = match &msg {
                Message::Response(r) => !inflight.remove(&r.id),
                Message::Error(e) => e.id.as_ref().is_some_and(|id| !inflight.remove(id)),
                _ => false,
            };
            if ours {
                // A late answer to the probe: not the client's business.
                let _ = conn.on_inbound(msg);
            } else {
                let _ = outbox.send(msg);
            }
        }
        Some(Mode::LegacyFront(front, _)) => {
            if let Some(event) = conn.on_inbound(msg) {
                front.handle_upstream(event);
            }
        }
        Some(Mode::ModernFront(front, _)) => {
            if let Some(event) = conn.on_inbound(msg) {
                front.handle_upstream(event);
            }
        }
        None => {
            if let Some(event) = conn.on_inbound(msg) {
                tracing::debug!(?event, "upstream traffic before the client spoke; dropped");
            }
        }
    }
}

/// Sends `server/discover` and classifies the answer, feeding upstream
/// traffic to the connection meanwhile.
async fn probe(
    conn: &Arc<Connection>,
    up_rx: &mut mpsc::UnboundedReceiver<Inbound>,
    timeout: Duration,
) -> ProbeVerdict {
    let info = json!({"name": "mcp-tasks-shim", "version": env!("CARGO_PKG_VERSION")});
    let params = revision::probe_request(Id::Num(0), &info)
        .params()
        .cloned()
        .unwrap_or_default();
    let c = conn.clone();
    let mut ask = tokio::spawn(async move { c.request("server/discover", params).await });
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    loop {
        tokio::select! {
            done = &mut ask => {
                let answer = match done {
                    Ok(Ok(Ok(result))) => Some(Message::response(Id::Num(0), result)),
                    Ok(Ok(Err(error))) => Some(Message::error(Some(Id::Num(0)), error)),
                    _ => None,
                };
                return revision::classify_probe(answer.as_ref());
            }
            inbound = up_rx.recv() => match inbound {
                Some(Inbound::Message(m)) => { let _ = conn.on_inbound(m); }
                Some(Inbound::Invalid { .. }) => {}
                None => return ProbeVerdict::Legacy,
            },
            _ = &mut deadline => {
                ask.abort();
                return ProbeVerdict::Legacy;
            }
        }
    }
}

async fn exit_reason(child: &mut tokio::process::Child) -> String {
    match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(Ok(status)) => format!("the upstream server exited ({status})"),
        _ => "the upstream server closed its output".to_owned(),
    }
}

/// Closing stdin asks the child to stop; a child that ignores it is killed.
async fn shutdown_child(child: &mut tokio::process::Child) {
    if tokio::time::timeout(Duration::from_secs(3), child.wait())
        .await
        .is_err()
    {
        tracing::warn!("upstream did not exit after its stdin closed; killing it");
        let _ = child.kill().await;
    }
}

type Recorder = Option<mpsc::UnboundedSender<(&'static str, Message)>>;

/// The client-side writer, plus an optional transcript recorder.
struct ClientWriter {
    outbox: Outbox,
    recorder: Recorder,
    writer: tokio::task::JoinHandle<std::io::Result<()>>,
    recorder_task: Option<tokio::task::JoinHandle<()>>,
}

impl ClientWriter {
    fn send(&self, msg: Message) {
        let _ = self.outbox.send(msg);
    }

    async fn finish(self) {
        drop(self.outbox);
        let _ = self.writer.await;
        drop(self.recorder);
        if let Some(t) = self.recorder_task {
            let _ = t.await;
        }
    }
}

fn spawn_client_writer<W: AsyncWrite + Unpin + Send + 'static>(
    out: W,
    record_path: Option<std::path::PathBuf>,
) -> std::io::Result<ClientWriter> {
    let (outbox, mut rx) = mpsc::unbounded_channel::<Message>();
    let (recorder, recorder_task) = match record_path {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)?;
            let (tx, rx) = mpsc::unbounded_channel();
            (Some(tx), Some(tokio::spawn(write_records(file, rx))))
        }
        None => (None, None),
    };
    let writer = match recorder.clone() {
        // Without a transcript the writer drains the outbox itself: one
        // task hand-off less on every message to the client.
        None => tokio::spawn(transport::write_lines(out, rx)),
        Some(rec) => {
            let (wtx, wrx) = mpsc::unbounded_channel();
            tokio::spawn(async move {
                while let Some(msg) = rx.recv().await {
                    let _ = rec.send(("s2c", msg.clone()));
                    if wtx.send(msg).is_err() {
                        break;
                    }
                }
            });
            tokio::spawn(transport::write_lines(out, wrx))
        }
    };
    Ok(ClientWriter {
        outbox,
        recorder,
        writer,
        recorder_task,
    })
}

fn record(recorder: &Recorder, dir: &'static str, msg: &Message) {
    if let Some(tx) = recorder {
        let _ = tx.send((dir, msg.clone()));
    }
}

async fn write_records(
    file: std::fs::File,
    mut rx: mpsc::UnboundedReceiver<(&'static str, Message)>,
) {
    use std::io::Write;
    let mut file = std::io::BufWriter::new(file);
    while let Some((dir, msg)) = rx.recv().await {
        let line = json!({"dir": dir, "msg": msg});
        if writeln!(file, "{line}").and_then(|_| file.flush()).is_err() {
            tracing::warn!("cannot write the transcript; recording stops");
            return;
        }
    }
}
