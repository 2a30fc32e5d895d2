//! The shim inside your own server: a tower [`Layer`](tower::Layer) in
//! front of any service that serves MCP Streamable HTTP (rmcp's
//! `StreamableHttpService`, an axum `Router`, a handler).
//!
//! ```text
//!                    ┌──────────────── TasksCompat<S> ───────────────┐
//!  same revision ───▶│──────────── the request, untouched ──────────▶│ S
//!                    │                                               │ (your
//!  other revision ──▶│ HttpShim front ─▶ HttpUpstream ─ S::call ────▶│ server)
//!                    └───────────────── no socket ───────────────────┘
//! ```
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
//! - Requests in the inner service's revision reach it as they came: the
//!   same `http::Request`, its body never read.
//! - The other revision's requests are served by the shim's HTTP front
//!   ([`crate::driver::http::HttpShim`]), whose upstream is the inner
//!   service called in-process ([`crate::upstream::http::connect_service`]):
//!   for a 2026-07-28 service, 2025-11-25 sessions with tasks, `tasks/list`
//!   and elicitation; for a 2025-11-25 service, 2026-07-28 clients.
//! - The inner service's revision is learnt on the first request (a
//!   `server/discover` probe), unless [`TasksCompatConfig::inner_revision`](field@TasksCompatConfig::inner_revision)
//!   says it.
//! - The in-process requests carry none of the client's headers or
//!   extensions: authenticate in front of the layer, and leave the caller
//!   as an [`AuthenticatedPrincipal`] for the front's scopes.

mod principal;
mod route;
mod service;

use std::sync::Arc;
use std::time::Duration;

use crate::driver::http::{ConfiguredPrincipals, HttpOptions};
use crate::ledger::TaskLedger;
use crate::revision::Revision;
use crate::translate::tools::TaskPolicy;
use crate::wire::legacy::TaskSupport;

pub use principal::AuthenticatedPrincipal;
pub use service::TasksCompat;

/// How the layer serves the revision its inner service does not speak.
#[derive(Debug, Clone)]
pub struct TasksCompatConfig {
    /// The front's settings, as `mcp-tasks-shim http` has them: body
    /// limit, session caps, idle timeout, allowed origins, and the engine
    /// settings in `http.bridge` (the per-tool `taskSupport` policy among
    /// them). `path`, `listen`, `max_connections` and `record` are the
    /// CLI's and are not used here.
    pub http: HttpOptions,
    /// The CLI's principal options (`--token`, `--principal-header`), for
    /// requests your own auth layer left no [`AuthenticatedPrincipal`] on.
    pub principals: ConfiguredPrincipals,
    /// Where the front keeps its tasks; in memory when `None`.
    pub ledger: Option<Arc<dyn TaskLedger>>,
    /// The inner service's revision, so that its own clients' requests
    /// are routed without waiting for a probe; `None` probes it
    /// (`server/discover`) on the first request. The front probes it
    /// anyway when it is first needed (it needs the discover result).
    pub inner_revision: Option<Revision>,
    /// How long one call into the inner service may take (its answer's
    /// body included); long-lived streams are not bounded by it.
    pub request_timeout: Duration,
}

impl Default for TasksCompatConfig {
    fn default() -> Self {
        TasksCompatConfig {
            http: HttpOptions::default(),
            principals: ConfiguredPrincipals::default(),
            ledger: None,
            inner_revision: None,
            request_timeout: Duration::from_secs(300),
        }
    }
}

impl TasksCompatConfig {
    /// `execution.taskSupport` of one tool as 2025-11-25 clients are told
    /// (`--task-support TOOL=SUPPORT`): `forbidden` refuses task calls,
    /// `required` refuses plain ones.
    pub fn task_support(mut self, tool: impl Into<String>, support: TaskSupport) -> Self {
        self.policy().per_tool.insert(tool.into(), support);
        self
    }

    /// `execution.taskSupport` of every tool not named by
    /// [`TasksCompatConfig::task_support`] (`default_task_support`).
    pub fn default_task_support(mut self, support: TaskSupport) -> Self {
        self.policy().default = Some(support);
        self
    }

    /// A bearer token and the principal it stands for (`--token`).
    pub fn bearer_token(mut self, token: impl Into<String>, principal: impl Into<String>) -> Self {
        self.principals
            .tokens
            .insert(token.into(), principal.into());
        self
    }

    /// Trust this header as the principal (`--principal-header`).
    pub fn principal_header(mut self, header: impl Into<String>) -> Self {
        self.principals.trusted_header = Some(header.into());
        self
    }

    /// Keep tasks in `ledger` (shared, durable) instead of in memory.
    pub fn ledger(mut self, ledger: Arc<dyn TaskLedger>) -> Self {
        self.ledger = Some(ledger);
        self
    }

    /// The inner service speaks `revision`: its clients' requests pass
    /// from the first one on, with no probe in front of them.
    pub fn inner_revision(mut self, revision: Revision) -> Self {
        self.inner_revision = Some(revision);
        self
    }

    fn policy(&mut self) -> &mut TaskPolicy {
        // `None` would leave tools to the upstream's verdict; a rule given
        // here starts from the CLI's default (`optional`).
        self.http
            .bridge
            .policy
            .get_or_insert_with(TaskPolicy::optional)
    }
}

/// Wraps a Streamable HTTP MCP service so that clients of the other task
/// revision are served too; see the [module docs](self).
#[derive(Debug, Clone, Default)]
pub struct TasksCompatLayer {
    config: Arc<TasksCompatConfig>,
}

impl TasksCompatLayer {
    /// A layer with `config`.
    pub fn new(config: TasksCompatConfig) -> Self {
        TasksCompatLayer {
            config: Arc::new(config),
        }
    }

    /// `inner` behind the shim ([`tower::Layer::layer`], callable without
    /// the trait in scope). Each call makes a front of its own.
    pub fn layer<S>(&self, inner: S) -> TasksCompat<S> {
        TasksCompat::new(inner, self.config.clone())
    }
}

impl<S> tower::Layer<S> for TasksCompatLayer {
    type Service = TasksCompat<S>;

    fn layer(&self, inner: S) -> TasksCompat<S> {
        TasksCompatLayer::layer(self, inner)
    }
}
