//! Who is calling: the ledger scope of an HTTP request.
//!
//! A [`PrincipalResolver`] maps request headers to a principal. The
//! built-in [`ConfiguredPrincipals`] maps configured bearer tokens, or
//! trusts a header set by an authenticating proxy in front of the shim.
//! Token comparison runs over every configured token without early exit,
//! so timing does not reveal how much of a token matched.

use std::collections::HashMap;

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;

pub use crate::scope::Principal;

/// Maps a request to the principal it acts for.
pub trait PrincipalResolver: Send + Sync + std::fmt::Debug {
    /// The principal of a request whose credentials are acceptable
    /// (`None`: anonymous), or why they are not: the request is then
    /// answered 401, as MCP's authorization spec requires for an invalid
    /// token. `extensions` is where an authentication layer of your own
    /// (a tower layer in front of [`super::HttpShim::router`]) leaves who
    /// the caller is.
    ///
    /// A principal your resolver returns is built with [`Principal::new`]:
    /// its tasks live apart from those of configured tokens, trusted
    /// headers, sessions and anonymous callers, whatever its name.
    ///
    /// ```
    /// use axum::http::{Extensions, HeaderMap};
    /// use mcp_tasks_shim::scope::Principal;
    /// use mcp_tasks_shim::driver::http::PrincipalResolver;
    ///
    /// /// What the application's auth layer inserts for a verified caller.
    /// #[derive(Clone)]
    /// struct Caller(String);
    ///
    /// #[derive(Debug)]
    /// struct FromAuthLayer;
    ///
    /// impl PrincipalResolver for FromAuthLayer {
    ///     fn authenticate(
    ///         &self,
    ///         _: &HeaderMap,
    ///         extensions: &Extensions,
    ///     ) -> Result<Option<Principal>, String> {
    ///         Ok(extensions.get::<Caller>().map(|c| Principal::new(c.0.clone())))
    ///     }
    /// }
    /// ```
    fn authenticate(
        &self,
        headers: &HeaderMap,
        extensions: &axum::http::Extensions,
    ) -> Result<Option<Principal>, String>;
}

/// Configured bearer tokens and/or a trusted header.
#[derive(Debug, Default, Clone)]
pub struct ConfiguredPrincipals {
    /// Bearer token → principal.
    pub tokens: HashMap<String, String>,
    /// A header whose value names the principal (set by a trusted
    /// proxy). Its scope is apart from the token principals' (see
    /// [`crate::scope`]): a header can never claim a token's tasks. A
    /// value that is not visible ASCII is refused (401), never read as
    /// anonymous.
    pub trusted_header: Option<String>,
}

impl PrincipalResolver for ConfiguredPrincipals {
    /// With tokens configured, an `Authorization` header must carry one
    /// of them: a mistyped or revoked token is refused rather than served
    /// as anonymous, which would put the client's tasks in the scope every
    /// anonymous caller shares. A trusted header that is present must be
    /// readable: one that is not visible ASCII is refused too, for the
    /// same reason.
    fn authenticate(
        &self,
        headers: &HeaderMap,
        _: &axum::http::Extensions,
    ) -> Result<Option<Principal>, String> {
        // Two copies of a header that names the caller are two claims; the
        // first one winning would let a client behind a proxy that appends
        // its own copy pick whose tasks it gets.
        if super::headers::doubled(headers, AUTHORIZATION) {
            return Err("more than one authorization header".into());
        }
        if let Some(name) = self.trusted_header.as_deref()
            && super::headers::doubled(headers, name)
        {
            return Err(format!("more than one {name} header"));
        }
        if let Some(auth) = headers.get(AUTHORIZATION) {
            let bearer = auth.to_str().ok().and_then(|v| v.strip_prefix("Bearer "));
            match bearer.and_then(|b| self.bearer(b)) {
                Some(principal) => return Ok(Some(principal)),
                None if !self.tokens.is_empty() => {
                    return Err(match bearer {
                        Some(_) => "invalid bearer token".into(),
                        None => "the Authorization header is not a bearer token".into(),
                    });
                }
                // Without configured tokens the shim does not judge
                // credentials (an authenticating proxy in front may, or
                // the upstream).
                None => {}
            }
        }
        let Some(name) = self.trusted_header.as_deref() else {
            return Ok(None);
        };
        match headers.get(name) {
            None => Ok(None),
            Some(v) => match v.to_str() {
                Ok("") => Ok(None),
                Ok(v) => Ok(Some(Principal::header(v))),
                // Read as "no principal", it put the caller's tasks in the
                // scope every anonymous caller shares.
                Err(_) => Err(format!(
                    "the {name} header is not visible ASCII, so it names no principal the shim can tell apart"
                )),
            },
        }
    }
}

impl ConfiguredPrincipals {
    /// The principal of a bearer token, comparing with every configured
    /// token.
    fn bearer(&self, token: &str) -> Option<Principal> {
        let mut found = None;
        for (known, principal) in &self.tokens {
            if constant_time_eq(known.as_bytes(), token.as_bytes()) {
                found = Some(principal);
            }
        }
        found.map(Principal::token)
    }
}

/// [`ConfiguredPrincipals`] whose tokens can be replaced while requests
/// are served (a token file reloaded on SIGHUP): each request reads the
/// set in force when it arrives.
#[derive(Debug, Default)]
pub struct ReloadablePrincipals {
    current: std::sync::RwLock<std::sync::Arc<ConfiguredPrincipals>>,
    /// Tokens are judged even while none is configured: emptying a token
    /// file must revoke every token, not let any bearer token in as
    /// anonymous.
    always_check_tokens: bool,
}

impl ReloadablePrincipals {
    /// Starts with `principals`. With `always_check_tokens`, a bearer
    /// token is refused (401) while the token set is empty, instead of the
    /// request being served as anonymous.
    pub fn new(principals: ConfiguredPrincipals, always_check_tokens: bool) -> Self {
        ReloadablePrincipals {
            current: std::sync::RwLock::new(std::sync::Arc::new(principals)),
            always_check_tokens,
        }
    }

    /// Puts `tokens` in force for the requests that arrive from now on
    /// (the trusted header stays).
    pub fn replace_tokens(&self, tokens: HashMap<String, String>) {
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        *current = std::sync::Arc::new(ConfiguredPrincipals {
            tokens,
            trusted_header: current.trusted_header.clone(),
        });
    }

    fn snapshot(&self) -> std::sync::Arc<ConfiguredPrincipals> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl PrincipalResolver for ReloadablePrincipals {
    fn authenticate(
        &self,
        headers: &HeaderMap,
        extensions: &axum::http::Extensions,
    ) -> Result<Option<Principal>, String> {
        let current = self.snapshot();
        if self.always_check_tokens
            && current.tokens.is_empty()
            && headers.contains_key(AUTHORIZATION)
        {
            return Err("invalid bearer token (no token is configured)".into());
        }
        current.authenticate(headers, extensions)
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
    use crate::scope::Origin;

    fn auth(p: &ConfiguredPrincipals, h: &HeaderMap) -> Result<Option<Principal>, String> {
        p.authenticate(h, &axum::http::Extensions::new())
    }

    #[test]
    fn tokens_and_trusted_headers_resolve() {
        let p = ConfiguredPrincipals {
            tokens: HashMap::from([("s3cret".into(), "alice".into())]),
            trusted_header: Some("x-principal".into()),
        };
        let mut h = HeaderMap::new();
        h.insert("authorization", "Bearer s3cret".parse().unwrap());
        assert_eq!(auth(&p, &h), Ok(Some(Principal::token("alice"))));
        h.remove("authorization");
        h.insert("x-principal", "bob".parse().unwrap());
        let bob = auth(&p, &h).unwrap().unwrap();
        assert_eq!((bob.name(), bob.origin()), ("bob", Origin::Header));
    }

    #[test]
    fn a_wrong_token_is_refused_not_anonymous() {
        let p = ConfiguredPrincipals {
            tokens: HashMap::from([("s3cret".into(), "alice".into())]),
            trusted_header: None,
        };
        let mut h = HeaderMap::new();
        assert_eq!(auth(&p, &h), Ok(None), "no credentials: anonymous");
        h.insert("authorization", "Bearer s3cret".parse().unwrap());
        assert_eq!(auth(&p, &h), Ok(Some(Principal::token("alice"))));
        for bad in ["Bearer s3cre", "Bearer s3cret2", "Basic czNjcmV0", "s3cret"] {
            h.insert("authorization", bad.parse().unwrap());
            assert!(auth(&p, &h).is_err(), "{bad} is refused");
        }
        // Without configured tokens the shim does not judge credentials
        // (an authenticating proxy in front may, or the upstream).
        let open = ConfiguredPrincipals::default();
        assert_eq!(auth(&open, &h), Ok(None));
    }

    #[test]
    fn replaced_tokens_are_in_force_and_an_empty_set_revokes_all() {
        let p = ReloadablePrincipals::new(
            ConfiguredPrincipals {
                tokens: HashMap::from([("old".into(), "alice".into())]),
                trusted_header: None,
            },
            true,
        );
        let with = |t: &str| {
            let mut h = HeaderMap::new();
            h.insert("authorization", format!("Bearer {t}").parse().unwrap());
            p.authenticate(&h, &axum::http::Extensions::new())
        };
        assert_eq!(with("old"), Ok(Some(Principal::token("alice"))));
        p.replace_tokens(HashMap::from([("new".into(), "bob".into())]));
        assert!(with("old").is_err());
        assert_eq!(with("new"), Ok(Some(Principal::token("bob"))));
        p.replace_tokens(HashMap::new());
        assert!(with("new").is_err(), "an emptied token set lets nobody in");
    }

    /// A UTF-8 value (`José`) was read as "no principal": the caller's
    /// tasks went to the scope every anonymous caller reads.
    #[test]
    fn a_header_that_is_not_visible_ascii_is_refused() {
        let p = ConfiguredPrincipals {
            tokens: HashMap::new(),
            trusted_header: Some("x-principal".into()),
        };
        let mut h = HeaderMap::new();
        h.insert(
            "x-principal",
            axum::http::HeaderValue::from_bytes("José".as_bytes()).unwrap(),
        );
        assert!(auth(&p, &h).is_err());
    }
}
