//! `mcp-tasks-shim reference-server`.

use crate::revision::Revision;

/// Arguments of `reference-server`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Which revision to speak: 2025-11-25 or 2026-07-28.
    #[arg(long, value_parser = super::parse_revision)]
    pub revision: Revision,
}

pub(crate) fn run(args: Args) -> Result<(), String> {
    let rt = tokio::runtime::Runtime::new().map_err(|e| e.to_string())?;
    rt.block_on(crate::reference::serve_stdio(args.revision))
        .map_err(|e| e.to_string())
}
