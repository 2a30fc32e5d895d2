//! Streamable HTTP for the reference servers, at the endpoint `/mcp`.
//!
//! A thin adapter around [`ReferenceServer`]: it turns each HTTP request
//! into messages for the server and demultiplexes the server's outgoing
//! messages back to the HTTP exchange waiting for them, by JSON-RPC id.
//! - `modern`: 2026-07-28, POST only, one shared server, request metadata
//!   headers checked against the body, `subscriptions/listen` as a
//!   long-lived SSE stream.
//! - `legacy`: 2025-11-25 Streamable HTTP with sessions (`Mcp-Session-Id`),
//!   one server per session, a GET stream for unsolicited messages, and
//!   server→client requests on the SSE stream of the POST they belong to.
//! - `session`: one legacy session and the routing of its server's output.
//! - `checks`: the header and `Origin` checks, pure.

mod checks;
mod legacy;
mod modern;
mod session;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::Stream;
use tokio::net::TcpListener;

use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, Message};
use crate::revision::Revision;

/// The MCP endpoint path.
pub const ENDPOINT: &str = "/mcp";

/// Keep-alive comment interval on SSE streams (listen and GET streams may
/// stay quiet for long).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Binds `addr` and serves the reference server of `revision` over
/// Streamable HTTP until the process ends. Prints a line ending in the
/// endpoint URL on stdout.
pub async fn serve_http(revision: Revision, addr: SocketAddr) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| std::io::Error::new(e.kind(), format!("{addr}: {e}")))?;
    let local = listener.local_addr()?;
    {
        // Not `println!`: it panics when stdout is gone.
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "mcp-tasks-shim reference server ({revision}) listening on http://{local}{ENDPOINT}"
        )
        .and_then(|_| out.flush());
    }
    serve_http_on(revision, listener).await
}

/// Serves the reference server of `revision` over Streamable HTTP on an
/// already bound listener (tests bind port 0 and read the address first).
pub async fn serve_http_on(revision: Revision, listener: TcpListener) -> std::io::Result<()> {
    tracing::info!(%revision, addr = ?listener.local_addr().ok(), "reference server listening on HTTP");
    let app = router(revision, ENDPOINT);
    // SSE answers go out in several writes; without TCP_NODELAY, Nagle
    // holds the later ones until the client's delayed ACK (about 40 ms).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await
}

/// The reference server of `revision` as an axum `Router` serving the
/// endpoint at `path`, for a server of your own or a test that calls it
/// in-process (`/` behind `Router::nest_service`). Must be called inside a
/// tokio runtime (the modern server's output is demultiplexed by a task).
pub fn router(revision: Revision, path: &str) -> axum::Router {
    match revision {
        Revision::Modern => modern::router(path),
        Revision::Legacy => legacy::router(path),
    }
}

/// A message as a JSON body. An error without an id leaves `id` out.
fn json_body(msg: &Message) -> Vec<u8> {
    let mut buf = Vec::with_capacity(256);
    msg.write_json(&mut buf);
    buf
}

/// An HTTP response carrying one JSON-RPC message.
fn json_response(status: StatusCode, msg: &Message) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        json_body(msg),
    )
        .into_response()
}

/// An HTTP error response whose body is a JSON-RPC error.
fn error_response(status: StatusCode, id: Option<Id>, e: &ShimError) -> Response {
    json_response(status, &Message::error(id, e.to_error_object()))
}

/// The status a 2026-07-28 server answers the error with (the crate's one
/// code-to-status mapping).
fn modern_status(e: &ErrorObject) -> StatusCode {
    StatusCode::from_u16(crate::error::modern_http_status(e.code)).unwrap_or(StatusCode::OK)
}

/// Whether the `Accept` header lists `mime` (or a wildcard covering it).
fn accepts(headers: &HeaderMap, mime: &str) -> bool {
    let (kind, _) = mime.split_once('/').unwrap_or((mime, ""));
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|m| m.split(';').next().unwrap_or("").trim())
        .any(|m| m == mime || m == "*/*" || m == format!("{kind}/*"))
}

/// Whether the answer must be SSE: the client accepts event streams but
/// not JSON. Clients that accept both get JSON.
fn sse_only(headers: &HeaderMap) -> bool {
    accepts(headers, "text/event-stream") && !accepts(headers, "application/json")
}

/// One SSE `message` event carrying a JSON-RPC message.
fn event(msg: &Message) -> Event {
    let data = String::from_utf8(json_body(msg)).unwrap_or_default();
    Event::default().event("message").data(data)
}

/// An SSE response with keep-alive comments and proxy buffering disabled.
fn sse_response<S>(stream: S, extra: &[(&'static str, String)]) -> Response
where
    S: Stream<Item = Result<Event, Infallible>> + Send + 'static,
{
    let mut resp = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response();
    let h = resp.headers_mut();
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    for (name, value) in extra {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(*name, v);
        }
    }
    resp
}

/// The answer to an unparseable body: `-32700` without an id, or `-32600`
/// with the id if one could be read.
fn parse_failure(body: &[u8], e: ShimError) -> Response {
    let id = match e {
        ShimError::Parse(_) => None,
        _ => crate::jsonrpc::salvage_id(body),
    };
    error_response(StatusCode::BAD_REQUEST, id, &e)
}

/// The messages arriving on `rx` as SSE events. With `until_answer` the
/// stream ends after the first response or error (the final answer of a
/// POST). `guard` lives exactly as long as the stream, so dropping it tells
/// the owner the client went away.
fn message_stream<G: Send + 'static>(
    rx: tokio::sync::mpsc::UnboundedReceiver<Message>,
    guard: G,
    until_answer: bool,
) -> impl Stream<Item = Result<Event, Infallible>> + Send + 'static {
    futures_util::stream::unfold(Some((rx, guard)), move |state| async move {
        let (mut rx, guard) = state?;
        let msg = rx.recv().await?;
        let last = until_answer && matches!(msg, Message::Response(_) | Message::Error(_));
        let next = (!last).then_some((rx, guard));
        Some((Ok(event(&msg)), next))
    })
}
