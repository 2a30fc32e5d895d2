//! Transports: adapters at the edge that move [`Message`]s.
//!
//! The line transport (newline-delimited JSON) carries stdio, both toward a
//! client on the shim's own stdin/stdout and toward an upstream child
//! process. What runs a session over these (and over HTTP) is a
//! [`crate::driver`].

pub mod child;
pub mod lines;
pub mod record;
pub mod stdout;

pub use lines::{Inbound, read_lines, write_lines};

use crate::jsonrpc::Message;

/// Where outgoing messages for one peer go: a channel drained by a writer
/// task, or a [`LineSink`] the sending thread writes into itself.
///
/// A sender from [`tokio::sync::mpsc::unbounded_channel`] converts into
/// one:
///
/// ```
/// # use mcp_tasks_shim::transport::Outbox;
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
/// let out = Outbox::from(tx);
/// out.send(mcp_tasks_shim::jsonrpc::Message::notification("n", serde_json::json!({}))).unwrap();
/// assert!(rx.try_recv().is_ok());
/// ```
#[derive(Debug, Clone)]
pub struct Outbox(OutboxKind);

#[derive(Debug, Clone)]
enum OutboxKind {
    Channel(tokio::sync::mpsc::UnboundedSender<Message>),
    Counted(
        tokio::sync::mpsc::UnboundedSender<Message>,
        std::sync::Arc<std::sync::atomic::AtomicU64>,
    ),
    Lines(std::sync::Arc<LinesOut>),
}

/// The [`LineSink`] behind every clone of one [`Outbox`]; closed when
/// the last clone goes.
#[derive(Debug)]
struct LinesOut(std::sync::Arc<dyn LineSink>);

impl Drop for LinesOut {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// A message could not be sent: its peer is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the peer is gone")]
pub struct PeerGone;

impl Outbox {
    /// Messages serialised and written into `sink` by the thread sending
    /// them; `sink` is closed once every clone of this outbox is dropped.
    pub fn lines(sink: std::sync::Arc<dyn LineSink>) -> Outbox {
        Outbox(OutboxKind::Lines(std::sync::Arc::new(LinesOut(sink))))
    }

    /// A channel whose messages are counted into `sent` as they go in
    /// (just before), so that its reader, counting what it took, can tell
    /// when it has caught up with everything sent before a given moment.
    pub fn counted(
        tx: tokio::sync::mpsc::UnboundedSender<Message>,
        sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
    ) -> Outbox {
        Outbox(OutboxKind::Counted(tx, sent))
    }

    /// Sends `msg`; fails (dropping it) when the peer is gone.
    pub fn send(&self, msg: Message) -> Result<(), PeerGone> {
        match &self.0 {
            OutboxKind::Channel(tx) => tx.send(msg).map_err(|_| PeerGone),
            OutboxKind::Counted(tx, sent) => {
                // Counted before it goes in: counted after, a message sent
                // meanwhile on another thread could be taken for this one
                // by a reader comparing counts (routed, not yet counted).
                sent.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                tx.send(msg).map_err(|_| {
                    sent.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
                    PeerGone
                })
            }
            OutboxKind::Lines(out) => out.0.write_line(&msg.to_line()).map_err(|_| PeerGone),
        }
    }
}

impl From<tokio::sync::mpsc::UnboundedSender<Message>> for Outbox {
    fn from(tx: tokio::sync::mpsc::UnboundedSender<Message>) -> Outbox {
        Outbox(OutboxKind::Channel(tx))
    }
}

/// Takes whole lines (newline included) from any thread without blocking,
/// in the order the callers came: what cannot be written now is queued
/// (see [`child::ChildInput`]). Lets a message be written by the thread
/// that made it, instead of waking a writer task for every message.
pub trait LineSink: Send + Sync + std::fmt::Debug {
    /// Writes or queues `line`; fails once the peer's input is closed.
    fn write_line(&self, line: &[u8]) -> std::io::Result<()>;

    /// No more lines will come: write out what is queued and let go of the
    /// peer. (Sinks whose end is decided elsewhere ignore it.)
    fn close(&self) {}
}
