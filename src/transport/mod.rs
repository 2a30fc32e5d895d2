//! Transports: adapters at the edge that move [`Message`]s.
//!
//! The line transport (newline-delimited JSON) carries stdio, both toward a
//! client on the shim's own stdin/stdout and toward an upstream child
//! process. HTTP lives in its own module.

pub mod child;
pub mod http;
pub mod lines;

pub use lines::{Inbound, read_lines, write_lines};

use crate::jsonrpc::Message;

/// Where outgoing messages for one peer go.
pub type Outbox = tokio::sync::mpsc::UnboundedSender<Message>;
