//! The server side as the replayer sees it: JSON-RPC messages out and in,
//! over a child's stdio (direct) or over the shim's stdio front running
//! in-process in front of a [`Link`] (bridged, or relayed unchanged when
//! the link already speaks the transcript's revision).

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;

use crate::driver::stdio::{self, ProxyOptions};
use crate::jsonrpc::{Id, Message};
use crate::ledger::MemoryLedger;
use crate::revision::{self, ProbeVerdict};
use crate::transport::{self, Inbound};
use crate::upstream::{AnyUpstream, Link, channel};

/// The id of the replayer's own `server/discover` probe (never a
/// recorded one: recorded ids are kept as they are).
const PROBE_ID: &str = "mcp-tasks-shim-replay-probe";

/// Messages to and from a server.
pub(super) struct Peer {
    pub(super) tx: mpsc::UnboundedSender<Message>,
    pub(super) rx: mpsc::UnboundedReceiver<Message>,
    /// What must live as long as the conversation (a child process).
    pub(super) child: Option<tokio::process::Child>,
}

impl Peer {
    /// A peer over newline-delimited JSON-RPC on `reader` / `writer`.
    pub(super) fn over_lines<R, W>(reader: R, writer: W) -> Peer
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, out_rx) = mpsc::unbounded_channel();
        tokio::spawn(transport::write_lines(writer, out_rx));
        let (in_tx, mut in_rx) = mpsc::unbounded_channel();
        tokio::spawn(transport::read_lines(
            reader,
            in_tx,
            crate::jsonrpc::DEFAULT_MAX_MESSAGE_BYTES,
        ));
        let (msg_tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Some(inbound) = in_rx.recv().await {
                match inbound {
                    Inbound::Message(m) => {
                        if msg_tx.send(m).is_err() {
                            break;
                        }
                    }
                    Inbound::Invalid { error, .. } => {
                        tracing::warn!(%error, "the server sent a malformed line; skipped");
                    }
                }
            }
        });
        Peer {
            tx,
            rx,
            child: None,
        }
    }

    /// `program args…` started with piped stdio.
    pub(super) fn spawn(program: &str, args: &[String]) -> std::io::Result<Peer> {
        let c = transport::child::spawn(program, args)?;
        let mut peer = Peer::over_lines(c.stdout, c.stdin);
        peer.child = Some(c.child);
        Ok(peer)
    }

    /// Sends `server/discover` and classifies the answer as the shim's
    /// upstream probe does; whatever else arrives first is not part of
    /// the conversation and is dropped.
    pub(super) async fn probe(&mut self, timeout: Duration) -> ProbeVerdict {
        let info = serde_json::json!({"name": "mcp-tasks-shim-replay",
            "version": env!("CARGO_PKG_VERSION")});
        let probe = revision::probe_request(Id::Str(PROBE_ID.into()), &info);
        if self.tx.send(probe).is_err() {
            return ProbeVerdict::Legacy;
        }
        let wait = async {
            while let Some(m) = self.rx.recv().await {
                let answers = matches!(&m, Message::Response(_) | Message::Error(_));
                if answers && m.id() == Some(&Id::Str(PROBE_ID.into())) {
                    return Some(m);
                }
            }
            None
        };
        let answer = tokio::time::timeout(timeout, wait).await.ok().flatten();
        revision::classify_probe(answer.as_ref())
    }

    /// This peer as a shim upstream that was probed to `verdict`.
    pub(super) fn into_link(self, verdict: ProbeVerdict, timeout: Duration) -> Link {
        let Peer { tx, mut rx, child } = self;
        let (conn, events, mut server) = channel::pair(timeout);
        tokio::spawn(async move {
            while let Some(m) = server.from_shim.recv().await {
                if tx.send(m).is_err() {
                    break;
                }
            }
        });
        tokio::spawn(async move {
            while let Some(m) = rx.recv().await {
                if server.to_shim.send(m).is_err() {
                    break;
                }
            }
        });
        let (revision, discover) = verdict.into_revision();
        Link {
            upstream: AnyUpstream::speaking(conn, revision),
            events,
            discover,
            child,
        }
    }

    /// The shim's stdio front in front of `link`, in this process: the
    /// replayer talks to it as a client would to `mcp-tasks-shim stdio`.
    pub(super) fn through_shim(link: Link, request_timeout: Duration) -> Peer {
        let (client_end, shim_end) = tokio::io::duplex(1 << 20);
        let (shim_r, shim_w) = tokio::io::split(shim_end);
        let opts = ProxyOptions {
            request_timeout,
            ..ProxyOptions::default()
        };
        let ledger = Arc::new(MemoryLedger::default());
        tokio::spawn(async move {
            if let Err(e) = stdio::serve_stdio(shim_r, shim_w, link, ledger, opts).await {
                tracing::warn!(error = %e, "the in-process shim stopped");
            }
        });
        let (r, w) = tokio::io::split(client_end);
        Peer::over_lines(r, w)
    }
}
