//! Long-lived upstream requests (`subscriptions/listen`): a request whose
//! answer is a stream of notifications, open until either side ends it.
//!
//! Unlike [`super::Upstream::request`], such a request has no timeout: it
//! lasts as long as its [`UpstreamStream`] is held. The notifications the
//! upstream tags with the request's id
//! (`_meta["io.modelcontextprotocol/subscriptionId"]`) arrive on the
//! handle, not among the link's [`super::UpstreamEvent`]s, so whoever
//! opened the stream owns its traffic.

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::RpcResult;
use crate::error::ShimError;
use crate::jsonrpc::{Id, Message, Notification};
use crate::revision::META_SUBSCRIPTION_ID;

/// What arrives on a long-lived request.
#[derive(Debug)]
pub enum StreamEvent {
    /// A notification the upstream sent on this stream.
    Notification(Notification),
    /// The stream is over: the upstream answered the request (a result
    /// when it ended the stream, an error when it refused it), or the
    /// stream could not be kept (`Err`: the upstream went away or cut it).
    Ended(Result<RpcResult, ShimError>),
}

/// An open long-lived request. Dropping it ends the request upstream
/// (stdio: `notifications/cancelled` for its id; HTTP: the response
/// stream is closed).
pub struct UpstreamStream {
    id: Id,
    rx: mpsc::UnboundedReceiver<StreamEvent>,
    on_drop: Option<Box<dyn FnOnce() + Send + Sync>>,
}

impl std::fmt::Debug for UpstreamStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamStream")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl UpstreamStream {
    /// A stream fed through `rx`; `on_drop` ends it upstream when the
    /// handle goes (for implementors of [`super::ModernUpstream::open_stream`]).
    pub fn new(
        id: Id,
        rx: mpsc::UnboundedReceiver<StreamEvent>,
        on_drop: impl FnOnce() + Send + Sync + 'static,
    ) -> Self {
        UpstreamStream {
            id,
            rx,
            on_drop: Some(Box::new(on_drop)),
        }
    }

    /// The id of the request that opened the stream (its subscription id).
    pub fn id(&self) -> &Id {
        &self.id
    }

    /// The next event; `None` after [`StreamEvent::Ended`], or when the
    /// feeding side vanished without saying why.
    pub async fn next(&mut self) -> Option<StreamEvent> {
        self.rx.recv().await
    }
}

impl Drop for UpstreamStream {
    fn drop(&mut self) {
        if let Some(f) = self.on_drop.take() {
            f();
        }
    }
}

/// The stream a notification belongs to: its
/// `_meta["io.modelcontextprotocol/subscriptionId"]`, or, for a
/// `notifications/cancelled` (how a stdio server ends a stream), its
/// `requestId`.
pub(crate) fn stream_of(n: &Notification) -> Option<Id> {
    let p = n.params.as_ref()?;
    let v = if n.method == CANCELLED {
        p.get("requestId")?
    } else {
        p.get("_meta")?.get(META_SUBSCRIPTION_ID)?
    };
    serde_json::from_value(v.clone()).ok()
}

/// The notification that ends a request (either direction on stdio).
pub(crate) const CANCELLED: &str = "notifications/cancelled";

/// `notifications/cancelled` for the stream `id`.
pub(crate) fn cancel_message(id: &Id, reason: &str) -> Message {
    Message::notification(CANCELLED, json!({"requestId": id, "reason": reason}))
}

/// `notifications/cancelled` for request `id`, whose answer nobody will
/// read (the requester gave up on it): the upstream may stop the work.
pub(crate) fn abandoned_message(id: &Id) -> Message {
    cancel_message(id, "the requester no longer waits for the answer")
}

/// The outcome of a stream the upstream ended with `notifications/cancelled`.
pub(crate) fn ended_by_upstream(n: &Notification) -> StreamEvent {
    let reason = n
        .params
        .as_ref()
        .and_then(|p| p.get("reason"))
        .and_then(Value::as_str)
        .unwrap_or("no reason given");
    StreamEvent::Ended(Err(ShimError::Upstream(format!(
        "the upstream ended the stream: {reason}"
    ))))
}
