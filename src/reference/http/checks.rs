//! Pure checks on HTTP request headers: the 2026-07-28 request metadata
//! headers against the body, and the `Origin` rule of both revisions.
//!
//! The reference server keeps its own copy of these rules (rather than
//! sharing the shim's) so it can serve as an independent oracle in tests.

use axum::http::HeaderMap;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::error::ShimError;
use crate::jsonrpc::Request;
use crate::revision::meta_protocol_version;

/// A header's value, trimmed of optional whitespace. `Err` when present
/// but not visible ASCII (the spec's "invalid characters"), or repeated
/// (two values cannot both mirror one body field).
fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, ShimError> {
    let mut values = headers.get_all(name).iter();
    let (Some(v), None) = (values.next(), values.next()) else {
        return match headers.contains_key(name) {
            true => Err(ShimError::HeaderMismatch(format!("{name} is repeated"))),
            false => Ok(None),
        };
    };
    v.to_str()
        .map(|s| Some(s.trim_matches([' ', '\t'])))
        .map_err(|_| ShimError::HeaderMismatch(format!("{name} has invalid characters")))
}

/// `=?base64?…?=` decoded; a plain value comes back unchanged.
fn decode_sentinel(value: &str) -> Result<String, ShimError> {
    match value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    {
        Some(b64) => STANDARD
            .decode(b64)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| {
                ShimError::HeaderMismatch("Mcp-Name is not valid base64-encoded UTF-8".into())
            }),
        None => Ok(value.to_owned()),
    }
}

/// The body field `Mcp-Name` mirrors, for methods that route on one.
fn name_key(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        // The tasks extension routes task methods on the task id.
        "tasks/get" | "tasks/update" | "tasks/cancel" => Some("taskId"),
        _ => None,
    }
}

/// Checks `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` of a modern
/// request against its body. Every failure is `-32020` (HTTP 400).
pub(super) fn modern_headers(headers: &HeaderMap, r: &Request) -> Result<(), ShimError> {
    let version = header(headers, "mcp-protocol-version")?
        .ok_or_else(|| ShimError::HeaderMismatch("missing MCP-Protocol-Version header".into()))?;
    let method = header(headers, "mcp-method")?
        .ok_or_else(|| ShimError::HeaderMismatch("missing Mcp-Method header".into()))?;
    if method != r.method {
        return Err(ShimError::HeaderMismatch(format!(
            "Mcp-Method header value '{method}' does not match body value '{}'",
            r.method
        )));
    }
    let params = r.params.as_ref();
    // A body without a version is judged by the `_meta` check (-32602).
    if let Some(body) = meta_protocol_version(params)
        && body != version
    {
        return Err(ShimError::HeaderMismatch(format!(
            "MCP-Protocol-Version header value '{version}' does not match body value '{body}'"
        )));
    }
    let Some(key) = name_key(&r.method) else {
        return Ok(());
    };
    let body = params.and_then(|p| p.get(key)).and_then(Value::as_str);
    let sent = header(headers, "mcp-name")?
        .map(decode_sentinel)
        .transpose()?;
    match (sent, body) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(ShimError::HeaderMismatch(format!(
            "missing Mcp-Name header (required for {})",
            r.method
        ))),
        (Some(h), b) if Some(h.as_str()) != b => Err(ShimError::HeaderMismatch(format!(
            "Mcp-Name header value '{h}' does not match body value '{}'",
            b.unwrap_or("(absent)")
        ))),
        _ => Ok(()),
    }
}

/// DNS-rebinding guard: an `Origin`, when present, must be a loopback host.
pub(super) fn origin_allowed(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get("origin") else {
        return true;
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    let rest = origin.split_once("://").map_or(origin, |(_, r)| r);
    let host = if let Some(v6) = rest.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        rest.split([':', '/']).next().unwrap_or("")
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jsonrpc::Message;
    use crate::testing::header_map as h;
    use serde_json::json;

    fn req(method: &str, params: Value) -> Request {
        match Message::request(1, method, params) {
            Message::Request(r) => r,
            _ => unreachable!(),
        }
    }

    const V: (&str, &str) = ("mcp-protocol-version", "2026-07-28");

    #[test]
    fn names_may_be_base64_and_padded() {
        let call = req("tools/call", json!({"name": "héllo"}));
        let enc = format!("=?base64?{}?=", STANDARD.encode("héllo"));
        let ok = h(&[V, ("mcp-method", "tools/call"), ("mcp-name", &enc)]);
        assert!(modern_headers(&ok, &call).is_ok());
        let get = req("tasks/get", json!({"taskId": "t1"}));
        let ok = h(&[V, ("mcp-method", "tasks/get"), ("mcp-name", " t1 ")]);
        assert!(modern_headers(&ok, &get).is_ok());
    }

    #[test]
    fn missing_or_wrong_headers_are_32020() {
        let get = req("tasks/get", json!({"taskId": "t1"}));
        for bad in [
            h(&[("mcp-method", "tasks/get"), ("mcp-name", "t1")]),
            h(&[V, ("mcp-name", "t1")]),
            h(&[V, ("mcp-method", "tasks/cancel"), ("mcp-name", "t1")]),
            h(&[V, ("mcp-method", "tasks/get")]),
            h(&[V, ("mcp-method", "tasks/get"), ("mcp-name", "t2")]),
            h(&[
                V,
                ("mcp-method", "tasks/get"),
                ("mcp-name", "=?base64?!!?="),
            ]),
        ] {
            assert_eq!(modern_headers(&bad, &get).unwrap_err().code(), -32020);
        }
        let meta = req(
            "tools/list",
            json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
        );
        let old = h(&[
            ("mcp-protocol-version", "2025-11-25"),
            ("mcp-method", "tools/list"),
        ]);
        assert_eq!(modern_headers(&old, &meta).unwrap_err().code(), -32020);
    }

    #[test]
    fn only_loopback_origins_pass() {
        assert!(origin_allowed(&h(&[])));
        assert!(origin_allowed(&h(&[("origin", "http://localhost:3000")])));
        assert!(origin_allowed(&h(&[("origin", "http://[::1]:8080")])));
        assert!(!origin_allowed(&h(&[("origin", "https://evil.example")])));
    }
}
