//! Reference MCP servers of both revisions: test fixtures and a way for
//! users to try their clients. Not library API; kept apart from the core.

use crate::revision::Revision;

/// Serves the reference server of `revision` on stdin/stdout until EOF.
pub async fn serve_stdio(revision: Revision) -> std::io::Result<()> {
    let _ = revision;
    Err(std::io::Error::other("reference servers are not built yet"))
}
