//! Modern (2026-07-28) requests: stateless, one engine session per POST,
//! scoped to the caller's principal.

use std::convert::Infallible;
use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use tokio::sync::mpsc;
use tokio_stream::StreamExt;
use tokio_stream::wrappers::UnboundedReceiverStream;

use super::{App, error_response, headers, json_response, modern_status};
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message};
use crate::revision::{MODERN_VERSION, Revision};
use crate::translate::session::check_modern_meta;

/// Scope of requests that carry no principal.
const ANONYMOUS: &str = "anonymous";

pub(super) async fn post(app: Arc<App>, msg: Message, hdrs: &HeaderMap) -> Response {
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
    if let Err(e) = check_modern_meta(req.params.as_ref()) {
        return error_response(StatusCode::BAD_REQUEST, Some(id), e);
    }
    let scope = app.principal(hdrs).unwrap_or_else(|| ANONYMOUS.to_owned());
    let (tx, rx) = mpsc::unbounded_channel();
    let listen = req.method == "subscriptions/listen";
    match (&app.modern, app.upstream_rev) {
        (Some(front), _) => front.session(scope, tx).handle_client(msg),
        // Same revision both sides: relay the request as it is.
        (None, Revision::Modern) => relay(app.clone(), msg, tx),
        (None, Revision::Legacy) => unreachable!("a legacy upstream always has a modern front"),
    }
    if listen {
        return stream(rx);
    }
    answer(rx, id).await
}

/// Waits for the answer to `id`; notifications before it are dropped
/// (the JSON form carries one message).
async fn answer(mut rx: mpsc::UnboundedReceiver<Message>, id: Id) -> Response {
    while let Some(m) = rx.recv().await {
        match &m {
            Message::Response(r) if r.id == id => return json_response(StatusCode::OK, &m),
            Message::Error(e) if e.id.as_ref() == Some(&id) => {
                return json_response(modern_status(e.error.code), &m);
            }
            _ => {}
        }
    }
    error_response(
        StatusCode::INTERNAL_SERVER_ERROR,
        Some(id),
        ShimError::Internal("the request ended without an answer".into()),
    )
}

/// A long-lived SSE stream (`subscriptions/listen`).
fn stream(rx: mpsc::UnboundedReceiver<Message>) -> Response {
    let events = UnboundedReceiverStream::new(rx)
        .map(|m| Ok::<_, Infallible>(Event::default().event("message").data(m.to_json())));
    let mut resp = Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response();
    resp.headers_mut().insert(
        "x-accel-buffering",
        axum::http::HeaderValue::from_static("no"),
    );
    resp
}

/// Pass-through of a modern request to a modern upstream.
fn relay(app: Arc<App>, msg: Message, tx: mpsc::UnboundedSender<Message>) {
    let Message::Request(req) = msg else { return };
    tokio::spawn(async move {
        let params = req.params.clone().unwrap_or_default();
        let answer = match app.upstream.request(&req.method, params).await {
            Ok(Ok(result)) => Message::response(req.id, result),
            Ok(Err(error)) => Message::error(Some(req.id), error),
            Err(e) => Message::error(Some(req.id), e.into()),
        };
        let _ = tx.send(answer);
    });
}
