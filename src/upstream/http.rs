//! An upstream reached over Streamable HTTP, one type per revision.
//!
//! [`ModernHttpUpstream`] sends one POST per request with the 2026-07-28
//! headers (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`).
//! [`LegacyHttpUpstream`] keeps the 2025-11-25 session: the
//! `Mcp-Session-Id` minted on `initialize` is sent on every later request,
//! and a GET stream carries unsolicited messages. [`connect`] probes the
//! server and builds the one it speaks ([`HttpUpstream`]). Both share the
//! transport and the answer reading: answers may come as JSON or as SSE;
//! anything on an SSE stream that is not the awaited answer
//! (notifications, server→client requests) becomes an [`UpstreamEvent`].

use std::sync::Arc;
use std::time::Duration;

mod exchange;
mod legacy;
mod modern;
mod relayed;
mod transport;

use axum::body::Bytes;
use axum::http::{HeaderValue, Response};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{AnyUpstream, UpstreamEvent};
use crate::error::ShimError;
use crate::jsonrpc::Id;
use crate::revision::{self, LEGACY_VERSION, Revision};
use crate::transport::record::Recorder;
use exchange::Http;
pub use legacy::LegacyHttpUpstream;
use legacy::Session;
pub use modern::ModernHttpUpstream;
use modern::Stateless;
pub use relayed::LegacyHttpRelay;
pub(crate) use relayed::{NotRelayed, RelayedSession};
pub use transport::BoxError;
use transport::InProcess;
use transport::Transport;

const LEGACY_VERSION_VALUE: HeaderValue = HeaderValue::from_static(LEGACY_VERSION);

/// How long a long-lived request may stay open (a day: in practice until
/// it is no longer needed).
const STREAM_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// A probed Streamable HTTP upstream, of the revision it speaks.
#[derive(Debug, Clone)]
pub enum HttpUpstream {
    /// A 2025-11-25 server.
    Legacy(Arc<LegacyHttpUpstream>),
    /// A 2026-07-28 server.
    Modern(Arc<ModernHttpUpstream>),
}

impl HttpUpstream {
    /// The revision it speaks.
    pub fn revision(&self) -> Revision {
        match self {
            HttpUpstream::Legacy(_) => Revision::Legacy,
            HttpUpstream::Modern(_) => Revision::Modern,
        }
    }

    /// While client requests wait, asks every `every` for a sign of life
    /// (`server/discover` on a 2026-07-28 upstream, `ping` in a 2025-11-25
    /// session); see [`LegacyHttpUpstream::watch_liveness`].
    pub fn watch_liveness(&self, every: Duration, timeout: Duration) {
        match self {
            HttpUpstream::Legacy(up) => up.watch_liveness(every, timeout),
            HttpUpstream::Modern(up) => up.watch_liveness(every, timeout),
        }
    }
}

impl From<HttpUpstream> for AnyUpstream {
    fn from(up: HttpUpstream) -> Self {
        match up {
            HttpUpstream::Legacy(up) => AnyUpstream::Legacy(up),
            HttpUpstream::Modern(up) => AnyUpstream::Modern(up),
        }
    }
}

/// A connected HTTP upstream and what the probe learnt.
#[derive(Debug)]
pub struct HttpLink {
    /// Requests go here.
    pub upstream: HttpUpstream,
    /// Notifications and server requests.
    pub events: mpsc::UnboundedReceiver<UpstreamEvent>,
    /// Its `server/discover` result (modern upstreams).
    pub discover: Value,
}

impl HttpLink {
    /// The revision it speaks.
    pub fn revision(&self) -> Revision {
        self.upstream.revision()
    }
}

/// Connects to `url` and probes its revision with a modern POST: a
/// `DiscoverResult` or a recognised modern error means 2026-07-28,
/// anything else 2025-11-25.
pub async fn connect(url: &str, request_timeout: Duration) -> Result<HttpLink, ShimError> {
    connect_recorded(url, request_timeout, None).await
}

/// [`connect`], recording every message to and from the upstream (the
/// probe included) to `record` (`--record-upstream`).
pub async fn connect_recorded(
    url: &str,
    request_timeout: Duration,
    record: Option<Recorder>,
) -> Result<HttpLink, ShimError> {
    let transport = transport::Network::new(url, request_timeout)?;
    connect_over(Box::new(transport), record).await
}

/// Connects to a Streamable HTTP server that is a tower service of this
/// process (an rmcp `StreamableHttpService`, an axum `Router`, any
/// `Service<http::Request<B>>`), called directly: no socket, no encoding
/// beyond the JSON bodies. `uri` is where the service sees its requests
/// (the path it serves, `/` behind `nest_service`) and `host` the `Host`
/// header to send (servers that check it, such as rmcp's, need one they
/// allow). Answers are read as from [`connect`]'s: JSON or SSE. Each
/// exchange is bounded by `request_timeout`.
pub async fn connect_service<S, B, R>(
    service: S,
    uri: axum::http::Uri,
    host: Option<HeaderValue>,
    request_timeout: Duration,
) -> Result<HttpLink, ShimError>
where
    S: tower::Service<axum::http::Request<B>, Response = Response<R>> + Clone + Send + 'static,
    S::Future: Send,
    S::Error: Into<BoxError>,
    B: From<Bytes> + Send + 'static,
    R: axum::body::HttpBody<Data = Bytes> + Send + 'static,
    R::Error: Into<BoxError>,
{
    let transport = InProcess::new(service, uri, host, request_timeout);
    connect_over(Box::new(transport), None).await
}

/// Probes the server behind `transport` (a modern POST: a
/// `DiscoverResult` or a recognised modern error means 2026-07-28,
/// anything else 2025-11-25) and builds the upstream of that revision.
async fn connect_over(
    transport: Box<dyn Transport>,
    record: Option<Recorder>,
) -> Result<HttpLink, ShimError> {
    let (tx, events) = mpsc::unbounded_channel();
    let http = Http::new(transport, tx, record, Stateless);
    let (revision, discover) = probe(&http).await?;
    tracing::info!(url = %http.url, %revision, "HTTP upstream probed");
    let upstream = match revision {
        Revision::Modern => {
            HttpUpstream::Modern(Arc::new(ModernHttpUpstream::new(http.probed_as(Stateless))))
        }
        Revision::Legacy => HttpUpstream::Legacy(Arc::new(LegacyHttpUpstream::new(
            http.probed_as(Session::default()),
        ))),
    };
    Ok(HttpLink {
        upstream,
        events,
        discover,
    })
}

/// The revision of the server behind `http`, and its `server/discover`
/// result. Unreachable is not "no answer, so legacy": the revision is
/// learnt once, here, and a wrong guess would hold for the whole run.
async fn probe(http: &Http<Stateless>) -> Result<(Revision, Value), ShimError> {
    let info = json!({"name": "mcp-tasks-shim", "version": env!("CARGO_PKG_VERSION")});
    let probe = revision::probe_request(Id::Num(0), &info);
    let resp = http
        .send_post(&probe, probe.to_json().into_bytes(), None)
        .await
        .map_err(|e| {
            // Its cause without a second "Upstream error:" prefix.
            let cause = match e {
                ShimError::Upstream(cause) => cause,
                other => other.to_string(),
            };
            ShimError::Upstream(format!(
                "cannot probe {}: {cause}; the shim learns the upstream's revision at start, so start the server first",
                http.url
            ))
        })?;
    let answer = http.answer_of(&probe, resp).await.ok().flatten();
    Ok(revision::classify_probe(answer.as_ref()).into_revision())
}

/// `url` parsed as [`connect`] takes it, or why it cannot be: a mistake
/// no wait for the server mends.
pub fn check_url(url: &str) -> Result<url::Url, ShimError> {
    if !url.contains("://") {
        return Err(ShimError::Upstream(format!(
            "invalid upstream URL {url:?}: no scheme; add http:// (for example http://{url})"
        )));
    }
    url::Url::parse(url)
        .map_err(|e| ShimError::Upstream(format!("invalid upstream URL {url:?}: {e}")))
}
