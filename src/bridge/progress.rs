//! Progress notifications for the many clients of one upstream session.
//!
//! Every client of a front shares one upstream session, and two of them
//! may well pick the same `progressToken` (1, say). So a request's token
//! is replaced upstream by one only the shim hands out, and the server's
//! `notifications/progress` for it goes back to the session that made the
//! request, under the client's own token, and to no other: progress names
//! what a client is doing, which is nobody else's business. A route lives
//! as long as its [`ProgressRoute`]: the request, or the task it made.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;

use super::lock;
use crate::jsonrpc::{Id, Message, Notification};

/// A client session progress can be sent to.
pub(crate) trait ProgressSink: Send + Sync + 'static {
    /// Sends the client a notification about its request `request`.
    fn send_progress(&self, request: &Id, msg: Message);
}

type Table<S> = Mutex<HashMap<String, Route<S>>>;

/// Token → who asked, with the token they asked with.
#[derive(Debug)]
pub(crate) struct ProgressRoutes<S> {
    routes: Arc<Table<S>>,
    next: AtomicU64,
}

impl<S> Default for ProgressRoutes<S> {
    fn default() -> Self {
        ProgressRoutes {
            routes: Arc::default(),
            next: AtomicU64::new(0),
        }
    }
}

#[derive(Debug)]
struct Route<S> {
    session: Weak<S>,
    /// The client request the progress is about (the one that made the
    /// task, for a task's), which places it.
    request: Id,
    token: Value,
}

/// Keeps one route; dropping it forgets the route.
#[derive(Debug)]
pub(crate) struct ProgressRoute<S> {
    routes: Weak<Table<S>>,
    token: String,
}

impl<S> Drop for ProgressRoute<S> {
    fn drop(&mut self) {
        if let Some(routes) = self.routes.upgrade() {
            lock(&routes).remove(&self.token);
        }
    }
}

impl<S: ProgressSink> ProgressRoutes<S> {
    /// Replaces the client's `params._meta.progressToken` (if any) of its
    /// request `request` with a token of the shim's, routed back to
    /// `session` while the returned guard lives.
    pub(crate) fn route(
        &self,
        session: &Arc<S>,
        request: &Id,
        params: &mut Value,
    ) -> Option<ProgressRoute<S>> {
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
                request: request.clone(),
                token: theirs,
            },
        );
        Some(ProgressRoute {
            routes: Arc::downgrade(&self.routes),
            token,
        })
    }

    /// Hands an upstream request's route to a later client request that
    /// continues it (an MRTR retry, `request`): its progress now goes to
    /// `session` under the token in `params._meta.progressToken`. A retry that asks
    /// for no progress ends the route; without a route (the first request
    /// asked for none, so the upstream has no token) there is nothing to
    /// hand over.
    pub(crate) fn hand_over(
        &self,
        route: Option<ProgressRoute<S>>,
        session: &Arc<S>,
        request: &Id,
        params: Option<&Value>,
    ) -> Option<ProgressRoute<S>> {
        let route = route?;
        let theirs = params?
            .get("_meta")?
            .get("progressToken")
            .filter(|t| t.is_string() || t.is_number())?
            .clone();
        lock(&self.routes).insert(
            route.token.clone(),
            Route {
                session: Arc::downgrade(session),
                request: request.clone(),
                token: theirs,
            },
        );
        Some(route)
    }

    /// Sends an upstream `notifications/progress` to the session whose
    /// request it is about, under that client's token; false when it is
    /// about no request still routed.
    pub(crate) fn deliver(&self, n: &Notification) -> bool {
        let Some(token) = n
            .params
            .as_ref()
            .and_then(|p| p.get("progressToken"))
            .and_then(Value::as_str)
        else {
            return false;
        };
        let (session, request, theirs) = {
            let routes = lock(&self.routes);
            let Some(route) = routes.get(token) else {
                return false;
            };
            (
                route.session.upgrade(),
                route.request.clone(),
                route.token.clone(),
            )
        };
        let Some(session) = session else {
            return false;
        };
        let mut params = n.params.clone().unwrap_or_default();
        params["progressToken"] = theirs;
        session.send_progress(&request, Message::notification(&n.method, params));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A client session: what it was sent, and about which request.
    #[derive(Default)]
    struct Client(Mutex<Vec<Message>>, Mutex<Vec<Id>>);

    impl ProgressSink for Client {
        fn send_progress(&self, request: &Id, msg: Message) {
            lock(&self.0).push(msg);
            lock(&self.1).push(request.clone());
        }
    }

    /// Two clients with the same token each get their own progress, under
    /// that token; a route ends with its guard.
    #[test]
    fn same_tokens_of_two_clients_stay_apart() {
        let routes = ProgressRoutes::<Client>::default();
        let (a, b) = (Arc::new(Client::default()), Arc::new(Client::default()));
        let mut pa = json!({"name": "x", "_meta": {"progressToken": 1}});
        let mut pb = json!({"name": "x", "_meta": {"progressToken": 1}});
        let ra = routes.route(&a, &Id::Num(1), &mut pa).expect("routed");
        let _rb = routes.route(&b, &Id::Num(1), &mut pb).expect("routed");
        let (ta, tb) = (
            pa["_meta"]["progressToken"].clone(),
            pb["_meta"]["progressToken"].clone(),
        );
        assert_ne!(ta, tb, "upstream tokens are the shim's, one per request");
        let progress = |t: &Value, p: u64| Notification {
            method: "notifications/progress".into(),
            params: Some(json!({"progressToken": t, "progress": p})),
        };
        assert!(routes.deliver(&progress(&tb, 7)));
        match lock(&b.0).as_slice() {
            [Message::Notification(n)] => assert_eq!(
                n.params.clone().unwrap(),
                json!({"progressToken": 1, "progress": 7})
            ),
            other => panic!("bob got {other:?}"),
        }
        assert!(lock(&a.0).is_empty(), "alice got bob's progress");
        drop(ra);
        assert!(
            !routes.deliver(&progress(&ta, 1)),
            "route gone with its guard"
        );
        assert!(lock(&a.0).is_empty());
        let mut none = json!({"name": "x"});
        assert!(routes.route(&a, &Id::Num(2), &mut none).is_none());
    }

    /// An MRTR retry takes the call's progress over: under its own token,
    /// to its own session; a retry without a token ends the route.
    #[test]
    fn a_retry_takes_the_route_over() {
        let routes = ProgressRoutes::<Client>::default();
        let (first, retry) = (Arc::new(Client::default()), Arc::new(Client::default()));
        let mut params = json!({"_meta": {"progressToken": "A"}});
        let route = routes.route(&first, &Id::Num(1), &mut params);
        let ours = params["_meta"]["progressToken"].clone();
        let progress = |n: u64| Notification {
            method: "notifications/progress".into(),
            params: Some(json!({"progressToken": ours, "progress": n})),
        };
        let route = routes.hand_over(
            route,
            &retry,
            &Id::Num(2),
            Some(&json!({"_meta": {"progressToken": "B"}})),
        );
        assert!(routes.deliver(&progress(1)));
        assert!(lock(&first.0).is_empty());
        let got = lock(&retry.0).clone();
        assert_eq!(got.len(), 1);
        let Message::Notification(n) = &got[0] else {
            panic!("{got:?}")
        };
        assert_eq!(n.params.as_ref().unwrap()["progressToken"], "B");
        assert_eq!(
            *lock(&retry.1),
            [Id::Num(2)],
            "placed with the retry, the request it now belongs to"
        );
        let gone = routes.hand_over(route, &retry, &Id::Num(3), Some(&json!({})));
        assert!(gone.is_none());
        assert!(!routes.deliver(&progress(2)));
    }
}
