//! MRTR `requestState` tokens: opaque to the client, integrity-protected
//! with HMAC-SHA256 under a per-process random key, and bound to one held
//! upstream call. A token is single-use: the held call is taken out of the
//! table when the retry arrives, so a replay finds nothing.
//!
//! The key is not kept in a durable ledger (`--ledger`), on purpose. A
//! token names a held call: an upstream `tools/call` still open, with the
//! server's questions waiting on it. That call lives in this process and on
//! its upstream connection, and ends with them. A restarted shim that could
//! still verify an old token would find nothing to resume, and answer the
//! same `-32602 invalid or expired requestState` a fresh key gives, so a
//! persisted key would only be one more secret on disk. The client starts
//! the call again (MRTR allows a retry without `requestState`).

use crate::scope::Scope;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::error::ShimError;

type HmacSha256 = Hmac<Sha256>;

/// Signs and checks `requestState` tokens.
pub(crate) struct StateSigner {
    key: [u8; 32],
}

impl std::fmt::Debug for StateSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StateSigner { key: <redacted> }")
    }
}

impl StateSigner {
    /// A signer with a fresh random key.
    pub(crate) fn new() -> Self {
        let mut key = [0u8; 32];
        crate::ids::fill(&mut key);
        StateSigner { key }
    }

    fn mac(&self, payload: &str) -> HmacSha256 {
        // HMAC accepts keys of any length.
        let mut mac = <HmacSha256 as Mac>::new_from_slice(&self.key).expect("any key length");
        mac.update(payload.as_bytes());
        mac
    }

    /// A token naming held call `held_id` of ledger scope `scope`.
    pub(crate) fn sign(&self, held_id: &str, scope: &Scope) -> String {
        let payload = format!("{held_id}|{}", scope.key());
        let tag = self.mac(&payload).finalize().into_bytes();
        format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(payload),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    /// The held call id inside a token, if the token is ours, untampered and
    /// issued to `scope`.
    pub(crate) fn verify(&self, token: &str, scope: &Scope) -> Result<String, ShimError> {
        let bad = || ShimError::InvalidParams("invalid or expired requestState".into());
        let (payload_b64, tag_b64) = token.split_once('.').ok_or_else(bad)?;
        let payload = URL_SAFE_NO_PAD.decode(payload_b64).map_err(|_| bad())?;
        let tag = URL_SAFE_NO_PAD.decode(tag_b64).map_err(|_| bad())?;
        let payload = String::from_utf8(payload).map_err(|_| bad())?;
        self.mac(&payload).verify_slice(&tag).map_err(|_| bad())?;
        let (held_id, token_scope) = payload.split_once('|').ok_or_else(bad)?;
        if token_scope != scope.key() {
            return Err(bad());
        }
        Ok(held_id.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_verify_and_forgeries_fail() {
        let s = StateSigner::new();
        let scope = Scope::from(crate::scope::Principal::new("alice"));
        let t = s.sign("h1", &scope);
        assert_eq!(s.verify(&t, &scope).unwrap(), "h1");
        assert!(s.verify(&t, &Scope::anonymous()).is_err());
        let other = StateSigner::new();
        assert!(other.verify(&t, &scope).is_err());
        let forged = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode("h2|principal:alice"),
            t.split_once('.').unwrap().1
        );
        assert_eq!(s.verify(&forged, &scope).unwrap_err().code(), -32602);
        assert!(s.verify("garbage", &scope).is_err());
    }
}
