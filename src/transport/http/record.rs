//! `--record` on the HTTP front: a layer over the MCP endpoint that copies
//! each client→shim body and each shim→client message (JSON answers and
//! SSE events alike) to a [`Recorder`], so that every front, legacy or
//! modern or relayed, is recorded the same way without each one knowing.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;

use super::PrincipalResolver;
use crate::jsonrpc::Message;
use crate::transport::record::{Recorder, SessionLabels};

/// What the layer records with.
#[derive(Clone)]
pub(crate) struct Tap {
    pub(crate) rec: Recorder,
    pub(crate) labels: SessionLabels,
    pub(crate) resolver: Arc<dyn PrincipalResolver>,
    pub(crate) max_body_bytes: usize,
}

/// The session a request belongs to: its `Mcp-Session-Id`, else (a
/// 2026-07-28 request, which has none) its principal. Only ever a key of
/// [`SessionLabels`], never written out.
fn session_key(tap: &Tap, req: &axum::http::request::Parts) -> Option<String> {
    if let Some(sid) = super::headers::header(&req.headers, "mcp-session-id") {
        return Some(format!("sid:{sid}"));
    }
    match tap.resolver.authenticate(&req.headers, &req.extensions) {
        Ok(Some(p)) => Some(format!("principal:{}", p.name())),
        _ => None,
    }
}

/// The middleware: records the request, then the answer as it streams.
pub(crate) async fn tap(State(tap): State<Tap>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    // Read here so it can be copied; the endpoint's own 413 rule still
    // applies to what is passed on.
    let Ok(bytes) = axum::body::to_bytes(body, tap.max_body_bytes.saturating_add(1)).await else {
        return StatusCode::PAYLOAD_TOO_LARGE.into_response();
    };
    let msg = Message::parse_bounded(&bytes, tap.max_body_bytes).ok();
    let known = session_key(&tap, &parts);
    // A request with a session is recorded at once (a blocking answer may
    // take long); one without waits for the answer's Mcp-Session-Id.
    if let (Some(key), Some(m)) = (&known, &msg) {
        tap.rec.record(&tap.labels.label(key), "c2s", m);
    }
    let resp = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let key = known.clone().unwrap_or_else(|| {
        super::headers::header(resp.headers(), "mcp-session-id")
            .map_or_else(|| "anonymous".to_owned(), |sid| format!("sid:{sid}"))
    });
    let label = tap.labels.label(&key);
    if known.is_none()
        && let Some(m) = &msg
    {
        tap.rec.record(&label, "c2s", m);
    }
    let sse = super::headers::header(resp.headers(), "content-type")
        .is_some_and(|c| c.starts_with("text/event-stream"));
    let (parts, body) = resp.into_parts();
    let rec = tap.rec.clone();
    let body = if sse {
        let mut pending = String::new();
        Body::from_stream(body.into_data_stream().map(move |chunk| {
            if let Ok(bytes) = &chunk {
                pending.push_str(&String::from_utf8_lossy(bytes));
                for m in take_events(&mut pending) {
                    rec.record(&label, "s2c", &m);
                }
            }
            chunk
        }))
    } else {
        let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
            return StatusCode::INTERNAL_SERVER_ERROR.into_response();
        };
        if let Ok(m) = Message::parse_bounded(&bytes, usize::MAX) {
            rec.record(&label, "s2c", &m);
        }
        Body::from(bytes)
    };
    Response::from_parts(parts, body)
}

/// The messages of the complete SSE events at the front of `pending`
/// (removed from it); comments and keep-alives carry none.
fn take_events(pending: &mut String) -> Vec<Message> {
    let mut out = Vec::new();
    while let Some(end) = pending.find("\n\n") {
        let event: String = pending.drain(..end + 2).collect();
        let data: Vec<&str> = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            continue;
        }
        if let Ok(m) = Message::parse_bounded(data.join("\n").as_bytes(), usize::MAX) {
            out.push(m);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_split_across_chunks_are_read_whole() {
        let mut pending = String::from(":\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",");
        assert!(take_events(&mut pending).is_empty());
        pending.push_str("\"method\":\"n\"}\n\nevent: mess");
        let got = take_events(&mut pending);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].method(), Some("n"));
        assert_eq!(pending, "event: mess");
    }
}
