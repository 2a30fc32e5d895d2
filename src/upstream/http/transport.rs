//! How an HTTP upstream's requests reach the server: over the
//! network with reqwest, or by calling a tower service of the same
//! process. Everything above (headers, sessions, JSON or SSE answers) is
//! the same for both; only "send these bytes, give me the response" is
//! here.

use std::fmt;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::{Body, Bytes, HttpBody};
use axum::http::{HeaderMap, HeaderValue, Method, Request, Response, Uri, header::HOST};
use futures_util::StreamExt;
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
    /// could not be reached or did not answer, with its causes.
    async fn send(
        &self,
        method: Method,
        headers: HeaderMap,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> Result<Response<Body>, Unanswered>;

    /// What the logs call the server (a URL, or "in-process").
    fn describe(&self) -> &str;
}

/// The network: one reqwest client, one URL. Clones share the client's
/// connection pool.
#[derive(Debug, Clone)]
pub(crate) struct Reqwest {
    /// Parsed once: reqwest parses a string URL on every request.
    url: reqwest::Url,
    client: reqwest::Client,
    label: String,
}

impl Reqwest {
    /// `url` (checked, see [`super::check_url`]), each exchange bounded
    /// by `request_timeout` unless the caller gives its own.
    pub(crate) fn new(url: &str, request_timeout: Duration) -> Result<Self, ShimError> {
        let parsed = super::check_url(url)?;
        let client = reqwest::Client::builder()
            .timeout(request_timeout)
            .build()
            .map_err(|e| ShimError::Upstream(format!("cannot build the HTTP client: {e}")))?;
        Ok(Reqwest {
            url: parsed,
            client,
            label: url.to_owned(),
        })
    }
}

#[async_trait]
impl Transport for Reqwest {
    async fn send(
        &self,
        method: Method,
        headers: HeaderMap,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> Result<Response<Body>, Unanswered> {
        let mut req = self
            .client
            .request(method, self.url.clone())
            .headers(headers)
            .body(body);
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        match req.send().await {
            // The body keeps reqwest's deadline: it reads within the timeout.
            Ok(resp) => Ok(http_response(resp).map(Body::new)),
            Err(e) => Err(cause(&e)),
        }
    }

    fn describe(&self) -> &str {
        &self.label
    }
}

fn http_response(resp: reqwest::Response) -> Response<reqwest::Body> {
    resp.into()
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
        mut headers: HeaderMap,
        body: Bytes,
        timeout: Option<Duration>,
    ) -> Result<Response<Body>, Unanswered> {
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
        let deadline = tokio::time::Instant::now() + timeout.unwrap_or(self.timeout);
        let resp = match tokio::time::timeout_at(deadline, service.oneshot(req)).await {
            Ok(Ok(resp)) => resp,
            Ok(Err(e)) => return Err(unanswered(&*e.into())),
            Err(_) => return Err(Unanswered::timed_out("no response in time (timed out)")),
        };
        Ok(resp.map(|b| within(Body::new(b), deadline)))
    }

    fn describe(&self) -> &str {
        "in-process"
    }
}

/// `body`, failing if it has not ended by `deadline` (reqwest bounds a
/// body the same way).
fn within(body: Body, deadline: tokio::time::Instant) -> Body {
    let chunks = body.into_data_stream();
    Body::from_stream(futures_util::stream::unfold(
        Some(chunks),
        move |chunks| async move {
            let mut chunks = chunks?;
            match tokio::time::timeout_at(deadline, chunks.next()).await {
                Ok(Some(Ok(chunk))) => Some((Ok(chunk), Some(chunks))),
                Ok(Some(Err(e))) => Some((Err(BoxError::from(e)), None)),
                Ok(None) => None,
                Err(_) => Some((
                    Err("the answer did not end in time (timed out)".into()),
                    None,
                )),
            }
        },
    ))
}

/// A reqwest error with its chain of causes ("connection reset by peer"
/// is three levels down), so the client learns what actually happened.
pub(crate) fn cause(e: &reqwest::Error) -> Unanswered {
    unanswered(e)
}

/// An error and its sources, each said once; a reqwest timeout anywhere in
/// the chain is named as one.
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    unanswered(e).why
}

/// [`chain`], and whether a reqwest timeout is among the causes.
fn unanswered(e: &(dyn std::error::Error + 'static)) -> Unanswered {
    let mut why = e.to_string();
    let mut timed_out = false;
    let mut next = Some(e);
    while let Some(s) = next {
        timed_out |= s
            .downcast_ref::<reqwest::Error>()
            .is_some_and(|r| r.is_timeout());
        let s_text = s.to_string();
        if !why.contains(&s_text) {
            why.push_str(": ");
            why.push_str(&s_text);
        }
        next = s.source();
    }
    if timed_out && !why.contains("timed out") {
        why.push_str(" (timed out)");
    }
    Unanswered { why, timed_out }
}
