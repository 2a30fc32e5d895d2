//! Unguessable identifiers and wall-clock timestamps.
//!
//! Kept out of the translator: it takes ids and times as arguments so it
//! stays pure; engines call these.

/// 128 random bits from the OS CSPRNG, hex-encoded (32 characters).
///
/// ```
/// let a = mcp_tasks_shim::ids::random_id();
/// assert_eq!(a.len(), 32);
/// assert_ne!(a, mcp_tasks_shim::ids::random_id());
/// ```
pub fn random_id() -> String {
    let mut bytes = [0u8; 16];
    fill(&mut bytes);
    let mut s = String::with_capacity(32);
    for b in bytes {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The first 8 characters of a session id, for logs: enough to follow one
/// session through them, too little to take it over (a session id in full
/// is the session's only credential when it has no principal).
pub(crate) fn log_prefix(id: &str) -> &str {
    id.char_indices().nth(8).map_or(id, |(end, _)| &id[..end])
}

/// Fills `buf` from the OS CSPRNG.
pub fn fill(buf: &mut [u8]) {
    // The OS RNG failing is not recoverable: an id we cannot make
    // unguessable must not be made at all.
    getrandom::fill(buf).expect("the OS random number generator failed");
}

/// Now as an RFC 3339 / ISO 8601 UTC timestamp with milliseconds.
pub fn now_iso() -> String {
    format_iso(time::OffsetDateTime::now_utc())
}

/// Formats a time as `YYYY-MM-DDTHH:MM:SS.mmmZ`.
pub fn format_iso(t: time::OffsetDateTime) -> String {
    let f = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    t.to_offset(time::UtcOffset::UTC)
        .format(&f)
        .unwrap_or_else(|_| "1970-01-01T00:00:00.000Z".to_owned())
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_are_iso_utc() {
        let s = super::now_iso();
        assert_eq!(s.len(), 24, "{s}");
        assert!(s.ends_with('Z'));
    }
}
