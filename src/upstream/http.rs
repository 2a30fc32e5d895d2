//! An upstream reached over Streamable HTTP, either revision.
//!
//! Modern upstreams get one POST per request with the 2026-07-28 headers
//! (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`). Legacy upstreams get
//! the 2025-11-25 session: the `Mcp-Session-Id` minted on `initialize` is
//! sent on every later request, and a GET stream carries unsolicited
//! messages. Answers may come as JSON or as SSE; anything on an SSE stream
//! that is not the awaited answer (notifications, server→client requests)
//! becomes an [`UpstreamEvent`].

use std::sync::{Arc, Mutex};
use std::time::Duration;

mod transport;

use async_trait::async_trait;
use axum::body::{Body, Bytes};
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Response, StatusCode};
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::Readiness;
use super::{RawAnswer, RpcResult, StreamEvent, Upstream, UpstreamEvent, UpstreamStream, lock};
use crate::driver::http::headers;
use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, Message, Peeked};
use crate::revision::{self, LEGACY_VERSION, MODERN_VERSION, Revision};
use crate::translate::session::ModernMeta;
use crate::transport::record::{Recorder, SessionLabels};
use crate::wire::modern::DetailedTask;
pub use transport::BoxError;
use transport::InProcess;
use transport::{Transport, chain};

/// An answer as the transport hands it over: its head, and its body
/// still streaming.
type Answer = Response<Body>;

/// A Streamable HTTP upstream.
#[derive(Debug)]
pub struct HttpUpstream {
    /// Where requests go: the network, or a service in this process.
    transport: Box<dyn Transport>,
    /// What the logs call it.
    url: String,
    revision: Revision,
    session: Mutex<Option<String>>,
    /// Legacy: the `initialize` params last sent, to open a new session
    /// with when the server no longer knows ours (see
    /// [`HttpUpstream::renew_session`]).
    handshake: Mutex<Option<Value>>,
    /// Legacy: `notifications/initialized` was sent in the session.
    initialized: std::sync::atomic::AtomicBool,
    /// One session renewal at a time: requests that hit the same stale
    /// session wait for it, then retry in the new one.
    renewal: tokio::sync::Mutex<()>,
    events: mpsc::UnboundedSender<UpstreamEvent>,
    next_id: std::sync::atomic::AtomicI64,
    /// Client requests waiting on an answer: liveness is checked only
    /// while there are some.
    in_flight: std::sync::atomic::AtomicUsize,
    /// Sent to each time a liveness check goes unanswered, with why: every
    /// request in flight then fails with that reason.
    hangs: tokio::sync::watch::Sender<String>,
    /// The last request could not reach the server: logged once when that
    /// starts and once when it ends, not for every request in between.
    unreachable: std::sync::atomic::AtomicBool,
    /// Set once probed: before, a server out of reach is the error
    /// [`connect`] returns, not a log line of its own.
    probed: bool,
    /// The last reachability check of `/readyz` and when it was made:
    /// probes arriving closer together than [`READY_CHECK_REUSE`] share it.
    ready_check: tokio::sync::Mutex<Option<(tokio::time::Instant, Readiness)>>,
    /// Server→client requests that came on the answer stream of a call a
    /// front marked ([`super::CALL_ORIGIN`]): request id → the call's mark,
    /// until the front asks ([`Upstream::origin_of`]) or answers.
    origins: Mutex<std::collections::HashMap<Id, u64>>,
    /// `--record-upstream`: every message posted and every one read back,
    /// labelled by the upstream session (`session-1`… for a 2025-11-25
    /// upstream's `Mcp-Session-Id`s; `upstream` outside one, as on a
    /// stateless 2026-07-28 upstream).
    record: Option<(Recorder, SessionLabels)>,
}

/// How long a `/readyz` reachability check of the server holds; one
/// request to the server per this, however often `/readyz` is asked.
const READY_CHECK_REUSE: Duration = Duration::from_secs(1);
/// Longest a reachability check may take (a server that accepts and never
/// answers is not ready).
const READY_CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// Most remembered origins: beyond, the oldest are not worth keeping (a
/// front asks at once, or never).
const MAX_ORIGINS: usize = 4096;

/// Counts a request in flight for as long as it lives.
struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(n: &'a std::sync::atomic::AtomicUsize) -> Self {
        n.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        InFlight(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Sends a 2025-11-25 upstream `notifications/cancelled` for request `id`
/// when dropped before it is disarmed (its `upstream` taken).
struct CancelUnanswered {
    upstream: Option<Arc<HttpUpstream>>,
    id: Id,
}

impl Drop for CancelUnanswered {
    fn drop(&mut self) {
        // Outside a runtime (the process ending) nothing can be sent.
        if let Some(up) = self.upstream.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            let params = serde_json::json!({
                "requestId": self.id,
                "reason": "the requester no longer waits for the answer",
            });
            let _ = up.notify("notifications/cancelled", params);
        }
    }
}

/// A connected HTTP upstream and what the probe learnt.
#[derive(Debug)]
pub struct HttpLink {
    /// Requests go here.
    pub upstream: Arc<HttpUpstream>,
    /// Notifications and server requests.
    pub events: mpsc::UnboundedReceiver<UpstreamEvent>,
    /// The revision it speaks.
    pub revision: Revision,
    /// Its `server/discover` result (modern upstreams).
    pub discover: Value,
}

/// Connects to `url` and probes its revision with a modern POST: a
/// `DiscoverResult` or a recognised modern error means 2026-07-28,
/// anything else 2025-11-25.
pub async fn connect(url: &str, request_timeout: Duration) -> Result<HttpLink, ShimError> {
    connect_recorded(url, request_timeout, None).await
}

/// [`connect`], recording every message to and from the upstream (the
/// probe included) to `record` (`--record-upstream`).
pub async fn connect_recorded(
    url: &str,
    request_timeout: Duration,
    record: Option<Recorder>,
) -> Result<HttpLink, ShimError> {
    let client = reqwest::Client::builder()
        .timeout(request_timeout)
        .build()
        .map_err(|e| ShimError::Upstream(format!("cannot build the HTTP client: {e}")))?;
    let parsed = check_url(url)?;
    let transport = transport::Reqwest {
        url: parsed,
        client,
        label: url.to_owned(),
    };
    connect_over(Box::new(transport), record).await
}

/// Connects to a Streamable HTTP server that is a tower service of this
/// process (an rmcp `StreamableHttpService`, an axum `Router`, any
/// `Service<http::Request<B>>`), called directly: no socket, no encoding
/// beyond the JSON bodies. `uri` is where the service sees its requests
/// (the path it serves, `/` behind `nest_service`) and `host` the `Host`
/// header to send (servers that check it, such as rmcp's, need one they
/// allow). Answers are read as from [`connect`]'s: JSON or SSE. Each
/// exchange is bounded by `request_timeout`.
pub async fn connect_service<S, B, R>(
    service: S,
    uri: axum::http::Uri,
    host: Option<HeaderValue>,
    request_timeout: Duration,
) -> Result<HttpLink, ShimError>
where
    S: tower::Service<axum::http::Request<B>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: From<Bytes> + Send + 'static,
    R: axum::body::HttpBody<Data = Bytes> + Send + 'static,
    R::Error: Into<BoxError>,
{
    let transport = InProcess::new(service, uri, host, request_timeout);
    connect_over(Box::new(transport), None).await
}

/// Probes the server behind `transport` (a modern POST: a
/// `DiscoverResult` or a recognised modern error means 2026-07-28,
/// anything else 2025-11-25) and bundles the upstream.
async fn connect_over(
    transport: Box<dyn Transport>,
    record: Option<Recorder>,
) -> Result<HttpLink, ShimError> {
    let url = transport.describe().to_owned();
    let (tx, events) = mpsc::unbounded_channel();
    let mut up = HttpUpstream {
        transport,
        url: url.clone(),
        revision: Revision::Modern,
        session: Mutex::new(None),
        handshake: Mutex::new(None),
        initialized: false.into(),
        renewal: tokio::sync::Mutex::new(()),
        events: tx,
        next_id: 1.into(),
        in_flight: 0.into(),
        hangs: tokio::sync::watch::Sender::new(String::new()),
        unreachable: false.into(),
        probed: false,
        ready_check: tokio::sync::Mutex::new(None),
        origins: Mutex::new(std::collections::HashMap::new()),
        record: record.map(|r| (r, SessionLabels::default())),
    };
    let info = json!({"name": "mcp-tasks-shim", "version": env!("CARGO_PKG_VERSION")});
    let probe = revision::probe_request(Id::Num(0), &info);
    // Unreachable is not "no answer, so legacy": the revision is learnt
    // once, here, and a wrong guess would hold for the whole run.
    let resp = up
        .send_post(&probe, probe.to_json().into_bytes(), None)
        .await
        .map_err(|e| {
            // Its cause without a second "Upstream error:" prefix.
            let cause = match e {
                ShimError::Upstream(cause) => cause,
                other => other.to_string(),
            };
            ShimError::Upstream(format!(
                "cannot probe {url}: {cause}; the shim learns the upstream's revision at start, so start the server first"
            ))
        })?;
    let answer = up.answer_of(&probe, resp).await.ok().flatten();
    let (revision, discover) = revision::classify_probe(answer.as_ref()).into_revision();
    tracing::info!(%url, %revision, "HTTP upstream probed");
    up.revision = revision;
    up.probed = true;
    Ok(HttpLink {
        upstream: Arc::new(up),
        events,
        revision,
        discover,
    })
}

/// `url` parsed as [`connect`] takes it, or why it cannot be: a mistake
/// no wait for the server mends.
pub fn check_url(url: &str) -> Result<reqwest::Url, ShimError> {
    if !url.contains("://") {
        return Err(ShimError::Upstream(format!(
            "invalid upstream URL {url:?}: no scheme; add http:// (for example http://{url})"
        )));
    }
    reqwest::Url::parse(url)
        .map_err(|e| ShimError::Upstream(format!("invalid upstream URL {url:?}: {e}")))
}

impl HttpUpstream {
    /// While client requests wait, asks every `every` for a sign of life
    /// (`server/discover` on a modern upstream, `ping` in a legacy
    /// session); one unanswered for `timeout` fails every request in
    /// flight with "upstream stopped answering", as a hung child does.
    /// Requests made afterwards are tried again: an HTTP server may come
    /// back by itself. Ends when the upstream is dropped.
    pub fn watch_liveness(self: &Arc<Self>, every: Duration, timeout: Duration) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(up) = weak.upgrade() else { return };
                if up.in_flight.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                    continue;
                }
                let (method, params) = match up.revision {
                    Revision::Modern => {
                        let info =
                            json!({"name": "mcp-tasks-shim", "version": env!("CARGO_PKG_VERSION")});
                        let probe = revision::probe_request(Id::Num(0), &info);
                        (
                            "server/discover",
                            probe.params().cloned().unwrap_or_default(),
                        )
                    }
                    Revision::Legacy => ("ping", json!({})),
                };
                let id = up.next_id();
                let check = Message::request(id, method, params);
                // Any answer, even an error or a refused connection (which
                // fails the requests by itself), proves it is not hanging.
                if tokio::time::timeout(timeout, up.post(&check))
                    .await
                    .is_err()
                {
                    let reason = format!(
                        "upstream stopped answering: no reply to {method} within {} ms",
                        timeout.as_millis()
                    );
                    tracing::error!(url = %up.url, %reason, "HTTP upstream hangs");
                    up.hangs.send_replace(reason);
                }
            }
        });
    }

    /// Runs one client request, failed early if a liveness check finds the
    /// upstream hanging meanwhile.
    async fn watched<T>(
        &self,
        request: impl std::future::Future<Output = Result<T, ShimError>>,
    ) -> Result<T, ShimError> {
        let mut hangs = self.hangs.subscribe();
        let _counted = InFlight::new(&self.in_flight);
        tokio::select! {
            r = request => r,
            Ok(()) = hangs.changed() => Err(ShimError::Upstream(hangs.borrow().clone())),
        }
    }

    /// POSTs one message; returns the answer to it (for requests), sending
    /// everything else that arrives on the stream out as events.
    async fn post(&self, msg: &Message) -> Result<Option<Message>, ShimError> {
        self.post_as(msg, msg.to_json().into_bytes()).await
    }

    /// [`HttpUpstream::post`] of `body`, the encoding of `msg` (which gives
    /// the headers and the id whose answer is awaited).
    async fn post_as(&self, msg: &Message, body: Vec<u8>) -> Result<Option<Message>, ShimError> {
        let resp = self.send_post(msg, body, None).await?;
        self.answer_of(msg, resp).await
    }

    /// The answer to `msg` in `resp`: `None` for a notification or an
    /// accepted message.
    async fn answer_of(&self, msg: &Message, resp: Answer) -> Result<Option<Message>, ShimError> {
        let status = resp.status();
        if status == StatusCode::ACCEPTED || msg.id().is_none() {
            return Ok(None);
        }
        let id = msg.id().cloned();
        if is_sse(&resp) {
            return self.read_sse(resp, id.as_ref()).await.map(Some);
        }
        self.read_json(resp).await.map(Some)
    }

    /// Sends one POST of `body`, the encoding of `msg` (a longer `timeout`
    /// than the client's for long-lived requests), with the headers `msg`
    /// calls for, and keeps the session id it may mint.
    async fn send_post(
        &self,
        msg: &Message,
        body: impl Into<Bytes>,
        timeout: Option<Duration>,
    ) -> Result<Answer, ShimError> {
        let method = msg.method().unwrap_or_default();
        let name = headers::name_source(method, msg.params());
        self.send_body(method, name, body.into(), timeout).await
    }

    /// Sends one POST of an encoded body with the headers of the revision
    /// spoken and keeps the session id it may mint.
    async fn send_body(
        &self,
        method: &str,
        name: Option<&str>,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> Result<Answer, ShimError> {
        if self.revision == Revision::Modern
            && (method.is_empty() || !headers::is_visible_ascii(method))
        {
            // It could not travel in Mcp-Method, and no 2026-07-28 server
            // has a method by that name: answered as the server would.
            return Err(ShimError::MethodNotFound(format!(
                "{method:?} (a method name outside visible ASCII cannot be sent to a 2026-07-28 server)"
            )));
        }
        // Names and fixed values as constants: parsing and checking them
        // anew was a few thousand instructions of every relayed request.
        let mut hdrs = HeaderMap::with_capacity(5);
        hdrs.insert(CONTENT_TYPE, JSON);
        hdrs.insert(ACCEPT, JSON_OR_SSE);
        match self.revision {
            Revision::Modern => {
                hdrs.insert(MCP_PROTOCOL_VERSION, MODERN_VERSION_VALUE);
                hdrs.insert(MCP_METHOD, header_value(method)?);
                if let Some(name) = name {
                    hdrs.insert(MCP_NAME, header_value(&headers::encode_sentinel(name))?);
                }
            }
            Revision::Legacy => {
                hdrs.insert(MCP_PROTOCOL_VERSION, LEGACY_VERSION_VALUE);
                if let Some(sid) = self.session_id() {
                    hdrs.insert(MCP_SESSION_ID, header_value(&sid)?);
                }
            }
        }
        // A 2025-11-25 `initialize` is recorded once its answer named the
        // session it opened.
        let opening = method == "initialize" && self.revision == Revision::Legacy;
        let posted = self
            .record
            .as_ref()
            .and_then(|_| Message::parse_bounded(&body, usize::MAX).ok());
        if !opening && let Some(m) = &posted {
            self.record("c2s", m);
        }
        let sent = self.transport.send(Method::POST, hdrs, body, timeout).await;
        let was_unreachable = self
            .unreachable
            .swap(sent.is_err(), std::sync::atomic::Ordering::Relaxed);
        let resp = match sent {
            Ok(resp) => {
                if was_unreachable {
                    tracing::warn!(url = %self.url, "HTTP upstream reachable again");
                }
                resp
            }
            Err(e) => {
                let why = format!("HTTP upstream unreachable: {e}");
                if !was_unreachable && self.probed {
                    tracing::error!(url = %self.url, "{why}");
                }
                return Err(ShimError::Upstream(why));
            }
        };
        // The 2025-11-25 transport assigns the session on the response that
        // carries the InitializeResult. An id on any other answer is not
        // one: the Python SDK's server sets one on the 400 it answers the
        // revision probe with, then forgets it, and every request sent
        // under it met 404 for good.
        if method == "initialize"
            && resp.status().is_success()
            && let Some(sid) = resp
                .headers()
                .get("mcp-session-id")
                .and_then(|v| v.to_str().ok())
        {
            *lock(&self.session) = Some(sid.to_owned());
        }
        if opening && let Some(m) = &posted {
            self.record("c2s", m);
        }
        Ok(resp)
    }

    /// Runs one long-lived request: its SSE answer's notifications go to
    /// `tx`, and so does how it ended. Whatever else the stream carries
    /// becomes an event, as on any other stream.
    async fn run_stream(&self, msg: Message, tx: mpsc::UnboundedSender<StreamEvent>) {
        let body = msg.to_json().into_bytes();
        let ended = match self.send_post(&msg, body, Some(STREAM_TIMEOUT)).await {
            Err(e) => Err(e),
            Ok(resp) if is_sse(&resp) => {
                let on_other = |m| match m {
                    Message::Notification(n) => {
                        let _ = tx.send(StreamEvent::Notification(n));
                    }
                    m => self.emit(m),
                };
                self.read_sse_with(resp, msg.id(), on_other).await
            }
            Ok(resp) => self.read_json(resp).await,
        }
        .and_then(|m| match m {
            Message::Response(r) => Ok(Ok(r.result)),
            Message::Error(e) => Ok(Err(e.error)),
            _ => Err(ShimError::Upstream(
                "the HTTP upstream answered a stream with no answer".into(),
            )),
        });
        let _ = tx.send(StreamEvent::Ended(ended));
    }

    /// Reads an SSE stream; returns the message answering `id` (if given),
    /// everything else becomes an event. A stream that ends or breaks
    /// before the answer is an error naming how.
    async fn read_sse(&self, resp: Answer, id: Option<&Id>) -> Result<Message, ShimError> {
        self.read_sse_with(resp, id, |m| self.emit(m)).await
    }

    /// [`HttpUpstream::read_sse`], handing what is not the answer to `on_other`.
    async fn read_sse_with(
        &self,
        resp: Answer,
        id: Option<&Id>,
        mut on_other: impl FnMut(Message),
    ) -> Result<Message, ShimError> {
        let mut events = sse_stream::SseByteStream::new(resp.into_body().into_data_stream());
        loop {
            let data = match events.next().await {
                Some(Ok(event)) => event.data,
                Some(Err(e)) => {
                    return Err(ShimError::Upstream(format!(
                        "HTTP upstream stream broke before the answer: {}",
                        sse_cause(&e)
                    )));
                }
                None => {
                    return Err(ShimError::Upstream(
                        "HTTP upstream closed the stream before the answer".into(),
                    ));
                }
            };
            // Comments, keep-alives and metadata-only events carry none.
            let Some(data) = data else { continue };
            let Ok(m) = Message::parse(data.as_bytes()) else {
                continue;
            };
            self.record("s2c", &m);
            let answers = matches!(m, Message::Response(_) | Message::Error(_))
                && id.is_some()
                && m.id() == id;
            if answers {
                return Ok(m);
            }
            on_other(m);
        }
    }

    fn emit(&self, m: Message) {
        let ev = match m {
            Message::Notification(n) => UpstreamEvent::Notification(n),
            Message::Request(r) => {
                // Read on the stream of a call a front marked: its own.
                if let Ok(origin) = super::CALL_ORIGIN.try_with(|o| *o) {
                    let mut origins = lock(&self.origins);
                    if origins.len() >= MAX_ORIGINS {
                        origins.clear();
                    }
                    origins.insert(r.id.clone(), origin);
                }
                UpstreamEvent::Request(r)
            }
            _ => return,
        };
        let _ = self.events.send(ev);
    }

    /// Opens the legacy GET stream for unsolicited messages (best effort:
    /// servers may answer 405).
    fn open_get_stream(self: &Arc<Self>) {
        let this = self.clone();
        tokio::spawn(async move {
            let sid = this.session_id();
            let Some(sid) = sid else { return };
            let mut hdrs = HeaderMap::with_capacity(3);
            hdrs.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
            hdrs.insert(MCP_PROTOCOL_VERSION, LEGACY_VERSION_VALUE);
            let Ok(sid) = header_value(&sid) else { return };
            hdrs.insert(MCP_SESSION_ID, sid);
            let resp = this
                .transport
                .send(Method::GET, hdrs, Bytes::new(), Some(STREAM_TIMEOUT))
                .await;
            match resp {
                Ok(r) if r.status().is_success() => {
                    let ended = this.read_sse(r, None).await;
                    tracing::debug!(?ended, "upstream GET stream ended");
                }
                Ok(r) => tracing::debug!(status = %r.status(), "upstream offers no GET stream"),
                Err(e) => tracing::debug!(error = %e, "upstream GET stream failed"),
            }
        });
    }
}

impl HttpUpstream {
    fn session_id(&self) -> Option<String> {
        lock(&self.session).clone()
    }

    /// Records `msg` (`--record-upstream`) in the current session.
    fn record(&self, dir: &'static str, msg: &Message) {
        let Some((rec, labels)) = &self.record else {
            return;
        };
        let label = match self.session_id() {
            Some(sid) => labels.label(&sid),
            None => Arc::from(STATELESS_LABEL),
        };
        rec.record(&label, dir, msg);
    }

    /// An answer's whole body, recorded when it is a message.
    async fn read_body(&self, resp: Answer) -> Result<(StatusCode, Bytes), ShimError> {
        let (status, body) = read_body(resp).await?;
        if self.record.is_some()
            && let Ok(m) = Message::parse_bounded(&body, usize::MAX)
        {
            self.record("s2c", &m);
        }
        Ok((status, body))
    }

    /// Reads a JSON answer body (recorded).
    async fn read_json(&self, resp: Answer) -> Result<Message, ShimError> {
        let (status, body) = self.read_body(resp).await?;
        parse_body(status, &body)
    }

    /// [`HttpUpstream::post_as`] for a client request. A 2025-11-25 server
    /// answers 404 to a session it no longer knows (it restarted, or ended
    /// the session); the spec has the client start a new one, so the shim
    /// does (see [`HttpUpstream::renew_session`]) and sends the request
    /// again, once, in it.
    async fn post_in_session(
        self: &Arc<Self>,
        msg: &Message,
        body: Vec<u8>,
    ) -> Result<Option<Message>, ShimError> {
        let stale = self.session_id();
        if self.revision != Revision::Legacy
            || stale.is_none()
            || msg.method() == Some("initialize")
        {
            return self.post_as(msg, body).await;
        }
        // Shared, so keeping it for the rare retry copies nothing.
        let body = Bytes::from(body);
        let mut resp = self.send_post(msg, body.clone(), None).await?;
        if resp.status() == StatusCode::NOT_FOUND {
            self.renew_session(stale.as_deref()).await?;
            resp = self.send_post(msg, body, None).await?;
        }
        self.answer_of(msg, resp).await
    }

    /// Opens a new legacy session in place of `stale`: the `initialize`
    /// sent before (its answer is the client's business only the first
    /// time), `notifications/initialized` if it followed, and a new GET
    /// stream. Tasks of the old session are gone with it: asked about
    /// them, the server answers "unknown task", which the fronts report
    /// as lost tasks. A renewal another request already made counts.
    async fn renew_session(self: &Arc<Self>, stale: Option<&str>) -> Result<(), ShimError> {
        let _one = self.renewal.lock().await;
        if self.session_id().as_deref() != stale {
            return Ok(());
        }
        let params = lock(&self.handshake).clone().ok_or_else(|| {
            ShimError::Upstream(
                "the HTTP upstream no longer knows the session (404), and the shim has no \
                 initialize to open a new one with"
                    .into(),
            )
        })?;
        tracing::warn!(url = %self.url, "the HTTP upstream no longer knows the session (404: it restarted?); opening a new one");
        *lock(&self.session) = None;
        let id = self.next_id();
        let refused = |why: String| {
            ShimError::Upstream(format!(
                "the HTTP upstream no longer knows the session (404), and opening a new one failed: {why}"
            ))
        };
        match self.post(&Message::request(id, "initialize", params)).await {
            Ok(Some(Message::Response(_))) if self.session_id().is_some() => {}
            Ok(Some(Message::Error(e))) => return Err(refused(e.error.message)),
            Ok(_) => return Err(refused("no session in the answer to initialize".into())),
            Err(e) => return Err(refused(e.to_string())),
        }
        if self.initialized.load(std::sync::atomic::Ordering::SeqCst) {
            let note = Message::notification("notifications/initialized", json!({}));
            self.post(&note).await.map_err(|e| refused(e.to_string()))?;
        }
        self.open_get_stream();
        tracing::info!(url = %self.url, "new session with the HTTP upstream");
        Ok(())
    }
}

impl HttpUpstream {
    /// The id of the shim's next request to this upstream.
    fn next_id(&self) -> Id {
        Id::Num(
            self.next_id
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        )
    }

    /// One request and its answer; with `meta`, its members are written
    /// into `params._meta` from their serialised form.
    async fn exchange(
        self: &Arc<Self>,
        method: &str,
        params: Value,
        meta: Option<&ModernMeta>,
    ) -> Result<RpcResult, ShimError> {
        let id = self.next_id();
        let spliced = meta.map(|meta| {
            let mut body = Vec::with_capacity(512);
            meta.write_request(&mut body, &id, method, Some(&params));
            body
        });
        // A 2025-11-25 server does not take a dropped connection for a
        // cancel (its transport says so): it is told, if nobody waits for
        // the answer any more.
        let unanswered = (self.revision == Revision::Legacy).then(|| CancelUnanswered {
            upstream: Some(self.clone()),
            id: id.clone(),
        });
        let msg = Message::request(id, method, params);
        let body = spliced.unwrap_or_else(|| msg.to_json().into_bytes());
        let answer = self.watched(self.post_in_session(&msg, body)).await;
        if let Some(mut u) = unanswered {
            u.upstream = None;
        }
        let answer = answer?;
        if method == "initialize" && self.revision == Revision::Legacy {
            *lock(&self.handshake) = msg.params().cloned();
            self.open_get_stream();
        }
        outcome(method, answer)
    }
}

/// What the answer to the shim's `method` request says: its result or its
/// error; anything else is no answer.
fn outcome(method: &str, answer: Option<Message>) -> Result<RpcResult, ShimError> {
    match answer {
        Some(Message::Response(r)) => Ok(Ok(r.result)),
        Some(Message::Error(e)) => Ok(Err(e.error)),
        _ => Err(ShimError::Upstream(format!(
            "the HTTP upstream gave no answer to {method}"
        ))),
    }
}

#[async_trait]
impl Upstream for Arc<HttpUpstream> {
    /// Up while the server answers HTTP at all (any status: it is there);
    /// down, with why, when it cannot be reached or does not answer
    /// within 5 s (`READY_CHECK_TIMEOUT`). Asks with what a liveness check
    /// sends (`server/discover`, or `ping` in the 2025-11-25 session).
    async fn check_readiness(&self) -> Readiness {
        let mut last = self.ready_check.lock().await;
        if let Some((at, readiness)) = &*last
            && at.elapsed() < READY_CHECK_REUSE
        {
            return readiness.clone();
        }
        let check = match self.revision {
            Revision::Modern => {
                Message::request(self.next_id(), "server/discover", super::probe_params())
            }
            Revision::Legacy => Message::request(self.next_id(), "ping", json!({})),
        };
        let body = check.to_json().into_bytes();
        let sent = tokio::time::timeout(READY_CHECK_TIMEOUT, async {
            let resp = self
                .send_post(&check, body, Some(READY_CHECK_TIMEOUT))
                .await?;
            // Read (and so recorded, with --record-upstream) like any
            // answer; what it says does not matter.
            let _ = self.answer_of(&check, resp).await;
            Ok::<(), ShimError>(())
        })
        .await;
        let readiness = match sent {
            Ok(Ok(())) => Readiness::Up,
            Ok(Err(e)) => Readiness::Down(match e {
                ShimError::Upstream(why) => why,
                other => other.to_string(),
            }),
            Err(_) => Readiness::Down(format!(
                "HTTP upstream {} did not answer within {} s",
                self.url,
                READY_CHECK_TIMEOUT.as_secs()
            )),
        };
        *last = Some((tokio::time::Instant::now(), readiness.clone()));
        readiness
    }

    async fn request(&self, method: &str, params: Value) -> Result<RpcResult, ShimError> {
        self.exchange(method, params, None).await
    }

    async fn request_with_meta(
        &self,
        method: &str,
        params: &Value,
        meta: &ModernMeta,
    ) -> Result<RpcResult, ShimError> {
        // The request is kept as a message for its headers and a renewed
        // session's retry, so it owns a copy.
        self.exchange(method, params.clone(), Some(meta)).await
    }

    async fn get_task(
        &self,
        task_id: &str,
        meta: &ModernMeta,
    ) -> Result<Result<DetailedTask, ErrorObject>, ShimError> {
        if self.revision != Revision::Modern {
            return super::read_task(self, task_id, meta).await;
        }
        self.watched(self.get_modern_task(task_id, meta)).await
    }

    async fn open_stream(&self, method: &str, params: Value) -> Result<UpstreamStream, ShimError> {
        if self.revision != Revision::Modern {
            return Err(ShimError::MethodNotFound(format!(
                "{method} on a {} upstream",
                self.revision
            )));
        }
        let id = self.next_id();
        let (tx, rx) = mpsc::unbounded_channel();
        let this = self.clone();
        let msg = Message::request(id.clone(), method, params);
        let task = tokio::spawn(async move { this.run_stream(msg, tx).await });
        // Dropping the POST's response closes the connection: on HTTP that
        // is how a client ends a long-lived request.
        let abort = task.abort_handle();
        Ok(UpstreamStream::new(id, rx, move || abort.abort()))
    }

    async fn events_handled(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let _ = self.events.send(UpstreamEvent::Barrier(tx));
        let _ = rx.await;
    }

    fn notify(&self, method: &str, params: Value) -> Result<(), ShimError> {
        if method == "notifications/initialized" {
            self.initialized
                .store(true, std::sync::atomic::Ordering::SeqCst);
        }
        let this = self.clone();
        let msg = Message::notification(method, params);
        tokio::spawn(async move {
            if let Err(e) = this.post(&msg).await {
                tracing::warn!(error = %e, "notification to the HTTP upstream failed");
            }
        });
        Ok(())
    }

    async fn relay_raw(
        &self,
        id: &Id,
        method: &str,
        name: Option<&str>,
        body: axum::body::Bytes,
    ) -> Option<Result<RawAnswer, ShimError>> {
        // Only a modern upstream is stateless per POST, so the client's own
        // id can travel as is; a legacy one gets the session's requests.
        if self.revision != Revision::Modern {
            return None;
        }
        Some(self.watched(self.relay_body(id, method, name, body)).await)
    }

    fn origin_of(&self, id: &Id) -> Option<u64> {
        lock(&self.origins).get(id).copied()
    }

    fn respond(&self, id: Id, outcome: RpcResult) -> Result<(), ShimError> {
        lock(&self.origins).remove(&id);
        let this = self.clone();
        let msg = match outcome {
            Ok(result) => Message::response(id, result),
            Err(error) => Message::error(Some(id), error),
        };
        tokio::spawn(async move {
            if let Err(e) = this.post(&msg).await {
                tracing::warn!(error = %e, "answer to the HTTP upstream failed");
            }
        });
        Ok(())
    }
}

impl HttpUpstream {
    /// [`Upstream::get_task`] on a modern upstream: a plain JSON answer
    /// that is a task is read straight into one; anything else (an error,
    /// an SSE answer, an odd shape) is read as [`HttpUpstream::exchange`]
    /// reads it.
    async fn get_modern_task(
        &self,
        task_id: &str,
        meta: &ModernMeta,
    ) -> Result<Result<DetailedTask, ErrorObject>, ShimError> {
        let params = json!({ "taskId": task_id });
        let id = self.next_id();
        let mut body = Vec::with_capacity(512);
        meta.write_request(&mut body, &id, "tasks/get", Some(&params));
        let msg = Message::request(id, "tasks/get", params);
        let resp = self.send_post(&msg, body, None).await?;
        let answer = if resp.status() == StatusCode::ACCEPTED || is_sse(&resp) {
            self.answer_of(&msg, resp).await?
        } else {
            let (status, body) = self.read_body(resp).await?;
            if let Some(task) = crate::wire::modern::detailed_task_answer(&body) {
                return Ok(Ok(task));
            }
            Some(parse_body(status, &body)?)
        };
        super::task_of(outcome("tasks/get", answer)?)
    }

    /// [`Upstream::relay_raw`] on a modern upstream.
    async fn relay_body(
        &self,
        id: &Id,
        method: &str,
        name: Option<&str>,
        body: axum::body::Bytes,
    ) -> Result<RawAnswer, ShimError> {
        let resp = self.send_body(method, name, body, None).await?;
        if resp.status() == StatusCode::ACCEPTED {
            return Err(ShimError::Upstream(format!(
                "the HTTP upstream gave no answer to {method}"
            )));
        }
        if is_sse(&resp) {
            return self.read_sse(resp, Some(id)).await.map(RawAnswer::Parsed);
        }
        let (status, body) = self.read_body(resp).await?;
        match crate::jsonrpc::peek(&body) {
            Some(Peeked::Response { id: answered }) if answered == *id => {
                Ok(RawAnswer::Verbatim(body))
            }
            _ => parse_body(status, &body).map(RawAnswer::Parsed),
        }
    }
}

const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");
const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const JSON: HeaderValue = HeaderValue::from_static("application/json");
const JSON_OR_SSE: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");
const MODERN_VERSION_VALUE: HeaderValue = HeaderValue::from_static(MODERN_VERSION);
const LEGACY_VERSION_VALUE: HeaderValue = HeaderValue::from_static(LEGACY_VERSION);

/// How long a long-lived request may stay open (a day: in practice until
/// it is no longer needed).
const STREAM_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

fn is_sse(resp: &Answer) -> bool {
    resp.headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"))
}

/// The `session` of records made outside any upstream session.
const STATELESS_LABEL: &str = "upstream";

/// The whole body of an answer, with its status.
async fn read_body(resp: Answer) -> Result<(StatusCode, Bytes), ShimError> {
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .map_err(|e| {
            ShimError::Upstream(format!("HTTP upstream dropped the answer: {}", chain(&e)))
        })?;
    Ok((status, body))
}

/// An answer body as a message; one that is not JSON-RPC is the
/// upstream's fault.
fn parse_body(status: StatusCode, body: &[u8]) -> Result<Message, ShimError> {
    Message::parse(body).map_err(|_| {
        ShimError::Upstream(format!(
            "HTTP upstream answered {status} with a body that is not JSON-RPC: {:?}",
            crate::transport::lines::excerpt(body)
        ))
    })
}

/// Why an SSE stream ended in error, with the body's chain of causes when
/// the body broke (a parse error says itself).
fn sse_cause(e: &sse_stream::Error) -> String {
    match e {
        sse_stream::Error::Body(body) => chain(body.as_ref()),
        other => other.to_string(),
    }
}

/// A value for a header the shim sets; one that cannot be a header value
/// (a session id with control characters, say) is the upstream's fault.
fn header_value(v: &str) -> Result<HeaderValue, ShimError> {
    HeaderValue::from_str(v)
        .map_err(|_| ShimError::Upstream(format!("{v:?} cannot travel in an HTTP header")))
}
