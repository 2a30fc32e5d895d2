//! What every 2025-11-25 HTTP session goes through, whether the shim
//! bridges it ([`super::legacy::HttpSession`]) or relays it to a process
//! of its own ([`super::legacy_relay::RelaySession`]): the lookup a
//! request makes, the in-use mark while it is answered, the GET stream,
//! DELETE and the idle sweep. Each kind says only what differs, through
//! [`LegacyHttpSession`].

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::App;
use super::legacy::{SessionCap, admit, session_cap_reached, unknown_session};
use crate::bridge::lock;
use crate::jsonrpc::Message;
use crate::revision::Revision;
use crate::scope::Principal;

/// Who opened a session, and how it is being used: what every kind keeps.
#[derive(Debug)]
pub(super) struct Usage {
    /// Who opened it: every later request must come from the same
    /// principal (or be anonymous like it), as MCP's security practices
    /// require; a session id is not a credential.
    pub(super) principal: Option<Principal>,
    /// Requests of this session being answered now.
    in_flight: AtomicUsize,
    /// When the session was last in use ([`App::now_ms`]).
    last_used_ms: AtomicU64,
}

impl Usage {
    /// A session of `principal` opened at `now_ms`.
    pub(super) fn new(principal: Option<Principal>, now_ms: u64) -> Self {
        Usage {
            principal,
            in_flight: AtomicUsize::new(0),
            last_used_ms: AtomicU64::new(now_ms),
        }
    }

    /// Marks the session used at `now_ms`.
    fn touch(&self, now_ms: u64) {
        self.last_used_ms.store(now_ms, Ordering::Relaxed);
    }

    /// Whether a request of `principal` may use this session (`sid`).
    fn belongs_to(&self, sid: &str, principal: &Option<Principal>) -> bool {
        let mine = self.principal == *principal;
        if !mine {
            tracing::info!(session = %crate::ids::log_prefix(sid), "refused: a request for a session another principal opened");
        }
        mine
    }
}

/// One kind of 2025-11-25 HTTP session.
pub(super) trait LegacyHttpSession: Send + Sync + Sized + 'static {
    /// What the logs add when a session of this kind ends (the relay's
    /// process ends with it).
    const ENDING: &'static str;
    /// The app's sessions of this kind, by id.
    fn sessions(app: &App) -> &Mutex<HashMap<String, Arc<Self>>>;
    /// Who opened it and how it is used.
    fn usage(&self) -> &Usage;
    /// A stream open to the client (the GET stream, an SSE answer in
    /// progress).
    fn streaming(&self) -> bool;
    /// Answers an admitted POST of `msg`.
    fn exchange(
        self: &Arc<Self>,
        msg: Message,
        hdrs: &HeaderMap,
    ) -> impl Future<Output = Response> + Send;
    /// Makes `tx` the session's GET stream.
    fn open_get(&self, tx: mpsc::UnboundedSender<Message>);
    /// What ending a session (removed from the map already) takes with it.
    fn close(&self, app: &App, why: &str) -> impl Future<Output = ()> + Send;

    /// A request being answered, or a stream open to the client, keeps a
    /// session from expiring.
    fn busy(&self) -> bool {
        self.usage().in_flight.load(Ordering::Acquire) > 0 || self.streaming()
    }
}

/// Makes an initialized `session` known as `sid`, unless a session cap
/// was reached meanwhile (checked again under the sessions lock: the
/// check before `initialize` raced with other sessions opening).
pub(super) fn keep<S: LegacyHttpSession>(
    app: &App,
    sid: &str,
    session: Arc<S>,
) -> Result<(), SessionCap> {
    let mut sessions = lock(S::sessions(app));
    if let Some(cap) = session_cap_reached(
        app,
        sessions.values().map(|s| &s.usage().principal),
        &session.usage().principal,
    ) {
        return Err(cap);
    }
    session.usage().touch(app.now_ms());
    sessions.insert(sid.to_owned(), session);
    Ok(())
}

/// Looks a session up for a request of `principal` and marks it used,
/// under the sessions lock: the idle sweep, which decides under the same
/// lock, cannot end a session a request has just found. A session of
/// another principal is not found, exactly like an unknown one.
fn find<S: LegacyHttpSession>(
    app: &App,
    sid: &str,
    principal: &Option<Principal>,
) -> Option<Arc<S>> {
    let sessions = lock(S::sessions(app));
    let s = sessions
        .get(sid)
        .filter(|s| s.usage().belongs_to(sid, principal))?;
    s.usage().touch(app.now_ms());
    Some(s.clone())
}

/// Marks a session in use while one of its requests is answered; idle
/// time counts from when the last one ends.
struct InUse<'a, S: LegacyHttpSession> {
    session: &'a S,
    app: &'a App,
}

impl<'a, S: LegacyHttpSession> InUse<'a, S> {
    fn new(session: &'a S, app: &'a App) -> Self {
        session.usage().in_flight.fetch_add(1, Ordering::AcqRel);
        InUse { session, app }
    }
}

impl<S: LegacyHttpSession> Drop for InUse<'_, S> {
    fn drop(&mut self) {
        let usage = self.session.usage();
        usage.touch(self.app.now_ms());
        usage.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A POST to session `sid`, past [`admit`]'s checks, answered by the
/// session's kind.
pub(super) async fn post<S: LegacyHttpSession>(
    app: Arc<App>,
    sid: &str,
    msg: Message,
    hdrs: &HeaderMap,
    principal: Option<Principal>,
) -> Response {
    app.metrics
        .count(Revision::Legacy, msg.method().unwrap_or("(response)"));
    let found = find::<S>(&app, sid, &principal);
    let s = match admit(found, &app, &msg, hdrs, &principal) {
        Ok(s) => s,
        Err(refusal) => return *refusal,
    };
    let _in_use = InUse::new(&*s, &app);
    s.exchange(msg, hdrs).await
}

/// A GET (the session's stream) or a DELETE (its end) of session `sid`.
pub(super) async fn get_or_delete<S: LegacyHttpSession>(
    app: Arc<App>,
    method: axum::http::Method,
    sid: &str,
    principal: Option<Principal>,
) -> Response {
    if method == axum::http::Method::DELETE {
        delete::<S>(app, sid, principal).await
    } else {
        get_stream::<S>(app, sid, principal)
    }
}

/// The session's GET stream: what the server says outside any request.
fn get_stream<S: LegacyHttpSession>(
    app: Arc<App>,
    sid: &str,
    principal: Option<Principal>,
) -> Response {
    app.metrics.count(Revision::Legacy, "GET");
    let Some(s) = find::<S>(&app, sid, &principal) else {
        return unknown_session(None);
    };
    let (tx, rx) = mpsc::unbounded_channel();
    s.open_get(tx);
    let events = UnboundedReceiverStream::new(rx).map(|m| super::sse_event(&m));
    Sse::new(app.until_closing(events))
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// DELETE of session `sid`: ended, if it is the principal's.
async fn delete<S: LegacyHttpSession>(
    app: Arc<App>,
    sid: &str,
    principal: Option<Principal>,
) -> Response {
    app.metrics.count(Revision::Legacy, "DELETE");
    let removed = {
        let mut sessions = lock(S::sessions(&app));
        match sessions.get(sid) {
            Some(s) if s.usage().belongs_to(sid, &principal) => sessions.remove(sid),
            _ => None,
        }
    };
    let Some(s) = removed else {
        return unknown_session(None);
    };
    s.close(&app, "the session was deleted").await;
    tracing::info!(session = %crate::ids::log_prefix(sid), "legacy HTTP session deleted{}", S::ENDING);
    StatusCode::OK.into_response()
}

/// Ends the sessions idle for longer than the configured time; returns
/// how many. Run by the sweeper every second.
pub(super) async fn expire_idle<S: LegacyHttpSession>(app: &App) -> usize {
    let Some(idle) = app.opts.session_idle_timeout else {
        return 0;
    };
    let expired = take_idle(S::sessions(app), app.now_ms(), idle);
    for (sid, s) in &expired {
        s.close(app, "the session expired").await;
        tracing::info!(session = %crate::ids::log_prefix(sid), idle_s = idle.as_secs(), "idle legacy HTTP session expired{}", S::ENDING);
    }
    expired.len()
}

/// Takes out of `sessions` those idle for `idle` or longer at `now_ms`. A
/// busy session counts as used now, so its idle time counts from the end
/// of its last stream.
fn take_idle<S: LegacyHttpSession>(
    sessions: &Mutex<HashMap<String, Arc<S>>>,
    now_ms: u64,
    idle: std::time::Duration,
) -> Vec<(String, Arc<S>)> {
    use std::sync::atomic::Ordering::Relaxed;
    let idle_ms = u64::try_from(idle.as_millis()).unwrap_or(u64::MAX);
    let mut sessions = lock(sessions);
    let expired: Vec<String> = sessions
        .iter()
        .filter_map(|(sid, s)| {
            if s.busy() {
                s.usage().touch(now_ms);
                return None;
            }
            let since = now_ms.saturating_sub(s.usage().last_used_ms.load(Relaxed));
            (since >= idle_ms).then(|| sid.clone())
        })
        .collect();
    expired
        .into_iter()
        .filter_map(|sid| sessions.remove(&sid).map(|s| (sid, s)))
        .collect()
}
