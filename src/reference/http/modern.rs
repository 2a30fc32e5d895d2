//! 2026-07-28 Streamable HTTP: POST only, no sessions, one shared server.
//!
//! Each POST carries one message. Requests get a server-unique internal id
//! (clients number their requests independently, so their ids collide);
//! the answer is routed back by that id and restored to the client's id.
//! A `subscriptions/listen` request becomes an SSE stream: the server's
//! acknowledgement, then every `notifications/tasks` whose subscription id
//! is that request's internal id. Closing the stream ends the subscription.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::super::modern::METHODS;
use super::super::modern_wire::check_meta;
use super::{
    checks, error_response, event, json_response, message_stream, modern_status, parse_failure,
    sse_only, sse_response,
};
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message, Request};
use crate::reference::ReferenceServer;
use crate::revision::{META_SUBSCRIPTION_ID, Revision};

/// Where the answer to one in-flight request goes.
struct Waiter {
    tx: mpsc::UnboundedSender<Message>,
    /// The id the client chose, restored on the way out.
    client_id: Id,
}

struct Shared {
    server: ReferenceServer,
    waiters: Mutex<HashMap<Id, Waiter>>,
    next: AtomicU64,
}

#[derive(Clone)]
struct App(Arc<Shared>);

/// The `/mcp` router of the modern server; spawns its output demultiplexer.
pub(super) fn router(path: &str) -> Router {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = App(Arc::new(Shared {
        server: ReferenceServer::new(Revision::Modern, tx),
        waiters: Mutex::new(HashMap::new()),
        next: AtomicU64::new(1),
    }));
    tokio::spawn(app.clone().demux(rx));
    // axum answers other HTTP methods on the route with 405.
    Router::new().route(path, post(handle_post)).with_state(app)
}

impl App {
    fn waiters(&self) -> MutexGuard<'_, HashMap<Id, Waiter>> {
        self.0.waiters.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Routes every outgoing message to the exchange waiting for it.
    async fn demux(self, mut rx: mpsc::UnboundedReceiver<Message>) {
        while let Some(msg) = rx.recv().await {
            self.route(msg);
        }
    }

    fn route(&self, mut msg: Message) {
        let key = match &msg {
            Message::Response(r) => Some(r.id.clone()),
            Message::Error(e) => e.id.clone(),
            Message::Notification(n) => subscription_of(n.params.as_ref()),
            Message::Request(_) => None,
        };
        let waiters = self.waiters();
        let Some(w) = key.as_ref().and_then(|k| waiters.get(k)) else {
            tracing::debug!(?msg, "no HTTP exchange waits for this message; dropped");
            return;
        };
        restore_id(&mut msg, &w.client_id);
        let _ = w.tx.send(msg);
    }

    /// Hands a validated request to the server and answers the POST.
    async fn dispatch(&self, mut r: Request, headers: &HeaderMap) -> Response {
        let internal = Id::Str(format!(
            "http-{}",
            self.0.next.fetch_add(1, Ordering::Relaxed)
        ));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let client_id = std::mem::replace(&mut r.id, internal.clone());
        let listen = r.method == "subscriptions/listen";
        self.waiters().insert(
            internal.clone(),
            Waiter {
                tx,
                client_id: client_id.clone(),
            },
        );
        let guard = Registration {
            app: self.clone(),
            id: internal,
            listen,
        };
        self.0.server.handle(Message::Request(r));
        if listen {
            return match rx.recv().await {
                Some(Message::Error(e)) => {
                    json_response(modern_status(&e.error), &Message::Error(e))
                }
                Some(first) => {
                    let rest = message_stream(rx, guard, false);
                    let all =
                        futures_util::stream::once(async move { Ok(event(&first)) }).chain(rest);
                    sse_response(all, &[])
                }
                None => gone(client_id),
            };
        }
        if sse_only(headers) {
            return sse_response(message_stream(rx, guard, true), &[]);
        }
        while let Some(msg) = rx.recv().await {
            match &msg {
                Message::Response(_) => return json_response(StatusCode::OK, &msg),
                Message::Error(e) => return json_response(modern_status(&e.error), &msg),
                _ => {} // request-scoped notifications have no place in a JSON answer
            }
        }
        gone(client_id)
    }
}

/// The server dropped a request without answering (it never does).
fn gone(id: Id) -> Response {
    let e = ShimError::Internal("the server ended the request without an answer".into());
    error_response(StatusCode::INTERNAL_SERVER_ERROR, Some(id), &e)
}

/// `_meta["io.modelcontextprotocol/subscriptionId"]` of a notification.
fn subscription_of(params: Option<&Value>) -> Option<Id> {
    let v = params?.get("_meta")?.get(META_SUBSCRIPTION_ID)?;
    serde_json::from_value(v.clone()).ok()
}

/// Puts the client's id back: on answers, and as the subscription id of
/// listen-stream notifications.
fn restore_id(msg: &mut Message, client: &Id) {
    match msg {
        Message::Response(r) => r.id = client.clone(),
        Message::Error(e) => e.id = Some(client.clone()),
        Message::Notification(n) => {
            if let Some(meta) = n.params.as_mut().and_then(|p| p.get_mut("_meta")) {
                meta[META_SUBSCRIPTION_ID] = json!(client);
            }
        }
        Message::Request(_) => {}
    }
}

/// Unregisters an exchange when its HTTP response is done or abandoned;
/// an abandoned listen stream also ends the server's subscription.
struct Registration {
    app: App,
    id: Id,
    listen: bool,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.app.waiters().remove(&self.id);
        if self.listen {
            self.app.0.server.handle(Message::notification(
                "notifications/cancelled",
                json!({"requestId": self.id, "reason": "listen stream closed"}),
            ));
        }
    }
}

async fn handle_post(State(app): State<App>, headers: HeaderMap, body: Bytes) -> Response {
    if !checks::origin_allowed(&headers) {
        let e = ShimError::InvalidRequest("Origin not allowed".into());
        return error_response(StatusCode::FORBIDDEN, None, &e);
    }
    let r = match Message::parse(&body) {
        Ok(Message::Request(r)) => r,
        // No client notification is defined on HTTP; accept and ignore.
        Ok(Message::Notification(_)) => return StatusCode::ACCEPTED.into_response(),
        Ok(_) => {
            let e = ShimError::InvalidRequest(
                "a 2026-07-28 client never sends JSON-RPC responses".into(),
            );
            return error_response(StatusCode::BAD_REQUEST, None, &e);
        }
        Err(e) => return parse_failure(&body, e),
    };
    if let Err(e) = checks::modern_headers(&headers, &r) {
        let status = StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::BAD_REQUEST);
        return error_response(status, Some(r.id), &e);
    }
    // A known method with bad `_meta` (missing, unsupported version) is a
    // 400; unknown methods fall through to the server's -32601 (404).
    if METHODS.contains(&r.method.as_str())
        && let Err(e) = check_meta(r.params.as_ref())
    {
        return error_response(StatusCode::BAD_REQUEST, Some(r.id), &e);
    }
    app.dispatch(r, &headers).await
}
