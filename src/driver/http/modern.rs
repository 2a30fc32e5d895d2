//! Modern (2026-07-28) requests: stateless, one engine session per POST,
//! scoped to the caller's principal.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;

use super::{App, error_response, headers, json_response, modern_status};
use crate::bridge::IfDropped;
use crate::bridge::modern_front::ModernSession;
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message, Request};
use crate::revision::{self, META_SUBSCRIPTION_ID, MODERN_VERSION, Revision};
use crate::scope::{Principal, Scope};
use crate::translate::session::validate_modern_meta;
use crate::upstream::stream::StreamEvent;
use crate::upstream::{AnyUpstream, ModernUpstream, RawAnswer};

pub(super) async fn post(
    app: Arc<App>,
    msg: Message,
    body: Bytes,
    hdrs: &HeaderMap,
    principal: Option<Principal>,
) -> Response {
    app.metrics
        .count(Revision::Modern, msg.method().unwrap_or("(response)"));
    let Message::Request(req) = &msg else {
        // Modern clients send no responses; notifications are accepted.
        return StatusCode::ACCEPTED.into_response();
    };
    let id = req.id.clone();
    // Refused before the header checks, on the bridge and the relay alike:
    // relayed, `tasks/list` would be the one request whose answer the
    // shim could not scope to the caller.
    if revision::is_legacy_only_request(&req.method) {
        let e = revision::not_a_modern_method(&req.method);
        return error_response(modern_status(e.code()), Some(id), e);
    }
    match headers::check(hdrs, &msg, app.opts.accept_missing_mcp_name) {
        Ok(headers::Checked::Complete) => {}
        Ok(headers::Checked::NameMissing) => missing_mcp_name(&app, &req.method, &principal),
        Err(e) => return error_response(StatusCode::BAD_REQUEST, Some(id), e),
    }
    if let Some(v) = headers::header(hdrs, &headers::MCP_PROTOCOL_VERSION)
        && v != MODERN_VERSION
    {
        return error_response(
            StatusCode::BAD_REQUEST,
            Some(id),
            ShimError::unsupported_version(v),
        );
    }
    if let Err(e) = validate_modern_meta(req.params.as_ref()) {
        return error_response(StatusCode::BAD_REQUEST, Some(id), e);
    }
    let listen = req.method == "subscriptions/listen";
    let front = match (&app.upstream, &app.modern) {
        (AnyUpstream::Legacy(_), Some(front)) => front,
        (AnyUpstream::Legacy(_), None) => {
            unreachable!("HttpShim::new gives a 2025-11-25 upstream its modern front")
        }
        // Same revision both sides: relay the request as it is.
        (AnyUpstream::Modern(up), _) => {
            return relay(&app, &**up, req, body, principal, listen).await;
        }
    };
    let sse = super::accepts_sse(hdrs);
    let (tx, rx) = mpsc::unbounded_channel();
    let session = front.request_session(principal, tx);
    session.handle_client(msg);
    if listen {
        return stream(&app, rx, id, session).await;
    }
    answer(rx, id, sse, session).await
}

/// A 2026-07-28 request to the same-revision upstream `up`, relayed as it
/// is (a listen as the caller's own stream), within the caller's scope.
async fn relay(
    app: &App,
    up: &dyn ModernUpstream,
    req: &Request,
    body: Bytes,
    principal: Option<Principal>,
    listen: bool,
) -> Response {
    let scope = &principal.map_or_else(Scope::anonymous, Scope::from);
    if listen {
        return relay_listen(app, up, req, scope).await;
    }
    match not_the_callers_task(app, req, scope).await {
        Ok(None) => relay_inline(app, up, req, body, scope).await,
        Ok(Some(task_id)) => relay_as_unknown(app, up, req, task_id).await,
        Err(e) => error_response(StatusCode::OK, Some(req.id.clone()), e),
    }
}

/// Most callers whose first request without `Mcp-Name` is remembered (so
/// that only it is logged at warn): principals are not bounded in number.
const MISSING_NAME_CALLERS: usize = 10_000;

/// A request let through without its `Mcp-Name`: counted, and the first of
/// each caller (principal, or the anonymous scope) logged at warn, so the
/// operator can see which clients rely on `--accept-missing-mcp-name`
/// without a line per request.
fn missing_mcp_name(app: &App, method: &str, principal: &Option<Principal>) {
    app.metrics.count_missing_mcp_name();
    let anonymous = Scope::anonymous();
    let caller = principal
        .as_ref()
        .map_or(anonymous.key(), |p| p.scope().key());
    let first = {
        let mut seen = app
            .missing_mcp_name_callers
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        seen.len() < MISSING_NAME_CALLERS && seen.insert(caller.to_owned())
    };
    if first {
        tracing::warn!(
            %caller,
            %method,
            "a 2026-07-28 request without the Mcp-Name header, served (--accept-missing-mcp-name); \
             only the first of this caller is logged, all are counted in mcp_shim_missing_mcp_name_total"
        );
    } else {
        tracing::debug!(%caller, %method, "a 2026-07-28 request without Mcp-Name, served");
    }
}

/// The answer to `id`. Alone it goes back as plain JSON; a notification
/// before it (the request's progress) opens an SSE stream, for a client
/// that takes one, which ends with the answer. A client that takes only
/// JSON gets the answer alone.
///
/// A client that closes the connection before the answer cancels the
/// request (2026-07-28 Streamable HTTP, "Cancellation"): this future, or
/// the SSE stream it hands over to, is dropped unanswered.
async fn answer(
    mut rx: mpsc::UnboundedReceiver<Message>,
    id: Id,
    sse: bool,
    session: Arc<ModernSession>,
) -> Response {
    let hang_up = {
        let (session, id) = (session.clone(), id.clone());
        IfDropped::new(move || session.abandon(&id))
    };
    let first = loop {
        let Some(m) = rx.recv().await else {
            hang_up.disarm();
            return error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                Some(id),
                ShimError::Internal("the request ended without an answer".into()),
            );
        };
        if super::is_answer_to(&m, &id) {
            hang_up.disarm();
            let status = match &m {
                Message::Error(e) => modern_status(e.error.code),
                _ => StatusCode::OK,
            };
            return json_response(status, &m);
        }
        if sse && matches!(m, Message::Notification(_)) {
            break m;
        }
    };
    // The stream holds the session: progress is routed to it only while
    // it lives.
    super::sse_until_answer(&first, rx, id, session, Some(hang_up))
}

/// A long-lived SSE stream (`subscriptions/listen`), fed by `engine`. A
/// listen the front refuses (its first message is the error answer) is
/// answered as JSON with that error's HTTP status, as every other refused
/// request is.
async fn stream(
    app: &App,
    mut rx: mpsc::UnboundedReceiver<Message>,
    id: Id,
    engine: Arc<ModernSession>,
) -> Response {
    let Some(first) = rx.recv().await else {
        let e = ShimError::Internal("the request ended without an answer".into());
        return error_response(StatusCode::INTERNAL_SERVER_ERROR, Some(id), e);
    };
    if let Message::Error(e) = &first
        && e.id.as_ref() == Some(&id)
    {
        return json_response(modern_status(e.error.code), &first);
    }
    // The engine holds the stream's subscription and the front holds the
    // engine only weakly: unless the stream keeps it, it goes once the
    // acknowledgement is sent, ending the stream before any later status.
    // Held here, it lives as long as the client reads. The stream ends
    // after its answer (the error the front sends when the upstream is
    // gone for good).
    // At shutdown the front answers the listen (a graceful close) before
    // the shim starts closing streams: what is queued goes out first, and
    // only then does the stream end.
    let closing = app.closing.subscribe();
    let rest = futures_util::stream::unfold(Some((rx, engine, id, closing)), |state| async move {
        let (mut rx, engine, id, mut closing) = state?;
        let m = tokio::select! {
            biased;
            m = rx.recv() => m?,
            _ = closing.wait_for(|c| *c) => rx.try_recv().ok()?,
        };
        let next = (!super::is_answer_to(&m, &id)).then_some((rx, engine, id, closing));
        Some((super::sse_event(&m), next))
    });
    sse_answer(&first, rest)
}

/// An SSE answer: `first`, then the events of `rest`. Tells a proxy in
/// front not to buffer it, so each event reaches the client as it comes.
fn sse_answer<S>(first: &Message, rest: S) -> Response
where
    S: futures_util::Stream<Item = Result<axum::response::sse::Event, std::convert::Infallible>>
        + Send
        + 'static,
{
    let events = futures_util::StreamExt::chain(
        futures_util::stream::once(std::future::ready(super::sse_event(first))),
        rest,
    );
    let sse = Sse::new(events).keep_alive(KeepAlive::default());
    ([("x-accel-buffering", "no")], sse).into_response()
}

/// A same-revision `subscriptions/listen`, opened upstream as the caller's
/// own stream. The upstream sees one client (the shim), so the filter it
/// gets names only tasks the ledger records for `scope` (every other id is
/// dropped, as a server drops ids it does not know); its events go back to
/// the client as SSE under the client's request id, until the client goes
/// (dropping the stream closes the upstream one) or the upstream ends it.
async fn relay_listen(
    app: &App,
    up: &dyn ModernUpstream,
    req: &Request,
    scope: &Scope,
) -> Response {
    let id = req.id.clone();
    let mut params = req.params.clone().unwrap_or_default();
    let own = match own_task_filter(app, &mut params, scope).await {
        Ok(own) => own,
        Err(e) => return error_response(StatusCode::OK, Some(id), e),
    };
    let mut upstream = match up.open_stream("subscriptions/listen", params).await {
        Ok(s) => s,
        Err(e) => {
            let m = Message::error(Some(id), e.into());
            return json_response(modern_status(m_code(&m)), &m);
        }
    };
    // A refusal (the first event ends the stream) is answered as JSON with
    // its error's HTTP status, as every other refused request is.
    let first = loop {
        match upstream.next().await {
            Some(StreamEvent::Notification(n)) => {
                if let Some(m) = relayed_event(n, &id, &own) {
                    break m;
                }
            }
            Some(StreamEvent::Ended(end)) => {
                let m = stream_end(end, &id);
                return json_response(modern_status(m_code(&m)), &m);
            }
            None => {
                let e = ShimError::Upstream("the upstream ended the listen stream".into());
                return error_response(StatusCode::OK, Some(id), e);
            }
        }
    };
    let closing = app.closing.subscribe();
    let rest =
        futures_util::stream::unfold(Some((upstream, id, own, closing)), |state| async move {
            let (mut upstream, id, own, mut closing) = state?;
            loop {
                let event = tokio::select! {
                    biased;
                    e = upstream.next() => e?,
                    // At shutdown the stream ends; dropping the upstream
                    // one closes it there.
                    _ = closing.wait_for(|c| *c) => return None,
                };
                match event {
                    StreamEvent::Notification(n) => {
                        if let Some(m) = relayed_event(n, &id, &own) {
                            let event = super::sse_event(&m);
                            return Some((event, Some((upstream, id, own, closing))));
                        }
                    }
                    StreamEvent::Ended(end) => {
                        return Some((super::sse_event(&stream_end(end, &id)), None));
                    }
                }
            }
        });
    sse_answer(&first, rest)
}

/// Cuts `params.notifications.taskIds` of a listen down to the tasks the
/// ledger records for `scope`; returns those ids (what the stream may
/// carry task notifications for).
async fn own_task_filter(
    app: &App,
    params: &mut serde_json::Value,
    scope: &Scope,
) -> Result<std::collections::HashSet<String>, ShimError> {
    let mut own = std::collections::HashSet::new();
    let Some(ids) = params
        .get_mut("notifications")
        .and_then(|n| n.get_mut("taskIds"))
        .and_then(serde_json::Value::as_array_mut)
    else {
        return Ok(own);
    };
    let now = app.clock.now_ms();
    for task_id in ids.iter().filter_map(serde_json::Value::as_str) {
        if app.ledger.scope_of(task_id, now).await?.as_ref() == Some(scope) {
            own.insert(task_id.to_owned());
        }
    }
    ids.retain(|v| v.as_str().is_some_and(|t| own.contains(t)));
    Ok(own)
}

/// An upstream stream notification as the client's: tagged with the
/// client's listen id instead of the shim's. A task notification for a task
/// not in `own` is dropped (the upstream was asked for none, but the
/// stream is the caller's alone whatever the upstream sends).
fn relayed_event(
    mut n: crate::jsonrpc::Notification,
    id: &Id,
    own: &std::collections::HashSet<String>,
) -> Option<Message> {
    if n.method == "notifications/tasks"
        && !n
            .params
            .as_ref()
            .and_then(|p| p.get("taskId"))
            .and_then(serde_json::Value::as_str)
            .is_some_and(|t| own.contains(t))
    {
        return None;
    }
    if let Some(meta) = n
        .params
        .as_mut()
        .and_then(|p| p.get_mut("_meta"))
        .and_then(serde_json::Value::as_object_mut)
        && meta.contains_key(META_SUBSCRIPTION_ID)
    {
        meta.insert(META_SUBSCRIPTION_ID.to_owned(), serde_json::json!(id));
    }
    Some(Message::Notification(n))
}

/// The client's answer to its listen when the upstream stream ends.
fn stream_end(end: Result<crate::upstream::RpcResult, ShimError>, id: &Id) -> Message {
    match end {
        Ok(Ok(result)) => Message::response(id.clone(), result),
        Ok(Err(e)) => Message::error(Some(id.clone()), e),
        Err(e) => Message::error(Some(id.clone()), e.into()),
    }
}

/// The task id of a same-revision `tasks/get|update|cancel` unless the
/// ledger holds that task for `scope`. The upstream sees one client (the
/// shim), so it cannot keep principals apart itself, and the ledger holds
/// every task a caller can own here: each one a relayed `tools/call`
/// created is recorded as its caller's ([`record_created`]; one the ledger
/// refuses is cancelled). Any other id is no business of this caller's,
/// whether the ledger holds it for another scope (another principal's, or
/// one the shim made for a 2025-11-25 session) or not at all: the record
/// of a task whose session ended goes with the session, while the task
/// itself may live on upstream.
async fn not_the_callers_task<'r>(
    app: &App,
    req: &'r Request,
    scope: &Scope,
) -> Result<Option<&'r str>, ShimError> {
    if !matches!(
        req.method.as_str(),
        "tasks/get" | "tasks/update" | "tasks/cancel"
    ) {
        return Ok(None);
    }
    let Some(task_id) = req
        .params
        .as_ref()
        .and_then(|p| p.get("taskId"))
        .and_then(serde_json::Value::as_str)
    else {
        return Ok(None);
    };
    let owner = app.ledger.scope_of(task_id, app.clock.now_ms()).await?;
    Ok((owner.as_ref() != Some(scope)).then_some(task_id))
}

/// Another scope's task, asked for through the relay: the upstream is
/// asked about a stand-in id of the same form instead, which it does not
/// know, and its answer goes back with the stand-in replaced by the id the
/// client sent. So the client reads exactly what it would for an id that
/// does not exist, and the task is not touched.
async fn relay_as_unknown(
    app: &App,
    up: &dyn ModernUpstream,
    req: &Request,
    task_id: &str,
) -> Response {
    let stand_in = stand_in_for(task_id);
    let mut params = req.params.clone().unwrap_or_default();
    params["taskId"] = serde_json::Value::from(stand_in.as_str());
    let asked = Request {
        id: req.id.clone(),
        method: req.method.clone(),
        params: Some(params),
    };
    let body = Bytes::from(Message::Request(asked.clone()).to_json());
    // The ledger's scope does not matter here: the stand-in is no one's.
    let resp = relay_inline(app, up, &asked, body, &Scope::anonymous()).await;
    let (parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        let e = ShimError::Upstream("the upstream's answer could not be read".into());
        return error_response(StatusCode::OK, Some(req.id.clone()), e);
    };
    let text = String::from_utf8_lossy(&bytes).replace(&stand_in, task_id);
    let mut resp = Response::from_parts(parts, axum::body::Body::from(text));
    resp.headers_mut()
        .remove(axum::http::header::CONTENT_LENGTH);
    resp
}

/// A random id shaped like `id`: each ASCII digit or letter replaced by a
/// random one of its kind (hex letters by hex letters), anything else kept,
/// so an upstream that checks the form of its ids answers "not found".
fn stand_in_for(id: &str) -> String {
    let mut noise = vec![0u8; id.chars().count()];
    crate::ids::fill(&mut noise);
    id.chars()
        .zip(noise)
        .map(|(c, r)| {
            let pick = |set: &[u8]| char::from(set[usize::from(r) % set.len()]);
            match c {
                '0'..='9' => pick(b"0123456789"),
                'a'..='f' => pick(b"0123456789abcdef"),
                'A'..='F' => pick(b"0123456789ABCDEF"),
                'g'..='z' => pick(b"abcdefghijklmnopqrstuvwxyz"),
                'G'..='Z' => pick(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"),
                other => other,
            }
        })
        .collect()
}

/// Records the task a relayed `tools/call` created (its answer is
/// `resultType: "task"`) as `scope`'s, so that no other scope reaches it
/// through the relay ([`not_the_callers_task`]). A ledger that refuses it (the
/// scope's `--max-tasks-per-client`, a failing store) must not leave it
/// running unrecorded: another scope could then reach it, and the cap
/// would not hold. It is cancelled upstream, and the error returned is the
/// client's answer instead of the task, as on the translating paths.
async fn record_created(
    app: &App,
    req: &Request,
    scope: &Scope,
    result: &serde_json::Value,
) -> Result<(), crate::jsonrpc::ErrorObject> {
    if crate::wire::modern::result_type_of(result) != crate::wire::modern::result_type::TASK {
        return Ok(());
    }
    let d = match crate::wire::modern::DetailedTask::from_value(result) {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(error = %e, "a relayed task creation could not be read; not recorded");
            return Ok(());
        }
    };
    let task_id = d.task.task_id.clone();
    let record = crate::ledger::TaskRecord::new(
        scope.clone(),
        crate::translate::task::detailed_to_legacy_record(&d),
        Some(
            app.clock
                .record_expiry(d.task.ttl_ms, app.opts.bridge.max_task_ttl_ms),
        ),
    );
    let Err(refused) = app.ledger.insert(record, app.clock.now_ms()).await else {
        return Ok(());
    };
    tracing::warn!(task = %task_id, error = %refused, "a relayed task was not recorded; cancelling it upstream");
    // The client's own `_meta` (it passed the checks) speaks for the cancel.
    let mut params = serde_json::json!({"taskId": task_id});
    if let Some(meta) = req.params.as_ref().and_then(|p| p.get("_meta")) {
        params["_meta"] = meta.clone();
    }
    let upstream = app.upstream.clone();
    let cancel = async move { upstream.request("tasks/cancel", params).await };
    Err(crate::bridge::cancel_unrecorded(task_id, cancel, refused))
}

/// The answer to relayed `req`: `result`, or the refusal of the task it
/// created when the ledger would not record it ([`record_created`]).
async fn relayed_answer(
    app: &App,
    req: &Request,
    scope: &Scope,
    result: serde_json::Value,
) -> Message {
    let recorded = if req.method == "tools/call" {
        record_created(app, req, scope, &result).await
    } else {
        Ok(())
    };
    match recorded {
        Ok(()) => Message::response(req.id.clone(), result),
        Err(error) => Message::error(Some(req.id.clone()), error),
    }
}

/// Pass-through of a modern request to a modern upstream, answered in this
/// handler: the body already passed every check, so it goes upstream as it
/// came and, when the answer is a plain JSON answer to the same id, that
/// goes back as it came (no task, channel or re-serialisation per request).
/// A task a `tools/call` creates is recorded as `scope`'s.
async fn relay_inline(
    app: &App,
    up: &dyn ModernUpstream,
    req: &Request,
    body: Bytes,
    scope: &Scope,
) -> Response {
    let name = headers::name_source(&req.method, req.params.as_ref());
    let creates = req.method == "tools/call";
    let answer = match up.relay_raw(&req.id, &req.method, name, body).await {
        Some(Ok(a)) => a,
        Some(Err(e)) => {
            let m = Message::error(Some(req.id.clone()), e.into());
            return json_response(modern_status(m_code(&m)), &m);
        }
        None => {
            let params = req.params.clone().unwrap_or_default();
            let m = match up.request(&req.method, params).await {
                Ok(Ok(result)) => relayed_answer(app, req, scope, result).await,
                Ok(Err(error)) => Message::error(Some(req.id.clone()), error),
                Err(e) => Message::error(Some(req.id.clone()), e.into()),
            };
            return json_response(modern_status(m_code(&m)), &m);
        }
    };
    let message = match answer {
        RawAnswer::Verbatim(body) => {
            // Only an answer that names a task is read whole.
            if creates
                && memchr::memmem::find(&body, b"\"task\"").is_some()
                && let Ok(v) = serde_json::from_slice::<serde_json::Value>(&body)
                && let Err(error) = record_created(app, req, scope, &v["result"]).await
            {
                let m = Message::error(Some(req.id.clone()), error);
                return json_response(modern_status(m_code(&m)), &m);
            }
            return raw_json(StatusCode::OK, body);
        }
        RawAnswer::Parsed(message) => message,
    };
    match message {
        Message::Response(r) => {
            let m = relayed_answer(app, req, scope, r.result).await;
            json_response(modern_status(m_code(&m)), &m)
        }
        // Errors are rare: rebuilt, so they read exactly as before.
        Message::Error(e) => {
            let m = Message::error(Some(req.id.clone()), e.error);
            json_response(modern_status(m_code(&m)), &m)
        }
        _ => {
            let e = ShimError::Upstream(format!(
                "the HTTP upstream gave no answer to {}",
                req.method
            ));
            let m = Message::error(Some(req.id.clone()), e.into());
            json_response(modern_status(m_code(&m)), &m)
        }
    }
}

/// The error code of an error message (0 for anything else).
fn m_code(m: &Message) -> i64 {
    match m {
        Message::Error(e) => e.error.code,
        _ => 0,
    }
}

/// A JSON body sent as the upstream wrote it.
fn raw_json(status: StatusCode, body: Bytes) -> Response {
    (status, [("content-type", "application/json")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::stand_in_for;

    #[test]
    fn a_stand_in_has_the_form_of_the_id_it_replaces() {
        for id in [
            "0123456789abcdef0123456789abcdef",
            "550e8400-e29b-41d4-a716-446655440000",
            "Task_42-xyz.Q",
            "tâche-7",
        ] {
            let s = stand_in_for(id);
            assert_ne!(s, id, "{id}");
            assert_eq!(s.chars().count(), id.chars().count(), "{id} → {s}");
            for (a, b) in id.chars().zip(s.chars()) {
                let kind = |c: char| {
                    if c.is_ascii_digit() || matches!(c, 'a'..='f') {
                        'h'
                    } else if matches!(c, 'A'..='F') {
                        'H'
                    } else if c.is_ascii_lowercase() {
                        'l'
                    } else if c.is_ascii_uppercase() {
                        'u'
                    } else {
                        c
                    }
                };
                // Hex stays hex; other letters stay letters of their case;
                // anything else is kept.
                match kind(a) {
                    'h' => assert!(kind(b) == 'h', "{id} → {s}"),
                    'H' => assert!(b.is_ascii_digit() || matches!(b, 'A'..='F'), "{id} → {s}"),
                    'l' => assert!(b.is_ascii_lowercase(), "{id} → {s}"),
                    'u' => assert!(b.is_ascii_uppercase(), "{id} → {s}"),
                    other => assert_eq!(b, other, "{id} → {s}"),
                }
            }
        }
    }
}
