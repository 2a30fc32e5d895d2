//! 2026-07-28 Streamable HTTP request metadata checks (pure).
//!
//! `Mcp-Method` must equal the body's method, `MCP-Protocol-Version` the
//! body's `_meta` version, and `Mcp-Name` the name the body routes on
//! (tool name, resource URI, prompt name, or task id for the tasks
//! extension). `Mcp-Name` may use the `=?base64?…?=` sentinel form.

use axum::http::header::AsHeaderName;
use axum::http::{HeaderMap, HeaderName};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::error::ShimError;
use crate::jsonrpc::Message;
use crate::revision::meta_protocol_version;

/// The MCP headers by name. A `HeaderName` is looked up as it is; a
/// `&str` is parsed and checked first, on every lookup.
pub(crate) const MCP_SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
/// `MCP-Protocol-Version`.
pub(crate) const MCP_PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
/// `Mcp-Method`.
pub(crate) const MCP_METHOD: HeaderName = HeaderName::from_static("mcp-method");
/// `Mcp-Name`.
pub(crate) const MCP_NAME: HeaderName = HeaderName::from_static("mcp-name");

/// A header's value as text (`None` when absent or not visible ASCII).
pub(crate) fn header(headers: &HeaderMap, name: impl AsHeaderName) -> Option<&str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether header `name` came more than once: two claims, where the
/// shim reads one value (the first one winning is nothing to build on).
pub(crate) fn doubled(headers: &HeaderMap, name: impl AsHeaderName) -> bool {
    headers.get_all(name).iter().nth(1).is_some()
}

/// Decodes the base64 sentinel form; plain values come back unchanged.
pub(crate) fn decode_sentinel(value: &str) -> Result<String, ShimError> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(b64) => STANDARD
            .decode(b64)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| ShimError::HeaderMismatch("Mcp-Name is not valid base64 UTF-8".into())),
        None => Ok(value.to_owned()),
    }
}

/// Whether `value` can travel in a header as it is: visible ASCII only,
/// no space (which a header value would lose at its ends).
pub(crate) fn is_visible_ascii(value: &str) -> bool {
    value.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// Plain when header-safe, else the `=?base64?…?=` sentinel form (also for
/// plain values that look like a sentinel).
pub(crate) fn encode_sentinel(value: &str) -> String {
    let safe =
        is_visible_ascii(value) && !(value.starts_with("=?base64?") && value.ends_with("?="));
    if safe {
        value.to_owned()
    } else {
        format!("=?base64?{}?=", STANDARD.encode(value))
    }
}

/// The body value `Mcp-Name` mirrors, for methods that have one.
pub(crate) fn name_source<'a>(method: &str, params: Option<&'a Value>) -> Option<&'a str> {
    let key = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    params?.get(key)?.as_str()
}

/// What [`check`] passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checked {
    /// Every header the request needs, each matching its body.
    Complete,
    /// No `Mcp-Name` where the body names what the request routes on,
    /// let through because the operator accepts that
    /// (`--accept-missing-mcp-name`).
    NameMissing,
}

/// Checks the request metadata headers of a modern request against its
/// body; every failure is a `-32020`. With `accept_missing_name`, an
/// absent `Mcp-Name` is let through where the body names the task or tool
/// (or prompt, or resource) itself: some clients omit the header, and the
/// body still says what the request is about. A present one must still
/// match, and one that is not visible ASCII is not "absent".
pub(crate) fn check(
    headers: &HeaderMap,
    msg: &Message,
    accept_missing_name: bool,
) -> Result<Checked, ShimError> {
    let method = msg.method().unwrap_or_default();
    let h_method = header(headers, &MCP_METHOD)
        .ok_or_else(|| ShimError::HeaderMismatch("missing Mcp-Method header".into()))?;
    if h_method != method {
        return Err(ShimError::HeaderMismatch(format!(
            "Mcp-Method header value '{h_method}' does not match body value '{method}'"
        )));
    }
    let h_version = header(headers, &MCP_PROTOCOL_VERSION)
        .ok_or_else(|| ShimError::HeaderMismatch("missing MCP-Protocol-Version header".into()))?;
    if let Some(body) = meta_protocol_version(msg.params())
        && body != h_version
    {
        return Err(ShimError::HeaderMismatch(format!(
            "MCP-Protocol-Version header value '{h_version}' does not match body value '{body}'"
        )));
    }
    if let Some(body) = name_source(method, msg.params()) {
        if accept_missing_name && !headers.contains_key(&MCP_NAME) {
            return Ok(Checked::NameMissing);
        }
        let raw = header(headers, &MCP_NAME).ok_or_else(|| {
            // Present but not visible ASCII is not "missing": a name
            // outside ASCII travels base64-encoded (`=?base64?…?=`).
            ShimError::HeaderMismatch(if headers.contains_key(&MCP_NAME) {
                "Mcp-Name header is not visible ASCII; encode such a name as =?base64?…?=".into()
            } else {
                "missing Mcp-Name header".into()
            })
        })?;
        let h_name = decode_sentinel(raw)?;
        if h_name != body {
            return Err(ShimError::HeaderMismatch(format!(
                "Mcp-Name header value '{h_name}' does not match body value '{body}'"
            )));
        }
    }
    Ok(Checked::Complete)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::header_map as h;
    use serde_json::json;

    fn call() -> Message {
        Message::request(
            1,
            "tools/call",
            json!({"name": "héllo", "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
        )
    }

    #[test]
    fn matching_headers_pass_including_base64_names() {
        let enc = format!("=?base64?{}?=", STANDARD.encode("héllo"));
        let ok = h(&[
            ("mcp-method", "tools/call"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-name", &enc),
        ]);
        assert!(check(&ok, &call(), false).is_ok());
    }

    #[test]
    fn a_raw_non_ascii_name_is_named_as_such_not_missing() {
        let mut raw = h(&[
            ("mcp-method", "tools/call"),
            ("mcp-protocol-version", "2026-07-28"),
        ]);
        raw.insert(
            "mcp-name",
            axum::http::HeaderValue::from_bytes("héllo".as_bytes()).unwrap(),
        );
        let e = check(&raw, &call(), false).unwrap_err();
        assert_eq!(e.code(), -32020);
        assert!(e.to_string().contains("not visible ASCII"), "{e}");
    }

    #[test]
    fn missing_or_mismatching_headers_are_32020() {
        for bad in [
            h(&[("mcp-protocol-version", "2026-07-28")]),
            h(&[
                ("mcp-method", "tools/list"),
                ("mcp-protocol-version", "2026-07-28"),
            ]),
            h(&[("mcp-method", "tools/call")]),
            h(&[
                ("mcp-method", "tools/call"),
                ("mcp-protocol-version", "2026-07-28"),
            ]),
            h(&[
                ("mcp-method", "tools/call"),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-name", "other"),
            ]),
            h(&[
                ("mcp-method", "tools/call"),
                ("mcp-protocol-version", "2025-11-25"),
                ("mcp-name", "héllo"),
            ]),
        ] {
            assert_eq!(check(&bad, &call(), false).unwrap_err().code(), -32020);
        }
    }

    /// Accepting a missing `Mcp-Name` lets through only its absence:
    /// a mismatched or unreadable one, and every other header, are still
    /// `-32020`.
    #[test]
    fn accepting_a_missing_name_accepts_nothing_else() {
        let get = Message::request(1, "tasks/get", json!({"taskId": "t1"}));
        let missing = h(&[
            ("mcp-method", "tasks/get"),
            ("mcp-protocol-version", "2026-07-28"),
        ]);
        assert_eq!(check(&missing, &get, false).unwrap_err().code(), -32020);
        assert_eq!(check(&missing, &get, true).unwrap(), Checked::NameMissing);
        let named = h(&[
            ("mcp-method", "tasks/get"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-name", "t1"),
        ]);
        assert_eq!(check(&named, &get, true).unwrap(), Checked::Complete);
        let mut raw = missing.clone();
        raw.insert(
            "mcp-name",
            axum::http::HeaderValue::from_bytes("héllo".as_bytes()).unwrap(),
        );
        for bad in [
            h(&[
                ("mcp-method", "tasks/get"),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-name", "t2"),
            ]),
            raw,
            h(&[("mcp-protocol-version", "2026-07-28")]),
        ] {
            assert_eq!(check(&bad, &get, true).unwrap_err().code(), -32020);
        }
    }

    #[test]
    fn sentinel_round_trip() {
        for v in ["plain", "héllo", " padded ", "=?base64?x?="] {
            assert_eq!(decode_sentinel(&encode_sentinel(v)).unwrap(), v);
        }
        assert_eq!(encode_sentinel("plain"), "plain");
    }

    #[test]
    fn task_methods_route_on_task_id() {
        let get = Message::request(1, "tasks/get", json!({"taskId": "t1"}));
        let ok = h(&[
            ("mcp-method", "tasks/get"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-name", "t1"),
        ]);
        assert!(check(&ok, &get, false).is_ok());
        let bad = h(&[
            ("mcp-method", "tasks/get"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-name", "t2"),
        ]);
        assert!(check(&bad, &get, false).is_err());
    }
}
