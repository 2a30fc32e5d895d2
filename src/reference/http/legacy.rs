//! 2025-11-25 Streamable HTTP with sessions.
//!
//! `initialize` (POSTed without a session) mints an `Mcp-Session-Id`; every
//! later request must carry it (400 without, 404 once unknown or deleted).
//! Each session has its own [`ReferenceServer`](crate::reference::ReferenceServer). A POSTed request is
//! answered as JSON, or — for `tools/call` and `tasks/result`, when the
//! client accepts event streams — as an SSE stream that first carries the
//! server's own requests for that exchange (`elicitation/create` tagged
//! with the task) and ends with the answer, as SDK 1.x servers do.
//! POSTed notifications and responses (answers to those requests) get 202.
//! GET opens the session's stream for unsolicited messages (task status
//! notifications); DELETE ends the session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::session::{SESSION_HEADER, Session, refuse, with_session};
use super::{accepts, checks, message_stream, parse_failure, sse_response};
use crate::jsonrpc::Message;
use crate::revision::LEGACY_VERSIONS;

/// Most sessions held at once; a fixture must not grow without bound.
const MAX_SESSIONS: usize = 1024;
/// An HTTP status and the reason given in the JSON-RPC error body.
type Refusal = (StatusCode, &'static str);

#[derive(Clone, Default)]
struct App(Arc<Mutex<HashMap<String, Arc<Session>>>>);

/// The `/mcp` router of the legacy server.
pub(super) fn router(path: &str) -> Router {
    Router::new()
        .route(
            path,
            post(handle_post).get(handle_get).delete(handle_delete),
        )
        .with_state(App::default())
}

impl App {
    fn sessions(&self) -> MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new session with its own server and output demultiplexer.
    fn open(&self) -> Option<Arc<Session>> {
        let mut sessions = self.sessions();
        if sessions.len() >= MAX_SESSIONS {
            return None;
        }
        let s = Session::open();
        sessions.insert(s.id.clone(), s.clone());
        Some(s)
    }

    /// The session named by the request headers, or why it is refused.
    fn session(&self, headers: &HeaderMap) -> Result<Arc<Session>, Refusal> {
        let id = headers
            .get(SESSION_HEADER)
            .ok_or((StatusCode::BAD_REQUEST, "Mcp-Session-Id header is required"))?;
        let found = id
            .to_str()
            .ok()
            .and_then(|id| self.sessions().get(id).cloned());
        let s = found.ok_or((StatusCode::NOT_FOUND, "Session not found"))?;
        // Absent: the spec says to assume 2025-03-26, which we speak.
        let known = headers.get_all("mcp-protocol-version").iter().all(|v| {
            v.to_str()
                .is_ok_and(|v| LEGACY_VERSIONS.contains(&v.trim()))
        });
        match known {
            true => Ok(s),
            false => Err((StatusCode::BAD_REQUEST, "Unsupported MCP-Protocol-Version")),
        }
    }
}

async fn handle_post(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    if !checks::origin_allowed(&headers) {
        return refuse(StatusCode::FORBIDDEN, "Origin not allowed");
    }
    let msg = match Message::parse(&body) {
        Ok(m) => m,
        Err(e) => return parse_failure(&body, e),
    };
    let initialize = matches!(&msg, Message::Request(r) if r.method == "initialize");
    let session = if initialize && !headers.contains_key(SESSION_HEADER) {
        match app.open() {
            Some(s) => s,
            None => return refuse(StatusCode::SERVICE_UNAVAILABLE, "Too many sessions"),
        }
    } else {
        match app.session(&headers) {
            Ok(s) => s,
            Err((status, why)) => return refuse(status, why),
        }
    };
    match msg {
        Message::Request(r) => session.exchange(r, &headers).await,
        other => {
            session.server.handle(other);
            with_session(StatusCode::ACCEPTED.into_response(), &session.id)
        }
    }
}

async fn handle_get(State(app): State<App>, headers: HeaderMap) -> Response {
    if !checks::origin_allowed(&headers) {
        return refuse(StatusCode::FORBIDDEN, "Origin not allowed");
    }
    let session = match app.session(&headers) {
        Ok(s) => s,
        Err((status, why)) => return refuse(status, why),
    };
    if !accepts(&headers, "text/event-stream") {
        return refuse(
            StatusCode::NOT_ACCEPTABLE,
            "GET must accept text/event-stream",
        );
    }
    let Some(rx) = session.open_stream() else {
        return refuse(StatusCode::CONFLICT, "Only one GET stream per session");
    };
    sse_response(
        message_stream(rx, (), false),
        &[(SESSION_HEADER, session.id.clone())],
    )
}

async fn handle_delete(State(app): State<App>, headers: HeaderMap) -> Response {
    if !checks::origin_allowed(&headers) {
        return refuse(StatusCode::FORBIDDEN, "Origin not allowed");
    }
    let session = match app.session(&headers) {
        Ok(s) => s,
        Err((status, why)) => return refuse(status, why),
    };
    app.sessions().remove(&session.id);
    session.close();
    StatusCode::OK.into_response()
}
