//! Who a task belongs to: the ledger scope of a client, typed by where its
//! identity came from.
//!
//! A scope is built by exactly one constructor per origin, and each origin
//! writes its ledger key under a prefix of its own:
//!
//! | origin | built by | key |
//! |---|---|---|
//! | bearer token (`--token`) | [`Principal`], inside the shim | `token:<principal>` |
//! | trusted header (`--principal-header`) | [`Principal`], inside the shim | `header:<value>` |
//! | your own resolver or auth layer | [`Principal::new`] | `principal:<name>` |
//! | an anonymous 2025-11-25 HTTP session | the HTTP front | `session:<session id>` |
//! | a stdio client | [`Scope::stdio`] | `stdio:<random>` |
//! | anonymous 2026-07-28 callers | [`Scope::anonymous`] | `anonymous` |
//!
//! So no principal string can land in another origin's scope: a token
//! principal named `header:carol` is keyed `token:header:carol`, apart
//! from the header principal `carol` (`header:carol`), and a token
//! principal named `stdio:x` is never taken for a stdio client's scope by
//! the start-up sweep of a durable ledger, which only ever drops the
//! scopes that end with their session ([`Scope::key_ends_with_session`]).

use std::fmt;

/// Where a scope's identity came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A bearer token the shim was configured with.
    Token,
    /// A header set by a trusted proxy in front of the shim.
    Header,
    /// A principal your own code established ([`Principal::new`]).
    Custom,
    /// An anonymous 2025-11-25 HTTP session: its tasks end with it.
    Session,
    /// A stdio client: its tasks end with the process.
    Stdio,
    /// Every 2026-07-28 caller without a principal.
    Anonymous,
}

impl Origin {
    /// The key prefix of this origin's scopes (all of the key for
    /// [`Origin::Anonymous`]).
    const fn prefix(self) -> &'static str {
        match self {
            Origin::Token => "token:",
            Origin::Header => "header:",
            Origin::Custom => "principal:",
            Origin::Session => "session:",
            Origin::Stdio => "stdio:",
            Origin::Anonymous => "anonymous",
        }
    }

    /// Whether this origin's scopes end with their session: no client can
    /// come back to them once it has gone.
    const fn ends_with_session(self) -> bool {
        matches!(self, Origin::Session | Origin::Stdio)
    }
}

/// The ledger scope of a client: its tasks are visible to it and to no
/// other scope.
///
/// ```
/// use mcp_tasks_shim::scope::{Principal, Scope};
/// let alice = Scope::from(Principal::new("alice"));
/// assert_eq!(alice.key(), "principal:alice");
/// assert_ne!(Scope::from(Principal::new("anonymous")), Scope::anonymous());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    origin: Origin,
    /// The ledger key: the origin's prefix and the name.
    key: String,
}

impl Scope {
    fn new(origin: Origin, name: &str) -> Scope {
        Scope {
            origin,
            key: format!("{}{name}", origin.prefix()),
        }
    }

    /// The scope every 2026-07-28 caller without a principal shares.
    pub fn anonymous() -> Scope {
        Scope {
            origin: Origin::Anonymous,
            key: Origin::Anonymous.prefix().to_owned(),
        }
    }

    /// A fresh scope for one stdio client (a random id): its tasks are
    /// nobody else's, and a durable ledger drops them at the next start.
    pub fn stdio() -> Scope {
        Scope::new(Origin::Stdio, &crate::ids::random_id())
    }

    /// The scope of an anonymous 2025-11-25 HTTP session `session_id`: it
    /// ends with the session.
    pub(crate) fn session(session_id: &str) -> Scope {
        Scope::new(Origin::Session, session_id)
    }

    /// The scope a ledger filed under `key` (what [`Scope::key`] gave), as
    /// a store that keeps keys rebuilds it on reading. Crate-only: open to
    /// other code it would let a caller name any origin's scope.
    ///
    /// A key under no origin's prefix (a ledger written before scopes were
    /// typed) comes back as itself under [`Origin::Custom`]: no caller's
    /// scope equals it (theirs is `principal:…`), and no sweep drops it.
    pub(crate) fn from_key(key: &str) -> Scope {
        if key == Origin::Anonymous.prefix() {
            return Scope::anonymous();
        }
        let origin = [
            Origin::Token,
            Origin::Header,
            Origin::Custom,
            Origin::Session,
            Origin::Stdio,
        ]
        .into_iter()
        .find(|o| key.starts_with(o.prefix()))
        .unwrap_or(Origin::Custom);
        Scope {
            origin,
            key: key.to_owned(),
        }
    }

    /// The key the ledger files this scope's tasks under.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The key, for a store that keeps it (see [`Scope::from_key`]).
    pub(crate) fn into_key(self) -> String {
        self.key
    }

    /// Where the identity came from.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// Whether the scope ends with its session (anonymous 2025-11-25 HTTP
    /// sessions, stdio clients): its tasks go when the session does.
    pub fn ends_with_session(&self) -> bool {
        self.origin.ends_with_session()
    }

    /// Whether ledger key `key` is that of a scope that ends with its
    /// session: what a durable ledger's start-up sweep may drop, and
    /// nothing else (a principal's key never starts with those prefixes).
    pub fn key_ends_with_session(key: &str) -> bool {
        [Origin::Session, Origin::Stdio]
            .iter()
            .any(|o| key.starts_with(o.prefix()))
    }

    /// The key prefixes of the scopes that end with their session.
    pub fn session_key_prefixes() -> [&'static str; 2] {
        [Origin::Session.prefix(), Origin::Stdio.prefix()]
    }
}

impl fmt::Debug for Scope {
    /// An anonymous HTTP session's scope holds its session id, which
    /// admits its requests: logs show its origin only.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.origin {
            Origin::Session => f.write_str("Scope(session:…)"),
            _ => write!(f, "Scope({})", self.key),
        }
    }
}

/// A caller's identity as the shim's HTTP front established it, for a
/// [`crate::driver::http::PrincipalResolver`] to return.
///
/// [`Principal::new`] is the one constructor open to your code (a
/// resolver of your own, an auth layer): its scope can never be a token's,
/// a trusted header's, a session's or the anonymous one, whatever the name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    name: String,
    scope: Scope,
}

impl Principal {
    /// A principal your own code vouches for.
    pub fn new(name: impl Into<String>) -> Principal {
        Principal::of(Origin::Custom, name.into())
    }

    /// The principal of a configured bearer token.
    pub(crate) fn token(name: impl Into<String>) -> Principal {
        Principal::of(Origin::Token, name.into())
    }

    /// The principal a trusted header names.
    pub(crate) fn header(value: impl Into<String>) -> Principal {
        Principal::of(Origin::Header, value.into())
    }

    fn of(origin: Origin, name: String) -> Principal {
        Principal {
            scope: Scope::new(origin, &name),
            name,
        }
    }

    /// The name, as configured or resolved.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where it came from.
    pub fn origin(&self) -> Origin {
        self.scope.origin
    }

    /// Its tasks' scope.
    pub fn scope(&self) -> &Scope {
        &self.scope
    }
}

impl From<Principal> for Scope {
    fn from(p: Principal) -> Scope {
        p.scope
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The collisions a review found: a token principal named like a
    /// header's or a stdio scope's key.
    #[test]
    fn no_name_lands_in_another_origins_scope() {
        let names = [
            "carol",
            "header:carol",
            "stdio:x",
            "session:abc",
            "anonymous",
            "",
        ];
        let mut keys = std::collections::HashSet::new();
        for name in names {
            for p in [
                Principal::token(name),
                Principal::header(name),
                Principal::new(name),
            ] {
                assert!(keys.insert(p.scope().key().to_owned()), "{p:?}");
                assert!(!Scope::key_ends_with_session(p.scope().key()), "{p:?}");
                assert_ne!(p.scope(), &Scope::anonymous());
            }
        }
        assert!(Scope::key_ends_with_session(Scope::stdio().key()));
        assert!(Scope::key_ends_with_session(Scope::session("s").key()));
        assert!(!Scope::key_ends_with_session(Scope::anonymous().key()));
        assert_ne!(Scope::stdio(), Scope::stdio(), "each stdio client its own");
    }

    /// A ledger's stored key reads back as the scope that wrote it, and a
    /// key from before scopes were typed as nobody's live scope.
    #[test]
    fn a_stored_key_rebuilds_its_scope() {
        let scopes = [
            Principal::token("t").scope().clone(),
            Principal::header("h").scope().clone(),
            Principal::new("header:x").scope().clone(),
            Scope::session("s"),
            Scope::stdio(),
            Scope::anonymous(),
        ];
        for s in scopes {
            assert_eq!(Scope::from_key(s.key()), s);
        }
        let old = Scope::from_key("alice");
        assert_eq!(old.key(), "alice");
        assert_ne!(old, Scope::from(Principal::new("alice")));
        assert!(!old.ends_with_session());
    }

    #[test]
    fn a_session_scope_does_not_print_its_session_id() {
        let s = Scope::session("8d2f0c3a9b7e41d6");
        assert!(!format!("{s:?}").contains("8d2f0c3a"));
    }
}
