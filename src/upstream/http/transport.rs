//! How an HTTP upstream's requests reach the server: over the
//! network with hyper's client, or by calling a tower service of the same
//! process. Everything above (headers, sessions, JSON or SSE answers) is
//! the same for both; only "send these bytes, give me the response" is
//! here.

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::{Body, Bytes, HttpBody};
use axum::http::header::{AUTHORIZATION, HOST, LOCATION};
use axum::http::{HeaderMap, HeaderValue, Method, Request, Response, Uri};
use http_body::{Frame, SizeHint};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::time::Sleep;
use tower::ServiceExt;

use crate::error::ShimError;

/// An error of any transport, boxed as tower and http-body box them.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a request got no response.
#[derive(Debug)]
pub(crate) struct Unanswered {
    /// What happened, with its causes.
    pub(crate) why: String,
    /// The exchange's deadline passed: sending it again would wait as long
    /// again, so it is not.
    pub(crate) timed_out: bool,
}

impl Unanswered {
    fn timed_out(why: &str) -> Self {
        Unanswered {
            why: why.to_owned(),
            timed_out: true,
        }
    }
}

/// One request out, its response (head, then a body still streaming).
#[async_trait]
pub(crate) trait Transport: Send + Sync + fmt::Debug + 'static {
    /// Sends one request; `timeout` (the transport's own when `None`)
    /// bounds the whole exchange, body included. `Err` is why the server
    /// could not be reached or did not answer, with its causes. The
    /// headers are borrowed: a caller that sends again (and a transport
    /// that follows a redirect) reuses them.
    async fn send(
        &self,
        method: Method,
        headers: &HeaderMap,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> Result<Response<Body>, Unanswered>;

    /// What the logs call the server (a URL, or "in-process").
    fn describe(&self) -> &str;
}

/// The network: hyper's pooled HTTP/1.1 client, one URL. Clones share the
/// pool.
///
/// hyper's client, not reqwest (which wraps it): reqwest parses the URL
/// twice per request (its redirect policy and its response) and wraps
/// the exchange in retry and redirect layers the shim does not use; that
/// was a fifth of the CPU of a request relayed over HTTP.
#[derive(Debug, Clone)]
pub(crate) struct Network {
    /// Absolute: hyper's client connects to its authority.
    uri: Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    timeout: Duration,
    /// `Basic` credentials of the URL's user and password, sent with
    /// every request (as browsers, curl and reqwest do with such a URL).
    authorization: Option<HeaderValue>,
    /// The URL without its credentials, for logs and errors.
    label: String,
}

impl Network {
    /// `url` (checked, see [`super::check_url`]), each exchange bounded
    /// by `request_timeout` unless the caller gives its own.
    pub(crate) fn new(url: &str, request_timeout: Duration) -> Result<Self, ShimError> {
        let mut parsed = super::check_url(url)?;
        let authorization = basic_credentials(&parsed);
        let _ = parsed.set_username("");
        let _ = parsed.set_password(None);
        let label = parsed.to_string();
        let uri: Uri = label
            .parse()
            .map_err(|e| ShimError::Upstream(format!("invalid upstream URL {label:?}: {e}")))?;
        let mut connector = HttpConnector::new();
        // Each answer is one small write; without TCP_NODELAY the next
        // request can wait on the server's delayed ACK.
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(POOL_IDLE)
            .build(connector);
        Ok(Network {
            uri,
            client,
            timeout: request_timeout,
            authorization,
            label,
        })
    }
}

/// `Authorization: Basic …` for the user and password of `url`, if it
/// names a user.
fn basic_credentials(url: &url::Url) -> Option<HeaderValue> {
    use base64::Engine;
    if url.username().is_empty() && url.password().is_none() {
        return None;
    }
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let pair = format!(
        "{}:{}",
        decode(url.username()),
        decode(url.password().unwrap_or_default())
    );
    let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
    let mut value = HeaderValue::from_str(&format!("Basic {encoded}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// Redirects followed for one request (reqwest's default limit).
const MAX_REDIRECTS: usize = 10;

/// Where a `307` or `308` answer to a request to `uri` sends it again,
/// with the same method and body (servers that mount their endpoint at
/// `/mcp/` redirect `/mcp` so). Other redirects would turn a POST into a
/// GET, which carries no message: their answer is read as it is.
fn redirect_target<B>(uri: &Uri, resp: &Response<B>) -> Option<Uri> {
    use axum::http::StatusCode;
    if !matches!(
        resp.status(),
        StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
    ) {
        return None;
    }
    let location = resp.headers().get(LOCATION)?.to_str().ok()?;
    let base = url::Url::parse(&uri.to_string()).ok()?;
    let next = base.join(location).ok()?;
    if next.scheme() != "http" {
        return None;
    }
    next.as_str().parse().ok()
}

/// How long an idle pooled connection is kept (reqwest's default).
const POOL_IDLE: Duration = Duration::from_secs(90);

#[async_trait]
impl Transport for Network {
    async fn send(
        &self,
        method: Method,
        headers: &HeaderMap,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> Result<Response<Body>, Unanswered> {
        // One timer for the whole exchange: redirects, the head, the body.
        let mut deadline = Box::pin(tokio::time::sleep(timeout.unwrap_or(self.timeout)));
        let mut uri = self.uri.clone();
        // Credentials stay with the server they were given for.
        let mut same_server = true;
        for _ in 0..=MAX_REDIRECTS {
            let mut sent = headers.clone();
            if !same_server {
                sent.remove(AUTHORIZATION);
            } else if let Some(credentials) = &self.authorization {
                sent.entry(AUTHORIZATION)
                    .or_insert_with(|| credentials.clone());
            }
            let mut req = Request::new(Full::new(body.clone()));
            *req.method_mut() = method.clone();
            *req.uri_mut() = uri.clone();
            *req.headers_mut() = sent;
            let resp = tokio::select! {
                biased;
                r = self.client.request(req) => r,
                () = &mut deadline => {
                    return Err(Unanswered::timed_out(&format!(
                        "error sending request for url ({uri}): no response in time (timed out)"
                    )));
                }
            };
            let resp = resp.map_err(|e| {
                let mut failed = unanswered(&e);
                failed.why = format!("error sending request for url ({uri}): {}", failed.why);
                failed
            })?;
            let Some(next) = redirect_target(&uri, &resp) else {
                return Ok(resp.map(|body| Body::new(Deadline { body, deadline })));
            };
            same_server &= next.authority() == uri.authority();
            tracing::warn!(from = %uri, to = %next, status = resp.status().as_u16(),
                "the upstream redirects the request; following it (point --upstream-url there to save the round trip)");
            uri = next;
        }
        Err(Unanswered {
            why: format!(
                "error sending request for url ({}): more than {MAX_REDIRECTS} redirects",
                self.label
            ),
            timed_out: false,
        })
    }

    fn describe(&self) -> &str {
        &self.label
    }
}

/// A tower service of this process (an rmcp `StreamableHttpService`, an
/// axum `Router`), called directly: no socket, no HTTP encoding, the
/// request bytes handed over as they are.
pub(crate) struct InProcess<S, B> {
    /// Cloned for each call (tower's readiness is per clone); a lock, not
    /// `Sync`, because tower services need not be.
    service: Mutex<S>,
    /// Where the service is reached, as it sees its own requests (path and
    /// `Host`, which servers such as rmcp's check).
    uri: Uri,
    host: Option<HeaderValue>,
    timeout: Duration,
    _body: std::marker::PhantomData<fn(B)>,
}

impl<S, B> InProcess<S, B> {
    /// `service` reached at `uri` with `host` (its `Host` header), each
    /// exchange bounded by `timeout` unless the caller gives its own.
    pub(crate) fn new(service: S, uri: Uri, host: Option<HeaderValue>, timeout: Duration) -> Self {
        InProcess {
            service: Mutex::new(service),
            uri,
            host,
            timeout,
            _body: std::marker::PhantomData,
        }
    }
}

impl<S, B> fmt::Debug for InProcess<S, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InProcess").field("uri", &self.uri).finish()
    }
}

#[async_trait]
impl<S, B, R> Transport for InProcess<S, B>
where
    S: tower::Service<Request<B>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: From<Bytes> + Send + 'static,
    R: HttpBody<Data = Bytes> + Send + 'static,
    R::Error: Into<BoxError>,
{
    async fn send(
        &self,
        method: Method,
        headers: &HeaderMap,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> Result<Response<Body>, Unanswered> {
        let mut headers = headers.clone();
        if let Some(host) = &self.host {
            headers.insert(HOST, host.clone());
        }
        let mut req = Request::new(B::from(body));
        *req.method_mut() = method;
        *req.uri_mut() = self.uri.clone();
        *req.headers_mut() = headers;
        let service = self
            .service
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut deadline = Box::pin(tokio::time::sleep(timeout.unwrap_or(self.timeout)));
        let resp = tokio::select! {
            biased;
            r = service.oneshot(req) => match r {
                Ok(resp) => resp,
                Err(e) => return Err(unanswered(&*e.into())),
            },
            () = &mut deadline => {
                return Err(Unanswered::timed_out("no response in time (timed out)"));
            }
        };
        Ok(resp.map(|body| {
            Body::new(Deadline {
                body: Box::pin(body),
                deadline,
            })
        }))
    }

    fn describe(&self) -> &str {
        "in-process"
    }
}

/// A response body that fails once the exchange's `deadline` passes
/// before it ends (the head was read under the same timer).
struct Deadline<B> {
    body: B,
    deadline: Pin<Box<Sleep>>,
}

impl<B> HttpBody for Deadline<B>
where
    B: HttpBody<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        match this.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(
                "the answer did not end in time (timed out)".into()
            ))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// An error and its sources, each said once ("connection reset by peer"
/// is three levels down), so the client learns what actually happened.
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut why = e.to_string();
    let mut next = e.source();
    while let Some(s) = next {
        let s_text = s.to_string();
        if !why.contains(&s_text) {
            why.push_str(": ");
            why.push_str(&s_text);
        }
        next = s.source();
    }
    why
}

/// A transport's error as why the request went unanswered. Timeouts are
/// the transports' own timers, never an error of the layers below.
fn unanswered(e: &(dyn std::error::Error + 'static)) -> Unanswered {
    Unanswered {
        why: chain(e),
        timed_out: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `app` served on a loopback port.
    async fn serve(app: axum::Router) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        addr
    }

    /// A server that answers each request with its `Authorization`
    /// header (or `-`).
    async fn echo_authorization() -> std::net::SocketAddr {
        serve(
            axum::Router::new().fallback(|headers: HeaderMap| async move {
                let seen = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
                seen.unwrap_or("-").to_owned()
            }),
        )
        .await
    }

    async fn authorization_seen(net: &Network) -> String {
        let resp = net
            .send(Method::POST, &HeaderMap::new(), Bytes::new(), None)
            .await
            .unwrap();
        let body = axum::body::to_bytes(resp.into_body(), 1024).await.unwrap();
        String::from_utf8(body.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn the_credentials_of_the_url_go_as_basic_authorization_and_stay_out_of_logs() {
        let addr = echo_authorization().await;
        let timeout = Duration::from_secs(10);
        let net = Network::new(&format!("http://al%20ice:s3cret@{addr}/mcp"), timeout).unwrap();
        // base64("al ice:s3cret")
        assert_eq!(authorization_seen(&net).await, "Basic YWwgaWNlOnMzY3JldA==");
        assert_eq!(net.describe(), format!("http://{addr}/mcp"));
        let plain = Network::new(&format!("http://{addr}/mcp"), timeout).unwrap();
        assert_eq!(authorization_seen(&plain).await, "-");
    }

    /// A server whose `/mcp` sends POSTs on to `to` with `status`, and
    /// whose `/mcp/` answers with the body it got and its `Authorization`.
    async fn redirecting(status: u16, to: String) -> std::net::SocketAddr {
        use axum::routing::post;
        let app = axum::Router::new()
            .route(
                "/mcp",
                post(move || async move {
                    let status = axum::http::StatusCode::from_u16(status).unwrap();
                    (status, [(LOCATION, to)])
                }),
            )
            .route(
                "/mcp/",
                post(|headers: HeaderMap, body: Bytes| async move {
                    let seen = headers.get(AUTHORIZATION).and_then(|v| v.to_str().ok());
                    format!("{} {}", seen.unwrap_or("-"), String::from_utf8_lossy(&body))
                }),
            );
        serve(app).await
    }

    async fn answer_of(net: &Network, body: &'static str) -> (u16, String) {
        let resp = net
            .send(Method::POST, &HeaderMap::new(), Bytes::from(body), None)
            .await
            .unwrap();
        let status = resp.status().as_u16();
        let body = axum::body::to_bytes(resp.into_body(), 1024).await.unwrap();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn a_307_or_308_is_followed_with_the_same_post_and_a_302_is_not() {
        let timeout = Duration::from_secs(10);
        for status in [307, 308] {
            let addr = redirecting(status, "/mcp/".into()).await;
            let net = Network::new(&format!("http://u:p@{addr}/mcp"), timeout).unwrap();
            assert_eq!(
                answer_of(&net, "{\"jsonrpc\":\"2.0\"}").await,
                (200, "Basic dTpw {\"jsonrpc\":\"2.0\"}".to_owned())
            );
        }
        let addr = redirecting(302, "/mcp/".into()).await;
        let net = Network::new(&format!("http://{addr}/mcp"), timeout).unwrap();
        assert_eq!(answer_of(&net, "x").await.0, 302);
    }

    #[tokio::test]
    async fn credentials_do_not_follow_a_redirect_to_another_server() {
        let timeout = Duration::from_secs(10);
        let other = redirecting(307, String::new()).await;
        let addr = redirecting(307, format!("http://{other}/mcp/")).await;
        let net = Network::new(&format!("http://u:p@{addr}/mcp"), timeout).unwrap();
        assert_eq!(answer_of(&net, "m").await, (200, "- m".to_owned()));
    }

    #[tokio::test]
    async fn a_server_that_is_not_there_is_named_with_its_cause() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let net = Network::new(
            &format!("http://127.0.0.1:{port}/mcp"),
            Duration::from_secs(10),
        )
        .unwrap();
        let err = net
            .send(Method::POST, &HeaderMap::new(), Bytes::new(), None)
            .await
            .unwrap_err();
        assert!(!err.timed_out);
        assert!(
            err.why.starts_with(&format!(
                "error sending request for url (http://127.0.0.1:{port}/mcp)"
            )) && err.why.contains("onnection refused"),
            "{}",
            err.why
        );
    }
}
