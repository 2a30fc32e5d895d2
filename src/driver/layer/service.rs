//! [`TasksCompat`], the service the layer makes: the routing of each
//! request, and the front built on the first request that needs it.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::http::header::HOST;
use axum::http::{HeaderValue, Request, Response, StatusCode, Uri};
use tower::ServiceExt;

use super::TasksCompatConfig;
use super::principal::LayerPrincipals;
use super::route::{self, Route};
use crate::driver::http::{HttpShim, json_response};
use crate::error::ShimError;
use crate::jsonrpc::Message;
use crate::ledger::MemoryLedger;
use crate::revision::Revision;
use crate::upstream::Link;
use crate::upstream::http::{BoxError, connect_service};

/// An inner MCP service with the shim in front of it, made by
/// [`super::TasksCompatLayer`]. Cheap to clone (clones share the front).
pub struct TasksCompat<S> {
    inner: S,
    shared: Arc<Shared>,
}

/// What the clones of one [`TasksCompat`] share.
#[derive(Debug)]
struct Shared {
    config: Arc<TasksCompatConfig>,
    /// Built by the first request that needs it: it needs a runtime, and
    /// the probe of the inner service needs a request's path and `Host`.
    front: tokio::sync::OnceCell<Front>,
}

/// The front for the other revision, over the inner service in-process.
#[derive(Debug)]
struct Front {
    shim: HttpShim,
    revision: Revision,
}

impl<S> TasksCompat<S> {
    pub(super) fn new(inner: S, config: Arc<TasksCompatConfig>) -> Self {
        TasksCompat {
            inner,
            shared: Arc::new(Shared {
                config,
                front: tokio::sync::OnceCell::new(),
            }),
        }
    }

    /// Before your server drains: answers the 2025-11-25 clients still
    /// waiting on a task (`-32603` naming `reason`) and ends their
    /// long-lived streams, so that a graceful shutdown does not wait for
    /// tasks that may run for hours ([`HttpShim::begin_shutdown`]).
    pub fn begin_shutdown(&self, reason: &str) {
        if let Some(front) = self.shared.front.get() {
            front.shim.begin_shutdown(reason);
        }
    }
}

impl<S: Clone> Clone for TasksCompat<S> {
    fn clone(&self) -> Self {
        TasksCompat {
            inner: self.inner.clone(),
            shared: self.shared.clone(),
        }
    }
}

impl<S> fmt::Debug for TasksCompat<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TasksCompat")
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

impl<S, ReqB, ResB> tower::Service<Request<ReqB>> for TasksCompat<S>
where
    S: tower::Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError> + Send + 'static,
    ReqB: HttpBody<Data = Bytes> + From<Bytes> + Send + 'static,
    ReqB::Error: Into<BoxError>,
    ResB: HttpBody<Data = Bytes> + Send + 'static,
    ResB::Error: Into<BoxError>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<Body>, S::Error>>;

    /// Always ready: each call drives a clone of the inner service to
    /// readiness itself (as axum's `Router` does), since which service
    /// serves it is known only once its head (or body) is read.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<ReqB>) -> Self::Future {
        let inner = self.inner.clone();
        if let Some(rev) = self.shared.revision()
            && route::by_head(rev, req.method(), req.headers()) == Route::Inner
        {
            return Box::pin(pass(inner, req));
        }
        let shared = self.shared.clone();
        Box::pin(async move { shared.serve(inner, req).await })
    }
}

/// The request to the inner service as it came.
async fn pass<S, ReqB, ResB>(inner: S, req: Request<ReqB>) -> Result<Response<Body>, S::Error>
where
    S: tower::Service<Request<ReqB>, Response = Response<ResB>>,
    ResB: HttpBody<Data = Bytes> + Send + 'static,
    ResB::Error: Into<BoxError>,
{
    Ok(inner.oneshot(req).await?.map(Body::new))
}

impl Shared {
    /// The inner service's revision, when known without waiting.
    fn revision(&self) -> Option<Revision> {
        self.config
            .inner_revision
            .or_else(|| self.front.get().map(|f| f.revision))
    }

    /// A request whose head did not settle it at once.
    async fn serve<S, ReqB, ResB>(
        &self,
        inner: S,
        req: Request<ReqB>,
    ) -> Result<Response<Body>, S::Error>
    where
        S: tower::Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        ReqB: HttpBody<Data = Bytes> + From<Bytes> + Send + 'static,
        ReqB::Error: Into<BoxError>,
        ResB: HttpBody<Data = Bytes> + Send + 'static,
        ResB::Error: Into<BoxError>,
    {
        let (uri, host) = reached_at(&req);
        let front = match self.front(inner.clone(), uri, host).await {
            Ok(front) => front,
            Err(e) => return Ok(refusal(StatusCode::BAD_GATEWAY, e)),
        };
        let rev = self.revision().unwrap_or(front.revision);
        match route::by_head(rev, req.method(), req.headers()) {
            Route::Inner => pass(inner, req).await,
            Route::Front => Ok(front.shim.serve_request(req.map(Body::new)).await),
            Route::ByBody => {
                let (parts, body) = req.into_parts();
                let limit = self.config.http.max_body_bytes;
                let bytes = match axum::body::to_bytes(Body::new(body), limit).await {
                    Ok(bytes) => bytes,
                    Err(e) => {
                        let why =
                            format!("the request body could not be read within {limit} bytes: {e}");
                        let e = ShimError::InvalidRequest(why);
                        return Ok(refusal(StatusCode::PAYLOAD_TOO_LARGE, e));
                    }
                };
                match route::by_body(rev, &bytes) {
                    Route::Front => {
                        let req = Request::from_parts(parts, Body::from(bytes));
                        Ok(front.shim.serve_request(req).await)
                    }
                    _ => pass(inner, Request::from_parts(parts, ReqB::from(bytes))).await,
                }
            }
        }
    }

    /// The front, built (and the inner service probed) on first use. A
    /// failure is not kept: the next request tries again.
    async fn front<S, ReqB, ResB>(
        &self,
        inner: S,
        uri: Result<Uri, ShimError>,
        host: HeaderValue,
    ) -> Result<&Front, ShimError>
    where
        S: tower::Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
        S::Future: Send + 'static,
        S::Error: Into<BoxError>,
        ReqB: From<Bytes> + Send + 'static,
        ResB: HttpBody<Data = Bytes> + Send + 'static,
        ResB::Error: Into<BoxError>,
    {
        self.front
            .get_or_try_init(|| async {
                let link =
                    connect_service(inner, uri?, Some(host), self.config.request_timeout).await?;
                let revision = link.revision();
                let config = &self.config;
                let ledger = config
                    .ledger
                    .clone()
                    .unwrap_or_else(|| Arc::new(MemoryLedger::default()));
                let mut opts = config.http.clone();
                opts.path = crate::driver::http::DEFAULT_PATH.into();
                let resolver = Arc::new(LayerPrincipals(config.principals.clone()));
                let shim = HttpShim::new(opts, Link::from(link), ledger, resolver)
                    .map_err(|e| ShimError::Upstream(e.to_string()))?;
                tracing::info!(inner = %revision, "tasks compatibility front ready");
                Ok(Front { shim, revision })
            })
            .await
    }
}

/// Where the inner service sees `req` (behind `nest_service`: the nested
/// path) and the `Host` it came with: its in-process requests are sent
/// there, so that a server checking `Host` (rmcp's does) accepts them.
fn reached_at<B>(req: &Request<B>) -> (Result<Uri, ShimError>, HeaderValue) {
    let uri = Uri::builder()
        .path_and_query(req.uri().path())
        .build()
        .map_err(|e| ShimError::Upstream(format!("no URI for the inner service: {e}")));
    let host = req.headers().get(HOST).cloned().or_else(|| {
        let authority = req.uri().authority()?;
        HeaderValue::from_str(authority.as_str()).ok()
    });
    (uri, host.unwrap_or(HeaderValue::from_static("localhost")))
}

/// A JSON-RPC error answer of the layer's own.
fn refusal(status: StatusCode, e: ShimError) -> Response<Body> {
    json_response(status, &Message::error(None, e.to_error_object()))
}
