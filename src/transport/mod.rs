//! Transports: adapters at the edge that move [`Message`](crate::jsonrpc::Message)s.
//!
//! The line transport (newline-delimited JSON) carries stdio, both toward a
//! client on the shim's own stdin/stdout and toward an upstream child
//! process. What runs a session over these (and over HTTP) is a
//! [`crate::driver`]; what an engine sends, and to which exchange, is the
//! bridge's [`crate::bridge::Outbox`].

pub mod child;
pub mod lines;
pub mod record;
pub mod stdout;

pub use lines::{Inbound, read_lines, write_lines};

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
