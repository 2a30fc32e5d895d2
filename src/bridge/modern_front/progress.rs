//! Progress notifications for modern clients of one legacy upstream.
//!
//! Every modern client of a front shares one upstream session, and two of
//! them may well pick the same `progressToken` (1, say). So a request's
//! token is replaced upstream by one only the shim hands out, and the
//! server's `notifications/progress` for it goes back to the session that
//! made the request, under the client's own token. A route lives as long
//! as its [`ProgressRoute`]: the request, or the task the request made.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;

use super::{ModernSession, lock};
use crate::jsonrpc::{Message, Notification};

/// Token → who asked, with the token they asked with.
#[derive(Debug, Default)]
pub(super) struct ProgressRoutes {
    routes: Arc<Mutex<HashMap<String, Route>>>,
    next: AtomicU64,
}

#[derive(Debug)]
struct Route {
    session: Weak<ModernSession>,
    token: Value,
}

/// Keeps one route; dropping it forgets the route.
#[derive(Debug)]
pub(crate) struct ProgressRoute {
    routes: Weak<Mutex<HashMap<String, Route>>>,
    token: String,
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        if let Some(routes) = self.routes.upgrade() {
            lock(&routes).remove(&self.token);
        }
    }
}

impl ProgressRoutes {
    /// Replaces the client's `params._meta.progressToken` (if any) with a
    /// token of the shim's, routed back to `session` while the returned
    /// guard lives.
    pub(super) fn route(
        &self,
        session: &Arc<ModernSession>,
        params: &mut Value,
    ) -> Option<ProgressRoute> {
        let slot = params.get_mut("_meta")?.get_mut("progressToken")?;
        if !(slot.is_string() || slot.is_number()) {
            return None;
        }
        let token = format!(
            "mcp-tasks-shim-progress-{}",
            self.next.fetch_add(1, Ordering::Relaxed)
        );
        let theirs = std::mem::replace(slot, Value::String(token.clone()));
        lock(&self.routes).insert(
            token.clone(),
            Route {
                session: Arc::downgrade(session),
                token: theirs,
            },
        );
        Some(ProgressRoute {
            routes: Arc::downgrade(&self.routes),
            token,
        })
    }

    /// Sends an upstream `notifications/progress` to the session whose
    /// request it is about, under that client's token; false when it is
    /// about no request still routed.
    pub(super) fn deliver(&self, n: &Notification) -> bool {
        let Some(token) = n
            .params
            .as_ref()
            .and_then(|p| p.get("progressToken"))
            .and_then(Value::as_str)
        else {
            return false;
        };
        let (session, theirs) = {
            let routes = lock(&self.routes);
            let Some(route) = routes.get(token) else {
                return false;
            };
            (route.session.upgrade(), route.token.clone())
        };
        let Some(session) = session else {
            return false;
        };
        let mut params = n.params.clone().unwrap_or_default();
        params["progressToken"] = theirs;
        session.send(Message::notification(&n.method, params));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::BridgeConfig;
    use crate::bridge::modern_front::ModernFront;
    use crate::ledger::MemoryLedger;
    use crate::upstream::channel::pair;
    use serde_json::json;

    /// Two clients with the same token each get their own progress, under
    /// that token; a route ends with its guard.
    #[tokio::test]
    async fn same_tokens_of_two_clients_stay_apart() {
        let (conn, _events, _server) = pair(std::time::Duration::from_secs(1));
        let front = ModernFront::new(
            conn,
            Arc::new(MemoryLedger::default()),
            BridgeConfig::default(),
        );
        let (a_tx, mut a_rx) = tokio::sync::mpsc::unbounded_channel();
        let (b_tx, mut b_rx) = tokio::sync::mpsc::unbounded_channel();
        let a = front.request_session(Some("alice".into()), a_tx);
        let b = front.request_session(Some("bob".into()), b_tx);
        let mut pa = json!({"name": "x", "_meta": {"progressToken": 1}});
        let mut pb = json!({"name": "x", "_meta": {"progressToken": 1}});
        let ra = front.progress.route(&a, &mut pa).expect("routed");
        let _rb = front.progress.route(&b, &mut pb).expect("routed");
        let (ta, tb) = (
            pa["_meta"]["progressToken"].clone(),
            pb["_meta"]["progressToken"].clone(),
        );
        assert_ne!(ta, tb, "upstream tokens are the shim's, one per request");
        let progress = |t: &Value, p: u64| Notification {
            method: "notifications/progress".into(),
            params: Some(json!({"progressToken": t, "progress": p})),
        };
        assert!(front.progress.deliver(&progress(&tb, 7)));
        match b_rx.try_recv() {
            Ok(Message::Notification(n)) => {
                assert_eq!(
                    n.params.unwrap(),
                    json!({"progressToken": 1, "progress": 7})
                );
            }
            other => panic!("bob got {other:?}"),
        }
        assert!(a_rx.try_recv().is_err(), "alice got bob's progress");
        drop(ra);
        assert!(
            !front.progress.deliver(&progress(&ta, 1)),
            "route gone with its guard"
        );
        assert!(a_rx.try_recv().is_err());
        let mut none = json!({"name": "x"});
        assert!(front.progress.route(&a, &mut none).is_none());
    }
}
