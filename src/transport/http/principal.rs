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

    /// The principal of a request whose credentials are acceptable, or
    /// why they are not (the request is answered 401, as MCP's
    /// authorization spec requires for an invalid token). The default
    /// refuses nothing.
    fn authenticate(&self, headers: &HeaderMap) -> Result<Option<String>, String> {
        Ok(self.resolve(headers))
    }

    /// [`PrincipalResolver::authenticate`] seeing the request's extensions
    /// too: where an authentication layer of your own (a tower layer in
    /// front of [`super::HttpShim::router`]) leaves who the caller is. This
    /// is what the front calls; the default ignores the extensions.
    ///
    /// ```
    /// use axum::http::{Extensions, HeaderMap};
    /// use mcp_tasks_shim::transport::http::PrincipalResolver;
    ///
    /// /// What the application's auth layer inserts for a verified caller.
    /// #[derive(Clone)]
    /// struct Caller(String);
    ///
    /// #[derive(Debug)]
    /// struct FromAuthLayer;
    ///
    /// impl PrincipalResolver for FromAuthLayer {
    ///     fn resolve(&self, _: &HeaderMap) -> Option<String> {
    ///         None
    ///     }
    ///     fn authenticate_request(
    ///         &self,
    ///         _: &HeaderMap,
    ///         extensions: &Extensions,
    ///     ) -> Result<Option<String>, String> {
    ///         Ok(extensions.get::<Caller>().map(|c| c.0.clone()))
    ///     }
    /// }
    /// ```
    fn authenticate_request(
        &self,
        headers: &HeaderMap,
        extensions: &axum::http::Extensions,
    ) -> Result<Option<String>, String> {
        let _ = extensions;
        self.authenticate(headers)
    }
}

/// Configured bearer tokens and/or a trusted header.
#[derive(Debug, Default, Clone)]
pub struct ConfiguredPrincipals {
    /// Bearer token → principal.
    pub tokens: HashMap<String, String>,
    /// A header whose value names the principal (set by a trusted
    /// proxy). Its scope is `header:<value>`, apart from the token
    /// principals: a header can never claim a token's principal. (A
    /// resolver of your own that returns the bare value scopes tasks
    /// differently: records kept by a durable or shared ledger under
    /// `header:<value>` would not be found.)
    pub trusted_header: Option<String>,
}

impl PrincipalResolver for ConfiguredPrincipals {
    fn resolve(&self, headers: &HeaderMap) -> Option<String> {
        if let Some(bearer) = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            && let Some(principal) = self.bearer(bearer)
        {
            return Some(principal);
        }
        let name = self.trusted_header.as_deref()?;
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(|v| format!("header:{v}"))
    }

    /// With tokens configured, an `Authorization` header must carry one
    /// of them: a mistyped or revoked token is refused rather than served
    /// as anonymous, which would put the client's tasks in the scope every
    /// anonymous caller shares.
    fn authenticate(&self, headers: &HeaderMap) -> Result<Option<String>, String> {
        // Two copies of a header that names the caller are two claims; the
        // first one winning would let a client behind a proxy that appends
        // its own copy pick whose tasks it gets.
        for name in std::iter::once("authorization").chain(self.trusted_header.as_deref()) {
            if super::headers::doubled(headers, name) {
                return Err(format!("more than one {name} header"));
            }
        }
        let Some(auth) = headers.get("authorization") else {
            return Ok(self.resolve(headers));
        };
        if self.tokens.is_empty() {
            return Ok(self.resolve(headers));
        }
        let bearer = auth
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or("the Authorization header is not a bearer token")?;
        match self.bearer(bearer) {
            Some(principal) => Ok(Some(principal)),
            None => Err("invalid bearer token".into()),
        }
    }
}

impl ConfiguredPrincipals {
    /// The principal of a bearer token, comparing with every configured
    /// token.
    fn bearer(&self, token: &str) -> Option<String> {
        let mut found = None;
        for (known, principal) in &self.tokens {
            if constant_time_eq(known.as_bytes(), token.as_bytes()) {
                found = Some(principal.clone());
            }
        }
        found
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

    #[test]
    fn a_wrong_token_is_refused_not_anonymous() {
        let p = ConfiguredPrincipals {
            tokens: HashMap::from([("s3cret".into(), "alice".into())]),
            trusted_header: None,
        };
        let mut h = HeaderMap::new();
        assert_eq!(p.authenticate(&h), Ok(None), "no credentials: anonymous");
        h.insert("authorization", "Bearer s3cret".parse().unwrap());
        assert_eq!(p.authenticate(&h), Ok(Some("alice".into())));
        for bad in ["Bearer s3cre", "Bearer s3cret2", "Basic czNjcmV0", "s3cret"] {
            h.insert("authorization", bad.parse().unwrap());
            assert!(p.authenticate(&h).is_err(), "{bad} is refused");
        }
        // Without configured tokens the shim does not judge credentials
        // (an authenticating proxy in front may, or the upstream).
        let open = ConfiguredPrincipals::default();
        assert_eq!(open.authenticate(&h), Ok(None));
    }
}
