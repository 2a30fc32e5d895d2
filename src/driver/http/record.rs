//! `--record` on the HTTP front: a layer over the MCP endpoint that copies
//! each client→shim body and each shim→client message (JSON answers and
//! SSE events alike) to a [`Recorder`], so that every front, legacy or
//! modern or relayed, is recorded the same way without each one knowing.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures_util::{FutureExt, StreamExt};

use super::PrincipalResolver;
use crate::jsonrpc::Message;
use crate::transport::record::Recorder;

/// What the layer records with.
#[derive(Clone)]
pub(crate) struct Tap {
    pub(crate) rec: Recorder,
    pub(crate) resolver: Arc<dyn PrincipalResolver>,
    pub(crate) max_body_bytes: usize,
}

/// The session a request belongs to: its `Mcp-Session-Id`, else (a
/// 2026-07-28 request, which has none) its principal. Only ever a key of
/// the recorder's session labels ([`Recorder::session_label`]), never
/// written out.
fn session_key(tap: &Tap, req: &axum::http::request::Parts) -> Option<String> {
    if let Some(sid) = super::headers::header(&req.headers, &super::headers::MCP_SESSION_ID) {
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
        tap.rec.record(&tap.rec.session_label(key), "c2s", m);
    }
    let resp = next
        .run(Request::from_parts(parts, Body::from(bytes)))
        .await;
    let key = known.clone().unwrap_or_else(|| {
        super::headers::header(resp.headers(), &super::headers::MCP_SESSION_ID)
            .map_or_else(|| "anonymous".to_owned(), |sid| format!("sid:{sid}"))
    });
    let label = tap.rec.session_label(&key);
    if known.is_none()
        && let Some(m) = &msg
    {
        tap.rec.record(&label, "c2s", m);
    }
    let sse = super::headers::header(resp.headers(), axum::http::header::CONTENT_TYPE)
        .is_some_and(|c| c.starts_with("text/event-stream"));
    let (parts, body) = resp.into_parts();
    let rec = tap.rec.clone();
    let body = if sse {
        let mut copy = Events::default();
        Body::from_stream(body.into_data_stream().map(move |chunk| {
            if let Ok(bytes) = &chunk {
                for m in copy.take(bytes.clone()) {
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

/// An SSE parser fed the answer's chunks as they pass: each push is
/// parsed at once, in the middleware's own call, so a message is recorded
/// before the client can have read it (and sent the next request).
struct Events {
    feed: tokio::sync::mpsc::UnboundedSender<Bytes>,
    events: sse_stream::SseByteStream<Chunks>,
}

/// What [`Events`] feeds its parser: the chunks pushed, as a stream.
type Chunks = futures_util::stream::Map<
    tokio_stream::wrappers::UnboundedReceiverStream<Bytes>,
    fn(Bytes) -> Result<Bytes, std::convert::Infallible>,
>;

impl Default for Events {
    fn default() -> Self {
        let (feed, rx) = tokio::sync::mpsc::unbounded_channel();
        let ok: fn(Bytes) -> Result<Bytes, std::convert::Infallible> = Ok;
        let chunks = tokio_stream::wrappers::UnboundedReceiverStream::new(rx).map(ok);
        Events {
            feed,
            events: sse_stream::SseByteStream::new(chunks),
        }
    }
}

impl Events {
    /// The messages of the events `chunk` completes; comments and
    /// keep-alives carry none.
    fn take(&mut self, chunk: Bytes) -> Vec<Message> {
        let _ = self.feed.send(chunk);
        let mut out = Vec::new();
        // Everything fed is ready: polling ends (pending) once it is parsed.
        while let Some(Some(Ok(event))) = self.events.next().now_or_never() {
            if let Some(m) = event
                .data
                .and_then(|d| Message::parse_bounded(d.as_bytes(), usize::MAX).ok())
            {
                out.push(m);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_split_across_chunks_are_read_whole() {
        let mut events = Events::default();
        let first = Bytes::from_static(b":\n\nevent: message\ndata: {\"jsonrpc\":\"2.0\",");
        assert!(events.take(first).is_empty());
        let got = events.take(Bytes::from_static(b"\"method\":\"n\"}\r\n\r\nevent: mess"));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].method(), Some("n"));
        let got = events.take(Bytes::from_static(
            b"age\rdata: {\"jsonrpc\":\"2.0\",\"method\":\"m\"}\r\r",
        ));
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].method(), Some("m"));
    }
}
