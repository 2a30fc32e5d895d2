//! Modern (2026-07-28) requests: stateless, one engine session per POST,
//! scoped to the caller's principal.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::{App, error_response, headers, json_response, modern_status};
use crate::bridge::modern_front::ModernSession;
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message, Request};
use crate::revision::{MODERN_VERSION, Revision};
use crate::translate::session::validate_modern_meta;
use crate::upstream::RawAnswer;

pub(super) async fn post(
    app: Arc<App>,
    msg: Message,
    body: Bytes,
    hdrs: &HeaderMap,
    principal: Option<String>,
) -> Response {
    app.metrics
        .count(Revision::Modern, msg.method().unwrap_or("(response)"));
    let Message::Request(req) = &msg else {
        // Modern clients send no responses; notifications are accepted.
        return StatusCode::ACCEPTED.into_response();
    };
    let id = req.id.clone();
    if matches!(req.method.as_str(), "tasks/result" | "tasks/list") {
        let e = ShimError::MethodNotFound(req.method.clone());
        return error_response(StatusCode::NOT_FOUND, Some(id), e);
    }
    if let Err(e) = headers::check(hdrs, &msg) {
        return error_response(StatusCode::BAD_REQUEST, Some(id), e);
    }
    if let Some(v) = headers::header(hdrs, "mcp-protocol-version")
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
    let Some(front) = &app.modern else {
        // Same revision both sides: relay the request as it is. The
        // upstream's notifications are not demultiplexed per client, so a
        // listen stream cannot be relayed; refused at once rather than
        // left waiting for an answer that never comes.
        if listen {
            let e = ShimError::MethodNotFound(
                "subscriptions/listen is not relayed between two 2026-07-28 peers; poll tasks/get, or connect to the server directly".into(),
            );
            return error_response(StatusCode::NOT_FOUND, Some(id), e);
        }
        return relay_inline(&app, req, body).await;
    };
    let sse = super::accepts_sse(hdrs);
    let (tx, rx) = mpsc::unbounded_channel();
    let session = front.request_session(principal, tx);
    session.handle_client(msg);
    if listen {
        return stream(rx, id, session).await;
    }
    answer(rx, id, sse, session).await
}

/// The answer to `id`. Alone it goes back as plain JSON; a notification
/// before it (the request's progress) opens an SSE stream, for a client
/// that takes one, which ends with the answer. A client that takes only
/// JSON gets the answer alone.
async fn answer(
    mut rx: mpsc::UnboundedReceiver<Message>,
    id: Id,
    sse: bool,
    session: Arc<ModernSession>,
) -> Response {
    let first = loop {
        let Some(m) = rx.recv().await else {
            return error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                Some(id),
                ShimError::Internal("the request ended without an answer".into()),
            );
        };
        if super::is_answer_to(&m, &id) {
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
    super::sse_until_answer(&first, rx, id, session)
}

/// A long-lived SSE stream (`subscriptions/listen`), fed by `engine`. A
/// listen the front refuses (its first message is the error answer) is
/// answered as JSON with that error's HTTP status, as every other refused
/// request is.
async fn stream(
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
    // Held here, it lives as long as the client reads.
    let events = futures_util::StreamExt::chain(
        futures_util::stream::once(std::future::ready(first)),
        UnboundedReceiverStream::new(rx),
    )
    .map(move |m| {
        let _engine = &engine;
        super::sse_event(&m)
    });
    let mut resp = Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response();
    resp.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    resp
}

/// Pass-through of a modern request to a modern upstream, answered in this
/// handler: the body already passed every check, so it goes upstream as it
/// came and, when the answer is a plain JSON answer to the same id, that
/// goes back as it came (no task, channel or re-serialisation per request).
async fn relay_inline(app: &App, req: &Request, body: Bytes) -> Response {
    let name = headers::name_source(&req.method, req.params.as_ref());
    let answer = match app
        .upstream
        .relay_raw(&req.id, &req.method, name, body)
        .await
    {
        Some(Ok(a)) => a,
        Some(Err(e)) => {
            let m = Message::error(Some(req.id.clone()), e.into());
            return json_response(modern_status(m_code(&m)), &m);
        }
        None => {
            let params = req.params.clone().unwrap_or_default();
            let m = match app.upstream.request(&req.method, params).await {
                Ok(Ok(result)) => Message::response(req.id.clone(), result),
                Ok(Err(error)) => Message::error(Some(req.id.clone()), error),
                Err(e) => Message::error(Some(req.id.clone()), e.into()),
            };
            return json_response(modern_status(m_code(&m)), &m);
        }
    };
    let message = match answer {
        RawAnswer::Verbatim(body) => return raw_json(StatusCode::OK, body),
        RawAnswer::Parsed(message) => message,
    };
    match message {
        Message::Response(r) => {
            json_response(StatusCode::OK, &Message::response(req.id.clone(), r.result))
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
