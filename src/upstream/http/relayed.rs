//! A 2025-11-25 HTTP server as the upstream of 2025-11-25 client sessions
//! relayed unchanged: each client session gets a session of its own on the
//! server ([`RelayedSession`]), so the server's own session isolation
//! keeps one client's tasks, request ids and notifications from another.
//! Nothing is translated; what comes back (answers, and whatever the
//! server sends on an answer's stream or the GET stream) is handed to the
//! caller as it comes.

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use tokio::sync::mpsc;

use super::STREAM_TIMEOUT;
use super::exchange::{Http, is_sse};
use super::legacy::{Session, open_get_stream_with};
use super::transport::Network;
use crate::error::ShimError;
use crate::jsonrpc::Message;

/// Where relayed 2025-11-25 sessions are opened: a 2025-11-25 Streamable
/// HTTP server, one connection pool for all of them.
///
/// ```
/// use std::time::Duration;
/// use mcp_tasks_shim::upstream::http::LegacyHttpRelay;
///
/// let relay = LegacyHttpRelay::new("http://127.0.0.1:3000/mcp", Duration::from_secs(120));
/// assert!(relay.is_ok());
/// assert!(LegacyHttpRelay::new("127.0.0.1:3000", Duration::from_secs(1)).is_err());
/// ```
#[derive(Debug, Clone)]
pub struct LegacyHttpRelay {
    /// Cloned for each session: all of them share its connection pool.
    transport: Arc<Network>,
}

impl LegacyHttpRelay {
    /// The server at `url`; each exchange bounded by `request_timeout`.
    pub fn new(url: &str, request_timeout: Duration) -> Result<Self, ShimError> {
        Ok(LegacyHttpRelay {
            transport: Arc::new(Network::new(url, request_timeout)?),
        })
    }

    /// A session not opened yet: its `initialize` opens it.
    pub(crate) fn session(&self) -> RelayedSession {
        let transport = Network::clone(&self.transport);
        // Nothing is emitted as an event: every message read goes to the
        // caller's `deliver`.
        let (events, _) = mpsc::unbounded_channel();
        let http = Http::new(Box::new(transport), events, None, Session::default())
            .probed_as(Session::default());
        RelayedSession {
            http: Arc::new(http),
            get_stream: std::sync::Mutex::new(None),
        }
    }
}

/// One client session's own session on the server.
#[derive(Debug)]
pub(crate) struct RelayedSession {
    http: Arc<Http<Session>>,
    get_stream: std::sync::Mutex<Option<tokio::task::AbortHandle>>,
}

/// Why a message could not be relayed.
#[derive(Debug)]
pub(crate) enum NotRelayed {
    /// The server no longer knows the session (`404`: it restarted, or
    /// ended it): the client must initialize again.
    SessionGone,
    /// The server could not be reached, or its answer broke.
    Failed(ShimError),
}

impl RelayedSession {
    /// POSTs the client's `msg`; every message the server sends back for
    /// it (what comes first on its stream, then the answer) goes to
    /// `deliver`, in order.
    pub(crate) async fn post(
        &self,
        msg: &Message,
        mut deliver: impl FnMut(Message),
    ) -> Result<(), NotRelayed> {
        let body = msg.to_json().into_bytes();
        // `tasks/result` blocks until the task ends, however long it runs:
        // `--request-timeout` bounds the other requests, not that wait.
        let timeout = (msg.method() == Some("tasks/result")).then_some(STREAM_TIMEOUT);
        let resp = self
            .http
            .send_post(msg, body, timeout)
            .await
            .map_err(NotRelayed::Failed)?;
        let status = resp.status();
        if status == StatusCode::NOT_FOUND && self.http.dialect.id().is_some() {
            return Err(NotRelayed::SessionGone);
        }
        if status == StatusCode::ACCEPTED || msg.id().is_none() {
            return Ok(());
        }
        let answer = if is_sse(&resp) {
            self.http.read_sse_with(resp, msg.id(), &mut deliver).await
        } else {
            self.http.read_json(resp).await
        };
        deliver(answer.map_err(NotRelayed::Failed)?);
        Ok(())
    }

    /// Opens the session's GET stream (once; a server may offer none):
    /// what the server sends on it goes to `deliver`.
    pub(crate) fn open_get(&self, deliver: impl FnMut(Message) + Send + 'static) {
        let mut slot = crate::bridge::lock(&self.get_stream);
        if slot.is_none() {
            *slot = Some(open_get_stream_with(&self.http, deliver));
        }
    }

    /// Ends the session on the server (`DELETE`, best effort) and closes
    /// its GET stream.
    pub(crate) fn end(&self) {
        if let Some(get) = crate::bridge::lock(&self.get_stream).take() {
            get.abort();
        }
        // Outside a runtime (the process ending) nothing can be sent.
        if tokio::runtime::Handle::try_current().is_ok() {
            let http = self.http.clone();
            tokio::spawn(async move { http.delete_session().await });
        }
    }
}
