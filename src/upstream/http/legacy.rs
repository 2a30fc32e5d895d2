//! A 2025-11-25 Streamable HTTP upstream: the `Mcp-Session-Id` minted on
//! `initialize` is sent on every later request, a GET stream carries
//! unsolicited messages, and a session the server forgot is opened anew.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Bytes;
use axum::http::header::ACCEPT;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode};
use serde_json::{Value, json};

use super::exchange::{Answer, Dialect, Http, header_value, outcome};
use super::{LEGACY_VERSION_VALUE, STREAM_TIMEOUT};
use crate::driver::http::headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message, Request};
use crate::upstream::{Readiness, RpcResult, Upstream, lock};

/// Most remembered origins: beyond, the oldest are not worth keeping (a
/// front asks at once, or never).
const MAX_ORIGINS: usize = 4096;

/// The 2025-11-25 session as the exchange needs it.
#[derive(Debug, Default)]
pub(super) struct Session {
    /// The `Mcp-Session-Id` the server minted, once it did.
    id: Mutex<Option<String>>,
    /// Server→client requests that came on the answer stream of a call a
    /// front marked ([`crate::upstream::CALL_ORIGIN`]): request id → the
    /// call's mark, until the front asks ([`Upstream::origin_of`]) or
    /// answers.
    origins: Mutex<HashMap<Id, u64>>,
}

impl Session {
    /// The server's `Mcp-Session-Id`, once `initialize` was answered.
    pub(super) fn id(&self) -> Option<String> {
        lock(&self.id).clone()
    }
}

impl Dialect for Session {
    fn headers(
        &self,
        hdrs: &mut HeaderMap,
        _method: &str,
        _name: Option<&str>,
    ) -> Result<(), ShimError> {
        hdrs.insert(MCP_PROTOCOL_VERSION, LEGACY_VERSION_VALUE);
        if let Some(sid) = self.id() {
            hdrs.insert(MCP_SESSION_ID, header_value(&sid)?);
        }
        Ok(())
    }

    /// The 2025-11-25 transport assigns the session on the response that
    /// carries the InitializeResult. An id on any other answer is not
    /// one: the Python SDK's server sets one on the 400 it answers the
    /// revision probe with, then forgets it, and every request sent under
    /// it met 404 for good.
    fn answered(&self, method: &str, resp: &Answer) {
        if method == "initialize"
            && resp.status().is_success()
            && let Some(sid) = resp
                .headers()
                .get(MCP_SESSION_ID)
                .and_then(|v| v.to_str().ok())
        {
            *lock(&self.id) = Some(sid.to_owned());
        }
    }

    /// An `initialize` is recorded once its answer named the session it
    /// opened.
    fn opens_session(&self, method: &str) -> bool {
        method == "initialize"
    }

    fn session_id(&self) -> Option<String> {
        self.id()
    }

    /// Read on the stream of a call a front marked: its own.
    fn on_request(&self, r: &Request) {
        if let Ok(origin) = crate::upstream::CALL_ORIGIN.try_with(|o| *o) {
            let mut origins = lock(&self.origins);
            if origins.len() >= MAX_ORIGINS {
                origins.clear();
            }
            origins.insert(r.id.clone(), origin);
        }
    }

    fn check(&self, id: Id) -> Message {
        Message::request(id, "ping", json!({}))
    }
}

/// A 2025-11-25 Streamable HTTP upstream.
#[derive(Debug)]
pub struct LegacyHttpUpstream {
    http: Arc<Http<Session>>,
    /// The `initialize` params last sent, to open a new session with when
    /// the server no longer knows ours (see
    /// [`LegacyHttpUpstream::renew_session`]).
    handshake: Mutex<Option<Value>>,
    /// `notifications/initialized` was sent in the session.
    initialized: AtomicBool,
    /// One session renewal at a time: requests that hit the same stale
    /// session wait for it, then retry in the new one.
    renewal: tokio::sync::Mutex<()>,
}

/// Sends the upstream `notifications/cancelled` for request `id` when
/// dropped before it is disarmed (its `http` taken): a 2025-11-25 server
/// does not take a dropped connection for a cancel (its transport says so).
struct CancelUnanswered {
    http: Option<Arc<Http<Session>>>,
    id: Id,
}

impl Drop for CancelUnanswered {
    fn drop(&mut self) {
        // Outside a runtime (the process ending) nothing can be sent.
        if let Some(http) = self.http.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            let msg = crate::upstream::stream::abandoned_message(&self.id);
            http.post_later(msg, "notification");
        }
    }
}

impl LegacyHttpUpstream {
    /// The probed upstream, with no session yet.
    pub(super) fn new(http: Http<Session>) -> Self {
        LegacyHttpUpstream {
            http: Arc::new(http),
            handshake: Mutex::new(None),
            initialized: AtomicBool::new(false),
            renewal: tokio::sync::Mutex::new(()),
        }
    }

    /// While client requests wait, pings the session every `every`; one
    /// unanswered for `timeout` fails every request in flight with
    /// "upstream stopped answering", as a hung child does. Requests made
    /// afterwards are tried again: an HTTP server may come back by itself.
    /// Ends when the upstream is dropped.
    pub fn watch_liveness(&self, every: Duration, timeout: Duration) {
        self.http.watch_liveness(every, timeout);
    }

    /// [`Http::post_as`] for a client request. A 2025-11-25 server answers
    /// 404 to a session it no longer knows (it restarted, or ended the
    /// session); the spec has the client start a new one, so the shim does
    /// (see [`LegacyHttpUpstream::renew_session`]) and sends the request
    /// again, once, in it.
    async fn post_in_session(
        &self,
        msg: &Message,
        body: Vec<u8>,
    ) -> Result<Option<Message>, ShimError> {
        let stale = self.http.dialect.id();
        if stale.is_none() || msg.method() == Some("initialize") {
            return self.http.post_as(msg, body).await;
        }
        // Shared, so keeping it for the rare retry copies nothing.
        let body = Bytes::from(body);
        let mut resp = self.http.send_post(msg, body.clone(), None).await?;
        if resp.status() == StatusCode::NOT_FOUND {
            self.renew_session(stale.as_deref()).await?;
            resp = self.http.send_post(msg, body, None).await?;
        }
        self.http.answer_of(msg, resp).await
    }

    /// Opens a new session in place of `stale`: the `initialize` sent
    /// before (its answer is the client's business only the first time),
    /// `notifications/initialized` if it followed, and a new GET stream.
    /// Tasks of the old session are gone with it: asked about them, the
    /// server answers "unknown task", which the fronts report as lost
    /// tasks. A renewal another request already made counts.
    async fn renew_session(&self, stale: Option<&str>) -> Result<(), ShimError> {
        let _one = self.renewal.lock().await;
        if self.http.dialect.id().as_deref() != stale {
            return Ok(());
        }
        let params = lock(&self.handshake).clone().ok_or_else(|| {
            ShimError::Upstream(
                "the HTTP upstream no longer knows the session (404), and the shim has no \
                 initialize to open a new one with"
                    .into(),
            )
        })?;
        tracing::warn!(url = %self.http.url, "the HTTP upstream no longer knows the session (404: it restarted?); opening a new one");
        *lock(&self.http.dialect.id) = None;
        self.reopen(params).await.map_err(|why| {
            ShimError::Upstream(format!(
                "the HTTP upstream no longer knows the session (404), and opening a new one failed: {why}"
            ))
        })?;
        open_get_stream(&self.http);
        tracing::info!(url = %self.http.url, "new session with the HTTP upstream");
        Ok(())
    }

    /// The handshake of a renewed session: `initialize` with `params`,
    /// then `notifications/initialized` if the first session had it.
    async fn reopen(&self, params: Value) -> Result<(), String> {
        let init = Message::request(self.http.next_id(), "initialize", params);
        match self.http.post(&init).await {
            Ok(Some(Message::Response(_))) if self.http.dialect.id().is_some() => {}
            Ok(Some(Message::Error(e))) => return Err(e.error.message),
            Ok(_) => return Err("no session in the answer to initialize".into()),
            Err(e) => return Err(e.to_string()),
        }
        if self.initialized.load(Ordering::SeqCst) {
            let note = Message::notification("notifications/initialized", json!({}));
            self.http.post(&note).await.map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// Opens the GET stream for unsolicited messages (best effort: servers
/// may answer 405).
fn open_get_stream(http: &Arc<Http<Session>>) {
    let emitter = http.clone();
    open_get_stream_with(http, move |m| emitter.emit(m));
}

/// [`open_get_stream`], handing what comes on it to `deliver`; aborting
/// the handle closes the stream.
pub(super) fn open_get_stream_with(
    http: &Arc<Http<Session>>,
    mut deliver: impl FnMut(Message) + Send + 'static,
) -> tokio::task::AbortHandle {
    let http = http.clone();
    let task = tokio::spawn(async move {
        let Some(sid) = http.dialect.id() else { return };
        let mut hdrs = HeaderMap::with_capacity(3);
        hdrs.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        hdrs.insert(MCP_PROTOCOL_VERSION, LEGACY_VERSION_VALUE);
        let Ok(sid) = header_value(&sid) else { return };
        hdrs.insert(MCP_SESSION_ID, sid);
        let resp = http
            .transport
            .send(Method::GET, &hdrs, Bytes::new(), Some(STREAM_TIMEOUT))
            .await;
        match resp {
            Ok(r) if r.status().is_success() => {
                let ended = http.read_sse_with(r, None, &mut deliver).await;
                tracing::debug!(?ended, "upstream GET stream ended");
            }
            Ok(r) => tracing::debug!(status = %r.status(), "upstream offers no GET stream"),
            Err(e) => tracing::debug!(error = %e.why, "upstream GET stream failed"),
        }
    });
    task.abort_handle()
}

impl Http<Session> {
    /// Ends the session on the server (`DELETE`; a server may refuse with
    /// 405, and one gone already cannot answer: both only logged).
    pub(super) async fn delete_session(&self) {
        let Some(sid) = self.dialect.id() else { return };
        let Ok(value) = header_value(&sid) else {
            return;
        };
        let mut hdrs = HeaderMap::with_capacity(2);
        hdrs.insert(MCP_PROTOCOL_VERSION, LEGACY_VERSION_VALUE);
        hdrs.insert(MCP_SESSION_ID, value);
        match self
            .transport
            .send(Method::DELETE, &hdrs, Bytes::new(), None)
            .await
        {
            Ok(r) => tracing::debug!(status = %r.status(), "upstream session ended"),
            Err(e) => tracing::debug!(error = %e.why, "upstream session could not be ended"),
        }
    }
}

#[async_trait]
impl Upstream for LegacyHttpUpstream {
    /// Up while the server answers HTTP at all (any status: it is there);
    /// down, with why, when it cannot be reached or does not answer within
    /// 5 s. Asks with a `ping` in the session.
    async fn check_readiness(&self) -> Readiness {
        self.http.check_readiness().await
    }

    async fn request(&self, method: &str, params: Value) -> Result<RpcResult, ShimError> {
        let id = self.http.next_id();
        // Nobody waiting for the answer any more: the server is told.
        let mut unanswered = CancelUnanswered {
            http: Some(self.http.clone()),
            id: id.clone(),
        };
        let msg = Message::request(id, method, params);
        let body = msg.to_json().into_bytes();
        let answer = self.http.watched(self.post_in_session(&msg, body)).await;
        unanswered.http = None;
        let answer = answer?;
        if method == "initialize" {
            *lock(&self.handshake) = msg.params().cloned();
            open_get_stream(&self.http);
        }
        outcome(method, answer)
    }

    async fn events_handled(&self) {
        self.http.events_handled().await;
    }

    fn notify(&self, method: &str, params: Value) -> Result<(), ShimError> {
        if method == "notifications/initialized" {
            self.initialized.store(true, Ordering::SeqCst);
        }
        let msg = Message::notification(method, params);
        self.http.post_later(msg, "notification");
        Ok(())
    }

    fn origin_of(&self, id: &Id) -> Option<u64> {
        lock(&self.http.dialect.origins).get(id).copied()
    }

    fn respond(&self, id: Id, outcome: RpcResult) -> Result<(), ShimError> {
        lock(&self.http.dialect.origins).remove(&id);
        let msg = match outcome {
            Ok(result) => Message::response(id, result),
            Err(error) => Message::error(Some(id), error),
        };
        self.http.post_later(msg, "answer");
        Ok(())
    }
}
