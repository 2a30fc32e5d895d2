//! What both revisions' HTTP upstreams share: posting a message, reading
//! its answer (JSON or SSE), recording, liveness and readiness checks.
//! What differs between them (headers, the 2025-11-25 session) is a
//! [`Dialect`], so none of this asks which revision it speaks.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::header::{ACCEPT, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, Method, Response, StatusCode};
use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::transport::{Transport, chain};
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message, Request};
use crate::transport::record::Recorder;
use crate::upstream::{Readiness, RpcResult, UpstreamEvent};

/// An answer as the transport hands it over: its head, and its body
/// still streaming.
pub(super) type Answer = Response<Body>;

const JSON: HeaderValue = HeaderValue::from_static("application/json");
const JSON_OR_SSE: HeaderValue = HeaderValue::from_static("application/json, text/event-stream");

/// How long a `/readyz` reachability check of the server holds; one
/// request to the server per this, however often `/readyz` is asked.
const READY_CHECK_REUSE: Duration = Duration::from_secs(1);
/// Longest a reachability check may take (a server that accepts and never
/// answers is not ready).
const READY_CHECK_TIMEOUT: Duration = Duration::from_secs(5);

/// The `session` of records made outside any upstream session.
const STATELESS_LABEL: &str = "upstream";

/// What one revision's HTTP transport says beside the shared exchange.
pub(super) trait Dialect: Send + Sync + std::fmt::Debug + 'static {
    /// Adds the headers a POST of `method` (naming `name`) carries; `Err`
    /// when it cannot be sent at all.
    fn headers(
        &self,
        hdrs: &mut HeaderMap,
        method: &str,
        name: Option<&str>,
    ) -> Result<(), ShimError>;
    /// Sees each POST's answer head (a session it opens).
    fn answered(&self, method: &str, resp: &Answer) {
        let _ = (method, resp);
    }
    /// True for a POST recorded only once its answer named the session it
    /// opened.
    fn opens_session(&self, method: &str) -> bool {
        let _ = method;
        false
    }
    /// The session messages are recorded under (`None`: outside one).
    fn session_id(&self) -> Option<String> {
        None
    }
    /// A server→client request read on an answer stream.
    fn on_request(&self, r: &Request) {
        let _ = r;
    }
    /// What a liveness or readiness check sends, under `id`.
    fn check(&self, id: Id) -> Message;
}

/// The shared state and exchange of an HTTP upstream speaking `D`.
#[derive(Debug)]
pub(super) struct Http<D> {
    /// Where requests go: the network, or a service in this process.
    pub(super) transport: Box<dyn Transport>,
    /// What the logs call it.
    pub(super) url: String,
    pub(super) events: mpsc::UnboundedSender<UpstreamEvent>,
    next_id: AtomicI64,
    /// Client requests waiting on an answer: liveness is checked only
    /// while there are some.
    in_flight: AtomicUsize,
    /// Sent to each time a liveness check goes unanswered, with why: every
    /// request in flight then fails with that reason.
    hangs: tokio::sync::watch::Sender<String>,
    /// The last request could not reach the server: logged once when that
    /// starts and once when it ends, not for every request in between.
    unreachable: AtomicBool,
    /// Set once probed: before, a server out of reach is the error
    /// [`super::connect`] returns, not a log line of its own.
    probed: bool,
    /// The last reachability check of `/readyz` and when it was made:
    /// probes arriving closer together than [`READY_CHECK_REUSE`] share it.
    ready_check: tokio::sync::Mutex<Option<(tokio::time::Instant, Readiness)>>,
    /// `--record-upstream`: every message posted and every one read back,
    /// labelled by the upstream session (`session-1`… for a 2025-11-25
    /// upstream's `Mcp-Session-Id`s; `upstream` outside one, as on a
    /// stateless 2026-07-28 upstream).
    record: Option<Recorder>,
    /// What this revision says differently.
    pub(super) dialect: D,
}

/// Counts a request in flight for as long as it lives.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(n: &'a AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::SeqCst);
        InFlight(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<D: Dialect> Http<D> {
    /// Not yet probed, speaking `dialect`.
    pub(super) fn new(
        transport: Box<dyn Transport>,
        events: mpsc::UnboundedSender<UpstreamEvent>,
        record: Option<Recorder>,
        dialect: D,
    ) -> Self {
        Http {
            url: transport.describe().to_owned(),
            transport,
            events,
            next_id: 1.into(),
            in_flight: 0.into(),
            hangs: tokio::sync::watch::Sender::new(String::new()),
            unreachable: false.into(),
            probed: false,
            ready_check: tokio::sync::Mutex::new(None),
            record,
            dialect,
        }
    }

    /// The same upstream, probed, speaking `dialect` from now on.
    pub(super) fn probed_as<E: Dialect>(self, dialect: E) -> Http<E> {
        Http {
            transport: self.transport,
            url: self.url,
            events: self.events,
            next_id: self.next_id,
            in_flight: self.in_flight,
            hangs: self.hangs,
            unreachable: self.unreachable,
            probed: true,
            ready_check: self.ready_check,
            record: self.record,
            dialect,
        }
    }

    /// The id of the shim's next request to this upstream.
    pub(super) fn next_id(&self) -> Id {
        Id::Num(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// While client requests wait, asks every `every` for a sign of life
    /// (the dialect's check); one unanswered for `timeout` fails every
    /// request in flight with "upstream stopped answering", as a hung
    /// child does. Requests made afterwards are tried again: an HTTP
    /// server may come back by itself. Ends when the upstream is dropped.
    pub(super) fn watch_liveness(self: &Arc<Self>, every: Duration, timeout: Duration) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(up) = weak.upgrade() else { return };
                if up.in_flight.load(Ordering::SeqCst) == 0 {
                    continue;
                }
                let check = up.dialect.check(up.next_id());
                // Any answer, even an error or a refused connection (which
                // fails the requests by itself), proves it is not hanging.
                if tokio::time::timeout(timeout, up.post(&check))
                    .await
                    .is_err()
                {
                    let reason = format!(
                        "upstream stopped answering: no reply to {} within {} ms",
                        check.method().unwrap_or_default(),
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
    pub(super) async fn watched<T>(
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

    /// Up while the server answers HTTP at all (any status: it is there);
    /// down, with why, when it cannot be reached or does not answer
    /// within 5 s. Asks with what a liveness check sends.
    pub(super) async fn check_readiness(&self) -> Readiness {
        let mut last = self.ready_check.lock().await;
        if let Some((at, readiness)) = &*last
            && at.elapsed() < READY_CHECK_REUSE
        {
            return readiness.clone();
        }
        let readiness = self.ask_readiness().await;
        *last = Some((tokio::time::Instant::now(), readiness.clone()));
        readiness
    }

    /// One reachability check, not reused.
    async fn ask_readiness(&self) -> Readiness {
        let check = self.dialect.check(self.next_id());
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
        match sent {
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
        }
    }

    /// Waits until the events sent so far are handled.
    pub(super) async fn events_handled(&self) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let _ = self.events.send(UpstreamEvent::Barrier(tx));
        let _ = rx.await;
    }

    /// POSTs `msg` in the background (a notification, an answer), logging
    /// a failure as `what`.
    pub(super) fn post_later(self: &Arc<Self>, msg: Message, what: &'static str) {
        let this = self.clone();
        tokio::spawn(async move {
            if let Err(e) = this.post(&msg).await {
                tracing::warn!(error = %e, "{what} to the HTTP upstream failed");
            }
        });
    }

    /// POSTs one message; returns the answer to it (for requests), sending
    /// everything else that arrives on the stream out as events.
    pub(super) async fn post(&self, msg: &Message) -> Result<Option<Message>, ShimError> {
        self.post_as(msg, msg.to_json().into_bytes()).await
    }

    /// [`Http::post`] of `body`, the encoding of `msg` (which gives the
    /// headers and the id whose answer is awaited).
    pub(super) async fn post_as(
        &self,
        msg: &Message,
        body: impl Into<Bytes>,
    ) -> Result<Option<Message>, ShimError> {
        let resp = self.send_post(msg, body, None).await?;
        self.answer_of(msg, resp).await
    }

    /// The answer to `msg` in `resp`: `None` for a notification or an
    /// accepted message.
    pub(super) async fn answer_of(
        &self,
        msg: &Message,
        resp: Answer,
    ) -> Result<Option<Message>, ShimError> {
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
    /// calls for.
    pub(super) async fn send_post(
        &self,
        msg: &Message,
        body: impl Into<Bytes>,
        timeout: Option<Duration>,
    ) -> Result<Answer, ShimError> {
        let method = msg.method().unwrap_or_default();
        let name = crate::driver::http::headers::name_source(method, msg.params());
        self.send_body(method, name, body.into(), timeout).await
    }

    /// Sends one POST of an encoded body with the dialect's headers,
    /// recorded (`--record-upstream`), and shows the dialect its answer.
    pub(super) async fn send_body(
        &self,
        method: &str,
        name: Option<&str>,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> Result<Answer, ShimError> {
        // Names and fixed values as constants: parsing and checking them
        // anew was a few thousand instructions of every relayed request.
        let mut hdrs = HeaderMap::with_capacity(5);
        hdrs.insert(CONTENT_TYPE, JSON);
        hdrs.insert(ACCEPT, JSON_OR_SSE);
        self.dialect.headers(&mut hdrs, method, name)?;
        let opening = self.dialect.opens_session(method);
        let posted = self
            .record
            .as_ref()
            .and_then(|_| Message::parse_bounded(&body, usize::MAX).ok());
        if !opening && let Some(m) = &posted {
            self.record("c2s", m);
        }
        let resend = changes_nothing(method);
        let resp = self
            .reach(Method::POST, hdrs, body, timeout, resend)
            .await?;
        self.dialect.answered(method, &resp);
        if opening && let Some(m) = &posted {
            self.record("c2s", m);
        }
        Ok(resp)
    }

    /// Sends one request to the server; logs when it goes out of reach
    /// and when it is back, once each. With `resend`, a request whose
    /// connection broke before its answer (the server closed a kept-alive
    /// connection as it went out, a network blip) is sent once more on a
    /// new one; a timed-out one is not, it would wait as long again.
    pub(super) async fn reach(
        &self,
        method: Method,
        hdrs: HeaderMap,
        body: Bytes,
        timeout: Option<Duration>,
        resend: bool,
    ) -> Result<Answer, ShimError> {
        let again = resend.then(|| (method.clone(), body.clone()));
        let mut sent = self.transport.send(method, &hdrs, body, timeout).await;
        let broke = match &sent {
            Err(e) if !e.timed_out => Some(e.why.clone()),
            _ => None,
        };
        if let (Some(why), Some((method, body))) = (broke, again) {
            tracing::warn!(url = %self.url, error = %why, "the connection broke before the answer; sending the request again");
            sent = self.transport.send(method, &hdrs, body, timeout).await;
        }
        let was_unreachable = self.unreachable.swap(sent.is_err(), Ordering::Relaxed);
        match sent {
            Ok(resp) => {
                if was_unreachable {
                    tracing::warn!(url = %self.url, "HTTP upstream reachable again");
                }
                Ok(resp)
            }
            Err(e) => {
                let why = format!("HTTP upstream unreachable: {}", e.why);
                if !was_unreachable && self.probed {
                    tracing::error!(url = %self.url, "{why}");
                }
                Err(ShimError::Upstream(why))
            }
        }
    }

    /// Reads an SSE stream; returns the message answering `id` (if given),
    /// everything else becomes an event. A stream that ends or breaks
    /// before the answer is an error naming how.
    pub(super) async fn read_sse(
        &self,
        resp: Answer,
        id: Option<&Id>,
    ) -> Result<Message, ShimError> {
        self.read_sse_with(resp, id, |m| self.emit(m)).await
    }

    /// [`Http::read_sse`], handing what is not the answer to `on_other`.
    pub(super) async fn read_sse_with(
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

    /// A message read that answers none of the shim's requests, as an event.
    pub(super) fn emit(&self, m: Message) {
        let ev = match m {
            Message::Notification(n) => UpstreamEvent::Notification(n),
            Message::Request(r) => {
                self.dialect.on_request(&r);
                UpstreamEvent::Request(r)
            }
            _ => return,
        };
        let _ = self.events.send(ev);
    }

    /// Records `msg` (`--record-upstream`) in the current session.
    fn record(&self, dir: &'static str, msg: &Message) {
        let Some(rec) = &self.record else {
            return;
        };
        let label = match self.dialect.session_id() {
            Some(sid) => rec.session_label(&sid),
            None => Arc::from(STATELESS_LABEL),
        };
        rec.record(&label, dir, msg);
    }

    /// An answer's whole body, recorded when it is a message.
    pub(super) async fn read_body(&self, resp: Answer) -> Result<(StatusCode, Bytes), ShimError> {
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
            .await
            .map_err(|e| {
                ShimError::Upstream(format!("HTTP upstream dropped the answer: {}", chain(&e)))
            })?;
        if self.record.is_some()
            && let Ok(m) = Message::parse_bounded(&body, usize::MAX)
        {
            self.record("s2c", &m);
        }
        Ok((status, body))
    }

    /// Reads a JSON answer body (recorded).
    pub(super) async fn read_json(&self, resp: Answer) -> Result<Message, ShimError> {
        let (status, body) = self.read_body(resp).await?;
        parse_body(status, &body)
    }
}

/// What the answer to the shim's `method` request says: its result or its
/// error; anything else is no answer.
pub(super) fn outcome(method: &str, answer: Option<Message>) -> Result<RpcResult, ShimError> {
    match answer {
        Some(Message::Response(r)) => Ok(Ok(r.result)),
        Some(Message::Error(e)) => Ok(Err(e.error)),
        _ => Err(ShimError::Upstream(format!(
            "the HTTP upstream gave no answer to {method}"
        ))),
    }
}

/// Whether an answer comes as an SSE stream.
pub(super) fn is_sse(resp: &Answer) -> bool {
    resp.headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|c| c.starts_with("text/event-stream"))
}

/// An answer body as a message; one that is not JSON-RPC is the
/// upstream's fault.
pub(super) fn parse_body(status: StatusCode, body: &[u8]) -> Result<Message, ShimError> {
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
pub(super) fn header_value(v: &str) -> Result<HeaderValue, ShimError> {
    HeaderValue::from_str(v)
        .map_err(|_| ShimError::Upstream(format!("{v:?} cannot travel in an HTTP header")))
}

/// Requests that change nothing on the server (its own task reads, the
/// lists, reads and pings): safe to send again when their connection broke
/// before the answer, which a blocked `tasks/result` would otherwise end on.
fn changes_nothing(method: &str) -> bool {
    matches!(
        method,
        "tasks/get"
            | "ping"
            | "server/discover"
            | "tools/list"
            | "prompts/list"
            | "prompts/get"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read"
    )
}
