//! What an engine hands its driver: each outgoing message with its
//! [`Route`], decided where the engine knows it.
//!
//! A driver with one pipe to the client (stdio) ignores the route. One
//! that answers each request on a channel of its own (2025-11-25
//! Streamable HTTP: a POST's SSE stream, the GET stream) places the
//! message by its route at once, on the thread that sent it: by the time
//! an engine call returns, everything it sent before is placed, so an
//! answer handed back directly cannot overtake it.

use std::sync::Arc;

use crate::jsonrpc::{Id, Message, Reply};

/// Which exchange of the client's an outgoing message belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The answer to client request `0`.
    Answer(Id),
    /// Sent on behalf of client request `0` while it runs: its progress,
    /// or a question of the shim's asked for it.
    During(Id),
    /// A question about task `0` (tagged with it): a client waiting on
    /// the task (`tasks/result`) is the one to ask.
    Task(String),
    /// The withdrawal of question `0` the shim asked earlier: it follows
    /// the question wherever the question went.
    Withdrawal(Id),
    /// About no one exchange: a relayed server notification, a task's
    /// status notification. Over HTTP, the session's GET stream.
    Session,
}

/// The driver's end of an [`Outbox`]: places each message by its route.
///
/// Called on the engine's own thread, possibly with the engine's locks
/// held: it must not block, and must not call back into the engine
/// except to feed it a client message it would take from any thread.
pub trait Deliver: Send + Sync + std::fmt::Debug {
    /// Sends or queues `msg`, bound for `route`; fails once the client's
    /// side is closed.
    fn deliver(&self, route: Route, msg: Message) -> Result<(), PeerGone>;

    /// [`Deliver::deliver`] of the answer to `id` carrying `reply`. A
    /// sink that writes JSON writes a [`Reply::Text`] as it is
    /// ([`Reply::write_answer`]); the default builds the message.
    fn deliver_reply(&self, route: Route, id: Id, reply: Reply) -> Result<(), PeerGone> {
        self.deliver(route, reply.into_message(id))
    }

    /// The engine's last outbox is gone: no more messages will come.
    /// (Sinks whose end is decided elsewhere ignore it.)
    fn close(&self) {}
}

/// Where an engine's outgoing messages for one client go: a [`Deliver`]
/// of the driver's, or a plain channel that forgets the routes (tests,
/// and drivers with one pipe per client).
///
/// A sender from [`tokio::sync::mpsc::unbounded_channel`] converts into
/// one:
///
/// ```
/// # use mcp_tasks_shim::bridge::{Outbox, Route};
/// let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
/// let out = Outbox::from(tx);
/// out.send(Route::Session, mcp_tasks_shim::jsonrpc::Message::notification("n", serde_json::json!({}))).unwrap();
/// assert!(rx.try_recv().is_ok());
/// ```
#[derive(Debug, Clone)]
pub struct Outbox(Kind);

#[derive(Debug, Clone)]
enum Kind {
    Channel(tokio::sync::mpsc::UnboundedSender<Message>),
    Sink(Arc<Closing>),
}

/// The [`Deliver`] behind every clone of one [`Outbox`]; closed when the
/// last clone goes.
#[derive(Debug)]
struct Closing(Arc<dyn Deliver>);

impl Drop for Closing {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// A message could not be sent: its peer is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the peer is gone")]
pub struct PeerGone;

impl Outbox {
    /// Messages handed to `sink` with their routes; `sink` is closed once
    /// every clone of this outbox is dropped.
    pub fn new(sink: Arc<dyn Deliver>) -> Outbox {
        Outbox(Kind::Sink(Arc::new(Closing(sink))))
    }

    /// Sends `msg`, bound for `route`; fails (dropping it) when the peer
    /// is gone.
    pub fn send(&self, route: Route, msg: Message) -> Result<(), PeerGone> {
        match &self.0 {
            Kind::Channel(tx) => tx.send(msg).map_err(|_| PeerGone),
            Kind::Sink(sink) => sink.0.deliver(route, msg),
        }
    }

    /// [`Outbox::send`] of the answer to `id` carrying `reply`; see
    /// [`Deliver::deliver_reply`].
    pub fn send_reply(&self, route: Route, id: Id, reply: Reply) -> Result<(), PeerGone> {
        match &self.0 {
            Kind::Channel(tx) => tx.send(reply.into_message(id)).map_err(|_| PeerGone),
            Kind::Sink(sink) => sink.0.deliver_reply(route, id, reply),
        }
    }
}

impl From<tokio::sync::mpsc::UnboundedSender<Message>> for Outbox {
    fn from(tx: tokio::sync::mpsc::UnboundedSender<Message>) -> Outbox {
        Outbox(Kind::Channel(tx))
    }
}
