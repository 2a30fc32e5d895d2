//! Who is calling: the ledger scope of an HTTP request.
//!
//! A [`PrincipalResolver`] maps request headers to a principal. The
//! built-in [`ConfiguredPrincipals`] maps configured bearer tokens, or
//! trusts a header set by an authenticating proxy in front of the shim.
//! Token comparison runs over every configured token without early exit,
//! so timing does not reveal how much of a token matched.

use std::collections::HashMap;

use axum::http::HeaderMap;

/// Maps a request to the principal it acts for.
pub trait PrincipalResolver: Send + Sync + std::fmt::Debug {
    /// The principal, or `None` for an anonymous request.
    fn resolve(&self, headers: &HeaderMap) -> Option<String>;
}

/// Configured bearer tokens and/or a trusted header.
#[derive(Debug, Default, Clone)]
pub struct ConfiguredPrincipals {
    /// Bearer token → principal.
    pub tokens: HashMap<String, String>,
    /// A header whose value is the principal (set by a trusted proxy).
    pub trusted_header: Option<String>,
}

impl PrincipalResolver for ConfiguredPrincipals {
    fn resolve(&self, headers: &HeaderMap) -> Option<String> {
        if let Some(bearer) = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
        {
            let mut found = None;
            for (token, principal) in &self.tokens {
                if constant_time_eq(token.as_bytes(), bearer.as_bytes()) {
                    found = Some(principal.clone());
                }
            }
            if found.is_some() {
                return found;
            }
        }
        let name = self.trusted_header.as_deref()?;
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(|v| format!("header:{v}"))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_trusted_headers_resolve() {
        let p = ConfiguredPrincipals {
            tokens: HashMap::from([("s3cret".into(), "alice".into())]),
            trusted_header: Some("x-principal".into()),
        };
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer s3cret".parse().unwrap());
        assert_eq!(p.resolve(&h).as_deref(), Some("alice"));
        h.insert("authorization", "Bearer wrong".parse().unwrap());
        assert_eq!(p.resolve(&h), None);
        h.insert("x-principal", "bob".parse().unwrap());
        assert_eq!(p.resolve(&h).as_deref(), Some("header:bob"));
    }
}
