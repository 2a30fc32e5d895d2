//! Drivers: what runs the bridge engines against real IO.
//!
//! A driver owns the edges of one way of serving: it reads client
//! messages from its transport, decides each session's revision and mode
//! (pass-through, legacy front, modern front), feeds the engine, sends
//! what the engine emits where it belongs, and owns the timers and tasks
//! that outlive a single message (sweepers, supervision, idle sessions).
//! The engines in [`crate::bridge`] and the pure [`crate::translate`]
//! core know nothing of any of this.
//!
//! - [`stdio`]: one client on a byte stream (the shim's own stdin/stdout,
//!   or any `AsyncRead`/`AsyncWrite` pair) and one upstream.
//! - [`http`]: a Streamable HTTP endpoint serving both revisions side by
//!   side, sessions and stateless requests, in front of any upstream.
//! - [`layer`]: the HTTP driver as a tower layer around an in-process
//!   Streamable HTTP service (no socket between the two).
//!
//! A new front (another transport, another embedding) is a new driver
//! here: see `docs/architecture.md`.

pub mod http;
pub mod layer;
pub mod stdio;
