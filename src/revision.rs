//! Which revision a peer speaks, decided once per session or request.
//!
//! Detection is pure: it reads a message (or HTTP header names and values)
//! and returns a verdict. The upstream probe is split the same way: the
//! transport sends [`probe_request`] and feeds whatever comes back (or a
//! timeout) to [`classify_probe`].

use serde_json::{Value, json};

use crate::error::codes;
use crate::jsonrpc::{Id, Message};

/// The 2025-11-25 protocol version string.
pub const LEGACY_VERSION: &str = "2025-11-25";
/// The 2026-07-28 protocol version string.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The tasks extension identifier.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Whether `capabilities` (a client's or a server's, 2026-07-28) declare
/// the tasks extension: its settings object is present under
/// `extensions` (`null` is no declaration).
///
/// ```
/// use mcp_tasks_shim::revision::declares_tasks;
/// use serde_json::json;
/// assert!(declares_tasks(&json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})));
/// assert!(!declares_tasks(&json!({"extensions": {"io.modelcontextprotocol/tasks": null}})));
/// assert!(!declares_tasks(&json!({})));
/// ```
pub fn declares_tasks(capabilities: &serde_json::Value) -> bool {
    capabilities
        .get("extensions")
        .and_then(|e| e.get(TASKS_EXTENSION))
        .is_some_and(serde_json::Value::is_object)
}
/// `_meta` key: protocol version of a modern request.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: client capabilities of a modern request.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key: client info of a modern request.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key: log level of a modern request.
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key: server info on a modern result.
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key: subscription id on notifications of a listen stream.
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// `_meta` key: 2025-11-25 related-task marker.
pub const META_RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Protocol versions before 2026-07-28 that open a session with `initialize`.
pub const LEGACY_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", LEGACY_VERSION];

/// A protocol revision as far as tasks are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Revision {
    /// 2025-11-25 and earlier: `initialize` sessions, tasks in the core.
    Legacy,
    /// 2026-07-28: stateless requests, tasks as an extension.
    Modern,
}

impl Revision {
    /// The version string this revision is named by.
    pub fn version(self) -> &'static str {
        match self {
            Revision::Legacy => LEGACY_VERSION,
            Revision::Modern => MODERN_VERSION,
        }
    }

    /// Parses a version string (`2025-11-25`, older legacy dates, `2026-07-28`).
    pub fn from_version(v: &str) -> Option<Revision> {
        if v == MODERN_VERSION {
            Some(Revision::Modern)
        } else if LEGACY_VERSIONS.contains(&v) {
            Some(Revision::Legacy)
        } else {
            None
        }
    }

    /// The other revision.
    pub fn other(self) -> Revision {
        match self {
            Revision::Legacy => Revision::Modern,
            Revision::Modern => Revision::Legacy,
        }
    }
}

impl std::fmt::Display for Revision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.version())
    }
}

impl std::str::FromStr for Revision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Revision::from_version(s).ok_or_else(|| {
            format!(
                "unknown protocol revision {s:?} (expected {LEGACY_VERSION} or {MODERN_VERSION})"
            )
        })
    }
}

/// Requests a 2025-11-25 client sends that 2026-07-28 does not have. A
/// 2026-07-28 front answers each with [`not_a_modern_method`]: forwarded,
/// they would act on the one upstream session every modern client shares
/// (a log level, a resource subscription), or answer as if they existed.
pub const LEGACY_ONLY_REQUESTS: &[&str] = &[
    "initialize",
    "ping",
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
    "tasks/result",
    "tasks/list",
];

/// Whether `method` is one of [`LEGACY_ONLY_REQUESTS`].
pub fn is_legacy_only_request(method: &str) -> bool {
    LEGACY_ONLY_REQUESTS.contains(&method)
}

/// The `-32601` a 2026-07-28 front answers a [`LEGACY_ONLY_REQUESTS`]
/// method with, worded the same on every front.
pub fn not_a_modern_method(method: &str) -> crate::error::ShimError {
    crate::error::ShimError::MethodNotFound(format!("{method} is not a 2026-07-28 method"))
}

/// Methods only a modern client sends.
const MODERN_ONLY_CLIENT_METHODS: &[&str] =
    &["server/discover", "subscriptions/listen", "tasks/update"];

/// What one downstream message says about the client's revision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientSignal {
    /// The message could only come from this revision.
    Is(Revision),
    /// A modern `_meta` names a version the shim does not know (`-32022`).
    UnknownVersion(String),
    /// The message is valid in both (e.g. `tools/list` without `_meta`).
    Ambiguous,
}

/// Reads the revision a downstream message signals (design doc §1).
///
/// ```
/// use mcp_tasks_shim::jsonrpc::Message;
/// use mcp_tasks_shim::revision::{detect_client, ClientSignal, Revision};
/// use serde_json::json;
/// let init = Message::request(1, "initialize", json!({"protocolVersion": "2025-11-25"}));
/// assert_eq!(detect_client(&init), ClientSignal::Is(Revision::Legacy));
/// ```
pub fn detect_client(msg: &Message) -> ClientSignal {
    match msg {
        // Clients answer server requests only on legacy sessions; modern
        // input flows back as `inputResponses` on a retry or `tasks/update`.
        Message::Response(_) | Message::Error(_) => ClientSignal::Is(Revision::Legacy),
        Message::Request(_) | Message::Notification(_) => {
            if let Some(v) = meta_protocol_version(msg.params()) {
                return match Revision::from_version(v) {
                    Some(Revision::Modern) => ClientSignal::Is(Revision::Modern),
                    // A legacy version in modern `_meta` is not a revision
                    // the modern transport speaks.
                    _ => ClientSignal::UnknownVersion(v.to_owned()),
                };
            }
            let method = msg.method().unwrap_or_default();
            if is_legacy_only_request(method) || method == "notifications/initialized" {
                ClientSignal::Is(Revision::Legacy)
            } else if MODERN_ONLY_CLIENT_METHODS.contains(&method) {
                ClientSignal::Is(Revision::Modern)
            } else {
                ClientSignal::Ambiguous
            }
        }
    }
}

/// `params._meta["io.modelcontextprotocol/protocolVersion"]`, if present.
pub fn meta_protocol_version(params: Option<&Value>) -> Option<&str> {
    params?.get("_meta")?.get(META_PROTOCOL_VERSION)?.as_str()
}

/// What a set of HTTP request headers says about the client's revision.
///
/// `headers` yields (lower- or mixed-case name, value) pairs.
pub fn detect_http<'a>(
    method: &str,
    headers: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> ClientSignal {
    let mut version = None;
    let mut has_session = false;
    let mut has_mcp_method = false;
    let mut has_last_event = false;
    for (name, value) in headers {
        match name.to_ascii_lowercase().as_str() {
            "mcp-protocol-version" => version = Some(value.to_owned()),
            "mcp-session-id" => has_session = true,
            "mcp-method" => has_mcp_method = true,
            "last-event-id" => has_last_event = true,
            _ => {}
        }
    }
    if has_session || has_last_event || method == "GET" || method == "DELETE" {
        return ClientSignal::Is(Revision::Legacy);
    }
    match version.as_deref() {
        Some(v) if v == MODERN_VERSION => ClientSignal::Is(Revision::Modern),
        Some(v) if LEGACY_VERSIONS.contains(&v) => ClientSignal::Is(Revision::Legacy),
        Some(v) if has_mcp_method => ClientSignal::UnknownVersion(v.to_owned()),
        _ if has_mcp_method => ClientSignal::Is(Revision::Modern),
        _ => ClientSignal::Ambiguous,
    }
}

/// The `server/discover` request the shim sends first to an upstream.
pub fn probe_request(id: Id, client_info: &Value) -> Message {
    Message::request(
        id,
        "server/discover",
        json!({"_meta": {
            META_PROTOCOL_VERSION: MODERN_VERSION,
            META_CLIENT_CAPABILITIES: {"extensions": {TASKS_EXTENSION: {}}},
            META_CLIENT_INFO: client_info,
        }}),
    )
}

/// The verdict of the upstream probe.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeVerdict {
    /// The upstream answered `server/discover`: modern; the result is kept.
    Modern(Value),
    /// The upstream refused `server/discover` with a modern error code
    /// (it is modern but wants something else, e.g. another version).
    ModernRefused(i64),
    /// Anything else: legacy; fall back to `initialize`.
    Legacy,
}

/// For logs: what the probe found, without the whole `server/discover`.
impl std::fmt::Display for ProbeVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeVerdict::Modern(_) => write!(f, "{MODERN_VERSION} (answered server/discover)"),
            ProbeVerdict::ModernRefused(code) => {
                write!(f, "{MODERN_VERSION} (refused server/discover with {code})")
            }
            ProbeVerdict::Legacy => write!(f, "{LEGACY_VERSION} (no server/discover)"),
        }
    }
}

impl ProbeVerdict {
    /// The revision to treat the upstream as, and its `server/discover`
    /// result. A server that refused the probe with a 2026-07-28 error is
    /// still a 2026-07-28 one; nothing is known of its capabilities.
    pub fn into_revision(self) -> (Revision, Value) {
        match self {
            ProbeVerdict::Modern(discover) => (Revision::Modern, discover),
            ProbeVerdict::ModernRefused(_) => (
                Revision::Modern,
                json!({"supportedVersions": [MODERN_VERSION], "capabilities": {}}),
            ),
            ProbeVerdict::Legacy => (Revision::Legacy, json!({})),
        }
    }
}

/// Classifies the answer to [`probe_request`]; `None` means the probe timed
/// out, which also means legacy.
pub fn classify_probe(answer: Option<&Message>) -> ProbeVerdict {
    match answer {
        Some(Message::Response(r)) if r.result.get("supportedVersions").is_some() => {
            ProbeVerdict::Modern(r.result.clone())
        }
        Some(Message::Error(e))
            if matches!(
                e.error.code,
                codes::HEADER_MISMATCH | codes::MISSING_CAPABILITY | codes::UNSUPPORTED_VERSION
            ) =>
        {
            ProbeVerdict::ModernRefused(e.error.code)
        }
        _ => ProbeVerdict::Legacy,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::ErrorObject;

    fn req(method: &str, params: Value) -> Message {
        Message::request(1, method, params)
    }

    #[test]
    fn legacy_only_methods_signal_legacy() {
        for m in LEGACY_ONLY_REQUESTS {
            assert_eq!(
                detect_client(&req(m, json!({}))),
                ClientSignal::Is(Revision::Legacy),
                "{m}"
            );
        }
        let n = Message::notification("notifications/initialized", json!({}));
        assert_eq!(detect_client(&n), ClientSignal::Is(Revision::Legacy));
    }

    #[test]
    fn client_responses_signal_legacy() {
        let r = Message::response(Id::Num(3), json!({"action":"accept"}));
        assert_eq!(detect_client(&r), ClientSignal::Is(Revision::Legacy));
        let e = Message::error(Some(Id::Num(3)), ErrorObject::new(-1, "no"));
        assert_eq!(detect_client(&e), ClientSignal::Is(Revision::Legacy));
    }

    #[test]
    fn modern_only_methods_signal_modern() {
        for m in MODERN_ONLY_CLIENT_METHODS {
            assert_eq!(
                detect_client(&req(m, json!({}))),
                ClientSignal::Is(Revision::Modern)
            );
        }
    }

    #[test]
    fn modern_meta_signals_modern_and_unknown_versions_are_flagged() {
        let m = req(
            "tools/list",
            json!({"_meta": {META_PROTOCOL_VERSION: MODERN_VERSION}}),
        );
        assert_eq!(detect_client(&m), ClientSignal::Is(Revision::Modern));
        let u = req(
            "tools/list",
            json!({"_meta": {META_PROTOCOL_VERSION: "2099-01-01"}}),
        );
        assert_eq!(
            detect_client(&u),
            ClientSignal::UnknownVersion("2099-01-01".into())
        );
    }

    #[test]
    fn shared_methods_without_meta_are_ambiguous() {
        assert_eq!(
            detect_client(&req("tools/call", json!({"name":"x"}))),
            ClientSignal::Ambiguous
        );
        assert_eq!(
            detect_client(&req("tasks/get", json!({"taskId":"x"}))),
            ClientSignal::Ambiguous
        );
    }

    #[test]
    fn http_signals() {
        assert_eq!(
            detect_http("POST", [("Mcp-Session-Id", "abc")]),
            ClientSignal::Is(Revision::Legacy)
        );
        assert_eq!(detect_http("GET", []), ClientSignal::Is(Revision::Legacy));
        assert_eq!(
            detect_http("DELETE", []),
            ClientSignal::Is(Revision::Legacy)
        );
        assert_eq!(
            detect_http("POST", [("last-event-id", "5")]),
            ClientSignal::Is(Revision::Legacy)
        );
        assert_eq!(
            detect_http("POST", [("MCP-Protocol-Version", MODERN_VERSION)]),
            ClientSignal::Is(Revision::Modern)
        );
        assert_eq!(
            detect_http("POST", [("mcp-method", "tools/call")]),
            ClientSignal::Is(Revision::Modern)
        );
        assert_eq!(
            detect_http("POST", [("MCP-Protocol-Version", LEGACY_VERSION)]),
            ClientSignal::Is(Revision::Legacy)
        );
        assert_eq!(
            detect_http(
                "POST",
                [("MCP-Protocol-Version", "2099-01-01"), ("Mcp-Method", "x")]
            ),
            ClientSignal::UnknownVersion("2099-01-01".into())
        );
        assert_eq!(detect_http("POST", []), ClientSignal::Ambiguous);
    }

    #[test]
    fn probe_rule() {
        let ok = Message::response(
            Id::Num(0),
            json!({"supportedVersions":[MODERN_VERSION],"capabilities":{}}),
        );
        assert!(matches!(classify_probe(Some(&ok)), ProbeVerdict::Modern(_)));
        for code in [-32020, -32021, -32022] {
            let e = Message::error(Some(Id::Num(0)), ErrorObject::new(code, "x"));
            assert_eq!(classify_probe(Some(&e)), ProbeVerdict::ModernRefused(code));
        }
        let nf = Message::error(Some(Id::Num(0)), ErrorObject::new(-32601, "nope"));
        assert_eq!(classify_probe(Some(&nf)), ProbeVerdict::Legacy);
        let junk = Message::response(Id::Num(0), json!({}));
        assert_eq!(classify_probe(Some(&junk)), ProbeVerdict::Legacy);
        assert_eq!(classify_probe(None), ProbeVerdict::Legacy);
    }

    #[test]
    fn probe_request_is_a_complete_modern_request() {
        let p = probe_request(Id::Num(0), &json!({"name":"shim","version":"1"}));
        assert_eq!(meta_protocol_version(p.params()), Some(MODERN_VERSION));
        assert!(p.params().unwrap()["_meta"][META_CLIENT_CAPABILITIES].is_object());
    }
}
