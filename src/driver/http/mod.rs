//! Streamable HTTP in front of the shim: one endpoint that serves legacy
//! (2025-11-25, sessions) and modern (2026-07-28, stateless) clients side
//! by side, choosing per request as the 2026 versioning spec describes:
//! `initialize` or an `Mcp-Session-Id` means legacy, modern `_meta` or
//! headers mean modern.

pub(crate) mod headers;
mod legacy;
mod legacy_relay;
mod legacy_session;
mod legacy_streams;
mod modern;
pub mod principal;
mod record;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::bridge::BridgeConfig;
use crate::bridge::legacy_front::LegacyFront;
use crate::bridge::modern_front::ModernFront;
use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, Message, Reply};
use crate::ledger::TaskLedger;
use crate::revision::{self, ClientSignal, Revision};
use crate::upstream::{AnyUpstream, Link, UpstreamEvent};

pub use crate::scope::Principal;
pub use legacy_relay::{LegacyRelay, RelayCommand};
pub use principal::{ConfiguredPrincipals, PrincipalResolver, ReloadablePrincipals};

/// How long open requests and streams may take to end after a shutdown signal.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Where the liveness check is served.
pub const HEALTHZ_PATH: &str = "/healthz";
/// Where the readiness check is served.
pub const READYZ_PATH: &str = "/readyz";
/// Where the metrics are served by [`serve`].
pub const METRICS_PATH: &str = "/metrics";

/// The endpoint path unless configured.
pub const DEFAULT_PATH: &str = "/mcp";
/// The request body limit unless configured (bytes).
pub const DEFAULT_MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// How long an idle legacy session lives unless configured (seconds).
pub const DEFAULT_SESSION_IDLE_TIMEOUT_S: u64 = 1800;
/// Most legacy sessions open at once unless configured.
pub const DEFAULT_MAX_SESSIONS: u64 = 10_000;
/// Default of [`HttpOptions::read_timeout`] (seconds).
pub const DEFAULT_READ_TIMEOUT_S: u64 = 30;
/// Default of [`HttpOptions::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: u64 = 4_096;

/// A configuration [`HttpShim::new`] cannot serve.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// `HttpOptions::path` is not a plain absolute path.
    #[error("HttpOptions.path: {0}")]
    Path(String),
    /// [`HttpShim::new`] was called outside a tokio runtime, which its
    /// background work (upstream events, expiry sweeps) needs.
    #[error("HttpShim::new must be called inside a tokio runtime")]
    NoRuntime,
}

/// Whether `path` is an endpoint path the router can serve as given:
/// absolute, plain segments of letters, digits and `-._~` (no `*`, `:` or
/// `{` pattern syntax, no trailing `/`).
pub fn check_path(path: &str) -> Result<(), String> {
    let plain = path.len() > 1
        && path.starts_with('/')
        && !path.ends_with('/')
        && path[1..].split('/').all(|seg| {
            !seg.is_empty()
                && seg
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b))
        });
    if plain {
        Ok(())
    } else {
        Err(format!(
            "expected a path like /mcp (segments of letters, digits, - . _ ~), got {path:?}"
        ))
    }
}

/// How the HTTP front is configured.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen.
    pub listen: SocketAddr,
    /// The MCP endpoint path.
    pub path: String,
    /// Largest accepted request body (bytes); larger answers 413.
    pub max_body_bytes: usize,
    /// Refuse legacy `tasks/list` for requests without a principal.
    pub require_principal: bool,
    /// Origins allowed besides loopback ones (`http://host:port`). A request
    /// with any other `Origin` is refused with 403 (DNS-rebinding defence).
    pub allowed_origins: Vec<String>,
    /// A legacy session with no request being answered and no stream open
    /// for this long is ended, as if the client had sent DELETE; `None`
    /// keeps sessions until DELETE.
    pub session_idle_timeout: Option<std::time::Duration>,
    /// Most legacy sessions open at once; `initialize` beyond it answers 503.
    pub max_sessions: usize,
    /// Most legacy sessions without a principal open at once, within
    /// `max_sessions`; one more anonymous `initialize` answers 503. An
    /// anonymous `initialize` costs a client nothing, so without this cap
    /// anonymous clients could take every session and lock authenticated
    /// principals out. `None`: half of `max_sessions`
    /// ([`HttpOptions::anonymous_session_cap`]).
    pub max_anonymous_sessions: Option<usize>,
    /// Most legacy sessions one principal may hold open at once, within
    /// `max_sessions`; one more `initialize` of it answers 503, while other
    /// principals are still served. `None`: a tenth of `max_sessions`
    /// ([`HttpOptions::principal_session_cap`]).
    pub max_sessions_per_principal: Option<usize>,
    /// How long a client may take to send a request's headers, and then
    /// its body, before the connection is closed (slow clients holding
    /// connections open). Used by [`serve`] (headers) and the endpoint
    /// (body).
    pub read_timeout: std::time::Duration,
    /// Most client connections open at once ([`serve`]); more are closed
    /// as they come.
    pub max_connections: usize,
    /// Accept a 2026-07-28 request that has no `Mcp-Name` header where
    /// its body names what it routes on (the task id of `tasks/*`, the
    /// tool of `tools/call`…), instead of refusing it with `-32020` as
    /// SEP-2243 says: some clients omit it. A mismatched or unreadable
    /// `Mcp-Name` is still refused. Such requests are counted in
    /// `/metrics` (`mcp_shim_missing_mcp_name_total`).
    pub accept_missing_mcp_name: bool,
    /// A second listener for operators, serving `/healthz`, `/readyz`
    /// and `/metrics` only ([`serve`]; the MCP listener serves them too).
    pub admin_listen: Option<SocketAddr>,
    /// Engine settings.
    pub bridge: BridgeConfig,
    /// Where 2025-11-25 HTTP sessions get an upstream of their own when
    /// the upstream speaks 2025-11-25 too: a process each (the upstream's
    /// command) or a session each on the upstream's URL, relayed
    /// unchanged. `None` refuses 2025-11-25 sessions to a 2025-11-25
    /// upstream.
    pub legacy_relay: Option<LegacyRelay>,
    /// Copy every message between clients and the shim to this transcript
    /// (`--record`), each labelled with its session (`session-1`, …: a
    /// 2025-11-25 session id, else the request's principal).
    pub record: Option<crate::transport::record::Recorder>,
    /// `--record-upstream` for the processes of relayed 2025-11-25
    /// sessions ([`HttpOptions::legacy_relay`]): each process's messages,
    /// labelled `session-1`, … by session. (An upstream the shim was given
    /// records itself: see [`crate::upstream::http::connect_recorded`] and
    /// [`crate::upstream::supervised::SuperviseOptions::record`].)
    pub record_upstream: Option<crate::transport::record::Recorder>,
}

impl Default for HttpOptions {
    /// The CLI's defaults: `127.0.0.1:8080`, `/mcp`, 4 MiB bodies, idle
    /// legacy sessions ended after 30 minutes, at most 10,000 of them.
    fn default() -> Self {
        HttpOptions {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            path: DEFAULT_PATH.into(),
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            require_principal: false,
            allowed_origins: Vec::new(),
            session_idle_timeout: Some(std::time::Duration::from_secs(
                DEFAULT_SESSION_IDLE_TIMEOUT_S,
            )),
            max_sessions: usize::try_from(DEFAULT_MAX_SESSIONS).unwrap_or(usize::MAX),
            max_anonymous_sessions: None,
            max_sessions_per_principal: None,
            read_timeout: std::time::Duration::from_secs(DEFAULT_READ_TIMEOUT_S),
            max_connections: usize::try_from(DEFAULT_MAX_CONNECTIONS).unwrap_or(usize::MAX),
            accept_missing_mcp_name: false,
            admin_listen: None,
            bridge: BridgeConfig::default(),
            legacy_relay: None,
            record: None,
            record_upstream: None,
        }
    }
}

impl HttpOptions {
    /// The anonymous share of `max_sessions` in force: the configured one,
    /// else half (at least 1), never more than `max_sessions`.
    pub fn anonymous_session_cap(&self) -> usize {
        self.max_anonymous_sessions
            .unwrap_or(self.max_sessions / 2)
            .clamp(1, self.max_sessions.max(1))
    }

    /// The per-principal share of `max_sessions` in force: the configured
    /// one, else a tenth (at least 1), never more than `max_sessions`.
    pub fn principal_session_cap(&self) -> usize {
        self.max_sessions_per_principal
            .unwrap_or(self.max_sessions / 10)
            .clamp(1, self.max_sessions.max(1))
    }
}

/// State shared by every request.
#[derive(Debug)]
pub(crate) struct App {
    opts: HttpOptions,
    /// Typed by its revision: a 2026-07-28 one is also relayed to.
    upstream: AnyUpstream,
    legacy: Option<Arc<LegacyFront>>,
    modern: Option<Arc<ModernFront>>,
    ledger: Arc<dyn TaskLedger>,
    sessions: Mutex<HashMap<String, Arc<legacy::HttpSession>>>,
    /// 2025-11-25 sessions relayed to upstreams of their own (a 2025-11-25
    /// upstream with [`HttpOptions::legacy_relay`]).
    relays: Mutex<HashMap<String, Arc<legacy_relay::RelaySession>>>,
    resolver: Arc<dyn PrincipalResolver>,
    metrics: Arc<crate::telemetry::Telemetry>,
    /// Callers already logged for a request without `Mcp-Name`
    /// (`--accept-missing-mcp-name`).
    missing_mcp_name_callers: Mutex<std::collections::HashSet<String>>,
    /// The front's ledger clock: task checks made outside the engine, and
    /// session idle time.
    clock: crate::bridge::clock::Clock,
    /// Set by [`HttpShim::begin_shutdown`]: long-lived streams end.
    closing: tokio::sync::watch::Sender<bool>,
}

/// The HTTP front as routes of your own axum (tower) server.
///
/// [`serve`] is this plus a listener and signal handling. Embed it instead
/// when the endpoint should live beside your own routes and layers
/// (authentication, tracing, CORS…): build it once, merge
/// [`HttpShim::router`] into your `Router`, and on shutdown call
/// [`HttpShim::begin_shutdown`] before your server drains, then
/// [`HttpShim::finish`] after it has stopped.
///
/// ```no_run
/// # async fn run(link: mcp_tasks_shim::upstream::Link) -> std::io::Result<()> {
/// use std::sync::Arc;
/// use mcp_tasks_shim::ledger::MemoryLedger;
/// use mcp_tasks_shim::driver::http::{ConfiguredPrincipals, HttpOptions, HttpShim};
///
/// let shim = HttpShim::new(
///     HttpOptions::default(), // the endpoint at /mcp
///     link,                   // a probed upstream, e.g. `Link::probe`
///     Arc::new(MemoryLedger::default()),
///     Arc::new(ConfiguredPrincipals::default()),
/// )
/// .expect("/mcp is a path the router can serve");
/// let app = axum::Router::new()
///     .route("/health", axum::routing::get(|| async { "ok" }))
///     .merge(shim.router());
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// axum::serve(listener, app).await?;
/// shim.finish().await;
/// # Ok(()) }
/// ```
///
/// Cloning is cheap and shares the front (hand a clone to your shutdown
/// future).
#[derive(Debug, Clone)]
pub struct HttpShim {
    app: Arc<App>,
    background: Arc<Mutex<Background>>,
}

/// What [`HttpShim::finish`] stops.
#[derive(Debug, Default)]
struct Background {
    /// Expiry sweeps (tasks; idle legacy sessions).
    sweepers: Vec<tokio::task::JoinHandle<()>>,
    child: Option<tokio::process::Child>,
}

impl HttpShim {
    /// Builds the front over a probed upstream. Starts its background work
    /// (upstream events, expiry sweeps), so it must be called inside a
    /// tokio runtime ([`OptionsError::NoRuntime`] otherwise).
    /// `opts.listen`, `opts.max_connections` and the header part of
    /// `opts.read_timeout` are [`serve`]'s, not the router's: behind your
    /// own `axum::serve`, bind the listener and bound connections and
    /// header reads yourself (the body deadline still applies). Fails on a
    /// path the router could not serve as given ([`check_path`]).
    pub fn new(
        opts: HttpOptions,
        link: Link,
        ledger: Arc<dyn TaskLedger>,
        resolver: Arc<dyn PrincipalResolver>,
    ) -> Result<HttpShim, OptionsError> {
        check_path(&opts.path).map_err(OptionsError::Path)?;
        tokio::runtime::Handle::try_current().map_err(|_| OptionsError::NoRuntime)?;
        let Link {
            upstream,
            events,
            discover,
            child,
        } = link;
        let metrics = Arc::new(crate::telemetry::Telemetry::new());
        let ledger = crate::ledger::timed::TimedLedger::wrap(ledger, metrics.clone());
        let (legacy, modern) = match &upstream {
            AnyUpstream::Modern(up) => (
                Some(LegacyFront::new(
                    up.clone(),
                    ledger.clone(),
                    opts.bridge.clone(),
                    discover,
                )),
                None,
            ),
            AnyUpstream::Legacy(up) => (
                None,
                Some(ModernFront::new(
                    up.clone(),
                    ledger.clone(),
                    opts.bridge.clone(),
                )),
            ),
        };
        let clock = match (&legacy, &modern) {
            (Some(front), _) => front.clock(),
            (_, Some(front)) => front.clock(),
            (None, None) => crate::bridge::clock::Clock::new(),
        };
        let app = Arc::new(App {
            opts,
            upstream,
            legacy,
            modern,
            ledger,
            sessions: Mutex::new(HashMap::new()),
            relays: Mutex::new(HashMap::new()),
            resolver,
            metrics,
            missing_mcp_name_callers: Mutex::default(),
            clock,
            closing: tokio::sync::watch::Sender::new(false),
        });
        follow_upstream(&app, events);
        let sweepers = spawn_sweepers(&app);
        Ok(HttpShim {
            app,
            background: Arc::new(Mutex::new(Background { sweepers, child })),
        })
    }

    /// The MCP endpoint (GET, POST, DELETE at `opts.path`), for any state
    /// type of yours. Its body limit (`opts.max_body_bytes`) applies to
    /// these routes only.
    ///
    /// Legacy SSE answers go out in several writes: set `TCP_NODELAY` on
    /// accepted connections (`axum::serve::ListenerExt::tap_io`), or Nagle
    /// delays each answer's end by the client's delayed ACK (~40 ms).
    pub fn router<S: Clone + Send + Sync + 'static>(&self) -> Router<S> {
        let routes = Router::new().route(
            &self.app.opts.path,
            get(session_endpoint)
                .post(post_endpoint)
                .delete(session_endpoint),
        );
        let routes = match &self.app.opts.record {
            Some(rec) => routes.layer(axum::middleware::from_fn_with_state(
                record::Tap {
                    rec: rec.clone(),
                    resolver: self.app.resolver.clone(),
                    max_body_bytes: self.app.opts.max_body_bytes,
                },
                record::tap,
            )),
            None => routes,
        };
        routes.with_state(self.app.clone())
    }

    /// Serves one request of the endpoint, whatever its path (the
    /// [`crate::driver::layer`] hands over the requests it routes here): POST,
    /// GET and DELETE as [`HttpShim::router`] serves them, 405 otherwise.
    pub(crate) async fn serve_request(
        &self,
        req: axum::http::Request<axum::body::Body>,
    ) -> Response {
        let (parts, body) = req.into_parts();
        let app = self.app.clone();
        match parts.method {
            axum::http::Method::POST => post(app, parts.headers, parts.extensions, body).await,
            axum::http::Method::GET | axum::http::Method::DELETE => {
                session_endpoint(State(app), parts.method, parts.headers, parts.extensions).await
            }
            _ => method_not_allowed(),
        }
    }

    /// The front's metrics (request latency and counts per revision and
    /// method, errors by code, upstream health, what the shim holds; the
    /// guide lists them) in Prometheus text form at `path`.
    ///
    /// They live in a recorder of this front's own: the shim installs no
    /// global `metrics` recorder, so one your application installed is
    /// left alone (and does not see the shim's metrics; serve both
    /// routes, or render [`HttpShim::metrics_handle`] into your own).
    pub fn metrics_router<S: Clone + Send + Sync + 'static>(&self, path: &str) -> Router<S> {
        Router::new()
            .route(path, get(metrics_endpoint))
            .with_state(self.app.clone())
    }

    /// What renders the front's metrics, for an application that exports
    /// them its own way. Its gauges are as of the last
    /// [`HttpShim::render_metrics`] (or scrape of
    /// [`HttpShim::metrics_router`]), which reads them afresh.
    pub fn metrics_handle(&self) -> metrics_exporter_prometheus::PrometheusHandle {
        self.app.metrics.handle().clone()
    }

    /// The text [`HttpShim::metrics_router`] serves: the gauges read now,
    /// then everything rendered in the Prometheus text format.
    pub async fn render_metrics(&self) -> String {
        self.app.refresh_gauges().await;
        self.app.metrics.render()
    }

    /// `GET /healthz` (200 while the process serves) and `GET /readyz`
    /// (200 once the upstream is probed and up; 503 while it restarts, once
    /// it is down, and during shutdown, the JSON body saying why).
    pub fn health_router<S: Clone + Send + Sync + 'static>(&self) -> Router<S> {
        Router::new()
            .route(HEALTHZ_PATH, get(healthz_endpoint))
            .route(READYZ_PATH, get(readyz_endpoint))
            .with_state(self.app.clone())
    }

    /// Answers everything still waiting with `-32603` naming `reason`
    /// (blocking `tasks/result`, driven calls, calls open upstream), ends
    /// the long-lived streams (a 2025-11-25 session's GET stream,
    /// `subscriptions/listen`) and stops the upstream, so that your
    /// server's graceful shutdown does not wait for tasks that may run for
    /// hours, or for clients that never close their streams.
    pub fn begin_shutdown(&self, reason: &str) {
        // First: once the upstream is stopped, they would end in error.
        if let Some(front) = &self.app.modern {
            front.close_listens();
        }
        self.app.upstream.shutdown(reason);
        legacy::end_waits(&self.app, reason);
        legacy_relay::end_all(&self.app, reason);
        self.app.closing.send_replace(true);
    }

    /// After your server has stopped: ends the background work, lets the
    /// upstream finish, and stops its child process (SIGKILL after 3 s).
    pub async fn finish(&self) {
        self.app.upstream.shutdown("the shim is shutting down");
        let Background {
            sweepers,
            mut child,
        } = std::mem::take(&mut *self.background.lock().unwrap_or_else(|p| p.into_inner()));
        for sweeper in sweepers {
            sweeper.abort();
        }
        self.app.upstream.finish().await;
        if let Some(child) = child.as_mut()
            && tokio::time::timeout(std::time::Duration::from_secs(3), child.wait())
                .await
                .is_err()
        {
            let _ = child.kill().await;
        }
    }
}

/// The upstream's events (notifications, server requests, its end) fed
/// to the front that bridges them, on a task of their own.
fn follow_upstream(app: &Arc<App>, events: tokio::sync::mpsc::UnboundedReceiver<UpstreamEvent>) {
    crate::bridge::spawn_follower(app.clone(), events);
}

impl crate::bridge::FollowsUpstream for App {
    async fn upstream_event(self: &Arc<Self>, ev: UpstreamEvent) {
        if let UpstreamEvent::Closed(reason) = &ev {
            tracing::error!(%reason, "upstream gone");
        }
        match (&self.legacy, &self.modern) {
            (Some(front), _) => front.handle_upstream(ev).await,
            (_, Some(front)) => front.handle_upstream(ev).await,
            _ => {}
        }
    }
    fn events_ended(&self) {
        if let Some(front) = &self.modern {
            front.upstream_ended();
        }
        if let Some(front) = &self.legacy {
            front.upstream_ended();
        }
    }
}

/// The periodic upkeep [`HttpShim::finish`] stops: metrics, each front's
/// expired tasks, and idle sessions when they time out.
fn spawn_sweepers(app: &Arc<App>) -> Vec<tokio::task::JoinHandle<()>> {
    let mut sweepers = Vec::new();
    sweepers.push(crate::bridge::spawn_sweeper(
        Arc::downgrade(app),
        |app: Arc<App>| async move {
            app.metrics.upkeep();
            0
        },
    ));
    if let Some(front) = &app.legacy {
        sweepers.push(crate::bridge::spawn_sweeper(
            Arc::downgrade(front),
            |f: Arc<LegacyFront>| async move { f.sweep().await },
        ));
    }
    if let Some(front) = &app.modern {
        sweepers.push(crate::bridge::spawn_sweeper(
            Arc::downgrade(front),
            |f: Arc<ModernFront>| async move { f.sweep().await },
        ));
    }
    if app.opts.session_idle_timeout.is_some() {
        sweepers.push(crate::bridge::spawn_sweeper(
            Arc::downgrade(app),
            |app: Arc<App>| async move {
                legacy_session::expire_idle::<legacy::HttpSession>(&app).await
            },
        ));
        sweepers.push(crate::bridge::spawn_sweeper(
            Arc::downgrade(app),
            |app: Arc<App>| async move {
                legacy_session::expire_idle::<legacy_relay::RelaySession>(&app).await
            },
        ));
    }
    sweepers
}

/// Serves the endpoint until `shutdown` resolves, then stops the upstream.
pub async fn serve(
    opts: HttpOptions,
    link: Link,
    ledger: Arc<dyn TaskLedger>,
    resolver: Arc<dyn PrincipalResolver>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let startup = Startup::default();
    serve_connecting(
        opts,
        std::future::ready(Ok(link)),
        startup,
        ledger,
        resolver,
        shutdown,
    )
    .await
}

/// What `/readyz` says while [`serve_connecting`]'s upstream is still
/// being reached and probed: the connecting side reports each setback
/// ("connection refused…") here. Cloning shares it.
#[derive(Debug, Clone)]
pub struct Startup(Arc<Mutex<String>>);

impl Default for Startup {
    fn default() -> Self {
        Startup(Arc::new(Mutex::new(
            "the upstream has not been probed yet".into(),
        )))
    }
}

impl Startup {
    /// Why the upstream is not ready yet, as `/readyz` will say it.
    pub fn report(&self, why: impl Into<String>) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = why.into();
    }

    fn reason(&self) -> String {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// [`serve`] of an upstream still to be connected: the listeners open
/// first, so that `/healthz` answers 200 and `/readyz` 503 (with
/// `startup`'s reason) while `connect` runs, and MCP requests get HTTP 503
/// with a JSON-RPC error instead of a refused connection. "listening on"
/// is announced once `connect` has given the probed upstream and the
/// endpoint serves; an `Err` from `connect` ends the server with it.
pub async fn serve_connecting(
    opts: HttpOptions,
    connect: impl std::future::Future<Output = Result<Link, String>> + Send,
    startup: Startup,
    ledger: Arc<dyn TaskLedger>,
    resolver: Arc<dyn PrincipalResolver>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    check_path(&opts.path).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let Port {
        listener,
        addr,
        starting,
        to_mcp,
        mcp,
        to_ops,
        admin,
        admin_closing,
    } = open_port(&opts, startup).await?;
    let slots = Arc::new(tokio::sync::Semaphore::new(opts.max_connections));
    let connections = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut connect = std::pin::pin!(connect);
    let mut shim: Option<HttpShim> = None;
    let mut failed: Option<String> = None;
    loop {
        let (tcp, peer) = tokio::select! {
            accepted = accept(&listener) => accepted,
            linked = &mut connect, if shim.is_none() => {
                match linked {
                    Ok(link) => {
                        let upstream_rev = link.revision();
                        let front = HttpShim::new(opts.clone(), link, ledger.clone(), resolver.clone())
                            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
                        go_live(&front, upstream_rev, &opts, addr, &to_mcp, &to_ops);
                        shim = Some(front);
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
                continue;
            }
            () = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::warn!(%peer, max = opts.max_connections,
                "connection closed: the connection limit (--max-connections) is reached");
            continue;
        };
        serve_connection(
            tcp,
            peer,
            slot,
            Switch(mcp.clone()),
            opts.read_timeout,
            &connections,
        );
    }
    if failed.is_none() {
        tracing::info!("shutting down: answering pending calls, stopping the upstream");
    }
    starting.closing();
    admin_closing.send_replace(true);
    // No new connections.
    drop(listener);
    shut_down(shim, connections, admin).await;
    match failed {
        Some(e) => Err(std::io::Error::other(e)),
        None => Ok(()),
    }
}

/// The next connection; an accept error (out of descriptors, say) is
/// waited out rather than spun on.
async fn accept(listener: &tokio::net::TcpListener) -> (tokio::net::TcpStream, SocketAddr) {
    loop {
        match listener.accept().await {
            Ok(accepted) => return accepted,
            Err(e) => {
                tracing::warn!(error = %e, "cannot accept a connection");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
}

/// The listeners, open before the upstream is probed, and the routes of
/// the starting server they serve until then.
struct Port {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    starting: Arc<Starting>,
    /// Where the MCP routes in force are switched.
    to_mcp: tokio::sync::watch::Sender<Routes>,
    mcp: tokio::sync::watch::Receiver<Routes>,
    /// Where the operations routes in force are switched.
    to_ops: tokio::sync::watch::Sender<Routes>,
    admin: Option<tokio::task::JoinHandle<()>>,
    admin_closing: tokio::sync::watch::Sender<bool>,
}

async fn open_port(opts: &HttpOptions, startup: Startup) -> std::io::Result<Port> {
    let (listener, admin) = bind_listeners(opts).await?;
    let addr = listener.local_addr()?;
    let starting = Arc::new(Starting {
        path: opts.path.clone(),
        startup,
        max_body_bytes: opts.max_body_bytes,
        read_timeout: opts.read_timeout,
    });
    let (to_mcp, mcp) = tokio::sync::watch::channel(Routes::browsable(
        starting.router(true),
        Router::new(),
        &opts.allowed_origins,
    ));
    let (to_ops, ops_now) = tokio::sync::watch::channel(Routes::same(starting.router(false)));
    // Not "listening on": scripts wait for that line to send requests.
    tracing::info!(%addr, "port open; /readyz answers 503 until the upstream is probed");
    crate::console::say(
        "mcp_tasks_shim",
        &format!(
            "mcp-tasks-shim: port open on http://{addr}; {READYZ_PATH} answers 503 until the upstream is probed"
        ),
        &format!("port open on http://{addr}"),
    );
    let admin_closing = tokio::sync::watch::Sender::new(false);
    let admin = match admin {
        Some(admin) => Some(serve_admin(
            admin,
            Switch(ops_now),
            admin_closing.subscribe(),
        )?),
        None => None,
    };
    Ok(Port {
        listener,
        addr,
        starting,
        to_mcp,
        mcp,
        to_ops,
        admin,
        admin_closing,
    })
}

/// On the signal (or a failed connect), the upstream is stopped first:
/// that answers the calls still waiting on it, so their HTTP requests can
/// finish. Long-lived streams (GET, `subscriptions/listen`, pending SSE)
/// are cut by `begin_shutdown`; whatever still runs gets the grace period.
async fn shut_down(
    shim: Option<HttpShim>,
    connections: hyper_util::server::graceful::GracefulShutdown,
    admin: Option<tokio::task::JoinHandle<()>>,
) {
    if let Some(shim) = &shim {
        shim.begin_shutdown("the shim is shutting down");
    }
    tokio::select! {
        () = connections.shutdown() => {}
        () = tokio::time::sleep(SHUTDOWN_GRACE) => {
            tracing::info!("open connections cut after the shutdown grace period");
        }
    }
    if let Some(admin) = admin {
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, admin).await;
    }
    if let Some(shim) = shim {
        shim.finish().await;
    }
}

/// The MCP listener and, with `--admin-listen`, the operations one; a
/// bind error names the flag whose address failed.
async fn bind_listeners(
    opts: &HttpOptions,
) -> std::io::Result<(tokio::net::TcpListener, Option<tokio::net::TcpListener>)> {
    let bind = |addr: SocketAddr, flag: &'static str| async move {
        tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| std::io::Error::new(e.kind(), format!("{flag} {addr}: {e}")))
    };
    let listener = bind(opts.listen, "--listen").await?;
    let admin = match opts.admin_listen {
        Some(addr) => Some(bind(addr, "--admin-listen").await?),
        None => None,
    };
    Ok((listener, admin))
}

/// The probed upstream's front takes over from the starting server: its
/// routes are switched in for every later request, and "listening on" is
/// announced.
fn go_live(
    front: &HttpShim,
    upstream_rev: Revision,
    opts: &HttpOptions,
    addr: SocketAddr,
    to_mcp: &tokio::sync::watch::Sender<Routes>,
    to_ops: &tokio::sync::watch::Sender<Routes>,
) {
    let ops: Router = front
        .metrics_router(METRICS_PATH)
        .merge(front.health_router());
    let mcp_routes = Routes::browsable(front.router(), ops.clone(), &opts.allowed_origins);
    to_mcp.send_modify(|r| *r = mcp_routes);
    to_ops.send_modify(|r| *r = Routes::same(ops));
    let path = &opts.path;
    tracing::info!(%addr, %path, upstream = %upstream_rev, "listening");
    let url = format!("http://{addr}{path}");
    crate::console::say(
        "mcp_tasks_shim",
        &format!("mcp-tasks-shim: listening on {url}"),
        &format!("listening on {url}"),
    );
}

/// One accepted connection, served on a task of its own under the
/// connection cap's `slot` and the graceful shutdown's watch.
fn serve_connection(
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    slot: tokio::sync::OwnedSemaphorePermit,
    routes: Switch,
    read_timeout: std::time::Duration,
    connections: &hyper_util::server::graceful::GracefulShutdown,
) {
    // SSE answers (legacy `tools/call`, `tasks/result`) go out in
    // several writes; without TCP_NODELAY, Nagle holds the later ones
    // until the client's delayed ACK, about 40 ms per answer.
    if let Err(e) = tcp.set_nodelay(true) {
        tracing::debug!(error = %e, "cannot set TCP_NODELAY");
    }
    let service = hyper_util::service::TowerToHyperService::new(tower::ServiceExt::map_request(
        routes,
        |r: axum::http::Request<hyper::body::Incoming>| r.map(axum::body::Body::new),
    ));
    // hyper's header read timeout needs a timer, which axum::serve
    // does not give it: a client trickling its headers, or sending
    // none, is dropped after `read_timeout`.
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(read_timeout)
        .serve_connection(hyper_util::rt::TokioIo::new(tcp), service);
    let conn = connections.watch(conn);
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(%peer, error = %e, "connection ended with an error");
        }
        drop(slot);
    });
}

/// The routes in force, read anew for each request: the starting
/// server's until the upstream is probed, then the front's.
#[derive(Debug, Clone)]
struct Switch(tokio::sync::watch::Receiver<Routes>);

/// One set of routes, with CORS for requests that carry an `Origin` (a
/// browser's) and without for the rest: CORS headers mean nothing to
/// other clients, and the layer (cloned for every request, headers added
/// to every answer) was about a tenth of the CPU of a relayed request.
#[derive(Debug, Clone)]
struct Routes {
    plain: Router,
    browser: Router,
}

impl Routes {
    /// `mcp` with CORS for browsers from `allowed` origins, and `other`
    /// routes beside it that need none.
    fn browsable(mcp: Router, other: Router, allowed: &[String]) -> Routes {
        Routes {
            browser: mcp.clone().layer(cors(allowed)).merge(other.clone()),
            plain: mcp.merge(other),
        }
    }

    /// Routes no browser calls.
    fn same(routes: Router) -> Routes {
        Routes {
            browser: routes.clone(),
            plain: routes,
        }
    }
}

impl tower::Service<axum::http::Request<axum::body::Body>> for Switch {
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = tower::util::Oneshot<Router, axum::http::Request<axum::body::Body>>;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: axum::http::Request<axum::body::Body>) -> Self::Future {
        let routes = self.0.borrow();
        let router = if req.headers().contains_key(axum::http::header::ORIGIN) {
            routes.browser.clone()
        } else {
            routes.plain.clone()
        };
        drop(routes);
        tower::ServiceExt::oneshot(router, req)
    }
}

/// What the server answers before its upstream is probed.
#[derive(Debug)]
struct Starting {
    path: String,
    startup: Startup,
    max_body_bytes: usize,
    read_timeout: std::time::Duration,
}

impl Starting {
    /// Health and readiness, and with `mcp` the endpoint too (refusing).
    fn router(self: &Arc<Self>, mcp: bool) -> Router {
        let ops = Router::new()
            .route(HEALTHZ_PATH, get(healthz_endpoint))
            .route(
                READYZ_PATH,
                get(|State(s): State<Arc<Starting>>| async move {
                    let reason = s.startup.reason();
                    let body = serde_json::json!({
                        "ready": false,
                        "upstream": "starting",
                        "reason": reason,
                    });
                    (StatusCode::SERVICE_UNAVAILABLE, axum::Json(body)).into_response()
                }),
            )
            .route(
                METRICS_PATH,
                get(|| async {
                    (
                        StatusCode::SERVICE_UNAVAILABLE,
                        "the upstream is not probed yet\n",
                    )
                }),
            );
        let ops = if mcp {
            ops.route(
                &self.path,
                get(not_ready_endpoint)
                    .post(not_ready_endpoint)
                    .delete(not_ready_endpoint),
            )
        } else {
            ops
        };
        ops.with_state(self.clone())
    }

    /// The server is shutting down before the upstream was ever probed.
    fn closing(&self) {
        self.startup.report("the shim is shutting down");
    }
}

/// An MCP request before the upstream is probed: HTTP 503 with a
/// JSON-RPC error (the request's id when its body can be read), and
/// `Retry-After`.
async fn not_ready_endpoint(State(s): State<Arc<Starting>>, body: axum::body::Body) -> Response {
    let read = axum::body::to_bytes(body, s.max_body_bytes);
    let id = match tokio::time::timeout(s.read_timeout, read).await {
        Ok(Ok(bytes)) if !bytes.is_empty() => Message::parse_bounded(&bytes, s.max_body_bytes)
            .ok()
            .and_then(|m| m.id().cloned()),
        _ => None,
    };
    let e = ShimError::Internal(format!(
        "the upstream is not ready yet ({}); retry shortly",
        s.startup.reason()
    ));
    let mut resp = error_response(StatusCode::SERVICE_UNAVAILABLE, id, e);
    resp.headers_mut().insert(
        axum::http::header::RETRY_AFTER,
        axum::http::HeaderValue::from_static("1"),
    );
    resp
}

/// Serves `ops` (health, readiness, metrics) on the admin listener until
/// the front begins shutting down. Announced after the MCP address, in a
/// line of its own, so that scripts reading "listening on" find the MCP
/// endpoint first.
fn serve_admin(
    listener: tokio::net::TcpListener,
    ops: Switch,
    mut closing: tokio::sync::watch::Receiver<bool>,
) -> std::io::Result<tokio::task::JoinHandle<()>> {
    let addr = listener.local_addr()?;
    tracing::info!(%addr, "admin endpoints listening");
    let url = format!("http://{addr}");
    crate::console::say(
        "mcp_tasks_shim",
        &format!(
            "mcp-tasks-shim: admin endpoints on {url} ({HEALTHZ_PATH}, {READYZ_PATH}, {METRICS_PATH})"
        ),
        &format!("admin endpoints on {url}"),
    );
    Ok(tokio::spawn(async move {
        let stop = async move {
            let _ = closing.wait_for(|c| *c).await;
        };
        if let Err(e) = axum::serve(listener, axum::ServiceExt::into_make_service(ops))
            .with_graceful_shutdown(stop)
            .await
        {
            tracing::warn!(error = %e, "the admin listener failed");
        }
    }))
}

impl App {
    /// Reads what the gauges show (sessions, tasks, waiters, the
    /// upstream) into the recorder, before a render.
    async fn refresh_gauges(&self) {
        use crate::telemetry as t;
        // Sessions the engine still holds, not just the open ones: a deleted
        // session that stayed in memory would be a leak.
        let bridged = self
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len();
        let relayed = self.relays.lock().unwrap_or_else(|p| p.into_inner()).len();
        let legacy = self
            .legacy
            .as_ref()
            .map_or(bridged, |f| f.sessions_in_memory().max(bridged));
        let modern = self.modern.as_ref().map_or(0, |f| f.sessions_in_memory());
        let tracked = self.modern.as_ref().map_or(0, |f| f.tracked_tasks());
        let held = self.ledger.len().await.unwrap_or_else(|e| {
            tracing::error!(error = %e, "metrics: could not count the ledger's tasks");
            0
        });
        let (pollers, listens, waiters) = self.legacy.as_ref().map_or((0, 0, 0), |f| {
            (f.active_pollers(), f.listen_streams(), f.waiters())
        });
        let waiters = waiters + self.modern.as_ref().map_or(0, |f| f.listen_streams());
        let up = self.upstream.readiness() == crate::upstream::Readiness::Up;
        let faults = self.upstream.faults();
        let m = &self.metrics;
        m.set_gauge("mcp_shim_ledger_tasks", &[], held as f64);
        m.set_gauge("mcp_shim_tracked_tasks", &[], tracked as f64);
        m.set_gauge("mcp_shim_legacy_sessions", &[], (legacy + relayed) as f64);
        m.set_gauge("mcp_shim_watched_tasks", &[], (pollers + listens) as f64);
        m.set_gauge(t::SESSIONS, &[("kind", "legacy")], legacy as f64);
        m.set_gauge(t::SESSIONS, &[("kind", "relayed")], relayed as f64);
        m.set_gauge(t::SESSIONS, &[("kind", "modern")], modern as f64);
        m.set_gauge(t::TASK_WAITERS, &[], waiters as f64);
        m.set_gauge(t::TASK_POLLERS, &[], pollers as f64);
        m.set_gauge(t::UPSTREAM_UP, &[], if up { 1.0 } else { 0.0 });
        m.set_counter(t::UPSTREAM_RESTARTS, faults.restarts);
        m.set_counter(t::UPSTREAM_PROBE_FAILURES, faults.probe_failures);
    }

    /// `stream`, ended when the front begins shutting down.
    fn until_closing<S: futures_util::Stream>(
        &self,
        stream: S,
    ) -> impl futures_util::Stream<Item = S::Item> + use<S> {
        let mut closing = self.closing.subscribe();
        futures_util::StreamExt::take_until(stream, async move {
            let _ = closing.wait_for(|c| *c).await;
        })
    }

    /// Ledger milliseconds: monotonic, and paused with tokio's time.
    fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }
}

/// The spec's DNS-rebinding rule: an `Origin` that is present must be one
/// we trust (loopback, or configured).
fn origin_ok(app: &App, headers: &HeaderMap) -> bool {
    headers::header(headers, axum::http::header::ORIGIN)
        .is_none_or(|o| origin_allowed(&app.opts.allowed_origins, o))
}

/// A loopback origin, or one of `allowed` (`--allow-origin`).
fn origin_allowed(allowed: &[String], origin: &str) -> bool {
    if allowed.iter().any(|o| o == origin) {
        return true;
    }
    let host = origin
        .split_once("://")
        .map_or(origin, |(_, rest)| rest)
        .trim_end_matches('/');
    let host = match host.rsplit_once(':') {
        Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    };
    matches!(host, "localhost" | "127.0.0.1" | "[::1]")
}

/// CORS for the MCP endpoint: the origins [`origin_ok`] admits may call
/// it from a browser (preflight answered, `Mcp-Session-Id` readable);
/// others get no CORS headers, and their requests 403 as before.
fn cors(allowed: &[String]) -> tower_http::cors::CorsLayer {
    use axum::http::{HeaderName, Method, header};
    let allowed = allowed.to_vec();
    let mcp = |name: &'static str| HeaderName::from_static(name);
    tower_http::cors::CorsLayer::new()
        .allow_origin(tower_http::cors::AllowOrigin::predicate(
            move |origin, _| origin.to_str().is_ok_and(|o| origin_allowed(&allowed, o)),
        ))
        .allow_methods([Method::GET, Method::POST, Method::DELETE])
        .allow_headers([
            header::CONTENT_TYPE,
            header::ACCEPT,
            header::AUTHORIZATION,
            mcp("last-event-id"),
            mcp("mcp-session-id"),
            mcp("mcp-protocol-version"),
            mcp("mcp-method"),
            mcp("mcp-name"),
        ])
        .expose_headers([mcp("mcp-session-id"), header::WWW_AUTHENTICATE])
        .max_age(std::time::Duration::from_secs(600))
}

fn forbidden_origin() -> Response {
    let e = ShimError::InvalidRequest("Origin not allowed".into());
    error_response(StatusCode::FORBIDDEN, None, e)
}

/// 401 for credentials the resolver refuses.
fn unauthorized(why: String) -> Response {
    tracing::info!(%why, "request refused: 401");
    let resp = error_response(StatusCode::UNAUTHORIZED, None, ShimError::Unauthorized(why));
    let challenge = [("www-authenticate", "Bearer error=\"invalid_token\"")];
    (challenge, resp).into_response()
}

/// A request's whole body, within `--read-timeout` and
/// `--max-body-bytes`. One that cannot be read is still answered in
/// JSON-RPC, so clients can tell what went wrong: 413 when it is too
/// large, 408 when it is too slow (a client trickling its body held the
/// connection and the request open for as long as it liked). A declared
/// `Content-Length` above the limit is answered before any of the body is
/// read: waiting for a body that will be refused anyway held the request
/// until the read timeout when the client sent none.
async fn read_body(
    opts: &HttpOptions,
    headers: &HeaderMap,
    body: axum::body::Body,
) -> Result<Bytes, Box<Response>> {
    let declared = headers::header(headers, axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.parse::<u64>().ok());
    if let Some(len) = declared.filter(|len| *len > opts.max_body_bytes as u64) {
        let e = ShimError::InvalidRequest(format!(
            "the request body ({len} bytes, Content-Length) is above {} bytes (--max-body-bytes)",
            opts.max_body_bytes
        ));
        return Err(Box::new(error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            None,
            e,
        )));
    }
    let read = axum::body::to_bytes(body, opts.max_body_bytes);
    match tokio::time::timeout(opts.read_timeout, read).await {
        Ok(Ok(bytes)) => Ok(bytes),
        // Over the limit (or the client went away, and reads no answer).
        Ok(Err(e)) => {
            let e = ShimError::InvalidRequest(format!(
                "the request body could not be read within {} bytes (--max-body-bytes): {e}",
                opts.max_body_bytes
            ));
            Err(Box::new(error_response(
                StatusCode::PAYLOAD_TOO_LARGE,
                None,
                e,
            )))
        }
        Err(_) => {
            tracing::info!("a request body did not arrive within the read timeout");
            let e = ShimError::InvalidRequest(format!(
                "the request body did not arrive within {} s",
                opts.read_timeout.as_secs_f64()
            ));
            Err(Box::new(error_response(
                StatusCode::REQUEST_TIMEOUT,
                None,
                e,
            )))
        }
    }
}

/// Request headers the shim reads one value of.
const SINGLE_VALUED: [HeaderName; 5] = [
    axum::http::header::ORIGIN,
    headers::MCP_SESSION_ID,
    headers::MCP_PROTOCOL_VERSION,
    headers::MCP_METHOD,
    headers::MCP_NAME,
];

/// What every request passes before anything else: the Origin rule and
/// the credentials check. The request's principal, resolved here once for
/// everything that follows, or the refusal.
fn admit(
    app: &App,
    headers: &HeaderMap,
    extensions: &axum::http::Extensions,
) -> Result<Option<Principal>, Box<Response>> {
    // Headers that hold one value: two copies are refused rather than
    // read as the first (which one a proxy or client put first is not
    // something to build on).
    for name in &SINGLE_VALUED {
        if headers::doubled(headers, name) {
            let e = ShimError::InvalidRequest(format!("more than one {name} header"));
            return Err(Box::new(error_response(StatusCode::BAD_REQUEST, None, e)));
        }
    }
    if !origin_ok(app, headers) {
        return Err(Box::new(forbidden_origin()));
    }
    app.resolver
        .authenticate(headers, extensions)
        .map_err(|why| Box::new(unauthorized(why)))
}

/// The POST route. The request is taken apart, not extracted: the
/// `HeaderMap` and `Extensions` extractors clone what they extract.
async fn post_endpoint(State(app): State<Arc<App>>, req: axum::extract::Request) -> Response {
    let (parts, body) = req.into_parts();
    post(app, parts.headers, parts.extensions, body).await
}

async fn post(
    app: Arc<App>,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
    body: axum::body::Body,
) -> Response {
    use tracing::Instrument;
    let started = std::time::Instant::now();
    let mut seen = Seen::request();
    let span = seen.span.clone();
    let resp = post_routed(&app, headers, extensions, body, &mut seen)
        .instrument(span)
        .await;
    observed(&app, seen, started, resp)
}

/// The POST endpoint, noting in `seen` what it learns of the request.
async fn post_routed(
    app: &Arc<App>,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
    body: axum::body::Body,
    seen: &mut Seen,
) -> Response {
    let app = app.clone();
    let principal = match admit(&app, &headers, &extensions) {
        Ok(principal) => principal,
        Err(refused) => return *refused,
    };
    let body = match read_body(&app.opts, &headers, body).await {
        Ok(body) => body,
        Err(refused) => return *refused,
    };
    let msg = match Message::parse_bounded(&body, app.opts.max_body_bytes) {
        Ok(m) => m,
        Err(e) => return error_response(StatusCode::BAD_REQUEST, None, e),
    };
    // A 2026-07-28 request (its transport's version header) has no
    // session, and that transport has an `Mcp-Session-Id` ignored: left
    // over by a client library, it is no reason to refuse the request.
    let modern_header =
        headers::header(&headers, &headers::MCP_PROTOCOL_VERSION) == Some(revision::MODERN_VERSION);
    if let Some(sid) = headers::header(&headers, &headers::MCP_SESSION_ID)
        && !modern_header
    {
        let sid = sid.to_owned();
        seen.saw(Revision::Legacy, &msg);
        if legacy_relay::holds(&app, &sid) {
            return legacy_session::post::<legacy_relay::RelaySession>(
                app, &sid, msg, &headers, principal,
            )
            .await;
        }
        return legacy_session::post::<legacy::HttpSession>(app, &sid, msg, &headers, principal)
            .await;
    }
    if msg.method() == Some("initialize") {
        seen.saw(Revision::Legacy, &msg);
        if let Err(refused) = initialize_version(&headers, &msg, seen) {
            return *refused;
        }
        return legacy::initialize(app, msg, principal).await;
    }
    let signal = match revision::detect_client(&msg) {
        ClientSignal::Ambiguous => revision::detect_http("POST", headers_iter(&headers)),
        s => s,
    };
    if let ClientSignal::Is(revision) = signal {
        seen.saw(revision, &msg);
    }
    match signal {
        ClientSignal::Is(Revision::Legacy) | ClientSignal::Ambiguous => error_response(
            StatusCode::BAD_REQUEST,
            msg.id().cloned(),
            ShimError::InvalidRequest(
                "missing Mcp-Session-Id: a 2025-11-25 client must initialize first; a 2026-07-28 client must send per-request _meta".into(),
            ),
        ),
        _ => {
            seen.saw(Revision::Modern, &msg);
            modern::post(app, msg, body, &headers, principal).await
        }
    }
}

/// The version header of an `initialize`: a client that says it speaks
/// 2026-07-28 gets what a 2026-07-28 server answers (404, no such method),
/// not a 2025-11-25 session it did not ask for; the 2025-11-25 transport
/// answers an unsupported version with 400.
fn initialize_version(
    headers: &HeaderMap,
    msg: &Message,
    seen: &mut Seen,
) -> Result<(), Box<Response>> {
    match headers::header(headers, &headers::MCP_PROTOCOL_VERSION) {
        Some(v) if v == revision::MODERN_VERSION => {
            seen.saw(Revision::Modern, msg);
            let e = ShimError::MethodNotFound(format!(
                "initialize is not a {v} method (MCP-Protocol-Version says {v}); such a client starts with server/discover"
            ));
            Err(Box::new(error_response(
                StatusCode::NOT_FOUND,
                msg.id().cloned(),
                e,
            )))
        }
        Some(v) if !revision::LEGACY_VERSIONS.contains(&v) => {
            let e = ShimError::InvalidRequest(format!(
                "unsupported MCP-Protocol-Version {v:?} (one of {}, or {})",
                revision::LEGACY_VERSIONS.join(", "),
                revision::MODERN_VERSION
            ));
            Err(Box::new(error_response(
                StatusCode::BAD_REQUEST,
                msg.id().cloned(),
                e,
            )))
        }
        _ => Ok(()),
    }
}

/// A GET or DELETE names its session; one without a principal it may use
/// is answered (and counted) here.
fn admit_session_request(
    app: &Arc<App>,
    headers: &HeaderMap,
    extensions: &axum::http::Extensions,
) -> Result<(Option<Principal>, Option<String>), Box<Response>> {
    let principal = admit(app, headers, extensions).map_err(|refused| {
        Box::new(observed(
            app,
            Seen::default(),
            std::time::Instant::now(),
            *refused,
        ))
    })?;
    let sid = headers::header(headers, &headers::MCP_SESSION_ID).map(str::to_owned);
    Ok((principal, sid))
}

/// GET (the session's stream) or DELETE (its end) of the 2025-11-25
/// session the request names, answered by that session's kind.
async fn session_endpoint(
    State(app): State<Arc<App>>,
    method: axum::http::Method,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
) -> Response {
    let (principal, sid) = match admit_session_request(&app, &headers, &extensions) {
        Err(refused) => return *refused,
        Ok((principal, Some(sid))) => (principal, sid),
        Ok((_, None)) => return method_not_allowed(),
    };
    if legacy_relay::holds(&app, &sid) {
        legacy_session::get_or_delete::<legacy_relay::RelaySession>(app, method, &sid, principal)
            .await
    } else {
        legacy_session::get_or_delete::<legacy::HttpSession>(app, method, &sid, principal).await
    }
}

async fn metrics_endpoint(State(app): State<Arc<App>>) -> Response {
    app.refresh_gauges().await;
    let text = app.metrics.render();
    ([("content-type", "text/plain; version=0.0.4")], text).into_response()
}

async fn healthz_endpoint() -> Response {
    axum::Json(serde_json::json!({"status": "alive"})).into_response()
}

/// What a load balancer asks before sending traffic: whether requests can
/// reach the upstream now, and if not, why.
async fn readyz_endpoint(State(app): State<Arc<App>>) -> Response {
    let readiness = if *app.closing.borrow() {
        crate::upstream::Readiness::Down("the shim is shutting down".into())
    } else {
        app.upstream.check_readiness().await
    };
    let mut body = serde_json::json!({
        "ready": readiness.why_not().is_none(),
        "upstream": readiness.name(),
    });
    let status = match readiness.why_not() {
        None => StatusCode::OK,
        Some(why) => {
            body["reason"] = why.into();
            StatusCode::SERVICE_UNAVAILABLE
        }
    };
    (status, axum::Json(body)).into_response()
}

fn method_not_allowed() -> Response {
    (StatusCode::METHOD_NOT_ALLOWED, [("allow", "POST")]).into_response()
}

fn headers_iter(headers: &HeaderMap) -> impl Iterator<Item = (&str, &str)> {
    headers
        .iter()
        .filter_map(|(k, v)| v.to_str().ok().map(|v| (k.as_str(), v)))
}

/// One message as an SSE `message` event (the form both revisions use).
pub(crate) fn sse_event(
    msg: &Message,
) -> Result<axum::response::sse::Event, std::convert::Infallible> {
    Ok(axum::response::sse::Event::default()
        .event("message")
        .data(msg.to_json()))
}

/// Whether the client takes an SSE answer (`Accept` names
/// `text/event-stream`).
pub(crate) fn accepts_sse(hdrs: &HeaderMap) -> bool {
    headers::header(hdrs, axum::http::header::ACCEPT)
        .is_some_and(|a| a.contains("text/event-stream"))
}

/// Whether `m` is the answer (result or error) to request `id`.
pub(crate) fn is_answer_to(m: &Message, id: &crate::jsonrpc::Id) -> bool {
    matches!(m, Message::Response(_) | Message::Error(_)) && m.id() == Some(id)
}

/// An SSE answer to request `id`: `first`, then what `rx` carries, the
/// stream ending right after the answer. `hold` lives as long as the
/// stream (what keeps `rx` fed, such as an engine session). `hang_up`
/// runs if the stream is dropped before the answer went out (the client
/// closed it), and is disarmed by the answer.
pub(crate) fn sse_until_answer<H: Send + 'static>(
    first: &Message,
    rx: tokio::sync::mpsc::UnboundedReceiver<Message>,
    id: crate::jsonrpc::Id,
    hold: H,
    hang_up: Option<crate::bridge::IfDropped>,
) -> Response {
    let answered = SseAnswer::default();
    let first = futures_util::stream::once(std::future::ready(sse_event(first)));
    let rest = futures_util::stream::unfold(Some((rx, hold, hang_up)), {
        let answered = answered.clone();
        move |state| {
            let (id, answered) = (id.clone(), answered.clone());
            async move {
                let (mut rx, hold, hang_up) = state?;
                let m = rx.recv().await?;
                if !is_answer_to(&m, &id) {
                    return Some((sse_event(&m), Some((rx, hold, hang_up))));
                }
                if let Some(h) = hang_up {
                    h.disarm();
                }
                answered.saw(&m);
                Some((sse_event(&m), None))
            }
        }
    });
    let mut resp = axum::response::sse::Sse::new(futures_util::StreamExt::chain(first, rest))
        .keep_alive(axum::response::sse::KeepAlive::default())
        .into_response();
    resp.extensions_mut().insert(answered);
    resp
}

/// The error code of the answer that ends an SSE answer, once it has been
/// sent (0: none yet, or no error), for the endpoint to count when the
/// stream ends.
#[derive(Debug, Clone, Default)]
struct SseAnswer(Arc<std::sync::atomic::AtomicI64>);

impl SseAnswer {
    fn saw(&self, m: &Message) {
        if let Message::Error(e) = m {
            self.0
                .store(e.error.code, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn code(&self) -> Option<i64> {
        Some(self.0.load(std::sync::atomic::Ordering::Relaxed)).filter(|c| *c != 0)
    }
}

/// A JSON body response.
pub(crate) fn json_response(status: StatusCode, msg: &Message) -> Response {
    // Bytes, not a `String`: checking serde_json's output for UTF-8 again
    // was a thousand instructions of every answer.
    let mut body = Vec::with_capacity(512);
    msg.write_json(&mut body);
    let mut resp = json_body(status, body);
    if let Message::Error(e) = msg {
        resp.extensions_mut().insert(AnsweredError(e.error.code));
    }
    resp
}

/// [`json_response`] of the answer to `id` with `outcome`: a result kept
/// as text is written as it is ([`Reply::write_answer`]).
pub(crate) fn reply_response(id: Id, outcome: Result<Reply, ErrorObject>) -> Response {
    match outcome {
        Ok(reply) => {
            let mut body = Vec::with_capacity(512);
            reply.write_answer(&mut body, &id);
            json_body(StatusCode::OK, body)
        }
        Err(error) => json_response(StatusCode::OK, &Message::error(Some(id), error)),
    }
}

/// A JSON body with its content type.
fn json_body(status: StatusCode, body: Vec<u8>) -> Response {
    (
        status,
        [(
            axum::http::header::CONTENT_TYPE,
            axum::http::HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// The JSON-RPC error code a JSON answer carries, left on the response by
/// [`json_response`] for the endpoint to count (`mcp_shim_errors_total`).
#[derive(Debug, Clone, Copy)]
struct AnsweredError(i64);

/// What the endpoint learnt of a request, for its metrics and its span.
#[derive(Debug)]
struct Seen {
    revision: Option<Revision>,
    method: Option<&'static str>,
    /// `mcp.request`, with `revision`, `method` and `task_id` recorded as
    /// they become known (exported over OTLP with the `otel` feature).
    span: tracing::Span,
}

impl Default for Seen {
    fn default() -> Self {
        Seen {
            revision: None,
            method: None,
            span: tracing::Span::none(),
        }
    }
}

impl Seen {
    fn request() -> Seen {
        use tracing::field::Empty;
        Seen {
            span: tracing::info_span!(
                "mcp.request",
                revision = Empty,
                method = Empty,
                task_id = Empty
            ),
            ..Seen::default()
        }
    }

    fn saw(&mut self, revision: Revision, msg: &Message) {
        let method = crate::telemetry::method_label(msg.method().unwrap_or("(response)"));
        self.revision = Some(revision);
        self.method = Some(method);
        self.span.record("revision", revision.version());
        self.span.record("method", method);
        if let Some(task_id) = msg
            .params()
            .and_then(|p| p.get("taskId"))
            .and_then(serde_json::Value::as_str)
        {
            self.span.record("task_id", task_id);
        }
    }
}

/// Counts the error `resp` answers, if any, and times the request (a
/// request of a known revision and method) until its body has been sent
/// or the client went away.
fn observed(app: &Arc<App>, seen: Seen, started: std::time::Instant, resp: Response) -> Response {
    if let Some(AnsweredError(code)) = resp.extensions().get::<AnsweredError>() {
        app.metrics.count_error(seen.revision, *code);
    }
    let (Some(revision), Some(method)) = (seen.revision, seen.method) else {
        return resp;
    };
    let timer = crate::telemetry::RequestTimer::new(app.metrics.clone(), revision, method, started);
    let sse = resp.extensions().get::<SseAnswer>().cloned();
    resp.map(|body| {
        axum::body::Body::new(TimedBody {
            body,
            timer: Some(timer),
            sse,
        })
    })
}

/// A response body that records its request's latency once it has been
/// sent whole (or dropped: the client went away).
struct TimedBody {
    body: axum::body::Body,
    timer: Option<crate::telemetry::RequestTimer>,
    /// An SSE answer's last message, whose error is counted at the end.
    sse: Option<SseAnswer>,
}

impl TimedBody {
    /// The request is over: its latency recorded, its SSE error counted.
    fn finish(&mut self) {
        if let Some(timer) = self.timer.take() {
            if let Some(code) = self.sse.take().and_then(|a| a.code()) {
                timer.count_error(code);
            }
            drop(timer);
        }
    }
}

impl Drop for TimedBody {
    fn drop(&mut self) {
        self.finish();
    }
}

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let polled = std::pin::Pin::new(&mut self.body).poll_frame(cx);
        if matches!(polled, std::task::Poll::Ready(None)) {
            self.finish();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

fn error_response(status: StatusCode, id: Option<crate::jsonrpc::Id>, e: ShimError) -> Response {
    json_response(status, &Message::error(id, e.to_error_object()))
}

/// [`crate::error::modern_http_status`] as axum's type.
pub(crate) fn modern_status(code: i64) -> StatusCode {
    StatusCode::from_u16(crate::error::modern_http_status(code)).unwrap_or(StatusCode::OK)
}
