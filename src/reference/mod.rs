//! Reference MCP servers of both revisions: test fixtures and a way for
//! users to try their clients, and the in-process server of the library's
//! examples. Not part of the shim itself; kept apart from the core.
//!
//! Each revision has a transport-independent core ([`ReferenceServer`]):
//! it is fed incoming messages and emits outgoing ones on a channel, so the
//! stdio transport here and an HTTP transport elsewhere can share it.
//! - `tools`: the tool set (the one the conformance suite's `tasks-*`
//!   scenarios expect) and what each tool does.
//! - `tasks`: the revision-neutral task table.
//! - `legacy` / `modern`: the 2025-11-25 and 2026-07-28 protocol surfaces
//!   (`*_wire`: how each renders tasks and results).
//! - `stdio`: newline-delimited JSON on stdin/stdout.
//! - `http`: Streamable HTTP at `/mcp` (2026-07-28 without sessions,
//!   2025-11-25 with sessions).
//! - [`rmcp`](mod@rmcp) (feature `rmcp`): the same tool set served by the
//!   official Rust SDK, rmcp 3.x, with its own task and MRTR APIs.

mod http;
mod legacy;
mod legacy_wire;
mod modern;
mod modern_wire;
mod peer;
#[cfg(feature = "rmcp")]
pub mod rmcp;
mod seeded;
mod stdio;
mod tasks;
mod tools;

use serde_json::{Value, json};
use tokio::sync::mpsc;

pub use http::{ENDPOINT, router, serve_http, serve_http_on};

use crate::jsonrpc::Message;
use crate::revision::Revision;

/// A reference server of one revision, independent of any transport.
///
/// Feed it every message the client sends with [`ReferenceServer::handle`];
/// whatever it has to say (responses, notifications, its own requests)
/// arrives on the channel given to [`ReferenceServer::new`], in order.
/// Long-running work is spawned, so `handle` must be called inside a Tokio
/// runtime and never blocks. Clones share the same session.
#[derive(Clone)]
pub struct ReferenceServer {
    inner: Inner,
}

#[derive(Clone)]
enum Inner {
    Legacy(legacy::LegacyServer),
    Modern(modern::ModernServer),
}

impl std::fmt::Debug for ReferenceServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReferenceServer")
            .field("revision", &self.revision())
            .finish_non_exhaustive()
    }
}

impl ReferenceServer {
    /// A fresh server (legacy: one session) writing to `out`.
    pub fn new(revision: Revision, out: mpsc::UnboundedSender<Message>) -> Self {
        let inner = match revision {
            Revision::Legacy => Inner::Legacy(legacy::LegacyServer::new(out)),
            Revision::Modern => Inner::Modern(modern::ModernServer::new(out)),
        };
        Self { inner }
    }

    /// The revision this server speaks.
    pub fn revision(&self) -> Revision {
        match self.inner {
            Inner::Legacy(_) => Revision::Legacy,
            Inner::Modern(_) => Revision::Modern,
        }
    }

    /// Processes one incoming message. Bad input is answered with a
    /// JSON-RPC error on the channel; it never panics or ends the session.
    pub fn handle(&self, msg: Message) {
        match &self.inner {
            Inner::Legacy(s) => s.handle(msg),
            Inner::Modern(s) => s.handle(msg),
        }
    }
}

/// Sets how long tasks are kept when the client asks for no retention (all
/// tasks of the 2026-07-28 server, which alone decides); clamped to 1 ms …
/// 1 hour. Process-wide: the reference servers are one per process.
pub fn set_task_ttl_ms(ms: i64) {
    tasks::set_default_ttl_ms(ms);
}

/// Sets the `pollIntervalMs` / `pollInterval` every task advertises
/// (default 100 ms; clamped to 1 ms … 1 hour). Process-wide.
pub fn set_poll_interval_ms(ms: i64) {
    tasks::set_poll_interval_ms(ms);
}

/// Makes the reference servers' ids and timestamps reproducible from
/// `seed` (see `reference-server --seed`). Process-wide.
pub fn set_seed(seed: u64) {
    seeded::set_seed(seed);
}

/// Makes the 2026-07-28 server answer `subscriptions/listen` with `-32601`,
/// like a server without listen streams. Process-wide.
pub fn disable_listen() {
    modern::disable_listen();
}

/// Serves the reference server of `revision` on stdin/stdout until EOF.
pub async fn serve_stdio(revision: Revision) -> std::io::Result<()> {
    stdio::serve(revision).await
}

/// A lock that a panicked holder did not poison for good: the tables it
/// guards stay consistent between statements.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `Implementation` of the reference servers, in full: the 2025-11-25
/// `initialize` and the 2026-07-28 `server/discover` answers.
fn server_info() -> Value {
    static INFO: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
        json!({
            "name": "mcp-tasks-shim-reference",
            "title": "mcp-tasks-shim reference server",
            "version": env!("CARGO_PKG_VERSION"),
        })
    });
    INFO.clone()
}

/// The short `Implementation` (name and version, what the schema requires)
/// that the 2026-07-28 server puts in the `_meta` of every other result.
/// The spec asks for server info on every response, which makes these
/// answers longer than the 2025-11-25 ones; a client that reads its pipe a
/// byte per system call (`Popen(bufsize=0)`) pays for every byte, so the
/// fixture sends no more than the spec asks (docs/performance.md,
/// "Reference fixtures").
fn server_id() -> Value {
    static ID: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
        json!({
            "name": "mcp-tasks-shim-reference",
            "version": env!("CARGO_PKG_VERSION"),
        })
    });
    ID.clone()
}
