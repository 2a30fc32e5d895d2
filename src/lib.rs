//! # mcp-tasks-shim
//!
//! A compatibility shim between the two task designs of the Model Context
//! Protocol: the 2025-11-25 core tasks ("legacy") and the 2026-07-28
//! `io.modelcontextprotocol/tasks` extension ("modern").
//!
//! ```text
//!            downstream                    upstream
//!   client ──────────────▶ ┌───────────┐ ──────────────▶ server
//!   (legacy | modern)      │  bridge   │  (modern | legacy)
//!                          │  engine   │
//!                          └─────┬─────┘
//!        transport::*  ◀── driver ──▶  translate (pure)  ledger (trait)
//! ```
//!
//! The rooms, from the inside out:
//! - [`jsonrpc`], [`wire`]: the envelope and each revision's typed shapes.
//! - [`revision`]: which revision a peer speaks (pure detection + probe rule).
//! - [`translate`]: pure functions, one per mapping row and direction; no IO,
//!   no clock, no randomness (ids and times are arguments).
//! - [`error`]: errors by cause and the single mapping to JSON-RPC codes.
//! - [`ids`]: CSPRNG ids and timestamps, used by engines, never by `translate`.
//! - [`scope`]: whose tasks are whose: one scope constructor per origin.
//! - [`reference`](mod@reference): small reference servers of both revisions (fixtures).
//! - `inline`: request futures run on the IO threads that read and answer
//!   them, where a spawned task would cost a worker wake-up each way.
//!
//! ## Inside your server
//!
//! A 2026-07-28 Streamable HTTP service (rmcp's `StreamableHttpService`,
//! an axum `Router`) keeps its 2025-11-25 clients with one line,
//! [`layer::TasksCompatLayer`]; no second process, no socket between the
//! layer and the service:
//!
//! ```no_run
//! # async fn run(rmcp_service: axum::Router) -> std::io::Result<()> {
//! use axum::Router;
//! use mcp_tasks_shim::layer::{TasksCompatConfig, TasksCompatLayer};
//! use mcp_tasks_shim::wire::legacy::TaskSupport;
//!
//! let config = TasksCompatConfig::default().task_support("greet", TaskSupport::Forbidden);
//! let app = Router::new().nest_service("/mcp", TasksCompatLayer::new(config).layer(rmcp_service));
//! axum::serve(tokio::net::TcpListener::bind("127.0.0.1:8080").await?, app).await
//! # }
//! ```
//!
//! Requests of the service's own revision reach it untouched; the other
//! revision's are served by the shim's front, with the service called
//! in-process as its upstream. A stdio server in the process: serve it on
//! a [`tokio::io::duplex`] pair, [`upstream::io::connect`] to it, and
//! [`driver::stdio::serve_stdio`] the process's stdin and stdout.
//!
//! To embed otherwise: [`driver::http::HttpShim`] is the Streamable HTTP front as
//! axum routes to merge into your own server, over an upstream
//! [`upstream::Link`] (a child process, an HTTP server, or one in your
//! process: [`upstream::channel`] and [`upstream::Link::probe`]). The bare
//! engines ([`bridge::legacy_front::LegacyFront`],
//! [`bridge::modern_front::ModernFront`]) take client messages and answer
//! through an outbox; `examples/embed_axum.rs` and `examples/in_process.rs`
//! show both.

pub mod bridge;
mod console;
pub mod driver;
pub mod error;
pub mod ids;
mod inline;
pub mod jsonrpc;
pub mod ledger;
pub mod reference;
pub mod revision;
#[cfg(feature = "rmcp")]
pub mod rmcp;
pub mod scope;
pub mod telemetry;
pub mod testing;
pub mod translate;
pub mod transport;
pub mod upstream;
pub mod wire;

/// The tower layer is the middleware author's entry point; it lives with
/// the other drivers, and is named here too so that embedding the shim
/// reads `mcp_tasks_shim::layer::TasksCompatLayer`.
pub use driver::layer;

#[doc(hidden)]
pub mod cli;
