//! Which side serves a request: the inner service as it is, or the
//! shim's front for the other revision. Pure: headers (and, when they do
//! not tell, the body) in, a verdict out.

use axum::http::{HeaderMap, Method};

use crate::driver::http::headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use crate::jsonrpc::Message;
use crate::revision::{self, ClientSignal, LEGACY_VERSIONS, MODERN_VERSION, Revision};

/// Where one request goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// The inner service, untouched: the client speaks its revision.
    Inner,
    /// The shim's front: the client speaks the other revision.
    Front,
    /// The headers do not tell: read the body ([`by_body`]).
    ByBody,
}

/// The verdict of a request's head, for an inner service speaking `inner`.
///
/// 2026-07-28 requests carry `MCP-Protocol-Version: 2026-07-28` on every
/// POST; 2025-11-25 sessions carry `Mcp-Session-Id` (and, after
/// `initialize`, their version). Only a POST with neither (a 2025-11-25
/// `initialize`, or a client that left the headers out) needs its body read.
pub(crate) fn by_head(inner: Revision, method: &Method, headers: &HeaderMap) -> Route {
    let version = headers
        .get(&MCP_PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok());
    let client = match version {
        Some(MODERN_VERSION) => Some(Revision::Modern),
        _ if headers.contains_key(&MCP_SESSION_ID) => Some(Revision::Legacy),
        Some(v) if LEGACY_VERSIONS.contains(&v) => Some(Revision::Legacy),
        // A version neither side knows: the inner service answers it.
        Some(_) => return Route::Inner,
        None => None,
    };
    match client {
        Some(rev) if rev == inner => Route::Inner,
        Some(_) => Route::Front,
        // Without a session a GET or DELETE is no 2025-11-25 session's.
        None if method == Method::POST => Route::ByBody,
        None => Route::Inner,
    }
}

/// The verdict of a POST's body, when its head did not tell: an
/// `initialize` (or any legacy-only message) opens a 2025-11-25 session,
/// a modern `_meta` is 2026-07-28, anything else (unreadable included)
/// goes to the inner service, which answers it as it would.
pub(crate) fn by_body(inner: Revision, body: &[u8]) -> Route {
    let Ok(msg) = Message::parse(body) else {
        return Route::Inner;
    };
    let client = match revision::detect_client(&msg) {
        ClientSignal::Is(rev) => rev,
        _ if msg.method() == Some("initialize") => Revision::Legacy,
        _ => return Route::Inner,
    };
    if client == inner {
        Route::Inner
    } else {
        Route::Front
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn modern_inner_passes_modern_requests_and_fronts_sessions() {
        let m = Revision::Modern;
        let modern = head(&[("mcp-protocol-version", "2026-07-28")]);
        assert_eq!(by_head(m, &Method::POST, &modern), Route::Inner);
        let session = head(&[
            ("mcp-session-id", "s1"),
            ("mcp-protocol-version", "2025-11-25"),
        ]);
        assert_eq!(by_head(m, &Method::POST, &session), Route::Front);
        assert_eq!(by_head(m, &Method::GET, &session), Route::Front);
        assert_eq!(by_head(m, &Method::DELETE, &session), Route::Front);
        assert_eq!(by_head(m, &Method::GET, &HeaderMap::new()), Route::Inner);
        assert_eq!(by_head(m, &Method::POST, &HeaderMap::new()), Route::ByBody);
        let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25"}}"#;
        assert_eq!(by_body(m, init), Route::Front);
        let list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        assert_eq!(by_body(m, list), Route::Inner);
        assert_eq!(by_body(m, b"not json"), Route::Inner);
    }

    #[test]
    fn legacy_inner_fronts_modern_requests_only() {
        let l = Revision::Legacy;
        let modern = head(&[("mcp-protocol-version", "2026-07-28")]);
        assert_eq!(by_head(l, &Method::POST, &modern), Route::Front);
        let session = head(&[("mcp-session-id", "s1")]);
        assert_eq!(by_head(l, &Method::POST, &session), Route::Inner);
        let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#;
        assert_eq!(by_body(l, init), Route::Inner);
        let discover = br#"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}"#;
        assert_eq!(by_body(l, discover), Route::Front);
    }
}
