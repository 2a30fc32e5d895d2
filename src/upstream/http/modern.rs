//! A 2026-07-28 Streamable HTTP upstream: one stateless POST per request
//! with the 2026-07-28 headers (`MCP-Protocol-Version`, `Mcp-Method`,
//! `Mcp-Name`); long-lived requests hold their POST open.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::STREAM_TIMEOUT;
use super::exchange::{Dialect, Http, header_value, is_sse, outcome, parse_body};
use crate::driver::http::headers::{self, MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION};
use crate::error::ShimError;
use crate::jsonrpc::{ErrorObject, Id, Message, Peeked};
use crate::revision::MODERN_VERSION;
use crate::translate::raw::Params;
use crate::translate::session::ModernMeta;
use crate::upstream::{
    ModernUpstream, RawAnswer, Readiness, RpcResult, StreamEvent, TextAnswer, Upstream,
    UpstreamStream,
};
use crate::wire::modern::DetailedTask;

const MODERN_VERSION_VALUE: HeaderValue = HeaderValue::from_static(MODERN_VERSION);

/// The 2026-07-28 transport: no session, the method and name in headers.
#[derive(Debug, Default)]
pub(super) struct Stateless;

impl Dialect for Stateless {
    fn headers(
        &self,
        hdrs: &mut HeaderMap,
        method: &str,
        name: Option<&str>,
    ) -> Result<(), ShimError> {
        if method.is_empty() || !headers::is_visible_ascii(method) {
            // It could not travel in Mcp-Method, and no 2026-07-28 server
            // has a method by that name: answered as the server would.
            return Err(ShimError::MethodNotFound(format!(
                "{method:?} (a method name outside visible ASCII cannot be sent to a 2026-07-28 server)"
            )));
        }
        hdrs.insert(MCP_PROTOCOL_VERSION, MODERN_VERSION_VALUE);
        hdrs.insert(MCP_METHOD, header_value(method)?);
        if let Some(name) = name {
            hdrs.insert(MCP_NAME, header_value(&headers::encode_sentinel(name))?);
        }
        Ok(())
    }

    fn check(&self, id: Id) -> Message {
        Message::request(id, "server/discover", crate::upstream::probe_params())
    }
}

/// A 2026-07-28 Streamable HTTP upstream.
#[derive(Debug)]
pub struct ModernHttpUpstream {
    http: Arc<Http<Stateless>>,
}

impl ModernHttpUpstream {
    /// The probed upstream.
    pub(super) fn new(http: Http<Stateless>) -> Self {
        ModernHttpUpstream {
            http: Arc::new(http),
        }
    }

    /// While client requests wait, asks every `every` for a sign of life
    /// (`server/discover`); one unanswered for `timeout` fails every
    /// request in flight with "upstream stopped answering", as a hung
    /// child does. Requests made afterwards are tried again: an HTTP
    /// server may come back by itself. Ends when the upstream is dropped.
    pub fn watch_liveness(&self, every: Duration, timeout: Duration) {
        self.http.watch_liveness(every, timeout);
    }

    /// One request and its answer; with `meta`, its members are written
    /// into `params._meta` from their serialised form.
    async fn exchange(
        &self,
        method: &str,
        params: Value,
        meta: Option<&ModernMeta>,
    ) -> Result<RpcResult, ShimError> {
        let id = self.http.next_id();
        let spliced = meta.map(|meta| {
            let mut body = Vec::with_capacity(512);
            meta.write_request(&mut body, &id, method, Some(&params));
            body
        });
        let msg = Message::request(id, method, params);
        let body = spliced.unwrap_or_else(|| msg.to_json().into_bytes());
        let answer = self.http.watched(self.http.post_as(&msg, body)).await?;
        outcome(method, answer)
    }
}

#[async_trait]
impl Upstream for ModernHttpUpstream {
    /// Up while the server answers HTTP at all (any status: it is there);
    /// down, with why, when it cannot be reached or does not answer within
    /// 5 s. Asks with a `server/discover`.
    async fn check_readiness(&self) -> Readiness {
        self.http.check_readiness().await
    }

    async fn request(&self, method: &str, params: Value) -> Result<RpcResult, ShimError> {
        self.exchange(method, params, None).await
    }

    async fn events_handled(&self) {
        self.http.events_handled().await;
    }

    fn notify(&self, method: &str, params: Value) -> Result<(), ShimError> {
        let msg = Message::notification(method, params);
        self.http.post_later(msg, "notification");
        Ok(())
    }

    fn respond(&self, id: Id, outcome: RpcResult) -> Result<(), ShimError> {
        let msg = match outcome {
            Ok(result) => Message::response(id, result),
            Err(error) => Message::error(Some(id), error),
        };
        self.http.post_later(msg, "answer");
        Ok(())
    }
}

#[async_trait]
impl ModernUpstream for ModernHttpUpstream {
    async fn request_with_meta(
        &self,
        method: &str,
        params: &Value,
        meta: &ModernMeta,
    ) -> Result<RpcResult, ShimError> {
        // The request is kept as a message for its headers, so it owns a
        // copy.
        self.exchange(method, params.clone(), Some(meta)).await
    }

    async fn get_task(
        &self,
        task_id: &str,
        meta: &ModernMeta,
    ) -> Result<Result<DetailedTask, ErrorObject>, ShimError> {
        self.http.watched(self.http.get_task(task_id, meta)).await
    }

    async fn request_text(
        &self,
        method: &str,
        params: Params<'_>,
        meta: &ModernMeta,
    ) -> Option<Result<TextAnswer, ShimError>> {
        Some(
            self.http
                .watched(self.http.request_text(method, params, meta))
                .await,
        )
    }

    async fn open_stream(&self, method: &str, params: Value) -> Result<UpstreamStream, ShimError> {
        let id = self.http.next_id();
        let (tx, rx) = mpsc::unbounded_channel();
        let http = self.http.clone();
        let msg = Message::request(id.clone(), method, params);
        let task = tokio::spawn(async move { http.run_stream(msg, tx).await });
        // Dropping the POST's response closes the connection: on HTTP that
        // is how a client ends a long-lived request.
        let abort = task.abort_handle();
        Ok(UpstreamStream::new(id, rx, move || abort.abort()))
    }

    /// The client's own id travels as is: each POST stands alone.
    async fn relay_raw(
        &self,
        id: &Id,
        method: &str,
        name: Option<&str>,
        body: Bytes,
    ) -> Option<Result<RawAnswer, ShimError>> {
        Some(
            self.http
                .watched(self.http.relay_body(id, method, name, body))
                .await,
        )
    }
}

impl Http<Stateless> {
    /// [`ModernUpstream::get_task`]: a plain JSON answer that is a task is
    /// read straight into one; anything else (an error, an SSE answer, an
    /// odd shape) is read as any answer.
    async fn get_task(
        &self,
        task_id: &str,
        meta: &ModernMeta,
    ) -> Result<Result<DetailedTask, ErrorObject>, ShimError> {
        let params = json!({ "taskId": task_id });
        let read = crate::wire::modern::detailed_task_answer;
        match self.post_reading("tasks/get", &params, meta, read).await? {
            Ok(task) => Ok(Ok(task)),
            Err(answer) => crate::upstream::task_of(answer),
        }
    }

    /// [`ModernUpstream::request_text`]: the result of a plain JSON answer
    /// is handed over as the text it came in.
    async fn request_text(
        &self,
        method: &str,
        params: Params<'_>,
        meta: &ModernMeta,
    ) -> Result<TextAnswer, ShimError> {
        // The params are read for the `Mcp-Name` header, and again should
        // the answer come as a stream: a tree either way.
        let tree;
        let params = match params {
            Params::Tree(params) => params,
            text => {
                tree = text.to_value();
                &tree
            }
        };
        // Only a result answer is handed over as text: anything else a
        // body holds is read here, and refused as any answer is. One that
        // opens as serialisers write one is known by its opening, as the
        // stdio reader knows it (the caller reads the whole of it once);
        // another shape is read through before it is handed over.
        let read = |body: &[u8]| {
            let text = std::str::from_utf8(body).ok()?;
            if crate::jsonrpc::answer_id(text).is_none() {
                crate::jsonrpc::result_answer(text)?;
            }
            Some(text.to_owned())
        };
        match self.post_reading(method, params, meta, read).await? {
            Ok(text) => Ok(TextAnswer::Line(text)),
            Err(answer) => Ok(TextAnswer::Read(answer)),
        }
    }

    /// Posts request `method` with `meta` spliced into its params. A plain
    /// JSON answer's bytes go to `read` first, and what it takes from them
    /// is `Ok`; anything else (an error, an SSE answer, an answer `read`
    /// does not take) is read as any answer, `Err`.
    async fn post_reading<T>(
        &self,
        method: &str,
        params: &Value,
        meta: &ModernMeta,
        read: impl FnOnce(&[u8]) -> Option<T>,
    ) -> Result<Result<T, RpcResult>, ShimError> {
        let id = self.next_id();
        let mut body = Vec::with_capacity(512);
        meta.write_request(&mut body, &id, method, Some(params));
        let name = headers::name_source(method, Some(params));
        let resp = self.send_body(method, name, body.into(), None).await?;
        let answer = if resp.status() == StatusCode::ACCEPTED || is_sse(&resp) {
            // Rare: only then is the request needed as a message (its id).
            let msg = Message::request(id, method, params.clone());
            self.answer_of(&msg, resp).await?
        } else {
            let (status, body) = self.read_body(resp).await?;
            if let Some(taken) = read(&body) {
                return Ok(Ok(taken));
            }
            Some(parse_body(status, &body)?)
        };
        Ok(Err(outcome(method, answer)?))
    }

    /// [`ModernUpstream::relay_raw`]: the body as it came, and a plain
    /// JSON answer to the same id handed back in its bytes.
    async fn relay_body(
        &self,
        id: &Id,
        method: &str,
        name: Option<&str>,
        body: Bytes,
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::raw::PlainParams;
    use crate::upstream::http::{HttpUpstream, connect_service};

    /// A 2026-07-28 server in process: `server/discover` answered as the
    /// reference server answers it, any other request with `body` (its id
    /// written where `ID` stands).
    fn answering(body: &'static str) -> axum::Router {
        axum::Router::new().fallback(move |req: Bytes| async move {
            let req: Value = serde_json::from_slice(&req).unwrap();
            let id = req["id"].to_string();
            let text = if req["method"] == "server/discover" {
                json!({"jsonrpc": "2.0", "id": req["id"], "result": {
                    "supportedVersions": ["2026-07-28"],
                    "capabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
                    "resultType": "complete"}})
                .to_string()
            } else {
                body.replace("ID", &id)
            };
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                text,
            )
        })
    }

    async fn text_answer(body: &'static str) -> TextAnswer {
        let uri = axum::http::Uri::from_static("/");
        let router = answering(body);
        let link =
            connect_service::<_, axum::body::Body, _>(router, uri, None, Duration::from_secs(5))
                .await
                .unwrap();
        let HttpUpstream::Modern(upstream) = link.upstream else {
            panic!("probed as 2026-07-28");
        };
        let params = PlainParams::task_id("t1").unwrap();
        let meta = ModernMeta::new(serde_json::Map::new());
        let answer = upstream.request_text("tasks/get", Params::Text(&params), &meta);
        answer.await.expect("answers as text").expect("answered")
    }

    /// A body that opens as a result answer is handed over as its text
    /// unread, and read in full only by whoever takes it: one that does
    /// not read through is then an error, as over stdio.
    #[tokio::test]
    async fn a_result_answer_is_known_by_its_opening_and_read_once() {
        let whole = r#"{"jsonrpc":"2.0","id":ID,"result":{"taskId":"t1","status":"working"}}"#;
        match text_answer(whole).await {
            TextAnswer::Line(line) => assert!(line.contains(r#""status":"working""#), "{line}"),
            other => panic!("as text: {other:?}"),
        }
        let cut = r#"{"jsonrpc":"2.0","id":ID,"result":{"taskId":"t1","#;
        let answer = text_answer(cut).await;
        assert!(matches!(answer, TextAnswer::Line(_)), "{answer:?}");
        let err = answer.outcome().expect_err("a cut answer is no result");
        assert_eq!(err.code, crate::error::codes::INTERNAL_ERROR, "{err:?}");
    }

    /// Another order of members is read through before it is handed
    /// over; an error answer is read, not handed over.
    #[tokio::test]
    async fn other_answers_are_read_before_they_are_handed_over() {
        let reordered = r#"{"result":{"taskId":"t1","status":"working"},"id":ID,"jsonrpc":"2.0"}"#;
        assert!(matches!(text_answer(reordered).await, TextAnswer::Line(_)));
        let error = r#"{"jsonrpc":"2.0","id":ID,"error":{"code":-32602,"message":"unknown task"}}"#;
        match text_answer(error).await {
            TextAnswer::Read(Err(e)) => assert_eq!(e.code, -32602),
            other => panic!("read as an error: {other:?}"),
        }
    }
}
